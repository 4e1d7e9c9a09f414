//! The per-session "pending deletes" worker: removal of lock nodes that cannot be lost.
//!
//! A dropped guard, a cancelled or failed acquire, or a release whose future was dropped
//! hands its node (or, when a create's outcome is unknown, its guid) to the worker of its
//! session. The worker retries each job until it succeeds or the session is over (its
//! ephemeral nodes are then gone anyway), as Curator's guaranteed delete does: it never gives
//! up on an error that may yet clear up, unlike kazoo's one best-effort delete or a manager
//! that stops with the framework that started it.
//!
//! - A retryable error (connection loss, timeout, ...) is retried at once after a backoff;
//!   the job keeps its place, since every other job would meet the same error.
//! - Any other error that does not end the session (`NoAuth` after an ACL change,
//!   `NotReadOnly` while only a read-only server is reachable, ...) may clear up later: the
//!   job goes to the back of the queue and is retried after a backoff, so that one stuck
//!   node does not hold up the others. It is logged at warn once per job.
//! - A terminal error (`SessionExpired`, `Closed`, ...) ends the job: on that client nothing
//!   can succeed any more, and if the session is over its nodes are gone.
//!
//! Backoff: 50 ms doubling to at most 1 s.
//!
//! A job holds a clone of its client, and so keeps the session open while it waits: a job
//! that keeps failing (an ACL that never lets it delete) keeps the session, and its ephemeral
//! node, until the session ends, even after the application dropped its own handles.
//!
//! A dropped guard's delete does not go through the worker unless it fails: it is sent in
//! the background ([`zkwire::Client::delete_detached`]) and its answer is looked at in the
//! client's driver, which hands a failure to the worker as a [`Job::Delete`]. On success no
//! task is woken at all: waking one from a guard's drop moves the client's driver to another
//! thread at every cycle (BENCHMARKS.md, "Allocations per lock cycle" and "Issue 29,
//! seventh pass").
//!
//! There is one worker per client, spawned when a job arrives; a job wakes it at once. Once
//! the queue is empty it lingers [`LINGER`] before it ends. While it lingers it holds no
//! client, so it never keeps an idle client (and its session) alive.
//! The queue lives in the client's coordinator for as long as the worker runs; a worker
//! dropped before it could run (its runtime shut down) drops the jobs left with it, whose
//! nodes then live until the session ends. Jobs run one at a time, which is what a single
//! ZooKeeper session does anyway.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use zkwire::{path, Backoff, Client, Error};

use crate::coordinator::Coordinator;
use crate::guid::owned_by_guid;

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

/// Deletes `node_path`, handing the request to the client before returning; a failure is
/// left to the worker.
///
/// Sent at once, the delete goes out ahead of whatever the caller sends next: a guard
/// dropped just before the next acquire shares that acquire's write, and the next listing
/// no longer shows the old node (the order argument of `Attempt::create_listing`). Its
/// answer is looked at in the client's driver: nothing more is done on success (`NoNode`
/// included), nothing can be on a terminal error (the session is over, and its ephemeral
/// nodes with it), and any other error hands the node to the worker, which retries it.
pub(crate) fn delete_now_or_later(client: &Client, node_path: String) {
    let retry = client.clone();
    client.delete_detached(node_path, None, move |path, outcome| match outcome {
        Ok(()) | Err(Error::NoNode) => {}
        Err(e) if e.is_terminal() => {
            tracing::debug!(node = path, error = %e, "lock cleanup ends with the session");
        }
        Err(_) => enqueue(&retry, Job::Delete(path)),
    });
}

struct Queued {
    client: Client,
    job: Job,
    /// The pauses between failed attempts.
    backoff: Backoff,
    /// Whether a non-retryable failure of this job was logged at warn already.
    warned: bool,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Queued>,
    /// A worker exists (spawned, maybe not polled yet) for this client.
    running: bool,
    /// The worker holds a job taken off `jobs` (running it, or waiting to retry it).
    active: bool,
}

/// The cleanup queue of one client, in its coordinator.
#[derive(Default)]
pub(crate) struct Jobs {
    queue: Mutex<Queue>,
    /// Wakes a worker that waits for the next job.
    wake: Notify,
}

/// How long a worker with nothing to do waits for the next job before it ends.
const LINGER: Duration = Duration::from_secs(1);

