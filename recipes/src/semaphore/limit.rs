//! Where a [`Semaphore`]'s limit comes from: fixed, or a Curator `SharedCount` node (its
//! encoding, its read and watch, its seed).

use zkwire::{path, Backoff, Client, CreateOptions, Error, OneshotWatcher};

use super::Semaphore;
use crate::error::LockError;
use crate::internals::create_containers;
use crate::options::LockOptions;

/// Where a [`Semaphore`]'s maximum number of leases comes from.
///
/// Every participant of a semaphore (ours and Curator's) must use the same limit: a
/// participant with a larger one over-grants. Only the SharedCount variants can check it.
///
/// ```
/// use zkwire_recipes::SemaphoreLimit;
///
/// // Every participant is configured with 5 (Curator's convention mode).
/// let fixed = SemaphoreLimit::Fixed(5);
/// // The limit is a Curator SharedCount node's value, read at every acquire.
/// let shared = SemaphoreLimit::SharedCount("/config/workers".into());
/// // 5, checked against the SharedCount node (created with 5 if missing).
/// let checked = SemaphoreLimit::FixedChecked { max: 5, shared_count: "/config/workers".into() };
/// # let _ = (fixed, shared, checked);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SemaphoreLimit {
    /// A number every participant is configured with, unchecked (Curator's "convention"
    /// mode, `InterProcessSemaphoreV2(client, path, maxLeases)`).
    Fixed(u32),
    /// Read from a Curator `SharedCount` node (4-byte big-endian int) at this path on every
    /// acquire, and again each time the acquire wakes up; a change of the count wakes
    /// waiting acquires (Curator: `InterProcessSemaphoreV2(client, path, sharedCountReader)`).
    /// The node must exist ([`LockError::SharedCountMissing`]). Change the limit by writing
    /// `n.to_be_bytes()` into it (or with Curator's `SharedCount.setCount`).
    SharedCount(String),
    /// A fixed limit, checked against a Curator `SharedCount` node on every acquire and
    /// while waiting: a different value fails the acquire with
    /// [`LockError::LimitMismatch`]. A missing node is created (persistent, parents as
    /// containers) with `max`, as Curator's `SharedCount` seeds it, so the first participant
    /// records the limit and the others must agree.
    FixedChecked {
        /// This participant's limit.
        max: u32,
        /// The SharedCount node's path.
        shared_count: String,
    },
}

impl Semaphore {
    /// The current limit, and a watch on the SharedCount node if there is one.
    pub(super) async fn limit_and_watch(&self) -> Result<(u32, Option<OneshotWatcher>), LockError> {
        let client = &self.leases.client;
        match &self.limit {
            SemaphoreLimit::Fixed(max) => Ok((*max, None)),
            SemaphoreLimit::SharedCount(count_path) => {
                let (count, watcher) = read_count(client, count_path, None).await?;
                Ok((count, Some(watcher)))
            }
            SemaphoreLimit::FixedChecked { max, shared_count } => {
                let seed = Some((*max, &self.leases.options));
                let (count, watcher) = read_count(client, shared_count, seed).await?;
                if count != *max {
                    return Err(LockError::LimitMismatch {
                        configured: *max,
                        shared: count,
                    });
                }
                Ok((count, Some(watcher)))
            }
        }
    }
}

/// Reads a Curator SharedCount node, leaving a data watch on it. With a seed, a missing
/// node is created first (persistent, missing parents as containers), as Curator's
/// `SharedCount.start()` does.
async fn read_count(
    client: &Client,
    count_path: &str,
    seed: Option<(u32, &LockOptions)>,
) -> Result<(u32, OneshotWatcher), LockError> {
    let mut backoff = Backoff::new();
    loop {
        let error = match client.get_data_and_watch(count_path).await {
            Ok((data, _, watcher)) => {
                return decode_count(count_path, &data).map(|count| (count, watcher))
            }
            Err(Error::NoNode) => match seed {
                None => {
                    return Err(LockError::SharedCountMissing {
                        path: count_path.to_owned(),
                    })
                }
                Some((max, options)) => match seed_count(client, count_path, max, options).await {
                    Ok(()) => continue,
                    Err(e) => e,
                },
            },
            Err(e) => e,
        };
        if !error.is_retryable() {
            return Err(error.into());
        }
        backoff.pause().await;
    }
}

/// Creates the SharedCount node with `max` (someone else's seed is fine too).
async fn seed_count(
    client: &Client,
    count_path: &str,
    max: u32,
    options: &LockOptions,
) -> Result<(), Error> {
    let data = encode_count(max);
    let persistent = CreateOptions::persistent().with_acl(options.parent_acl.clone());
    for _ in 0..16 {
        match client.create(count_path, &data, &persistent).await {
            Ok(_) | Err(Error::NodeExists) => return Ok(()),
            Err(Error::NoNode) => {
                if let Some(parent) = path::parent(count_path) {
                    create_containers(client, parent, options).await?;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::NoNode)
}

/// Curator `SharedCount.toBytes`: 4 bytes, big-endian.
pub(super) fn encode_count(count: u32) -> [u8; 4] {
    count.to_be_bytes()
}

/// Curator `SharedCount.fromBytes`, refusing what is not a 4-byte non-negative int.
pub(super) fn decode_count(count_path: &str, data: &[u8]) -> Result<u32, LockError> {
    let bad = || LockError::BadSharedCount {
        path: count_path.to_owned(),
        data: data.to_vec(),
    };
    let bytes: [u8; 4] = data.try_into().map_err(|_| bad())?;
    u32::try_from(i32::from_be_bytes(bytes)).map_err(|_| bad())
}
