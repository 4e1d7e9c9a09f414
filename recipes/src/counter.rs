//! Shared counters in Curator's encodings: `SharedCount` (a 4-byte big-endian `i32`, set by
//! versioned compare-and-set) and `AtomicCounter` (Curator's `DistributedAtomicLong`: an
//! 8-byte big-endian `i64`, changed by optimistic compare-and-set with bounded retries, and
//! optionally under a mutex once those run out). Curator reads and writes the same nodes
//! (docs/recipes.md, "Counters").

use std::time::Duration;

use zkwire::{Backoff, Client, CreateOptions, Error, EventType};

use crate::{LockError, Mutex};

/// A counter's value and the node version it was read at, for [`SharedCount::try_set`].
///
/// ```no_run
/// # async fn run(limit: zkwire_recipes::SharedCount) -> Result<(), zkwire::Error> {
/// let seen = limit.get().await?;
/// println!("limit {} at version {}", seen.value, seen.version);
/// // Raise it, unless someone changed it since.
/// let raised = limit.try_set(seen.value + 1, seen.version).await?;
/// # let _ = raised;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versioned<T> {
    /// The value.
    pub value: T,
    /// The data version of the node it was read from.
    pub version: i32,
}

/// Curator's `SharedCount`: an `i32` stored as 4 big-endian bytes in one persistent node.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire_recipes::SharedCount;
/// let limit = SharedCount::new(client, "/app/limit");
/// limit.ensure(10).await?; // created with 10 unless it exists
/// let seen = limit.get().await?;
/// if limit.try_set(seen.value + 1, seen.version).await? {
///     println!("raised to {}", seen.value + 1);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SharedCount {
    client: Client,
    path: String,
}

impl SharedCount {
    /// The count at `path`.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::SharedCount;
    /// let limit = SharedCount::new(client, "/app/limit");
    /// # let _ = limit;
    /// # }
    /// ```
    pub fn new(client: Client, path: impl Into<String>) -> Self {
        Self {
            client,
            path: path.into(),
        }
    }

