//! Reading a lock directory the way Curator does: sort keys, contender order, predicates.
//!
//! Curator's `StandardLockInternalsDriver.standardFixForSorting(name, lockName)` keys a child
//! by the substring after the **last** occurrence of the lock name, or by the whole name when
//! it is absent; `InterProcessReadWriteLock` applies it for `__READ__` and then `__WRIT__`.
//! Keys compare as strings and **every** child counts. We must order exactly the same way,
//! or our contenders and Curator's would disagree on who holds the lock.
//!
//! On top of that we refuse two situations Curator silently mis-orders:
//! - a **foreign child** (no marker followed by a sequence suffix): Curator keys it by its
//!   whole name and may wedge behind it forever (CURATOR-43); by default it is an error
//!   ([`ForeignChildPolicy`]);
//! - a **negative sequence suffix**: the parent's 32-bit `cversion` wrapped. As strings,
//!   `-…` sorts before every `0…`, and negative suffixes sort by magnitude, i.e. in reverse
//!   creation order, so any negative suffix (even among negatives only) breaks FIFO and
//!   exclusion with Curator peers (kazoo #606, #730). It is always an error.
//!
//! Strings compare byte-wise. Java compares UTF-16 code units, which is the same order here:
//! ZooKeeper paths cannot hold characters above U+FFFF, and below that UTF-8 byte order and
//! UTF-16 code-unit order both equal code-point order.

use std::cmp::Ordering;

use zkwire::path::parse_sequence;
use zkwire::Children;

use crate::error::LockError;

/// Curator `InterProcessMutex.LOCK_NAME`.
pub(crate) const MUTEX_MARKERS: &[&str] = &["lock-"];
/// Curator `LeaderLatch.LOCK_NAME`.
pub(crate) const LATCH_MARKERS: &[&str] = &["latch-"];
/// Curator `InterProcessReadWriteLock.READ_LOCK_NAME`.
pub(crate) const READ_MARKER: &str = "__READ__";
/// Curator `InterProcessReadWriteLock.WRITE_LOCK_NAME`.
pub(crate) const WRITE_MARKER: &str = "__WRIT__";
/// The read/write lock's sort: strip through the last `__READ__`, then the last `__WRIT__`.
pub(crate) const RW_MARKERS: &[&str] = &[READ_MARKER, WRITE_MARKER];
/// Sequence numbers this close to `i32::MAX` get a warning: the counter is about to wrap.
const WRAP_WARNING: i32 = i32::MAX - (1 << 24);

/// What to do with a child of the lock directory that is not one of the recipe's contenders.
///
/// ```
/// use zkwire_recipes::{ForeignChildPolicy, LockOptions};
/// // Share a lock directory with kazoo's `Lock`, configured with
/// // `extra_lock_patterns=["-lock-"]`.
/// let options = LockOptions::new().with_foreign_children(ForeignChildPolicy::OrderKazoo);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForeignChildPolicy {
    /// Fail the acquire with [`LockError::ForeignChild`] (the default). Nothing but lock nodes
    /// belongs in a lock directory (Curator Tech Note 7), and a foreign node can block every
    /// contender forever.
    #[default]
    Reject,
    /// Count it as a contender keyed by its whole name, exactly as Curator does.
    CountLikeCurator,
    /// Order kazoo's contenders with ours: a child named `…__lock__<seq>` (kazoo's `Lock`
    /// and `WriteLock`, a writer) or `…__rlock__<seq>` (kazoo's `ReadLock`, a reader) is keyed
    /// by its sequence suffix, as kazoo keys every contender; any other foreign child fails
    /// the acquire as under [`Reject`](Self::Reject).
    ///
    /// Both sides must see each other: configure kazoo with
    /// `extra_lock_patterns=["-lock-"]` for a [`Mutex`](crate::Mutex), and with
    /// `["__WRIT__"]` (readers) or `["__WRIT__", "__READ__"]` (writers) for an
    /// [`RwLock`](crate::RwLock). Sequence numbers come from the one parent, so the two
    /// orders agree. Not for a semaphore's directories (kazoo's semaphore has another layout):
    /// there it acts as [`Reject`](Self::Reject).
    OrderKazoo,
}

/// kazoo's `Lock` / `WriteLock` node name marker (a writer).
const KAZOO_WRITE_MARKER: &str = "__lock__";
/// kazoo's `ReadLock` node name marker.
const KAZOO_READ_MARKER: &str = "__rlock__";

