//! `--watch` of `locks`, `members` and `services`: print, then print again after every change
//! at or below a path, until Ctrl-C.

use std::future::Future;

use zkwire::{AddWatchMode, Client, EventType};

use crate::connect::Global;
use crate::fail::{Failure, UNAVAILABLE};
use crate::out;

/// Runs `show`, then again after every event at or below `path` (which need not exist),
/// until Ctrl-C. With `separated`, text rounds are apart by a blank line (for output that has
/// no header line of its own).
pub(crate) async fn follow<F, Fut>(
    g: &Global,
    client: &Client,
    path: &str,
    separated: bool,
    mut show: F,
) -> Result<(), Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    let ctrl_c = crate::interrupt::ctrl_c()?;
    tokio::pin!(ctrl_c);
    let mut events = client
        .with_timeout(g.session_timeout)
        .add_watch(path, AddWatchMode::PersistentRecursive)
        .await
        .map_err(|e| Failure::zk(path, &e))?;
    for round in 0_u64.. {
        if separated && round > 0 && !g.json {
            out::line("")?;
        }
        show().await?;
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            event = events.next() => match event {
                Some(e) if e.event_type != EventType::None => {}
                Some(_) => return Err(Failure::new(UNAVAILABLE, "the session ended; the watch is gone")),
                // The client ends a persistent watch whose consumer falls too far behind.
                None => return Err(Failure::new(
                    UNAVAILABLE,
                    "the watch ended: changes came faster than they could be shown; run again",
                )),
            },
        }
    }
    Ok(())
}