    /// Creates the node (and its missing parents, as containers) holding `seed`, unless it
    /// exists: what Curator's `SharedCount.start()` does.
    ///
    /// ```no_run
    /// # async fn run(limit: zkwire_recipes::SharedCount) -> Result<(), zkwire::Error> {
    /// limit.ensure(10).await?; // 10 unless someone set it first
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Client errors.
    pub async fn ensure(&self, seed: i32) -> Result<(), Error> {
        let options = CreateOptions::persistent().with_container_parents();
        match self
            .client
            .create_all(&self.path, seed.to_be_bytes(), &options)
            .await
        {
            Ok(_) | Err(Error::NodeExists) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The count and its version.
    ///
    /// ```no_run
    /// # async fn run(limit: zkwire_recipes::SharedCount) -> Result<(), zkwire::Error> {
    /// let now = limit.get().await?;
    /// println!("limit {} (version {})", now.value, now.version);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadArguments`] when the node holds fewer than 4 bytes (more
    /// are ignored, as Curator does).
    pub async fn get(&self) -> Result<Versioned<i32>, Error> {
        let (data, stat) = self.client.get_data(&self.path).await?;
        Ok(Versioned {
            value: count_of(&data)?,
            version: stat.version,
        })
    }

    /// Sets the count, whatever it was.
    ///
    /// ```no_run
    /// # async fn run(limit: zkwire_recipes::SharedCount) -> Result<(), zkwire::Error> {
    /// limit.set(20).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn set(&self, value: i32) -> Result<(), Error> {
        let bytes = value.to_be_bytes();
        self.client
            .set_data(&self.path, bytes, None)
            .await
            .map(drop)
    }

    /// Sets the count if the node is still at `version` (from [`get`](Self::get)); `false`
    /// when someone changed it first.
    ///
    /// ```no_run
    /// # async fn run(limit: zkwire_recipes::SharedCount) -> Result<(), zkwire::Error> {
    /// // Double the limit, whatever other writers do meanwhile.
    /// loop {
    ///     let seen = limit.get().await?;
    ///     if limit.try_set(seen.value * 2, seen.version).await? {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn try_set(&self, value: i32, version: i32) -> Result<bool, Error> {
        let bytes = value.to_be_bytes();
        match self.client.set_data(&self.path, bytes, Some(version)).await {
            Ok(_) => Ok(true),
            Err(Error::BadVersion) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl SharedCount {
    /// Follows the count's changes: each [`CountChanges::next`] waits for a value newer than
    /// the last one it returned (Curator's `SharedCountListener`).
    ///
    /// ```no_run
    /// # async fn run(limit: zkwire_recipes::SharedCount) {
    /// let mut changes = limit.changes();
    /// tokio::spawn(async move {
    ///     while let Ok(now) = changes.next().await {
    ///         println!("limit is {}", now.value);
    ///     }
    /// });
    /// # }
    /// ```
    pub fn changes(&self) -> CountChanges {
        CountChanges {
            count: self.clone(),
            last_version: None,
        }
    }
}

/// The changes of a [`SharedCount`], from [`SharedCount::changes`].
///
/// Values written in quick succession may be seen only as the last of them: each call
/// returns the node's current value once it differs from the last one returned, as a
/// watch-based listener does.
///
/// ```no_run
/// # async fn run(limit: zkwire_recipes::SharedCount) -> Result<(), zkwire::Error> {
/// let mut changes = limit.changes();
/// let now = changes.next().await?; // the current value first
/// println!("limit {}", now.value);
/// let later = changes.next().await?; // then each change
/// println!("limit now {}", later.value);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CountChanges {
    count: SharedCount,
    last_version: Option<i32>,
}

impl CountChanges {
    /// The current value the first time, then the next value written after the last one
    /// returned.
    ///
    /// ```no_run
    /// # async fn run(limit: zkwire_recipes::SharedCount) -> Result<(), zkwire::Error> {
    /// let mut changes = limit.changes();
    /// loop {
    ///     match changes.next().await {
    ///         Ok(now) => println!("limit is {}", now.value),
    ///         Err(zkwire::Error::NoNode) => {
    ///             println!("the limit was deleted");
    ///             break;
    ///         }
    ///         Err(e) => return Err(e),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`] when the node is deleted; [`Error::BadArguments`] when it holds
    /// fewer than 4 bytes; [`Error::SessionExpired`] (without session renewal) or `Closed` when the
    /// session ends.
    pub async fn next(&mut self) -> Result<Versioned<i32>, Error> {
        loop {
            let client = &self.count.client;
            let (data, stat, watcher) = client.get_data_and_watch(&self.count.path).await?;
            if self.last_version != Some(stat.version) {
                let value = count_of(&data)?;
                self.last_version = Some(stat.version);
                return Ok(Versioned {
                    value,
                    version: stat.version,
                });
            }
            // A change, or the session's end (the next read fails with why), or a renewed
            // session's marker: read again.
            if watcher.await.event_type == EventType::NodeDeleted {
                return Err(Error::NoNode);
            }
        }
    }
}

/// Curator's `DistributedAtomicLong`: an `i64` stored as 8 big-endian bytes, changed by
/// optimistic compare-and-set. A missing node reads as 0 and is created by the first change.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire_recipes::AtomicCounter;
/// let hits = AtomicCounter::new(client, "/app/hits")
///     // After 10 lost races, queue on a mutex with the other promoted writers.
///     .with_promotion("/app/hits-lock", Duration::from_secs(5));
/// match hits.add(1).await? {
///     Some(now) => println!("{now} hits"),
///     None => println!("too much contention; nothing was changed"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AtomicCounter {
    client: Client,
    path: String,
    attempts: u32,
    promotion: Option<Promotion>,
}

/// Curator's `PromotedToLock`: the mutex a change queues on once its optimistic attempts
/// ran out, and how long it waits for it.
#[derive(Debug, Clone)]
struct Promotion {
    lock: Mutex,
    max_wait: Duration,
}

impl AtomicCounter {
    /// The counter at `path`; a change gives up after 10 lost compare-and-sets.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::AtomicCounter;
    /// let hits = AtomicCounter::new(client, "/app/hits");
    /// if let Some(now) = hits.increment().await? {
    ///     println!("{now} hits");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn new(client: Client, path: impl Into<String>) -> Self {
        Self {
            client,
            path: path.into(),
            attempts: 10,
            promotion: None,
        }
    }

    /// Gives up a change after `attempts` compare-and-sets lost to other writers (and as many
    /// again under the mutex, with [`with_promotion`](Self::with_promotion)).
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::AtomicCounter;
    /// // A busy counter: try harder before giving up.
    /// let hits = AtomicCounter::new(client, "/app/hits").with_attempts(50);
    /// # let _ = hits;
    /// # }
    /// ```
    #[must_use]
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// Curator's promoted mode (`PromotedToLock`): a change whose optimistic attempts all
    /// lost takes the [`Mutex`] at `lock_path` (Curator's `InterProcessMutex` layout, so
    /// Curator's promoted writers queue on the same lock), waiting at most `max_wait` for it,
    /// and tries again while holding it. The writers that hold the mutex take turns; writers
    /// that do not take it can still win a race, so the attempts under the mutex are bounded
    /// too. The value stays exact either way: every write is a compare-and-set.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::AtomicCounter;
    ///
    /// // After 10 lost races, queue on a mutex (as Curator's promoted writers do), for up to 5 s.
    /// let hits = AtomicCounter::new(client, "/app/hits")
    ///     .with_promotion("/app/hits-lock", Duration::from_secs(5));
    /// # let _ = hits;
    /// # }
    /// ```
    #[must_use]
    pub fn with_promotion(mut self, lock_path: impl Into<String>, max_wait: Duration) -> Self {
        let lock = Mutex::new(self.client.clone(), lock_path);
        self.promotion = Some(Promotion { lock, max_wait });
        self
    }

