//! `watch PATH [--recursive]`: streams events until Ctrl-C.

use zkwire::{AddWatchMode, EventType, SessionState, WatchedEvent};

use serde_json::json;

use crate::cli::WatchArgs;
use crate::connect::Global;
use crate::fail::{Failure, UNAVAILABLE};
use crate::interrupt::{interrupted, until_stopped};
use crate::nodes::check_path;
use crate::out;

/// Adds a persistent (recursive) watch and prints each event on a line until Ctrl-C.
pub(crate) async fn watch(g: &Global, a: &WatchArgs) -> Result<(), Failure> {
    let path = a.path.clone();
    check_path(&path, false)?;
    let recursive = a.recursive;
    let mode = if recursive {
        AddWatchMode::PersistentRecursive
    } else {
        AddWatchMode::Persistent
    };
    let ctrl_c = crate::interrupt::ctrl_c()?;
    tokio::pin!(ctrl_c);
    let client = until_stopped(g.connect(), interrupted(&mut ctrl_c, "connecting")).await?;
    let mut states = client.state_stream();
    let mut events = client
        .with_timeout(g.session_timeout)
        .add_watch(&path, mode)
        .await
        .map_err(|e| Failure::zk(&path, &e))?;
    let scope = if recursive {
        " and everything under it"
    } else {
        ""
    };
    out::note(&format!("watching {path}{scope} (Ctrl-C to stop)"));
    let result = loop {
        tokio::select! {
            _ = &mut ctrl_c => break Ok(()),
            event = events.next() => match event {
                Some(e) if e.event_type == EventType::None => break Err(session_over(&format!("{:?}", e.state))),
                Some(e) => print_event(g.json, &e)?,
                None => break Err(Failure::new(UNAVAILABLE, "the watch ended (the session is over, or events were not read fast enough)")),
            },
            state = states.next() => match state {
                Some(SessionState::Disconnected) => out::note("disconnected; reconnecting (the watch is restored)"),
                Some(SessionState::Connected) => out::note("reconnected"),
                Some(s) if s.is_terminal() => break Err(session_over(&format!("{s:?}"))),
                Some(_) => {}
                None => break Err(session_over("Closed")),
            },
        }
    };
    g.close(&client).await;
    result
}

fn session_over(state: &str) -> Failure {
    Failure::new(
        UNAVAILABLE,
        format!("the session ended ({state}); the watch is gone"),
    )
}

/// One event: `NodeDataChanged /path`, or a JSON object.
fn print_event(json: bool, event: &WatchedEvent) -> Result<(), Failure> {
    let kind = format!("{:?}", event.event_type);
    if json {
        return out::json(&json!({"event": kind, "path": event.path, "zxid": event.zxid}));
    }
    out::line(&format!("{kind} {}", event.path))
}
