//! Revocation: asking a holder to give its lock up, as Curator's `Revoker` does.
//!
//! The request is a write of [`REVOKE_MESSAGE`] into the holder's lock node. A Curator holder
//! made revocable (`InterProcessMutex.makeRevocable(listener)`) has its listener called; a
//! zkwire holder sees [`revoked`](crate::MutexGuard::revoked) resolve. Either way the holder
//! decides: revocation is a request, never a loss, and nothing is deleted on its behalf.

use zkwire::{Client, Error};

use crate::error::LockError;

/// The node data that asks the holder to release: Curator's `LockInternals.REVOKE_MESSAGE`.
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Asks the holder of the lock node `node_path` to release it, by writing `__REVOKE__` into
/// the node as Curator's `Revoker.attemptRevoke` does (here conditionally on the version
/// read, and not at all if the node already asks). Returns `false` if the node no longer
/// exists (the hold is already over).
///
/// Works on any lock node of the Curator layout: a [`Mutex`](crate::Mutex) or
/// [`RwLock`](crate::RwLock) node of zkwire or of Curator (whose holder must have called
/// `makeRevocable` to hear it). Find the current holder's node with
/// [`Mutex::holder`](crate::Mutex::holder).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{revoke, Mutex};
///
/// let mutex = Mutex::new(client.clone(), "/locks/reports");
/// if let Some(node) = mutex.holder().await? {
///     revoke(&client, &node).await?;
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// The client's errors (e.g. [`zkwire::Error::NoAuth`] when the node's ACL forbids writes).
pub async fn revoke(client: &Client, node_path: &str) -> Result<bool, LockError> {
    // A conditional write, and none if the request is already there: revokers do not stack
    // writes on the node (each one is a notification and a re-read for the holder).
    loop {
        let (data, stat) = match client.get_data(node_path).await {
            Ok(found) => found,
            Err(Error::NoNode) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if data == REVOKE_MESSAGE {
            return Ok(true);
        }
        match client
            .set_data(node_path, REVOKE_MESSAGE, Some(stat.version))
            .await
        {
            Ok(_) => return Ok(true),
            Err(Error::NoNode) => return Ok(false),
            // Written meanwhile (by another revoker, or the holder): look again.
            Err(Error::BadVersion) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