    /// The value (0 when the node does not exist).
    ///
    /// ```no_run
    /// # async fn run(hits: zkwire_recipes::AtomicCounter) -> Result<(), zkwire::Error> {
    /// println!("{} hits so far", hits.get().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BadArguments`] when the node holds 1 to 7 bytes (empty reads as 0, and bytes
    /// past the eighth are ignored, as Curator reads them); client errors.
    pub async fn get(&self) -> Result<i64, Error> {
        Ok(self.read().await?.map_or(0, |v| v.value))
    }

    /// Adds `delta` (wrapping, as Java's `long`); returns the new value, or `None` when every
    /// attempt lost to a concurrent change (then this call changed nothing). With
    /// [`with_promotion`](Self::with_promotion), `None` also when the mutex was not had
    /// within its wait.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{AtomicCounter, LockError};
    /// # async fn run(stock: AtomicCounter) -> Result<(), LockError> {
    /// match stock.add(-3).await? {
    ///     Some(left) => println!("{left} left in stock"),
    ///     None => println!("too much contention: nothing was taken, try again"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::BadArguments`] when the node holds 1 to 7 bytes,
    /// or with the client's error (after a `ConnectionLoss` the change may or may not have
    /// applied, as for any write). With [`with_promotion`](Self::with_promotion), the
    /// mutex's errors other than its timeout: the lock directory holds a child that is not a
    /// contender ([`LockError::ForeignChild`]) or its sequence counter wrapped
    /// ([`LockError::SequenceWrapped`]).
    pub async fn add(&self, delta: i64) -> Result<Option<i64>, LockError> {
        if let Some(next) = self.try_add(delta).await? {
            return Ok(Some(next));
        }
        let Some(promotion) = &self.promotion else {
            return Ok(None);
        };
        let guard = match promotion.lock.lock_timeout(promotion.max_wait).await {
            Ok(guard) => guard,
            Err(LockError::Timeout) => return Ok(None),
            Err(e) => return Err(e),
        };
        let added = self.try_add(delta).await;
        // Dropped, not released: the node's delete is submitted at once and finishes in the
        // background, so the answer does not wait on it (release would wait, through a
        // reconnection if need be). The value's safety never rested on the mutex (every
        // write is a compare-and-set), so a hold lost meanwhile changes nothing either.
        drop(guard);
        Ok(added?)
    }

    /// Up to `attempts` read-then-compare-and-set rounds, pausing after each lost one.
    async fn try_add(&self, delta: i64) -> Result<Option<i64>, Error> {
        let mut backoff = Backoff::new()
            .with_delays(Duration::from_millis(5), Duration::from_millis(200))
            .with_max_attempts(self.attempts);
        loop {
            let current = self.read().await?;
            let next = current.map_or(0, |v| v.value).wrapping_add(delta);
            if self.compare_and_set(current, next).await? {
                return Ok(Some(next));
            }
            if !backoff.pause().await {
                return Ok(None);
            }
        }
    }

    /// Adds 1; see [`add`](Self::add).
    ///
    /// ```no_run
    /// # use zkwire_recipes::{AtomicCounter, LockError};
    /// # async fn run(hits: AtomicCounter) -> Result<(), LockError> {
    /// if hits.increment().await?.is_none() {
    ///     eprintln!("hit not counted: every attempt lost to another writer");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub async fn increment(&self) -> Result<Option<i64>, LockError> {
        self.add(1).await
    }

    async fn read(&self) -> Result<Option<Versioned<i64>>, Error> {
        match self.client.get_data(&self.path).await {
            Ok((data, stat)) => Ok(Some(Versioned {
                value: long_of(&data)?,
                version: stat.version,
            })),
            Err(Error::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `next` if the node is still as read (`None`: still missing); whether it was.
    async fn compare_and_set(
        &self,
        read: Option<Versioned<i64>>,
        next: i64,
    ) -> Result<bool, Error> {
        let bytes = next.to_be_bytes();
        let written = match read {
            Some(v) => self
                .client
                .set_data(&self.path, bytes, Some(v.version))
                .await
                .map(drop),
            None => {
                // Parents as containers, as Curator creates them.
                let options = CreateOptions::persistent().with_container_parents();
                self.client
                    .create_all(&self.path, bytes, &options)
                    .await
                    .map(drop)
            }
        };
        match written {
            Ok(()) => Ok(true),
            Err(Error::BadVersion | Error::NodeExists | Error::NoNode) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// A `SharedCount` node's value as Curator reads it: its first 4 bytes, big-endian.
fn count_of(data: &[u8]) -> Result<i32, Error> {
    let first: [u8; 4] = data
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(Error::BadArguments)?;
    Ok(i32::from_be_bytes(first))
}

/// A `DistributedAtomicLong` node's value as Curator reads it: 0 when empty (a node created
/// by another tool), else its first 8 bytes, big-endian.
fn long_of(data: &[u8]) -> Result<i64, Error> {
    if data.is_empty() {
        return Ok(0);
    }
    let first: [u8; 8] = data
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(Error::BadArguments)?;
    Ok(i64::from_be_bytes(first))
}
