//! The per-session "pending deletes" worker: removal of lock nodes that cannot be lost.
//!
//! A dropped guard, a cancelled or failed acquire, or a release whose future was dropped
//! hands its node (or, when a create's outcome is unknown, its guid) to the worker of its
//! session. The worker retries each job until it succeeds or the session is over (its
//! ephemeral nodes are then gone anyway); it never gives up on a retryable error, unlike
//! kazoo's one best-effort delete (kazoo #732) or Curator's manager that stops with the
//! framework (CURATOR-678).
//!
//! There is one worker per session id, spawned when a job arrives and ending when the queue
//! is empty, so it never keeps an idle client (and its session) alive. Jobs hold the client
//! clone they need; jobs run one at a time, in order, which is what a single ZooKeeper session
//! does anyway.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use zkwire::{path, Client, Error};

use crate::internals::{backoff, owned_by_guid};

/// One piece of cleanup.
#[derive(Debug)]
pub(crate) enum Job {
    /// Delete this node (any version); `NoNode` means done.
    Delete(String),
    /// Delete every child of `dir` whose name starts with `prefix` (a protected guid prefix)
    /// and whose ephemeral owner is this session, after a sync of `dir`.
    Sweep {
        /// The lock directory.
        dir: String,
        /// `_c_<uuid>-`.
        prefix: String,
    },
}

struct Queued {
    client: Client,
    job: Job,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Queued>,
    running: bool,
}

type Registry = Mutex<HashMap<i64, Queue>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// Hands `job` to the worker of `client`'s session, starting it if needed.
///
/// A client that never had a session (id 0) has nothing on the server to clean up. Outside
/// a tokio runtime nothing can run: the node then lives until the session ends.
pub(crate) fn enqueue(client: &Client, job: Job) {
    let session = client.session_id();
    if session == 0 {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            ?job,
            "no tokio runtime: the lock node stays until the session ends"
        );
        return;
    };
    let start = {
        let mut queues = registry().lock().unwrap_or_else(PoisonError::into_inner);
        let queue = queues.entry(session).or_default();
        queue.jobs.push_back(Queued {
            client: client.clone(),
            job,
        });
        !std::mem::replace(&mut queue.running, true)
    };
    if start {
        runtime.spawn(run(session));
    }
}

/// The number of jobs waiting for `session` (for tests and monitoring).
#[cfg(test)]
pub(crate) fn pending(session: i64) -> usize {
    let queues = registry().lock().unwrap_or_else(PoisonError::into_inner);
    queues.get(&session).map_or(0, |q| q.jobs.len())
}

async fn run(session: i64) {
    // Aborted with its runtime: let the next job start a new worker.
    let mut running = Running {
        session,
        ended: false,
    };
    loop {
        let next = {
            let mut queues = registry().lock().unwrap_or_else(PoisonError::into_inner);
            let next = queues.get_mut(&session).and_then(|q| q.jobs.pop_front());
            if next.is_none() {
                queues.remove(&session);
                // Another worker may own a new entry from now on: leave it alone.
                running.ended = true;
            }
            next
        };
        let Some(Queued { client, job }) = next else {
            return;
        };
        if let Err(e) = run_job(&client, &job).await {
            if e.is_terminal() {
                // The session is over: every ephemeral node of it is gone already.
                drop_all(session);
            } else {
                tracing::warn!(?job, error = %e, "lock cleanup failed for good");
            }
        }
    }
}

/// Runs one job, retrying retryable errors until it succeeds or fails for good.
async fn run_job(client: &Client, job: &Job) -> Result<(), Error> {
    let mut attempt = 0;
    loop {
        let result = match job {
            Job::Delete(path) => delete(client, path).await,
            Job::Sweep { dir, prefix } => sweep(client, dir, prefix).await,
        };
        match result {
            Err(e) if e.is_retryable() => {
                tracing::debug!(?job, error = %e, "lock cleanup will retry");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn delete(client: &Client, path: &str) -> Result<(), Error> {
    match client.delete(path, None).await {
        Ok(()) | Err(Error::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn sweep(client: &Client, dir: &str, prefix: &str) -> Result<(), Error> {
    for (name, _) in owned_by_guid(client, dir, prefix).await? {
        delete(client, &path::join(dir, &name)).await?;
    }
    Ok(())
}

/// Marks the worker of a session as gone if it is dropped before it ended (its runtime shut
/// down), so that the next job starts a new one.
struct Running {
    session: i64,
    ended: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut queues = registry().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(q) = queues.get_mut(&self.session) {
            q.running = false;
        }
    }
}

fn drop_all(session: i64) {
    let mut queues = registry().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(q) = queues.get_mut(&session) {
        q.jobs.clear();
    }
}

/// How long a foreground cleanup (after a timeout or `try_lock` miss) may take before it is
/// left to the worker.
pub(crate) const FOREGROUND_GRACE: Duration = Duration::from_millis(500);
