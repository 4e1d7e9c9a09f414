//! `sandbox [--ensemble N]`: a local ZooKeeper (standalone or ensemble) until Ctrl-C.

use zkwire_testing::server::{ZkEnsemble, ZkServer};

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
    Ensemble(ZkEnsemble),
}

impl Local {
    /// Starts `nodes` servers (1: standalone), from the installed ZooKeeper packages.
    ///
    /// # Errors
    /// [`UNAVAILABLE`] with the harness's first line (e.g. what to install).
    pub(crate) async fn start(nodes: usize) -> Result<Self, Failure> {
        let started = tokio::task::spawn_blocking(move || match nodes {
            1 => ZkServer::start().map(|s| Self::Standalone(Box::new(s))),
            n => ZkEnsemble::start(n).map(Self::Ensemble),
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
    out::note(&format!("starting {what}…"));
    let local = tokio::select! {
        local = Local::start(nodes) => local?,
        _ = &mut ctrl_c => return Ok(()),
    };
    let connect = local.connect_string();
    let printed = if g.json {
        out::json(&Json::obj([
            ("connect_string", Json::str(&connect)),
            ("servers", i64::try_from(nodes).unwrap_or(0).into()),
        ]))
    } else {
        out::line(&connect)
    };
    if printed.is_ok() {
        out::note(&format!(
            "{what} is running; try: zkw --server {connect} ls /   (Ctrl-C stops it)"
        ));
        let _ = ctrl_c.await;
        out::note("stopping…");
    }
    local.stop().await;
    printed
}
