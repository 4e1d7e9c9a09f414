//! `cache PATH [--depth N]`: a [`TreeCache`] of the subtree, printed, then its changes until
//! Ctrl-C.

use zkwire::SessionState;
use zkwire_recipes::{CacheEvent, CachedNode, TreeCache};

use serde_json::{json, Map, Value};

use crate::cli::CacheArgs;
use crate::connect::Global;
use crate::fail::{Failure, UNAVAILABLE};
use crate::format::{data_json, data_line};
use crate::interrupt::{interrupted, until_stopped};
use crate::nodes::check_path;
use crate::out;

/// Starts the cache and prints its events until Ctrl-C or the end of the session.
pub(crate) async fn cache(g: &Global, a: &CacheArgs) -> Result<(), Failure> {
    let path = a.path.clone();
    check_path(&path, false)?;
    let depth = a.depth;
    let ctrl_c = crate::interrupt::ctrl_c()?;
    tokio::pin!(ctrl_c);
    let client = until_stopped(g.connect(), interrupted(&mut ctrl_c, "connecting")).await?;
    let mut states = client.state_stream();
    let mut builder = TreeCache::builder(client.clone(), path.clone());
    if let Some(depth) = depth {
        builder = builder.with_max_depth(depth);
    }
    let started = tokio::select! {
        started = tokio::time::timeout(g.session_timeout, builder.start()) => started,
        _ = &mut ctrl_c => {
            g.close(&client).await;
            return Ok(());
        }
    };
    let (_cache, mut events) = match started {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => return Err(Failure::zk(&path, &e)),
        Err(_) => {
            return Err(Failure::new(
                UNAVAILABLE,
                format!("{path}: the tree was not read within the session timeout"),
            ))
        }
    };
    let result = loop {
        tokio::select! {
            _ = &mut ctrl_c => break Ok(()),
            event = events.next() => match event {
                Some(CacheEvent::Stopped(e)) => break Err(Failure::new(UNAVAILABLE, format!("the cache stopped: {e}"))),
                Some(event) => print_event(g.json, &event)?,
                None => break Err(Failure::new(UNAVAILABLE, "the cache stopped")),
            },
            state = states.next() => match state {
                Some(SessionState::Disconnected) => out::note("disconnected; reconnecting (the cache catches up then)"),
                Some(SessionState::Connected) => out::note("reconnected"),
                Some(_) => {}
                None => break Err(Failure::new(UNAVAILABLE, "the client closed")),
            },
        }
    };
    g.close(&client).await;
    result
}

/// One event on a line: `created /a data`, or a JSON object.
fn print_event(json: bool, event: &CacheEvent) -> Result<(), Failure> {
    let (kind, path, node) = match event {
        CacheEvent::Created { path, node } => ("created", path.as_str(), Some(node)),
        CacheEvent::Changed { path, new, .. } => ("changed", path.as_str(), Some(new)),
        CacheEvent::Deleted { path, .. } => ("deleted", path.as_str(), None),
        CacheEvent::Unreadable { path } => ("unreadable", path.as_str(), None),
        CacheEvent::Initialized => return initialized(json),
        CacheEvent::Lagged { missed } => return lagged(json, *missed),
        // Stopped is handled by the caller; the enum may grow.
        _ => return Ok(()),
    };
    if json {
        return out::json(&event_json(kind, path, node));
    }
    match node {
        Some(node) => out::line(&format!("{kind} {path} {}", data_line(&node.data))),
        None => out::line(&format!("{kind} {path}")),
    }
}

/// The output fell behind: `missed` events were not printed.
fn lagged(json: bool, missed: u64) -> Result<(), Failure> {
    if json {
        out::json(&json!({"event": "lagged", "missed": missed}))
    } else {
        out::line(&format!("lagged {missed}"))
    }
}

fn initialized(json: bool) -> Result<(), Failure> {
    if json {
        out::json(&json!({"event": "initialized"}))
    } else {
        out::line("initialized")
    }
}

/// `{"event":…,"path":…,"data":…,"data_base64":…,"version":…,"mzxid":…}` (no data for a
/// deletion or an unreadable node).
fn event_json(kind: &str, path: &str, node: Option<&CachedNode>) -> Value {
    let mut fields = Map::new();
    fields.insert("event".into(), json!(kind));
    fields.insert("path".into(), json!(path));
    if let Some(node) = node {
        fields.extend(data_json(&node.data).map(|(k, v)| (k.to_owned(), v)));
        fields.insert("version".into(), json!(node.stat.version));
        fields.insert("mzxid".into(), json!(node.stat.mzxid));
    }
    Value::Object(fields)
}
