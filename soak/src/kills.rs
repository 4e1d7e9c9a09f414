//! Leader kills: every ~`--leader-kill-every` seconds the ensemble's leader is killed and
//! restarted 2–5 s later, in turn with the partitions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zkwire_testing::rng::SplitMix64;

use crate::partition::{wait_whole, Servers};
use crate::shared::{lock, Shared};

/// Leader kills at most.
const MAX_KILLS: usize = 100_000;
/// How long a leader kill waits for its turn (a partition holds it until healed) before
/// the kill is skipped.
const KILL_TURN_WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub(crate) struct KillRecord {
    pub(crate) node: Option<usize>,
    pub(crate) killed_at: Instant,
    pub(crate) restarted_at: Option<Instant>,
    pub(crate) outcome: String,
}

impl KillRecord {
    /// A kill that did not happen, and why.
    fn skipped(outcome: String) -> Self {
        Self {
            node: None,
            killed_at: Instant::now(),
            restarted_at: None,
            outcome,
        }
    }
}

/// Kills and restarts leaders until the run stops.
pub(crate) async fn kill_leaders(sh: Arc<Shared>, servers: Arc<Servers>) {
    let every = sh.settings.kill_every;
    if every.is_zero() {
        return;
    }
    let mut rng = SplitMix64(sh.settings.seed ^ 0x6b69_6c6c);
    for _ in 0..MAX_KILLS {
        let wait = rng.between(every * 9 / 10, every * 11 / 10);
        if sh.sleep_or_stop(wait).await {
            break;
        }
        // Partitions and kills take turns (a kill during a partition can leave no quorum).
        let mut stop = sh.stop.subscribe();
        let turn = tokio::select! {
            t = tokio::time::timeout(KILL_TURN_WAIT, Arc::clone(&servers.turn).lock_owned()) => t,
            _ = stop.wait_for(|s| *s) => break,
        };
        let Ok(_turn) = turn else {
            let why = format!("no turn within {KILL_TURN_WAIT:?} (a partition)");
            lock(&sh.kills).push(KillRecord::skipped(why));
            continue;
        };
        let node = match kill_leader(&servers).await {
            Ok(node) => node,
            Err(why) => {
                lock(&sh.kills).push(KillRecord::skipped(why.to_owned()));
                continue;
            }
        };
        let killed_at = Instant::now();
        // Down for 2–5 s (cut short by a stop: the ensemble must be whole at the end).
        let down = rng.between(Duration::from_secs(2), Duration::from_secs(5));
        let _ = sh.sleep_or_stop(down).await;
        let restarted = restart(&servers, node).await;
        lock(&sh.kills).push(KillRecord {
            node: Some(node),
            killed_at,
            restarted_at: restarted.as_ref().ok().map(|(at, _)| *at),
            outcome: match restarted {
                Ok((at, whole)) => format!(
                    "down {:.1}s, rejoined after {:.1}s, {}",
                    down.as_secs_f64(),
                    (at - killed_at).as_secs_f64(),
                    match whole {
                        Ok(d) => format!("whole again {:.1}s later", d.as_secs_f64()),
                        Err(e) => e,
                    }
                ),
                Err(e) => format!("restart failed: {e}"),
            },
        });
    }
}

/// Kills the leader; returns its node.
async fn kill_leader(servers: &Arc<Servers>) -> Result<usize, &'static str> {
    let srv = Arc::clone(servers);
    tokio::task::spawn_blocking(move || {
        let mut e = srv.ensemble();
        let leader = e
            .leader()
            .ok_or("no leader to kill (election under way?)")?;
        e.kill(leader)
            .map(|()| leader)
            .map_err(|_| "could not kill the leader")
    })
    .await
    .unwrap_or(Err("the kill task failed"))
}

/// Restarts `node`; returns when it was back, and how long the ensemble then took to be
/// whole again (or why it was not).
async fn restart(
    servers: &Arc<Servers>,
    node: usize,
) -> Result<(Instant, Result<Duration, String>), String> {
    let srv = Arc::clone(servers);
    tokio::task::spawn_blocking(move || {
        let mut e = srv.ensemble();
        e.restart(node).map_err(|e| e.to_string())?;
        let restarted_at = Instant::now();
        Ok((restarted_at, wait_whole(&e)))
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r)
}
