//! `sandbox [--ensemble N] [--tls]`: a local ZooKeeper (standalone or ensemble) until Ctrl-C.

use zkwire_testing::server::{ServerConfig, ZkEnsemble, ZkServer};
use zkwire_testing::tls::{ClientAuth, StoreType, TlsMaterial};

use crate::args::Parsed;
use crate::connect::Global;
use crate::fail::{Failure, FAILED, UNAVAILABLE};
use crate::json::Json;
use crate::out;

/// The largest ensemble `sandbox` starts.
const MAX_ENSEMBLE: usize = 9;

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
pub(crate) async fn sandbox(g: &Global, p: &Parsed) -> Result<(), Failure> {
    p.expect_operands(&[])?;
    let nodes = p.number::<usize>("ensemble")?.unwrap_or(1);
    if !(1..=MAX_ENSEMBLE).contains(&nodes) {
        return Err(Failure::usage(format!(
            "--ensemble takes 1 to {MAX_ENSEMBLE} servers"
        )));
    }
    // Ctrl-C during the start still stops cleanly: the handler is in place first.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let what = if nodes == 1 {
        "a standalone server".to_owned()
    } else {
        format!("a {nodes}-node ensemble")
    };
    let tls = if p.has("tls") {
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
        let env = tls.as_ref().map_or_else(String::new, |m| {
            format!(
                "ZKW_TLS_CA={} ZKW_TLS_CERT={} ZKW_TLS_KEY={} ",
                m.ca_cert().display(),
                m.client_cert().display(),
                m.client_key().display()
            )
        });
        out::note(&format!(
            "{what} is running; try: {env}zkw --server {connect} ls /   (Ctrl-C stops it)"
        ));
        let _ = ctrl_c.await;
        out::note("stopping…");
    }
    local.stop().await;
    drop(tls);
    printed
}

/// The connect string (and, with TLS, the files a client needs) on standard output.
fn print_started(
    g: &Global,
    connect: &str,
    nodes: usize,
    tls: Option<&TlsMaterial>,
) -> Result<(), Failure> {
    if !g.json {
        return out::line(connect);
    }
    let mut fields = vec![
        ("connect_string", Json::str(connect)),
        ("servers", i64::try_from(nodes).unwrap_or(0).into()),
    ];
    if let Some(m) = tls {
        fields.push(("tls_ca", Json::str(m.ca_cert().display().to_string())));
        fields.push(("tls_cert", Json::str(m.client_cert().display().to_string())));
        fields.push(("tls_key", Json::str(m.client_key().display().to_string())));
    }
    out::json(&Json::Obj(fields))
}
