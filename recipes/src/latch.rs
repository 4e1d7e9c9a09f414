//! [`LeaderLatch`]: Curator's `LeaderLatch` layout, with leadership judged by the lease rule.
//!
//! A started latch runs one background task per latch: it creates its protected node
//! (`P/_c_<uuid>-latch-<seq>`, the participant id as data), waits behind its predecessor as
//! a mutex contender does, and on the grant publishes a [`Leadership`] that watches the hold
//! exactly as a lock guard does. When the leadership is lost the task first withdraws it
//! (so that nobody sees it as leader any more), then deletes its node and queues again with
//! a new one, until the latch is closed or the session is over for good.

use std::sync::Arc;

use tokio::sync::watch;
use zkwire::{path, Client, Error, Op, OpResult};

use crate::error::{LockError, LostReason};
use crate::hold::Hold;
use crate::internals::{acquire_until, Contest, Dir, Node, Outcome};
use crate::options::LockOptions;
use crate::sequence::LATCH_MARKERS;
use crate::task::Task;

/// A participant in a leader election in Curator's `LeaderLatch` layout: zkwire and Curator
/// latches on one path elect one leader among them.
///
/// [`start`](Self::start) joins the election: the latch creates
/// `path/_c_<uuid>-latch-<seq>` (EPHEMERAL_SEQUENTIAL, the participant id as its data,
/// missing parents as containers); the participant whose node sorts first leads, and every
/// other one watches only its predecessor. Leadership is a [`Leadership`] handle with the
/// guards' loss signal: it ends [`lease_margin`](crate::lease_margin) before the server could
/// expire the session (so before anyone else can be elected), when the node is deleted or
/// its data changes, or when the session ends. A latch that loses leadership deletes its
/// node and joins again at the back of the queue, by itself, until
/// [`close`](Self::close)d; on a client with session renewal
/// ([`zkwire::ClientBuilder::with_session_renewal`]) it joins again on the new session.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::LeaderLatch;
///
/// let latch = LeaderLatch::new(client, "/election/reports", "worker-7");
/// latch.start();
/// loop {
///     let leadership = latch.await_leadership().await?;
///     tokio::select! {
///         reason = leadership.lost() => eprintln!("no longer leader: {reason}"),
///         () = async { /* leader-only work, fenced by leadership.fencing_token() */ } => {}
///     }
/// #   break;
/// }
/// latch.close().await?;
/// # Ok(()) }
/// ```
///
/// Clones share the participant: one node, one leadership. Dropping the last clone closes
/// the latch in the background, as [`close`](Self::close) does: the leadership is withdrawn
/// and the node deleted.
#[derive(Debug, Clone)]
pub struct LeaderLatch {
    shared: Arc<Shared>,
    /// The participant task while started.
    task: Arc<ClosedOnDrop>,
}

/// What the participant task shares with the handles.
#[derive(Debug)]
struct Shared {
    dir: Dir,
    id: String,
    status: watch::Sender<Status>,
}

/// The task slot, held by the handles and not by the task (which holds [`Shared`]): the last
/// handle to go closes the latch.
#[derive(Debug, Default)]
struct ClosedOnDrop(Task);

impl Drop for ClosedOnDrop {
    fn drop(&mut self) {
        self.0.signal_close();
    }
}

/// Where the participant stands.
#[derive(Debug, Clone)]
enum Status {
    /// Not started, or closed.
    Idle,
    /// Queued (or creating its node).
    Waiting,
    Leading(Leadership),
    /// Stopped by an error no retry fixes (the session is over, a foreign child...).
    Failed(LockError),
}

/// One participant of an election, as listed by [`LeaderLatch::participants`].
///
/// ```no_run
/// # use zkwire_recipes::{LeaderLatch, LockError};
/// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
/// let participants = latch.participants().await?;
/// let leader = participants.iter().find(|p| p.is_leader).map(|p| p.id.as_str());
/// println!("{} participants, leader {leader:?}", participants.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// The participant's id: its node's data (Curator's `Participant.getId()`).
    pub id: String,
    /// Its node's full path.
    pub node: String,
    /// Whether its node sorts first: the leader, as far as the others are concerned.
    pub is_leader: bool,
}