impl Jobs {
    /// The queue of `client` (created if no worker holds one).
    fn of(client: &Client) -> Arc<Self> {
        // One queue per client: the key names nothing else.
        Coordinator::of(client).state::<Self>("")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Hands `job` to the worker of `client`, starting it if needed.
///
/// A client that never had a session (id 0) has nothing on the server to clean up. Outside
/// a tokio runtime nothing can run: the node then lives until the session ends.
pub(crate) fn enqueue(client: &Client, job: Job) {
    if client.session_id() == 0 {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            ?job,
            "no tokio runtime: the lock node stays until the session ends"
        );
        return;
    };
    let jobs = Jobs::of(client);
    let start = {
        let mut queue = jobs.lock();
        queue.jobs.push_back(Queued {
            client: client.clone(),
            job,
            backoff: Backoff::new(),
            warned: false,
        });
        !std::mem::replace(&mut queue.running, true)
    };
    if start {
        // The guard exists before the task does: if the task is dropped without ever being
        // polled (its runtime shuts down first), dropping the guard still clears `running`,
        // so that the next job starts a new worker.
        runtime.spawn(run(Running { jobs, ended: false }));
    } else {
        // A permit is kept if the worker is busy: it then looks at the queue once more.
        jobs.wake.notify_one();
    }
}

/// The number of jobs not done yet for `client`, the one in progress included (for tests
/// and monitoring).
#[cfg(test)]
pub(crate) fn pending(client: &Client) -> usize {
    let queue = Jobs::of(client);
    let queue = queue.lock();
    queue.jobs.len() + usize::from(queue.active)
}

/// What became of one attempt at a job.
enum Outcome {
    /// Done: succeeded, or ended by a terminal error.
    Done,
    /// Try the same job again after `pause`, before any other.
    RetryNow(Duration),
    /// Put the job at the back of the queue and pause before going on.
    RetryLater(Duration),
}

async fn run(mut running: Running) {
    let jobs = Arc::clone(&running.jobs);
    let mut idle_since = None;
    loop {
        let next = {
            let mut queue = jobs.lock();
            let next = queue.jobs.pop_front();
            queue.active = next.is_some();
            next
        };
        let Some(mut queued) = next else {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if let Some(left) = LINGER.checked_sub(since.elapsed()).filter(|d| !d.is_zero()) {
                // Woken by the next job, or not: the queue is looked at again either way.
                let _woken = tokio::time::timeout(left, jobs.wake.notified()).await;
                continue;
            }
            let mut queue = jobs.lock();
            if queue.jobs.is_empty() {
                queue.running = false;
                // Another worker may own the queue from now on: leave its flags alone.
                running.ended = true;
                return;
            }
            continue;
        };
        idle_since = None;
        loop {
            match attempt(&mut queued).await {
                Outcome::Done => break,
                Outcome::RetryNow(pause) => tokio::time::sleep(pause).await,
                Outcome::RetryLater(pause) => {
                    {
                        let mut queue = jobs.lock();
                        queue.jobs.push_back(queued);
                        queue.active = false;
                    }
                    tokio::time::sleep(pause).await;
                    break;
                }
            }
        }
    }
}

/// Tries `queued`'s job once and decides what comes next.
async fn attempt(queued: &mut Queued) -> Outcome {
    let Queued {
        client,
        job,
        backoff,
        warned,
    } = queued;
    let result = match job {
        Job::Delete(path) => delete(client, path).await,
        Job::Sweep { dir, prefix } => sweep(client, dir, prefix).await,
    };
    let e = match result {
        Ok(()) => return Outcome::Done,
        Err(e) => e,
    };
    if e.is_terminal() {
        // Nothing on this client can succeed any more; if the session is over, its
        // ephemeral nodes are gone already. Other jobs may hold another client of the same
        // session (resumed elsewhere) and run on their own.
        tracing::debug!(?job, error = %e, "lock cleanup ends with the session");
        return Outcome::Done;
    }
    // Unbounded: there is always a next pause.
    let pause = backoff.next_delay().unwrap_or(Duration::from_secs(1));
    if e.is_retryable() {
        tracing::debug!(?job, error = %e, "lock cleanup will retry");
        return Outcome::RetryNow(pause);
    }
    if !std::mem::replace(warned, true) {
        tracing::warn!(
            ?job,
            error = %e,
            "lock cleanup failed; retrying with backoff until it succeeds or the session ends"
        );
    } else {
        tracing::debug!(?job, error = %e, "lock cleanup failed again");
    }
    Outcome::RetryLater(pause)
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

/// The worker's hold on its client's queue. Dropped before the worker ended (its runtime
/// shut down, perhaps before it was ever polled), it marks the worker as gone, so that the
/// next job starts a new one. The job it held, if any, is dropped with it.
struct Running {
    jobs: Arc<Jobs>,
    ended: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut queue = self.jobs.lock();
        queue.running = false;
        queue.active = false;
    }
}

/// How long a foreground cleanup (after a timeout or `try_lock` miss) may take before it is
/// left to the worker.
pub(crate) const FOREGROUND_GRACE: Duration = Duration::from_millis(500);

#[cfg(test)]
mod tests {
    //! The worker against a real server.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::{Duration, Instant};

