//! Coordination recipes on top of [`zkwire`]: a [`Mutex`], an [`RwLock`] and a
//! [`Semaphore`] that exclude Apache Curator's `InterProcessMutex`,
//! `InterProcessReadWriteLock` and `InterProcessSemaphoreV2` on the same path, with
//! lost-lock signals, fencing tokens and cleanup that cannot be lost; leader election with
//! [`LeaderLatch`] and [`LeaderElection`] (Curator's `LeaderLatch` and `LeaderSelector` on the
//! same path); a [`TreeCache`] (Curator's `CuratorCache`: a subtree kept current by one
//! persistent recursive watch, with its change events); and the shared counters
//! [`SharedCount`] and [`AtomicCounter`] in the encodings of Curator's `SharedCount` and
//! `DistributedAtomicLong`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use zkwire::{Client, Op};
//! use zkwire_recipes::Mutex;
//!
//! let client = Client::connect("127.0.0.1:2181/app").await?;
//! let mutex = Mutex::new(client.clone(), "/locks/orders");
//! let guard = mutex.lock().await?;
//! let lost = guard.lost();
//! tokio::select! {
//!     reason = lost => eprintln!("lock lost ({reason}); stop writing"),
//!     () = async {
//!         // Writes to ZooKeeper can be fenced by the lock node itself...
//!         let _ = guard.multi_fenced(&[Op::set_data("/orders/state", &b"done"[..], None)]).await;
//!         // ...and writes elsewhere by the token, which only grows across holders.
//!         let _token = guard.fencing_token();
//!     } => {}
//! }
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! # Guarantees
//! - **Curator layout and order.** Nodes are `P/_c_<uuid>-lock-<seq>` (mutex),
//!   `P/_c_<uuid>-__WRIT__<seq>` / `__READ__<seq>` (read/write lock) and
//!   `P/leases/_c_<uuid>-lease-<seq>` next to a `P/locks/` mutex (semaphore),
//!   EPHEMERAL_SEQUENTIAL, with missing parents created as containers. Children are ordered
//!   exactly as Curator does (the text after the last marker, compared as strings, every
//!   child counted), and leases counted as Curator counts them, so our contenders and
//!   Curator's exclude each other.
//! - **No silent mis-ordering.** A child that is not a contender, or a negative (wrapped)
//!   sequence suffix, fails the acquire ([`LockError::ForeignChild`],
//!   [`LockError::SequenceWrapped`]) instead of being ordered the way Curator would (Curator
//!   counts foreign children by their whole name; see [`ForeignChildPolicy`]).
//! - **Guid protection.** Each acquire uses one guid. If a create fails in a way that may
//!   have applied it (connection loss), the directory is synced and listed and a node with
//!   our guid is adopted only if our current session owns it; duplicates our session owns are
//!   deleted; after a final failure a background sweep deletes any.
//! - **Cleanup cannot be lost.** Dropping a guard, a pending acquire or a release future
//!   hands the node to a per-session worker that retries until the delete succeeds or the
//!   session ends.
//! - **Fencing.** `fencing_token()` is the `czxid` of the lock node, strictly increasing
//!   across holders; `multi_fenced` runs a multi guarded by `check(lock node, any version)`.
//!
//! # Semaphore
//! [`Semaphore`] follows Curator's `InterProcessSemaphoreV2`: an acquire holds the
//! `P/locks` mutex while it creates its lease node and lists `P/leases` (children watch);
//! a lease is granted when at most `max` leases exist, counting its own. `acquire(n)` is all
//! or nothing, with one deadline for the whole call; each [`Lease`] is a guard like the
//! others. The limit is fixed ([`SemaphoreLimit::Fixed`], Curator's unchecked convention),
//! or read from a Curator `SharedCount` node (4-byte big-endian int) on every acquire and
//! while waiting ([`SemaphoreLimit::SharedCount`]), or fixed and checked against such a node
//! ([`SemaphoreLimit::FixedChecked`], [`LockError::LimitMismatch`]). Curator's convention
//! mode cannot see a peer configured with another limit, and lowering a limit never revokes
//! leases already granted (on either side).
//!
//! # Interop with Curator
//! Tested against the real Curator 5.4.0 (`recipes/tests/interop.rs`, which compiles
//! `recipes/interop/CuratorContender.java`): zkwire and Curator contenders on the same path
//! for the mutex, the read/write lock and the semaphore (SharedCount limit), with a
//! referee checking exclusion across both sides. Curator 5.4.0 predates CURATOR-621: its
//! read/write lock downgrade does not tie with the writer, so a queued writer may get in
//! while a Curator downgrader still reads (see [`RwLock`]).
//!
//! # When a hold is lost
//! Every guard has `is_held()`, `lost()` and `trusted_until()`. `lost()` resolves (with a
//! [`LostReason`]) when:
//! - the session's lease runs to within [`lease_margin`] (`max(T/15, 100 ms)` for a session
//!   timeout T) of its deadline without renewal ([`LostReason::Unacknowledged`]). The lease
//!   deadline ([`zkwire::Client::lease_deadline`]) is the send instant of the newest request
//!   the quorum's leader is known to have heard of, plus T: the leader cannot expire the
//!   session, and so cannot grant our lock to anyone else, before it. This holds whatever
//!   the connection state says; a client that keeps receiving notifications while the
//!   server no longer hears it (one-way loss), or talks to a server cut off from the leader,
//!   loses its holds on time. On a healthy session the deadline lags `now + T` by at most
//!   [`zkwire::Client::lease_staleness`] (two server ticks plus the ping interval), and a
//!   lock is granted only while the lease reaches past the margin;
//! - the session ends (`Expired`, `Closed`, `AuthFailed`);
//! - our lock node is deleted, or its data changes (a getData watch kept on it);
//! - optionally, the client has been disconnected longer than
//!   [`LockOptions::with_disconnect_grace`] (options only ever shorten a hold;
//!   [`LockOptions::with_lease_margin`] widens the margin).
//!
//! The argument, its assumptions (the two clocks run at nearly the same rate; this process
//! is not paused for longer than the margin) and its limits are in the repository's
//! `docs/lease.md`.
//!
//! A lock service alone cannot stop a paused holder from acting after its session expired
//! (Kleppmann 2016): check `lost()` before acting, and fence the resource.
//!
//! # Connection loss
//! Acquires ride through disconnections: requests wait for the next connection and failed
//! reads are retried; a lost create reply is recovered by guid. Only the end of the session
//! (or a deadline) ends an acquire. Holds are judged by `lost()` as above.
//!
//! # Cancel safety
//! Every acquire future (`lock`, `try_lock`, `lock_timeout`, `read`, `write`, …) is cancel
//! safe: dropped, it removes its node in the background, so it can be raced in `select!` or
//! wrapped in `tokio::time::timeout`. Guards delete their node when dropped; `release()`
//! does it in the foreground and reports the outcome. Cleanup needs a tokio runtime: a guard
//! dropped outside one leaves its node until the session ends.
#![forbid(unsafe_code)]