/// Where the sequence suffix of a kazoo contender starts, and whether it is a writer.
fn kazoo_contender(name: &str) -> Option<(usize, bool)> {
    [(KAZOO_WRITE_MARKER, true), (KAZOO_READ_MARKER, false)]
        .into_iter()
        .find_map(|(marker, writer)| {
            let at = rfind_marker(name, marker)? + marker.len();
            name.get(at..)
                .and_then(parse_sequence)
                .map(|_| (at, writer))
        })
}

/// One child of the lock directory, with its sort key; its name is the listing's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender<'a> {
    pub(crate) name: &'a str,
    /// Byte offset of the sort key in `name`.
    key_at: usize,
    /// The sequence suffix, `None` for a foreign child counted like Curator.
    pub(crate) seq: Option<i32>,
    /// Whether readers must wait for it, when kazoo's marker decided it (`__lock__` under
    /// [`ForeignChildPolicy::OrderKazoo`]); otherwise Curator's rule decides, when asked
    /// ([`is_writer`](Self::is_writer)): only readers ask, so a mutex never scans its names
    /// for a marker it does not use.
    kazoo_writer: Option<bool>,
}

impl Contender<'_> {
    pub(crate) fn key(&self) -> &str {
        self.name.get(self.key_at..).unwrap_or_default()
    }

    /// The lock order: by key, as Curator sorts. Two contenders with a sequence number have
    /// keys of exactly ten digits (`parse_sequence` accepts nothing else, and a negative one
    /// is refused before sorting), which compare as their numbers do: the order of the keys,
    /// without a byte comparison per pair.
    pub(crate) fn cmp_key(&self, other: &Self) -> Ordering {
        match (self.seq, other.seq) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.key().cmp(other.key()),
        }
    }

    /// Whether a reader must wait for this child.
    pub(crate) fn is_writer(&self) -> bool {
        self.kazoo_writer
            .unwrap_or_else(|| rfind_marker(self.name, WRITE_MARKER).is_some())
    }
}

/// What a contender should do, given the sorted children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The lock is ours.
    Held,
    /// Watch this child (name) and look again when it changes.
    Wait(String),
    /// Our node is not among the children (deleted, or the session is gone).
    Missing,
}

/// Curator's sort key of `name`: successively strip through the last occurrence of each
/// marker. Returns the key's offset and whether any marker was found.
pub(crate) fn sort_key_at(name: &str, markers: &[&str]) -> (usize, bool) {
    let mut at = 0;
    let mut found = false;
    for marker in markers {
        if let Some(i) = name.get(at..).and_then(|rest| rfind_marker(rest, marker)) {
            at += i + marker.len();
            found = true;
        }
    }
    (at, found)
}

/// Where the last `marker` starts in `name`. Names and markers are short: a scan for the
/// marker's first byte beats `str::rfind`, whose searcher costs more to set up than this
/// whole scan (it ran three times per child, on every listing; BENCHMARKS.md, "Issue 29,
/// seventh pass").
fn rfind_marker(name: &str, marker: &str) -> Option<usize> {
    let (name, marker) = (name.as_bytes(), marker.as_bytes());
    let last_start = name.len().checked_sub(marker.len())?;
    let Some(&first) = marker.first() else {
        return Some(last_start);
    };
    if let Some((at, _)) = marker_before_sequence(name, marker) {
        return Some(at);
    }
    (0..=last_start)
        .rev()
        .find(|&i| name[i] == first && name[i..].starts_with(marker))
}

/// Where a non-empty `marker` without digits starts when it stands right before a ten-digit
/// suffix, the shape of every contender's name, and the suffix's value. The marker is then
/// the last one: a later start would run into the digits. One comparison rather than a scan
/// back over the digits, per child and listing (BENCHMARKS.md, "Issue 29, eighth pass"); the
/// digits are read once, for the position and for the value (ninth pass).
fn marker_before_sequence(name: &[u8], marker: &[u8]) -> Option<(usize, u64)> {
    let digits_at = name.len().checked_sub(10)?;
    let at = digits_at.checked_sub(marker.len())?;
    let (before, digits) = name.split_at(digits_at);
    // Byte by byte rather than `==` on the slices, which calls `memcmp` for five bytes.
    let fits = !marker.is_empty()
        && before[at..].iter().zip(marker).all(|(b, m)| b == m)
        && !marker.iter().any(u8::is_ascii_digit);
    if !fits {
        return None;
    }
    // Every digit read, without a branch per byte: the loop unrolls.
    let mut value = 0;
    let mut not_digit = false;
    for &b in digits {
        let digit = b.wrapping_sub(b'0');
        not_digit |= digit > 9;
        value = value * 10 + u64::from(digit);
    }
    (!not_digit).then_some((at, value))
}

