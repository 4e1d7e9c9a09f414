//! [`Lease`]: the guard of one lease of a [`Semaphore`](super::Semaphore).

use crate::error::LockError;
use crate::hold::{Hold, View};

/// Proof of holding one lease of a [`Semaphore`](super::Semaphore), until released or dropped.
///
/// Dropping it deletes the lease node in the background (retried until it succeeds or the
/// session ends); [`release`](Self::release) does it in the foreground and reports how it
/// went.
///
/// ```no_run
/// # use zkwire_recipes::{LockError, Semaphore};
/// # async fn run(workers: Semaphore) -> Result<(), LockError> {
/// let lease = workers.acquire_one().await?;
/// println!("lease {} with fencing token {}", lease.path(), lease.fencing_token());
/// lease.release().await?; // or drop it: the node is then deleted in the background
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "the lease is returned when the guard is dropped"]
pub struct Lease {
    pub(super) hold: Hold,
}

impl Lease {
    async fn release_hold(self) -> Result<(), LockError> {
        self.hold.release().await
    }

    /// Leases do not nest: a lease names its node as its semaphore's handle does.
    fn view(&self) -> Option<&View> {
        None
    }

    crate::hold::guard_methods!(
        hold,
        "The `czxid` of the lease node. Leases are shared, so tokens of concurrent holders \
         are not ordered against each other; a token is larger than that of every lease \
         created before it, which is what a resource needs to refuse holders older than a \
         cut-off."
    );
}