mod barrier;
mod cache;
mod cleanup;
mod coordinator;
mod counter;
mod discovery;
mod election;
mod error;
mod group;
mod guid;
mod hold;
mod inspect;
mod internals;
mod latch;
mod local;
mod mutex;
mod options;
mod persistent;
mod poll;
mod revoke;
mod rwlock;
mod scope;
mod semaphore;
mod sequence;
mod task;
mod trust;

pub use barrier::{DistributedBarrier, DistributedDoubleBarrier};
pub use cache::{CacheEvent, CacheEvents, CachedNode, TreeCache, TreeCacheBuilder};
pub use counter::{AtomicCounter, CountChanges, SharedCount, Versioned};
pub use discovery::{
    DownInstancePolicy, InstanceFormatError, ProviderStrategy, Registration, ServiceCache,
    ServiceDiscovery, ServiceInstance, ServiceInstanceBuilder, ServiceProvider, ServiceType,
    UriPart, UriSpec,
};
pub use election::LeaderElection;
pub use error::{LockError, LostReason};
pub use group::GroupMember;
pub use inspect::{rank, ContenderKind, Ranked, SEMAPHORE_LEASES, SEMAPHORE_LOCKS};
pub use latch::{LeaderLatch, Leadership, Participant};
pub use mutex::{Mutex, MutexGuard};
pub use options::LockOptions;
pub use persistent::{NodeEvent, NodeEvents, PersistentNode, PersistentTtlNode};
pub use revoke::revoke;
pub use rwlock::{ReadGuard, RwLock, WriteGuard};
pub use semaphore::{Lease, Semaphore, SemaphoreLimit};
pub use sequence::ForeignChildPolicy;
pub use trust::lease_margin;
