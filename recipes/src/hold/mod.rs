//! A granted lock node and its watchdog: lost-lock detection, fencing, release.
//!
//! Every guard wraps a [`Hold`]. Its one background task watches the session's lease, the
//! session state and our own node (a getData watch, re-armed) and publishes the first
//! [`LostReason`]; it ends when that happens or when the guard is released or dropped.
//!
//! The watchdog (a task, and the node watch it keeps, which costs a request) starts only when
//! someone asks about the hold (`is_held`, `lost`, `revoked`, `trusted_until`...): a lock
//! taken and released without a look at the guard sends create, getChildren and delete,
//! nothing else, and runs no task. The first answer does not wait for the watchdog: the
//! lease and the session state are read on the spot. Asked outside a tokio runtime, the
//! watchdog waits for the next question asked inside one (`watchdog.rs`).
//!
//! The lease rule (docs/lease.md): a hold is trusted until the session's lease deadline (the
//! send instant of the newest request that the quorum's leader is known to have heard of,
//! plus the session timeout) less [`lease_margin`], whatever the connection state says:
//! received bytes prove nothing about what the leader heard from us.

mod watchdog;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use zkwire::{Backoff, Client, Error, Op, OpResult, SessionState};

use crate::cleanup;
use crate::error::{LockError, LostReason};
use crate::internals::Node;
use crate::options::LockOptions;
use crate::trust::trust_end;
use watchdog::{Limits, Watchdog};

/// A held lock node.
#[derive(Debug)]
pub(crate) struct Hold {
    client: Client,
    node: Node,
    /// The fencing token: our node's czxid, or the tied writer's for a downgrade's read node.
    token: i64,
    /// The session our node belongs to (its ephemeral owner). When the client runs another
    /// session (renewed after an expiry), the node is gone with the old one: lost.
    session: i64,
    /// What may end the hold early besides the default lease rule.
    limits: Limits,
    /// Started on the first question about the hold (see the module docs); shared with the
    /// futures of `lost()` and `revoked()`, which start it if that question was asked
    /// outside a runtime.
    watchdog: OnceLock<Arc<Watchdog>>,
    /// Set when the hold ended by release: it is no longer held, whatever the watchdog says.
    ended: AtomicBool,
    /// Dropping deletes the node (in the background) unless released.
    armed: AtomicBool,
}

impl Hold {
    /// A node we were just granted. Nothing runs until someone asks about the hold.
    pub(crate) fn new(client: Client, node: Node, options: &LockOptions) -> Self {
        Self {
            client,
            token: node.stat.czxid,
            session: node.stat.ephemeral_owner,
            node,
            limits: Limits {
                grace: options.disconnect_grace,
                margin: options.lease_margin,
            },
            watchdog: OnceLock::new(),
            ended: AtomicBool::new(false),
            armed: AtomicBool::new(true),
        }
    }

    /// The watchdog, started on first use inside a tokio runtime: someone cares about the
    /// hold.
    fn watchdog(&self) -> &Arc<Watchdog> {
        let dog = self.watchdog.get_or_init(|| Arc::new(Watchdog::new()));
        if !self.ended.load(Ordering::Relaxed) {
            dog.start(&self.client, &self.node, self.limits);
        }
        dog
    }

    /// What a future made now needs to start `dog`, the hold's watchdog (which the caller
    /// has just tried to start), when first polled: made outside a runtime, it could not
    /// start here, and nothing else may ever ask again. `None` once started, or when the
    /// hold ended.
    fn starter(&self, dog: &Arc<Watchdog>) -> Option<Starter> {
        if dog.started() || self.ended.load(Ordering::Relaxed) {
            return None;
        }
        Some(Starter {
            dog: Arc::clone(dog),
            client: self.client.clone(),
            node: self.node.clone(),
            limits: self.limits,
        })
    }

