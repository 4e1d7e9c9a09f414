//! Acquiring the recipe of each lock verb, and the granted hold ([`Held`]) the rest of the
//! verb watches and releases.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use zkwire::Client;
use zkwire_recipes::{
    LeaderLatch, Leadership, Lease, LockError, LostReason, Mutex, MutexGuard, ReadGuard, RwLock,
    Semaphore, SemaphoreLimit, WriteGuard,
};

use super::{Kind, LockArgs};

/// A granted lock or lease.
#[derive(Debug)]
pub(super) enum Held {
    Mutex(MutexGuard),
    Read(ReadGuard),
    Write(WriteGuard),
    Lease(Box<Lease>),
    /// The latch is kept to leave the election on release.
    Leader(LeaderLatch, Leadership),
}

impl Held {
    pub(super) fn is_held(&self) -> bool {
        match self {
            Self::Mutex(g) => g.is_held(),
            Self::Read(g) => g.is_held(),
            Self::Write(g) => g.is_held(),
            Self::Lease(g) => g.is_held(),
            Self::Leader(_, l) => l.is_held(),
        }
    }

    pub(super) fn fencing_token(&self) -> i64 {
        match self {
            Self::Mutex(g) => g.fencing_token(),
            Self::Read(g) => g.fencing_token(),
            Self::Write(g) => g.fencing_token(),
            Self::Lease(g) => g.fencing_token(),
            Self::Leader(_, l) => l.fencing_token(),
        }
    }

    pub(super) fn path(&self) -> &str {
        match self {
            Self::Mutex(g) => g.path(),
            Self::Read(g) => g.path(),
            Self::Write(g) => g.path(),
            Self::Lease(g) => g.path(),
            Self::Leader(_, l) => l.path(),
        }
    }

    /// Until when the hold may be trusted; moves forward as the lease is renewed.
    pub(super) fn trusted_until(&self) -> Option<Instant> {
        match self {
            Self::Mutex(g) => g.trusted_until(),
            Self::Read(g) => g.trusted_until(),
            Self::Write(g) => g.trusted_until(),
            Self::Lease(g) => g.trusted_until(),
            Self::Leader(_, l) => l.trusted_until(),
        }
    }

    pub(super) fn revoked(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        match self {
            Self::Mutex(g) => Box::pin(g.revoked()),
            Self::Read(g) => Box::pin(g.revoked()),
            Self::Write(g) => Box::pin(g.revoked()),
            Self::Lease(g) => Box::pin(g.revoked()),
            // Curator's latch has no revocation: leadership ends by leaving.
            Self::Leader(..) => Box::pin(std::future::pending()),
        }
    }

    pub(super) fn lost(&self) -> Pin<Box<dyn Future<Output = LostReason> + Send>> {
        match self {
            Self::Mutex(g) => Box::pin(g.lost()),
            Self::Read(g) => Box::pin(g.lost()),
            Self::Write(g) => Box::pin(g.lost()),
            Self::Lease(g) => Box::pin(g.lost()),
            Self::Leader(_, l) => Box::pin(l.lost()),
        }
    }

    pub(super) async fn release(self) -> Result<(), LockError> {
        match self {
            Self::Mutex(g) => g.release().await,
            Self::Read(g) => g.release().await,
            Self::Write(g) => g.release().await,
            Self::Lease(g) => g.release().await,
            Self::Leader(latch, _) => latch.close().await,
        }
    }
}

/// Acquires the recipe `kind` on the path, within the timeout if given.
pub(super) async fn acquire(
    client: Client,
    args: &LockArgs,
    kind: Kind,
) -> Result<Held, LockError> {
    let (path, timeout) = (args.path.clone(), args.timeout);
    let once = timeout.is_some_and(|t| t.is_zero());
    match (kind, timeout) {
        (Kind::Mutex, _) if once => tried(Mutex::new(client, path).try_lock().await, Held::Mutex),
        (Kind::Read, _) if once => tried(RwLock::new(client, path).try_read().await, Held::Read),
        (Kind::Write, _) if once => tried(RwLock::new(client, path).try_write().await, Held::Write),
        (Kind::Semaphore(n), _) if once => tried(
            Semaphore::new(client, path, SemaphoreLimit::Fixed(n))
                .try_acquire_one()
                .await,
            |lease| Held::Lease(Box::new(lease)),
        ),
        (Kind::Leader, _) if once => {
            let latch = LeaderLatch::new(client, path, args.id.clone());
            let leadership = latch.try_lead().await?;
            leadership
                .map(|l| Held::Leader(latch, l))
                .ok_or(LockError::Timeout)
        }
        (Kind::Mutex, None) => Mutex::new(client, path).lock().await.map(Held::Mutex),
        (Kind::Mutex, Some(t)) => Mutex::new(client, path)
            .lock_timeout(t)
            .await
            .map(Held::Mutex),
        (Kind::Read, None) => RwLock::new(client, path).read().await.map(Held::Read),
        (Kind::Read, Some(t)) => RwLock::new(client, path)
            .read_timeout(t)
            .await
            .map(Held::Read),
        (Kind::Write, None) => RwLock::new(client, path).write().await.map(Held::Write),
        (Kind::Write, Some(t)) => RwLock::new(client, path)
            .write_timeout(t)
            .await
            .map(Held::Write),
        (Kind::Semaphore(n), t) => {
            let semaphore = Semaphore::new(client, path, SemaphoreLimit::Fixed(n));
            let lease = match t {
                None => semaphore.acquire_one().await,
                Some(t) => semaphore.acquire_one_timeout(t).await,
            };
            lease.map(|lease| Held::Lease(Box::new(lease)))
        }
        (Kind::Leader, t) => lead(LeaderLatch::new(client, path, args.id.clone()), t).await,
    }
}

/// A `try_*` result: held, or [`LockError::Timeout`] when someone else holds or waits.
fn tried<G>(result: Result<Option<G>, LockError>, held: fn(G) -> Held) -> Result<Held, LockError> {
    result?.map(held).ok_or(LockError::Timeout)
}

/// Joins the election and waits for leadership (until `timeout`); leaves it on failure, so
/// that no node stays behind.
async fn lead(latch: LeaderLatch, timeout: Option<Duration>) -> Result<Held, LockError> {
    latch.start();
    let waited = match timeout {
        None => latch.await_leadership().await,
        Some(t) => tokio::time::timeout(t, latch.await_leadership())
            .await
            .unwrap_or(Err(LockError::Timeout)),
    };
    match waited {
        Ok(leadership) => Ok(Held::Leader(latch, leadership)),
        Err(e) => {
            let _ = latch.close().await;
            Err(e)
        }
    }
}
