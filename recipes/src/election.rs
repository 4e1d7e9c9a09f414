//! [`LeaderElection`]: Curator's `LeaderSelector` — run a closure while leader, cancel it the
//! moment leadership can no longer be trusted, queue again.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use zkwire::Client;

use crate::error::{LockError, LostReason};
use crate::hold::Hold;
use crate::internals::{acquire, Contest, Dir, Outcome};
use crate::latch::Leadership;
use crate::options::LockOptions;
use crate::sequence::MUTEX_MARKERS;

/// A leader election loop in the spirit of Curator's `LeaderSelector`, on its layout: the
/// contenders are mutex nodes (`path/_c_<uuid>-lock-<seq>`, the participant id as data), so
/// zkwire and Curator `LeaderSelector`s (and `InterProcessMutex`es) on one path exclude each
/// other.
///
/// [`run_once`](Self::run_once) waits for leadership and runs the closure with a
/// [`Leadership`]; when the leadership is lost — by the lock guards' rule, which fires
/// [`lease_margin`](crate::lease_margin) before the server could expire the session and
/// elect someone else — the closure's future is **dropped** (cancelled at its next await)
/// before the node is deleted. The next leader's closure therefore starts after ours was
/// cancelled. [`run`](Self::run) does it again and again (Curator's `autoRequeue`).
///
/// The closure must be cancel safe: anything it spawned should stop when its future is
/// dropped (hold a [`tokio::task::JoinHandle`] behind an abort-on-drop guard, or select on
/// [`Leadership::lost`] inside spawned work).
///
/// [`tokio::task::JoinHandle`]: https://docs.rs/tokio/1/tokio/task/struct.JoinHandle.html
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::LeaderElection;
///
/// let election = LeaderElection::new(client, "/election/compactor", "node-3");
/// // Runs until the session is over for good (or the future is dropped).
/// election
///     .run(|leadership| async move {
///         println!("leading with token {}", leadership.fencing_token());
///         loop {
///             // One unit of leader-only work; cancelled here if leadership is lost.
///             tokio::time::sleep(std::time::Duration::from_secs(1)).await;
///         }
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LeaderElection {
    dir: Dir,
}

impl LeaderElection {
    /// An election on `path` for participant `id` (stored as the node's data, as Curator's
    /// `LeaderSelector` does). Nothing is sent until run.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::LeaderElection;
    /// let election = LeaderElection::new(client, "/election/compactor", "node-3");
    /// # let _ = election;
    /// # }
    /// ```
    pub fn new(client: Client, path: impl Into<String>, id: impl Into<String>) -> Self {
        Self::with_options(client, path, id, LockOptions::default())
    }

    /// An election with `options` (ACLs, lease margin, disconnect grace...; the node data is
    /// always the id).
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::{LeaderElection, LockOptions};
    ///
    /// // Cancel the leader's work 5 s before the server may expire the session.
    /// let options = LockOptions::new().with_lease_margin(Duration::from_secs(5));
    /// let path = "/election/compactor";
    /// let election = LeaderElection::with_options(client, path, "node-3", options);
    /// # let _ = election;
    /// # }
    /// ```
    pub fn with_options(
        client: Client,
        path: impl Into<String>,
        id: impl Into<String>,
        options: LockOptions,
    ) -> Self {
        let options = options.with_data(id.into().into_bytes());
        Self {
            dir: Dir::new(client, path.into(), options),
        }
    }

    /// The election's directory.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// let election = zkwire_recipes::LeaderElection::new(client, "/election/compactor", "node-3");
    /// assert_eq!(election.path(), "/election/compactor");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.dir.path
    }

    /// Waits for leadership, then runs `lead` until it returns (`Ok(Ok(output))`) or the
    /// leadership is lost (`Ok(Err(reason))`, the future dropped first). The node is deleted
    /// either way before this returns (or, if the session is over, went with it).
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LeaderElection, LockError};
    /// # async fn compact() -> usize { 0 }
    /// # async fn run(election: LeaderElection) -> Result<(), LockError> {
    /// let term = election.run_once(|_leadership| compact()).await?;
    /// match term {
    ///     Ok(segments) => println!("compacted {segments} segments as leader"),
    ///     Err(reason) => println!("leadership lost ({reason}): compaction cancelled"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Mutex::lock`](crate::Mutex::lock): a non-retryable client error (the session is
    /// over without renewal, ACL...), [`LockError::ForeignChild`],
    /// [`LockError::SequenceWrapped`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops `lead`'s and removes our node in the
    /// background.
    pub async fn run_once<F, Fut>(
        &self,
        lead: F,
    ) -> Result<Result<Fut::Output, LostReason>, LockError>
    where
        F: FnOnce(Leadership) -> Fut,
        Fut: Future,
    {
        let contest = Contest::exclusive(MUTEX_MARKERS[0], MUTEX_MARKERS);
        let node = match acquire(&self.dir, &contest, true, None).await? {
            Outcome::Held(node) => node,
            Outcome::Busy => return Err(LockError::Timeout),
        };
        let hold = Arc::new(Hold::new(self.dir.client.clone(), node, &self.dir.options));
        let leadership = Leadership::new(Arc::clone(&hold));
        // Cancelled, this future must still end the term: clones of the leadership (kept by
        // work the closure spawned) would otherwise keep the node, and us leader, for the
        // session's life.
        let _term = AbandonOnDrop(Arc::clone(&hold));
        let outcome = {
            let work = lead(leadership);
            tokio::select! {
                // A loss noticed at the same time as the work ends counts as a loss.
                biased;
                reason = hold.lost() => Err(reason),
                output = work => Ok(output),
            }
            // `work` is dropped here, before the node goes.
        };
        let _ = hold.end().await;
        Ok(outcome)
    }

    /// [`run_once`](Self::run_once) again and again: after each term (the closure returned
    /// or was cancelled) the participant queues again with a new node. Returns only with an
    /// error.
    ///
    /// ```no_run
    /// # async fn run(election: zkwire_recipes::LeaderElection) {
    /// let Err(e) = election
    ///     .run(|leadership| async move {
    ///         println!("term with fencing token {}", leadership.fencing_token());
    ///         // ...leader-only work until it returns or the leadership is lost...
    ///     })
    ///     .await;
    /// eprintln!("left the election: {e}");
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`run_once`](Self::run_once).
    ///
    /// # Cancel safety
    /// As [`run_once`](Self::run_once).
    pub async fn run<F, Fut>(&self, mut lead: F) -> Result<Infallible, LockError>
    where
        F: FnMut(Leadership) -> Fut,
        Fut: Future,
    {
        loop {
            if let Err(reason) = self.run_once(&mut lead).await? {
                tracing::info!(path = self.dir.path, %reason, "leadership lost; queueing again");
            }
        }
    }
}

/// Abandons a leadership's hold when dropped: a no-op once the term ended by
/// [`Hold::end`], the delete in the background when the term was cancelled.
struct AbandonOnDrop(Arc<Hold>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.abandon();
    }
}