    /// Why the hold cannot be trusted now, judged on the spot from the session's state and
    /// lease (the watchdog publishes the same, a moment later, and more: a deleted node).
    fn lapsed(&self) -> Option<LostReason> {
        let state = self.client.state();
        if state.is_terminal() {
            return Some(LostReason::SessionEnded(state));
        }
        if self.session_changed() {
            // Renewed after an expiry: the expiry deleted our node, and the lease now read
            // is another session's.
            return Some(LostReason::SessionEnded(SessionState::Expired));
        }
        let Some(renewed) = self.client.lease_renewed_at() else {
            return Some(LostReason::SessionEnded(state));
        };
        let now = std::time::Instant::now();
        if let Some(off) = self.disconnected_past_grace(now) {
            return Some(LostReason::Disconnected(off));
        }
        if self.trust_end().is_some_and(|until| until > now) {
            return None;
        }
        let since = now.saturating_duration_since(renewed);
        Some(LostReason::Unacknowledged(since))
    }

    /// How long the client has been disconnected, when that is the grace or more
    /// ([`LockOptions::with_disconnect_grace`]).
    fn disconnected_past_grace(&self, now: std::time::Instant) -> Option<std::time::Duration> {
        let off = now.saturating_duration_since(self.client.disconnected_since()?);
        (off >= self.limits.grace?).then_some(off)
    }

    pub(crate) fn is_held(&self) -> bool {
        self.lost_reason().is_none()
    }