/// The sort key's offset and the sequence number of `name` (`None` without a marker or
/// suffix): [`sort_key_at`] then [`parse_sequence`] of the key, which a contender's name
/// under a single marker gets from one look at its last bytes.
fn key_and_sequence(name: &str, markers: &[&str]) -> (usize, Option<i32>) {
    if let [marker] = markers {
        if let Some((at, value)) = marker_before_sequence(name.as_bytes(), marker.as_bytes()) {
            // Ten digits, not negative: what `parse_sequence` makes of them.
            return (at + marker.len(), i32::try_from(value).ok());
        }
    }
    let (key_at, found) = sort_key_at(name, markers);
    let seq = if found {
        name.get(key_at..).and_then(parse_sequence)
    } else {
        None
    };
    (key_at, seq)
}

/// Parses and sorts the children of a lock directory.
///
/// # Errors
/// [`LockError::SequenceWrapped`] for any negative suffix; [`LockError::ForeignChild`] for a
/// child without marker and sequence suffix under [`ForeignChildPolicy::Reject`].
pub(crate) fn sort_children<'a>(
    names: &'a Children,
    markers: &[&str],
    policy: ForeignChildPolicy,
) -> Result<Vec<Contender<'a>>, LockError> {
    let mut sorted = Vec::with_capacity(names.len());
    for name in names {
        let (mut key_at, mut seq) = key_and_sequence(name, markers);
        let mut kazoo_writer = None;
        if seq.is_none() && policy == ForeignChildPolicy::OrderKazoo {
            if let Some((at, writer)) = kazoo_contender(name) {
                key_at = at;
                kazoo_writer = Some(writer);
                seq = name.get(at..).and_then(parse_sequence);
            }
        }
        match seq {
            Some(s) if s < 0 => {
                let name = name.to_owned();
                return Err(LockError::SequenceWrapped { name });
            }
            Some(s) if s >= WRAP_WARNING => {
                tracing::warn!(child = %name, "lock directory sequence is close to wrapping at 2^31");
            }
            Some(_) => {}
            None if policy != ForeignChildPolicy::CountLikeCurator => {
                return Err(LockError::ForeignChild {
                    name: name.to_owned(),
                })
            }
            None => {}
        }
        sorted.push(Contender {
            name,
            key_at,
            seq,
            kazoo_writer,
        });
    }
    // Stable, as Java's List.sort; ties only arise from a downgrade read node.
    sorted.sort_by(Contender::cmp_key);
    Ok(sorted)
}

/// Exclusive contenders (mutex, write lock, `maxLeases = 1`): held iff every other child
/// sorts strictly after ours; otherwise wait on the immediate predecessor.
///
/// Curator takes index 0 of the stable sort; we also refuse a tie at our key, which can only
/// be a downgrade read node of someone who already holds the write lock.
pub(crate) fn exclusive(sorted: &[Contender], ours: &str) -> Decision {
    let Some(me) = sorted.iter().find(|c| c.name == ours) else {
        return Decision::Missing;
    };
    let predecessor = sorted
        .iter()
        .rfind(|c| c.name != ours && c.cmp_key(me) != Ordering::Greater);
    match predecessor {
        None => Decision::Held,
        Some(p) => Decision::Wait(p.name.to_owned()),
    }
}

/// Readers: held iff no writer sorts strictly before ours; otherwise wait on the **nearest**
/// lower writer (the ZooKeeper recipe's rule; Curator watches the first one, which only costs
/// it extra wake-ups, so the two agree on who holds).
pub(crate) fn shared(sorted: &[Contender], ours: &str) -> Decision {
    let Some(me) = sorted.iter().find(|c| c.name == ours) else {
        return Decision::Missing;
    };
    let nearest_writer = sorted
        .iter()
        .rfind(|c| c.name != ours && c.is_writer() && c.cmp_key(me) == Ordering::Less);
    match nearest_writer {
        None => Decision::Held,
        Some(w) => Decision::Wait(w.name.to_owned()),
    }
}

/// The sequence suffix of our own node (the text after the last marker), for the tie layout
/// of a downgrade read node.
pub(crate) fn suffix_after<'a>(name: &'a str, marker: &str) -> Option<&'a str> {
    let at = rfind_marker(name, marker)? + marker.len();
    let suffix = name.get(at..)?;
    parse_sequence(suffix).map(|_| suffix)
}

#[cfg(test)]
mod tests;