impl LeaderLatch {
    /// A latch on `path` for participant `id` (stored as the node's data, as Curator's
    /// latch and `LeaderSelector` do). Nothing is sent until [`start`](Self::start).
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::LeaderLatch;
    /// let latch = LeaderLatch::new(client, "/election/reports", "worker-7");
    /// latch.start();
    /// # }
    /// ```
    pub fn new(client: Client, path: impl Into<String>, id: impl Into<String>) -> Self {
        Self::with_options(client, path, id, LockOptions::default())
    }

    /// A latch with `options` (ACLs, foreign children, lease margin, disconnect grace; the
    /// node data is always the id).
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::{LeaderLatch, LockOptions};
    ///
    /// // Step down at the first disconnection, not only when the session's lease runs out.
    /// let options = LockOptions::new().with_disconnect_grace(Duration::ZERO);
    /// let latch = LeaderLatch::with_options(client, "/election/reports", "worker-7", options);
    /// # let _ = latch;
    /// # }
    /// ```
    pub fn with_options(
        client: Client,
        path: impl Into<String>,
        id: impl Into<String>,
        options: LockOptions,
    ) -> Self {
        let id = id.into();
        let options = options.with_data(id.clone().into_bytes());
        let (status, _) = watch::channel(Status::Idle);
        Self {
            shared: Arc::new(Shared {
                dir: Dir::new(client, path.into(), options),
                id,
                status,
            }),
            task: Arc::default(),
        }
    }

