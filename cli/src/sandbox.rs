//! `sandbox [--ensemble N] [--port N] [--tls]`: a local ZooKeeper (standalone or ensemble)
//! until Ctrl-C, announced as an `export ZOOKEEPER=…` line.

use serde_json::{json, Value};
use tokio::net::TcpListener;
use zkwire_sandbox::server::{ServerConfig, ZkEnsemble, ZkServer, DEFAULT_TICK};
use zkwire_sandbox::tls::{ClientAuth, StoreType, TlsMaterial};

use crate::cli::SandboxArgs;
use crate::connect::{Global, SERVER_ENV, SERVER_TICK_ENV};
use crate::fail::{Failure, FAILED, UNAVAILABLE};
use crate::out;
use crate::secure::{TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV};

/// A running standalone server or ensemble; dropping it stops every JVM and removes its files.
#[derive(Debug)]
pub(crate) enum Local {
    /// One standalone server.
    Standalone(Box<ZkServer>),
    /// An ensemble.
    Ensemble(Box<ZkEnsemble>),
}

impl Local {
    /// Starts `nodes` servers (1: standalone) with `config`, from the installed ZooKeeper
    /// packages.
    ///
    /// # Errors
    /// [`UNAVAILABLE`] with the harness's first line (e.g. what to install).
    async fn start(nodes: usize, config: ServerConfig) -> Result<Self, Failure> {
        let started = tokio::task::spawn_blocking(move || match nodes {
            1 => ZkServer::start_with(config).map(|s| Self::Standalone(Box::new(s))),
            n => ZkEnsemble::start_with(n, config).map(|e| Self::Ensemble(Box::new(e))),
        })
        .await
        .map_err(|e| Failure::new(FAILED, format!("cannot start ZooKeeper: {e}")))?;
        started.map_err(|e| Failure::new(UNAVAILABLE, format!("cannot start ZooKeeper: {e}")))
    }

    /// The connect string naming every server.
    pub(crate) fn connect_string(&self) -> String {
        match self {
            Self::Standalone(server) => server.connect_string(),
            Self::Ensemble(ensemble) => ensemble.connect_string(),
        }
    }

    /// The connect string naming every server's TLS port, when they have one.
    fn secure_connect_string(&self) -> Option<String> {
        match self {
            Self::Standalone(server) => server.secure_connect_string(),
            Self::Ensemble(ensemble) => ensemble.secure_connect_string(),
        }
    }

    /// Stops everything (in a blocking thread: the harness waits for the JVMs to exit).
    pub(crate) async fn stop(self) {
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
    }
}

/// Starts the servers, prints the connect string, waits for Ctrl-C, stops them.
pub(crate) async fn sandbox(g: &Global, a: &SandboxArgs) -> Result<(), Failure> {
    let nodes = usize::from(a.ensemble);
    // Checked first, so that a busy port fails before any JVM starts.
    if let Some(port) = a.port {
        check_free(port, nodes).await?;
    }
    // Ctrl-C during the start still stops cleanly: zkw listens for it from here.
    let ctrl_c = crate::interrupt::ctrl_c()?;
    tokio::pin!(ctrl_c);
    let what = if nodes == 1 {
        "a standalone server".to_owned()
    } else {
        format!("a {nodes}-node ensemble")
    };
    let tls = if a.tls {
        let material = tokio::task::spawn_blocking(TlsMaterial::generate)
            .await
            .map_err(|e| Failure::new(FAILED, format!("cannot make certificates: {e}")))?
            .map_err(|e| Failure::new(FAILED, format!("cannot make certificates: {e}")))?;
        Some(material)
    } else {
        None
    };
    let config = match &tls {
        // `want`: clients may connect with the printed client certificate (and get an x509
        // identity) or without one.
        Some(m) => ServerConfig::default().tls(m, ClientAuth::Want, StoreType::Pem),
        None => ServerConfig::default(),
    };
    let config = match a.port {
        Some(port) => config.listen_port(port),
        None => config,
    };
    out::note(&format!("starting {what}…"));
    let local = tokio::select! {
        local = Local::start(nodes, config) => local?,
        _ = &mut ctrl_c => return Ok(()),
    };
    let connect = local
        .secure_connect_string()
        .unwrap_or_else(|| local.connect_string());
    let printed = print_started(g, &connect, nodes, tls.as_ref());
    if printed.is_ok() {
        out::note(&format!(
            "{what} is running; eval the export line, then: zkw ls /   (Ctrl-C stops it)"
        ));
        ctrl_c.await;
        out::note("stopping…");
    }
    local.stop().await;
    drop(tls);
    printed
}

/// Fails when `127.0.0.1:port` or one of the `nodes - 1` ports after it cannot be listened
/// on (they are released again for the servers).
///
/// # Errors
/// A failure naming the port that cannot be had.
async fn check_free(port: u16, nodes: usize) -> Result<(), Failure> {
    for offset in 0..nodes {
        let port = u16::try_from(offset)
            .ok()
            .and_then(|o| port.checked_add(o))
            .ok_or_else(|| Failure::usage("--port: the ensemble's ports run past 65535"))?;
        TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| Failure::new(FAILED, format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    }
    Ok(())
}

/// `export ZOOKEEPER=…` (and, with TLS, the files a client needs) on standard output.
fn print_started(
    g: &Global,
    connect: &str,
    nodes: usize,
    tls: Option<&TlsMaterial>,
) -> Result<(), Failure> {
    if !g.json {
        let files = tls.map_or_else(String::new, |m| {
            format!(
                " {TLS_CA_ENV}={} {TLS_CERT_ENV}={} {TLS_KEY_ENV}={}",
                m.ca_cert().display(),
                m.client_cert().display(),
                m.client_key().display()
            )
        });
        return out::line(&format!(
            "export {SERVER_ENV}={connect} {SERVER_TICK_ENV}={}ms{files}",
            DEFAULT_TICK.as_millis()
        ));
    }
    let tick_ms = u64::try_from(DEFAULT_TICK.as_millis()).unwrap_or(u64::MAX);
    let mut doc = json!({"connect_string": connect, "servers": nodes, "server_tick_ms": tick_ms});
    if let (Some(m), Value::Object(fields)) = (tls, &mut doc) {
        fields.insert("tls_ca".into(), json!(m.ca_cert().display().to_string()));
        fields.insert(
            "tls_cert".into(),
            json!(m.client_cert().display().to_string()),
        );
        fields.insert(
            "tls_key".into(),
            json!(m.client_key().display().to_string()),
        );
    }
    out::json(&doc)
}