    /// The first reason the hold was lost; [`LostReason::Released`] once it ended without
    /// one.
    pub(crate) fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let dog = self.watchdog();
        let mut rx = dog.lost().clone();
        let ended = self.ended.load(Ordering::Relaxed);
        let starter = self.starter(dog);
        async move {
            if let Some(starter) = starter {
                starter.start();
            }
            loop {
                if let Some(reason) = *rx.borrow_and_update() {
                    return reason;
                }
                if ended || rx.changed().await.is_err() {
                    return rx.borrow().unwrap_or(LostReason::Released);
                }
            }
        }
    }

    /// Why the hold ended, `None` while it is held.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.judge(self.watchdog())
    }

    /// [`lost_reason`](Self::lost_reason) by what `dog` published and the lease.
    fn judge(&self, dog: &Watchdog) -> Option<LostReason> {
        if let Some(reason) = *dog.lost().borrow() {
            return Some(reason);
        }
        if self.ended.load(Ordering::Relaxed) || dog.finished() {
            return Some(LostReason::Released);
        }
        self.lapsed()
    }

    /// As [`lost_reason`](Self::lost_reason), without starting the watchdog: a hold nobody
    /// watched is judged by the lease and the session alone (a nested acquire asks this, and
    /// must send nothing).
    pub(crate) fn known_lost(&self) -> Option<LostReason> {
        if let Some(dog) = self.watchdog.get() {
            return self.judge(dog);
        }
        if self.ended.load(Ordering::Relaxed) {
            return Some(LostReason::Released);
        }
        self.lapsed()
    }

    pub(crate) fn revocation_requested(&self) -> bool {
        *self.watchdog().revoked().borrow()
    }

    /// Resolves once a revocation is requested; never if the hold ends first.
    pub(crate) fn revoked(&self) -> impl Future<Output = ()> + Send + 'static {
        let dog = self.watchdog();
        let mut rx = dog.revoked().clone();
        let starter = self.starter(dog);
        async move {
            if let Some(starter) = starter {
                starter.start();
            }
            if rx.wait_for(|requested| *requested).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    pub(crate) fn fencing_token(&self) -> i64 {
        self.token
    }

    /// A hold tied to a write hold reports the writer's token, so that tokens never go
    /// backwards for the next conflicting holder (a writer queued between our writer and
    /// our read node has a smaller czxid than the read node).
    pub(crate) fn with_fencing_token(mut self, token: i64) -> Self {
        self.token = token;
        self
    }

    /// Until when the hold may be trusted: the lease deadline less the margin; `None` once
    /// lost (or released).
    pub(crate) fn trusted_until(&self) -> Option<std::time::Instant> {
        if !self.is_held() {
            return None;
        }
        self.trust_end()
    }

    /// The session our node belongs to (its ephemeral owner).
    pub(crate) fn session(&self) -> i64 {
        self.session
    }

    /// Whether the client now runs another session than the one our node belongs to.
    fn session_changed(&self) -> bool {
        self.client.session_id() != self.session
    }

    /// The session's lease deadline less the margin, held or not; `None` once the client
    /// runs another session.
    fn trust_end(&self) -> Option<std::time::Instant> {
        if self.session_changed() {
            return None;
        }
        trust_end(&self.client, self.limits.margin)
    }

    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    /// How `client`, another handle of the hold's client, names the hold: `None` when it
    /// names our node as the hold's own handle does (the same chroot). A guard nested
    /// through such a handle answers with it (docs/recipes.md, "Reentrancy").
    pub(crate) fn view_from(&self, client: &Client) -> Option<Box<View>> {
        let root = client.server_path("/").ok()?;
        if root == self.client.server_path("/").ok()? {
            return None;
        }
        let server = self.client.server_path(&self.node.path).ok()?;
        // The lock's path was given through `client`: our node lies under its root.
        let path = match root.as_str() {
            "/" => server,
            _ => server.strip_prefix(&root)?.to_owned(),
        };
        let client = client.clone();
        Some(Box::new(View { client, path }))
    }

    /// The client a guard with `view` answers with.
    pub(crate) fn client_in<'a>(&'a self, view: Option<&'a View>) -> &'a Client {
        view.map_or(&self.client, |v| &v.client)
    }

    /// Our node's path as a guard with `view` names it.
    pub(crate) fn path_in<'a>(&'a self, view: Option<&'a View>) -> &'a str {
        view.map_or(&self.node.path, |v| &v.path)
    }

    /// Runs `ops`, named as a guard with `view` names paths, in a multi preceded by
    /// `check(our node, any version)`.
    pub(crate) async fn multi_fenced(
        &self,
        view: Option<&View>,
        ops: &[Op],
    ) -> Result<Vec<OpResult>, LockError> {
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::check(self.path_in(view).to_owned(), None));
        all.extend_from_slice(ops);
        match self.client_in(view).multi(&all).await {
            Ok(results) => Ok(results.into_iter().skip(1).collect()),
            Err(Error::MultiFailed { index: 0, error }) => match *error {
                Error::NoNode => Err(LockError::Lost(LostReason::NodeDeleted)),
                other => Err(other.into()),
            },
            Err(Error::MultiFailed { index, error }) => Err(Error::MultiFailed {
                index: index - 1,
                error,
            }
            .into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the node, retrying until it is gone or the session is over.
    ///
    /// Every error but the end of the session is retried with backoff (as Curator's
    /// guaranteed delete): even one a retry cannot fix by itself, such as `NotReadOnly` while
    /// a read-only server serves us, or `NoAuth` after an ACL change, may clear later, and
    /// until then the node would keep the lock from everyone. A caller that cannot wait drops
    /// the future: the cleanup worker then carries on in the background.
    pub(crate) async fn release(self) -> Result<(), LockError> {
        self.end().await
    }

    /// [`end`](Self::end) without waiting, for a term cancelled while observers may still
    /// hold the `Hold` (a leadership's clones): the watchdog stops, so their `lost()`
    /// resolves, and the node goes in the background. Nothing happens once `end` has.
    pub(crate) fn abandon(&self) {
        self.ended.store(true, Ordering::Relaxed);
        if let Some(dog) = self.watchdog.get() {
            dog.stop();
        }
        if self.armed.swap(false, Ordering::Relaxed) {
            cleanup::delete_now_or_later(&self.client, self.node.path.clone());
        }
    }

    /// [`release`](Self::release) for a hold shared with handles that only observe it (a
    /// leader latch's leadership): the node goes now, whoever still holds the `Hold`, and
    /// dropping it later deletes nothing.
    pub(crate) async fn end(&self) -> Result<(), LockError> {
        // What the watchdog saw, if anyone asked; a hold nobody watched was never lost.
        let lost_before = self.watchdog.get().and_then(|dog| {
            dog.stop();
            *dog.lost().borrow()
        });
        self.ended.store(true, Ordering::Relaxed);
        let (mut backoff, mut retried) = (Backoff::new(), false);
        let mut warned = false;
        let deleted = loop {
            match self.client.delete(&self.node.path, None).await {
                Ok(()) => break Ok(()),
                // After a retry, NoNode most likely means our own earlier delete was applied
                // and only its reply was lost; a deletion by someone else while we held the
                // lock is caught below through `lost_before`.
                Err(Error::NoNode) if retried => break Ok(()),
                Err(Error::NoNode) => break Err(LockError::Lost(LostReason::NodeDeleted)),
                Err(e) if e.is_terminal() => {
                    break Err(LockError::Lost(LostReason::SessionEnded(ended(&e))))
                }
                Err(e) => {
                    if !e.is_retryable() && !std::mem::replace(&mut warned, true) {
                        tracing::warn!(node = self.node.path, error = %e, "cannot delete our lock node yet; retrying until the session ends");
                    }
                    backoff.pause().await;
                    retried = true;
                }
            }
        };
        self.armed.store(false, Ordering::Relaxed);
        let deleted = match deleted {
            // Our session is over (the client renewed it, or is renewing it): the node went
            // with it, and someone else may have held the lock since, whatever a delete sent
            // on the new session found.
            Ok(()) | Err(LockError::Lost(LostReason::NodeDeleted)) if self.session_changed() => {
                Err(LockError::Lost(LostReason::SessionEnded(
                    SessionState::Expired,
                )))
            }
            other => other,
        };
        match (deleted, lost_before) {
            (Ok(()), Some(reason)) => Err(LockError::Lost(reason)),
            (result, _) => result,
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(dog) = self.watchdog.get() {
            dog.stop();
        }
        if *self.armed.get_mut() {
            // The hold is going: its path goes with the delete, uncopied.
            cleanup::delete_now_or_later(&self.client, std::mem::take(&mut self.node.path));
        }
    }
}

/// Starts a hold's watchdog from a future of `lost()` or `revoked()` ([`Hold::starter`]).
struct Starter {
    dog: Arc<Watchdog>,
    client: Client,
    node: Node,
    limits: Limits,
}

impl Starter {
    fn start(self) {
        self.dog.start(&self.client, &self.node, self.limits);
    }
}

/// A guard's view of a hold taken through another handle of the same client (another
/// chroot): that handle, and our node's path as it names it.
#[derive(Debug, Clone)]
pub(crate) struct View {
    client: Client,
    path: String,
}

/// The session state a terminal error stands for.
pub(crate) fn ended(e: &Error) -> SessionState {
    match e {
        Error::SessionExpired => SessionState::Expired,
        Error::AuthFailed | Error::SessionClosedRequireSaslAuth => SessionState::AuthFailed,
        _ => SessionState::Closed,
    }
}

/// The methods every guard has, written once: [`MutexGuard`](crate::MutexGuard),
/// [`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard) and
/// [`Lease`](crate::Lease) each reach a [`Hold`] through the field path given first, and
/// have a private `release_hold(self)` (a nested mutex guard releases nothing) and a private
/// `view(&self)` (how it names the hold, [`View`]). `$token`
/// documents what the fencing token orders, which differs between exclusive and shared
/// holds.
macro_rules! guard_methods {
    ($($hold:ident).+, $token:expr) => {
        /// Whether the hold is still trusted: not lost (see [`lost`](Self::lost)).
        ///
        /// ```no_run
        /// # async fn run(guard: zkwire_recipes::MutexGuard) {
        /// for batch in 0..10 {
        ///     if !guard.is_held() {
        ///         eprintln!("lock lost before batch {batch}: stopping");
        ///         break;
        ///     }
        ///     // ...write the batch...
        /// }
        /// # }
        /// ```
        pub fn is_held(&self) -> bool {
            self.$($hold).+.is_held()
        }

        /// Resolves when the hold can no longer be trusted: the session's lease is within
        /// its margin of ending without renewal (see [`trusted_until`](Self::trusted_until)),
        /// the session ended, our node was deleted or its data changed (other than by a
        /// revocation request, see [`revoked`](Self::revoked)), or an option
        /// shortened the hold
        /// ([`LockOptions::with_disconnect_grace`](crate::LockOptions::with_disconnect_grace)).
        /// Resolves with [`LostReason::Released`](crate::LostReason::Released) once the
        /// guard is gone.
        ///
        /// The future is `'static`: it can be moved into another task.
        ///
        /// ```no_run
        /// # async fn write_the_report() {}
        /// # async fn run(guard: zkwire_recipes::MutexGuard) {
        /// tokio::select! {
        ///     reason = guard.lost() => eprintln!("lock lost ({reason}): the work was cancelled"),
        ///     () = write_the_report() => {}
        /// }
        /// # }
        /// ```
        pub fn lost(
            &self,
        ) -> impl ::std::future::Future<Output = $crate::LostReason> + Send + 'static {
            self.$($hold).+.lost()
        }

        /// Until when the hold may be trusted as things stand: the session's lease deadline
        /// ([`zkwire::Client::lease_deadline`]) less the margin ([`crate::lease_margin`], or
        /// the larger one of
        /// [`LockOptions::with_lease_margin`](crate::LockOptions::with_lease_margin));
        /// [`lost`](Self::lost) fires then unless the lease is renewed first. `None` once
        /// the hold is lost or released.
        ///
        /// It moves forward as the quorum's leader vouches for our requests (on a healthy
        /// session it stays within [`zkwire::Client::lease_staleness`] of now + T, less the
        /// margin): read it again after waiting. A supervisor
        /// that must stop work before the lock can pass to someone else schedules from it:
        ///
        /// ```no_run
        /// # async fn run(guard: zkwire_recipes::MutexGuard) {
        /// while let Some(until) = guard.trusted_until() {
        ///     tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
        ///     if guard.trusted_until().is_some_and(|u| u <= until) {
        ///         break; // not renewed: stop the work now
        ///     }
        /// }
        /// # }
        /// ```
        pub fn trusted_until(&self) -> Option<::std::time::Instant> {
            self.$($hold).+.trusted_until()
        }

        /// Resolves when someone asks this holder to release the lock
        /// ([`revoke`](crate::revoke), or Curator's `Revoker.attemptRevoke`, which write
        /// `__REVOKE__` into our node). A request, not a loss: the hold stays valid and
        /// [`lost`](Self::lost) does not fire for it; the holder decides when to release.
        /// Never resolves if the hold ends first.
        ///
        /// ```no_run
        /// # use zkwire_recipes::{LockError, MutexGuard};
        /// # async fn run(guard: MutexGuard) -> Result<(), LockError> {
        /// tokio::select! {
        ///     () = guard.revoked() => eprintln!("asked to give the lock up; finishing early"),
        ///     reason = guard.lost() => eprintln!("lock lost: {reason}"),
        ///     () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
        /// }
        /// guard.release().await?;
        /// # Ok(()) }
        /// ```
        pub fn revoked(&self) -> impl ::std::future::Future<Output = ()> + Send + 'static {
            self.$($hold).+.revoked()
        }

        /// Whether a revocation has been requested (see [`revoked`](Self::revoked)).
        ///
        /// ```no_run
        /// # use zkwire_recipes::{LockError, MutexGuard};
        /// # async fn run(guard: MutexGuard) -> Result<(), LockError> {
        /// for item in 0..1000 {
        ///     if guard.revocation_requested() {
        ///         println!("asked to release: stopping after {item} items");
        ///         break;
        ///     }
        ///     // ...process the item...
        /// }
        /// guard.release().await?;
        /// # Ok(()) }
        /// ```
        pub fn revocation_requested(&self) -> bool {
            self.$($hold).+.revocation_requested()
        }

        #[doc = $token]
        ///
        /// ```no_run
        /// # struct Storage;
        /// # impl Storage { async fn put(&self, _key: &str, _value: &[u8], _token: i64) {} }
        /// # async fn run(guard: zkwire_recipes::MutexGuard, storage: Storage) {
        /// // The storage keeps the largest token it has seen and refuses smaller ones.
        /// storage.put("report", b"...", guard.fencing_token()).await;
        /// # }
        /// ```
        pub fn fencing_token(&self) -> i64 {
            self.$($hold).+.fencing_token()
        }

        /// The full path of our node.
        ///
        /// ```no_run
        /// # async fn run(guard: zkwire_recipes::MutexGuard) {
        /// println!("holding the lock through {}", guard.path());
        /// # }
        /// ```
        pub fn path(&self) -> &str {
            self.$($hold).+.path_in(self.view())
        }

        /// The client the hold was taken with (for a guard nested through another handle of
        /// it, that handle: [`path`](Self::path) and [`multi_fenced`](Self::multi_fenced)
        /// name paths as it does).
        ///
        /// ```no_run
        /// # async fn run(guard: zkwire_recipes::MutexGuard) -> Result<(), zkwire::Error> {
        /// let (report, _stat) = guard.client().get_data("/reports/latest").await?;
        /// # let _ = report;
        /// # Ok(()) }
        /// ```
        pub fn client(&self) -> &::zkwire::Client {
            self.$($hold).+.client_in(self.view())
        }

        /// Runs `ops` atomically, on condition that our node still exists: a multi of
        /// `check(our node, any version)` followed by `ops`. Returns the results of `ops`.
        ///
        /// ```no_run
        /// # use zkwire_recipes::{LockError, MutexGuard};
        /// # async fn run(guard: MutexGuard) -> Result<(), LockError> {
        /// use zkwire::Op;
        /// // Applied only while our lock node exists: a holder that lost the lock writes nothing.
        /// guard.multi_fenced(&[Op::set_data("/reports/state", "done", None)]).await?;
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// [`LockError::Lost`](crate::LockError::Lost) with
        /// [`LostReason::NodeDeleted`](crate::LostReason::NodeDeleted) when our node is gone
        /// (nothing was applied); [`zkwire::Error::MultiFailed`] with the index into `ops`
        /// of the op that failed; the client's errors.
        pub async fn multi_fenced(
            &self,
            ops: &[::zkwire::Op],
        ) -> Result<Vec<::zkwire::OpResult>, $crate::LockError> {
            self.$($hold).+.multi_fenced(self.view(), ops).await
        }

        /// Deletes our node and reports the outcome.
        ///
        /// `Ok(())` means this call deleted the node and the hold was never reported lost.
        ///
        /// ```no_run
        /// # async fn run(guard: zkwire_recipes::MutexGuard) {
        /// match guard.release().await {
        ///     Ok(()) => println!("released; the lock was ours throughout"),
        ///     Err(e) => eprintln!("{e}: the work under the lock may not have been exclusive"),
        /// }
        /// # }
        /// ```
        ///
        /// # Errors
        /// [`LockError::Lost`](crate::LockError::Lost) when the node was already gone
        /// (deleted, session over) or [`lost`](Self::lost) had fired before the release:
        /// the critical section may not have been exclusive. Every other error is retried
        /// with backoff until the delete succeeds or the session ends.
        ///
        /// # Cancel safety
        /// Dropping the future leaves the delete to the background worker.
        pub async fn release(self) -> Result<(), $crate::LockError> {
            self.release_hold().await
        }
    };
}
pub(crate) use guard_methods;