    /// The election's directory.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// let latch = zkwire_recipes::LeaderLatch::new(client, "/election/reports", "worker-7");
    /// assert_eq!(latch.path(), "/election/reports");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.shared.dir.path
    }

    /// This participant's id.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// let latch = zkwire_recipes::LeaderLatch::new(client, "/election/reports", "worker-7");
    /// assert_eq!(latch.id(), "worker-7");
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Joins the election in the background (a no-op while started). Needs a tokio runtime.
    /// After a [`close`](Self::close), even one dropped before it returned, the new
    /// participant waits until the old one has left.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LeaderLatch, LockError};
    /// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
    /// latch.start();
    /// let leadership = latch.await_leadership().await?;
    /// # let _ = leadership;
    /// # Ok(()) }
    /// ```
    pub fn start(&self) {
        self.task.0.start(|closed| {
            self.shared.status.send_replace(Status::Waiting);
            participate(Arc::clone(&self.shared), closed, None)
        });
    }

    /// Joins the election only if this participant leads at once (no one else participates):
    /// then as [`start`](Self::start), with the leadership returned; otherwise leaves no
    /// node and returns `None`. A latch already started is not joined again: its leadership,
    /// if any, is returned.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LeaderLatch, LockError};
    /// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
    /// match latch.try_lead().await? {
    ///     Some(leadership) => println!("leading, with token {}", leadership.fencing_token()),
    ///     None => println!("someone else participates; not joining"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client's errors; [`LockError::ForeignChild`] and [`LockError::SequenceWrapped`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future removes a node it created (in the background).
    pub async fn try_lead(&self) -> Result<Option<Leadership>, LockError> {
        if self.is_started() {
            return Ok(self.leadership());
        }
        let never = std::future::pending::<LockError>();
        let node = match acquire_until(&self.shared.dir, &latch_contest(), false, never).await? {
            Outcome::Held(node) => node,
            Outcome::Busy => return Ok(None),
        };
        let leadership = self.task.0.replace(|closed| {
            let (hold, leadership) = self.shared.lead(node);
            let shared = Arc::clone(&self.shared);
            (participate(shared, closed, Some(hold)), leadership)
        });
        Ok(Some(leadership))
    }

    /// Whether the participant task runs (started and not stopped).
    fn is_started(&self) -> bool {
        self.task.0.is_running()
    }

    /// Whether this participant leads now: granted, and the leadership still trusted.
    ///
    /// ```no_run
    /// # fn run(latch: zkwire_recipes::LeaderLatch) {
    /// if latch.has_leadership() {
    ///     // ...a leader-only chore, checked again before the next one...
    /// }
    /// # }
    /// ```
    pub fn has_leadership(&self) -> bool {
        self.leadership().is_some()
    }

    /// The current leadership, if this participant leads and it is still trusted.
    ///
    /// ```no_run
    /// # fn run(latch: zkwire_recipes::LeaderLatch) {
    /// if let Some(leadership) = latch.leadership() {
    ///     println!("leading, with token {}", leadership.fencing_token());
    /// }
    /// # }
    /// ```
    pub fn leadership(&self) -> Option<Leadership> {
        match &*self.shared.status.borrow() {
            Status::Leading(leadership) if leadership.is_held() => Some(leadership.clone()),
            _ => None,
        }
    }

    /// Waits until this participant leads, and returns the leadership.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LeaderLatch, LockError};
    /// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
    /// latch.start();
    /// let leadership = latch.await_leadership().await?;
    /// println!("leading, with token {}", leadership.fencing_token());
    /// let reason = leadership.lost().await;
    /// println!("no longer leading: {reason}");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Closed`] if the latch is not started or is closed while waiting; the
    /// error that stopped the participant (the session is over without renewal, a foreign
    /// child in the directory...).
    ///
    /// # Cancel safety
    /// Cancel safe: waiting sends nothing, and the participant stays queued.
    pub async fn await_leadership(&self) -> Result<Leadership, LockError> {
        let mut status = self.shared.status.subscribe();
        loop {
            // A copy: the watch's read lock must not be held while `is_started` takes the
            // task's slot, which a start holds while it publishes a status.
            let current = status.borrow_and_update().clone();
            match &current {
                // Not once told to close (a `close()` even dropped after its first poll): the
                // leadership is being given up, and `Idle` follows.
                Status::Leading(leadership) if leadership.is_held() && self.is_started() => {
                    return Ok(leadership.clone());
                }
                Status::Leading(_) | Status::Waiting => {}
                // A participant closing while a new one waits to start says Idle last.
                Status::Idle if self.is_started() => {}
                Status::Idle => return Err(LockError::Closed),
                Status::Failed(e) => return Err(e.clone()),
            }
            // The sender lives in `shared`, which we hold: `changed` cannot fail.
            let _ = status.changed().await;
        }
    }

    /// Every participant in election order, the leader first, read from the server now.
    /// A node that vanishes while being read is left out.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LeaderLatch, LockError};
    /// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
    /// for participant in latch.participants().await? {
    ///     let role = if participant.is_leader { "leader" } else { "waiting" };
    ///     println!("{} ({role})", participant.id);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client's errors; [`LockError::ForeignChild`] and [`LockError::SequenceWrapped`].
    pub async fn participants(&self) -> Result<Vec<Participant>, LockError> {
        let dir = &self.shared.dir;
        let contenders = dir.contender_names(LATCH_MARKERS).await?;
        let mut participants = Vec::with_capacity(contenders.len());
        for name in contenders {
            let node = path::join(&dir.path, &name);
            match dir.client.get_data(&node).await {
                Ok((data, _)) => participants.push(Participant {
                    id: String::from_utf8_lossy(&data).into_owned(),
                    is_leader: participants.is_empty(),
                    node,
                }),
                Err(Error::NoNode) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(participants)
    }

    /// The current leader (of any client), `None` when nobody participates.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LeaderLatch, LockError};
    /// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
    /// match latch.leader().await? {
    ///     Some(leader) => println!("{} leads", leader.id),
    ///     None => println!("nobody participates"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`participants`](Self::participants).
    pub async fn leader(&self) -> Result<Option<Participant>, LockError> {
        Ok(self.participants().await?.into_iter().next())
    }

    /// Leaves the election: ends the leadership if held (it is withdrawn before the node is
    /// deleted), removes the node, and stops the participant. [`start`](Self::start) joins
    /// again later with a new node.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LeaderLatch, LockError};
    /// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
    /// latch.start();
    /// // ...until this process shuts down...
    /// latch.close().await?; // the next participant in line takes over
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The error that had stopped the participant, if any.
    ///
    /// # Cancel safety
    /// Dropping the future still closes the latch; the node is then removed in the
    /// background.
    pub async fn close(&self) -> Result<(), LockError> {
        self.task.0.close().await;
        // The task, closed, has made itself `Idle` (even if this future was dropped while
        // waiting for it). One stopped earlier by an error left that error: reported here,
        // once. Any other status is that of a participant started again meanwhile.
        let mut failed = None;
        self.shared.status.send_if_modified(|status| {
            if !matches!(status, Status::Failed(_)) {
                return false;
            }
            if let Status::Failed(e) = std::mem::replace(status, Status::Idle) {
                failed = Some(e);
            }
            true
        });
        failed.map_or(Ok(()), Err)
    }
}

impl Shared {
    /// Takes the lead with `node`, granted: its hold, and the leadership now published.
    fn lead(&self, node: Node) -> (Arc<Hold>, Leadership) {
        let hold = Arc::new(Hold::new(self.dir.client.clone(), node, &self.dir.options));
        let leadership = Leadership::new(Arc::clone(&hold));
        self.status
            .send_replace(Status::Leading(leadership.clone()));
        (hold, leadership)
    }
}

/// Curator's latch layout: `latch-` nodes, the first one leads.
fn latch_contest() -> Contest {
    Contest::exclusive(LATCH_MARKERS[0], LATCH_MARKERS)
}

/// The participant: queue, lead until the leadership is lost, withdraw, queue again.
/// `leading`: a hold already granted (by [`LeaderLatch::try_lead`]), led first.
async fn participate(
    shared: Arc<Shared>,
    mut closed: watch::Receiver<bool>,
    mut leading: Option<Arc<Hold>>,
) {
    let contest = latch_contest();
    let mut close = closed.clone();
    let closing = async move {
        let _ = close.wait_for(|closed| *closed).await;
        LockError::Closed
    };
    tokio::pin!(closing);
    // Led from the start (`try_lead`): said again now that any task closing before this one
    // has ended, since that task's last word was its own status.
    if let Some(hold) = &leading {
        let leadership = Leadership::new(Arc::clone(hold));
        shared.status.send_replace(Status::Leading(leadership));
    }
    loop {
        let hold = match leading.take() {
            Some(hold) => hold,
            None => {
                shared.status.send_replace(Status::Waiting);
                let node = match acquire_until(&shared.dir, &contest, true, closing.as_mut()).await
                {
                    Ok(Outcome::Held(node)) => node,
                    // Only a non-blocking acquire is ever busy.
                    Ok(Outcome::Busy) => continue,
                    Err(LockError::Closed) => break,
                    Err(e) => {
                        tracing::warn!(path = shared.dir.path, error = %e, "leader latch stopped");
                        shared.status.send_replace(Status::Failed(e));
                        return;
                    }
                };
                shared.lead(node).0
            }
        };
        tracing::debug!(path = shared.dir.path, id = shared.id, "leadership gained");
        let stop = tokio::select! {
            reason = hold.lost() => {
                tracing::info!(path = shared.dir.path, id = shared.id, %reason, "leadership lost");
                false
            }
            _ = closed.wait_for(|closed| *closed) => true,
        };
        // Withdrawn first: from here on nobody is told we lead.
        shared.status.send_replace(Status::Waiting);
        // Until the node is gone, or the session is: the next participant's turn.
        let _ = hold.end().await;
        if stop {
            break;
        }
    }
    // Closed: no longer a participant, whether or not `close` waited to say so.
    shared.status.send_replace(Status::Idle);
}

/// This participant's leadership, from [`LeaderLatch::await_leadership`]. Clones share it.
///
/// It only observes: the latch deletes the node when the leadership is lost or the latch is
/// closed, whoever still holds a `Leadership`.
///
/// ```no_run
/// # use zkwire_recipes::{LeaderLatch, LockError};
/// # async fn run(latch: LeaderLatch) -> Result<(), LockError> {
/// let leadership = latch.await_leadership().await?;
/// let watched = leadership.clone();
/// tokio::spawn(async move {
///     let reason = watched.lost().await;
///     eprintln!("leadership lost: {reason}");
/// });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Leadership {
    hold: Arc<Hold>,
}