    use zkwire::{Acl, Client, CreateOptions, Error, Id, Perms};
    use zkwire_testing::support::fresh_chroot;

    use super::*;

    /// Polls (for up to 10 s) until `path` is gone and `client` has at most `left` jobs.
    async fn wait_done(client: &Client, path: &str, left: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while (pending(client) > left || client.exists(path).await.unwrap().is_some())
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A worker whose task is dropped before its first poll (its runtime shut down right
    /// after `enqueue` spawned it) must not leave the client marked as having a worker: the
    /// next job, on another runtime, gets one and runs.
    #[test]
    fn a_worker_dropped_unpolled_does_not_block_later_jobs() {
        let main = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let a = main.block_on(async {
            let cs = fresh_chroot("cleanup_unpolled").await;
            let a = Client::connect(&cs).await.unwrap();
            a.create("/first", b"", &CreateOptions::persistent())
                .await
                .unwrap();
            a.create("/second", b"", &CreateOptions::persistent())
                .await
                .unwrap();
            a
        });
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // No await after this: the worker is spawned on `first` but never polled there.
        first.block_on(async { enqueue(&a, Job::Delete("/first".into())) });
        drop(first);
        // The worker went with its runtime, and its job with it.
        assert_eq!(pending(&a), 0, "no job left behind a dead worker");

        main.block_on(async {
            enqueue(&a, Job::Delete("/second".into()));
            wait_done(&a, "/second", 0).await;
            assert_eq!(
                a.exists("/second").await.unwrap(),
                None,
                "the later job ran"
            );
            assert!(
                a.exists("/first").await.unwrap().is_some(),
                "dropped, not run"
            );
            a.delete("/first", None).await.unwrap();
            a.close().await.unwrap();
        });
    }

    /// A delete refused with a non-retryable error (NoAuth: the parent's ACL denies DELETE)
    /// is retried until it succeeds once the ACL allows it again, and meanwhile does not hold
    /// up the session's other jobs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_delete_is_retried_until_it_succeeds() {
        let cs = fresh_chroot("cleanup_noauth").await;
        let a = Client::connect(&cs).await.unwrap();
        a.create("/dir", b"", &CreateOptions::persistent())
            .await
            .unwrap();
        let ephemeral = CreateOptions::ephemeral();
        a.create("/dir/node", b"", &ephemeral).await.unwrap();
        a.create("/other", b"", &ephemeral).await.unwrap();
        let no_delete = [Acl::new(
            Perms(Perms::ALL.0 & !Perms::DELETE.0),
            Id::anyone(),
        )];
        a.set_acl("/dir", &no_delete, None).await.unwrap();
        assert_eq!(a.delete("/dir/node", None).await, Err(Error::NoAuth));

        enqueue(&a, Job::Delete("/dir/node".into()));
        enqueue(&a, Job::Delete("/other".into()));
        wait_done(&a, "/other", 1).await;
        assert_eq!(a.exists("/other").await.unwrap(), None, "not held up");
        // Long enough for several attempts (50, 100, 200, 400 ms ... apart).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(a.exists("/dir/node").await.unwrap().is_some());
        assert_eq!(pending(&a), 1, "the refused job is still pending");

        a.set_acl("/dir", &Acl::open_unsafe(), None).await.unwrap();
        wait_done(&a, "/dir/node", 0).await;
        assert_eq!(
            a.exists("/dir/node").await.unwrap(),
            None,
            "deleted at last"
        );
        assert_eq!(pending(&a), 0);
        a.close().await.unwrap();
    }
}