impl Leadership {
    pub(crate) fn new(hold: Arc<Hold>) -> Self {
        Self { hold }
    }

    /// Whether the leadership is still trusted (see [`lost`](Self::lost)).
    ///
    /// ```no_run
    /// # async fn run(leadership: zkwire_recipes::Leadership) {
    /// while leadership.is_held() {
    ///     // ...one unit of leader-only work...
    /// #   break;
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        self.hold.is_held()
    }

    /// Resolves when the leadership can no longer be trusted, by the lock guards' rule
    /// ([`MutexGuard::lost`](crate::MutexGuard::lost)): the session's lease is within its
    /// margin of ending without renewal, the session ended, the node was deleted or its data
    /// changed. Resolves with [`LostReason::Released`] once the latch withdrew it (closed).
    /// The future is `'static`.
    ///
    /// ```no_run
    /// # async fn compact() {}
    /// # async fn run(leadership: zkwire_recipes::Leadership) {
    /// tokio::select! {
    ///     reason = leadership.lost() => eprintln!("no longer leading ({reason}): cancelled"),
    ///     () = compact() => {}
    /// }
    /// # }
    /// ```
    pub fn lost(&self) -> impl std::future::Future<Output = LostReason> + Send + 'static {
        self.hold.lost()
    }

    /// Until when the leadership may be trusted as things stand: the session's lease
    /// deadline less the margin (as
    /// [`MutexGuard::trusted_until`](crate::MutexGuard::trusted_until)). `None` once lost.
    ///
    /// ```no_run
    /// # fn run(leadership: zkwire_recipes::Leadership) {
    /// match leadership.trusted_until() {
    ///     Some(until) => println!("trusted until {until:?}: renewed as the server answers"),
    ///     None => println!("no longer leading"),
    /// }
    /// # }
    /// ```
    pub fn trusted_until(&self) -> Option<std::time::Instant> {
        self.hold.trusted_until()
    }

    /// A fencing token: the `czxid` of our latch node, strictly increasing across the
    /// successive leaders of the election.
    ///
    /// ```no_run
    /// # struct Storage;
    /// # impl Storage { async fn put(&self, _key: &str, _value: &[u8], _token: i64) {} }
    /// # async fn run(leadership: zkwire_recipes::Leadership, storage: Storage) {
    /// // The storage keeps the largest token it has seen and refuses smaller ones.
    /// storage.put("schedule", b"...", leadership.fencing_token()).await;
    /// # }
    /// ```
    pub fn fencing_token(&self) -> i64 {
        self.hold.fencing_token()
    }

    /// Our latch node's full path.
    ///
    /// ```no_run
    /// # fn run(leadership: zkwire_recipes::Leadership) {
    /// println!("leading through {}", leadership.path());
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.hold.node().path
    }

    /// Runs `ops` atomically on condition that our latch node still exists (as
    /// [`MutexGuard::multi_fenced`](crate::MutexGuard::multi_fenced)).
    ///
    /// ```no_run
    /// # use zkwire_recipes::{Leadership, LockError};
    /// # async fn run(leadership: Leadership) -> Result<(), LockError> {
    /// use zkwire::Op;
    /// // Applied only while our latch node exists: a former leader writes nothing.
    /// leadership.multi_fenced(&[Op::set_data("/schedule", "v2", None)]).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] with [`LostReason::NodeDeleted`] when our node is gone (nothing
    /// was applied); [`zkwire::Error::MultiFailed`] with the index into `ops`; the client's
    /// errors.
    pub async fn multi_fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>, LockError> {
        self.hold.multi_fenced(None, ops).await
    }
}
