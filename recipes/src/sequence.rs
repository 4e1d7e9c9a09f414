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
    fn cmp_key(&self, other: &Self) -> Ordering {
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
mod tests {
    use super::*;

    /// A listing of `names` that outlives the test (a few bytes leaked per call), so that
    /// contenders can borrow it whatever the expression it is built in.
    fn listing<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> &'static Children {
        Box::leak(Box::new(names.into_iter().collect()))
    }

    const U1: &str = "_c_f290140d-9856-42ad-b9bf-348ffc086062-";
    const U2: &str = "_c_00000000-0000-4000-8000-000000000000-";
    const U3: &str = "_c_ffffffff-ffff-4fff-bfff-ffffffffffff-";

    /// The byte scan, and the shortcut before a ten-digit suffix, find what `str::rfind`
    /// finds: markers at either end, overlapping candidates, markers with digits and the
    /// empty marker included.
    #[test]
    fn rfind_marker_agrees_with_str_rfind() {
        let names = [
            "",
            "-",
            "lock-",
            "-lock-",
            "a-lock-0000000001",
            "-lock--lock-0000000002",
            "__WRIT____WRIT__",
            "x__READ__y__WRIT__0000000003",
            "____",
            "_c_ab-cd-lock-",
            "k__lock__0000000004",
            "ü-lock-ß",
            "lock-0000000005",
            "0000000006",
            "x-lock-12345678-lock-0000000007",
            "-lock-000000000-0000000008",
            "__READ__-000000009",
            "lock-00000000a0",
            "7-1234567890",
            "a000000000000",
            "lock-lock-00000",
            "ab__READ____READ__00",
        ];
        let markers = [
            "-lock-", "__WRIT__", "__READ__", "__lock__", "__", "-", "", "ß", "lock-", "0", "00",
            "7-",
        ];
        for name in names {
            for marker in markers {
                assert_eq!(
                    rfind_marker(name, marker),
                    name.rfind(marker),
                    "{name:?} {marker:?}"
                );
            }
        }
    }

    /// The one look at a name's last bytes under a single marker gives the key and sequence
    /// that the marker scan and `parse_sequence` give.
    #[test]
    fn one_marker_keys_agree_with_the_scan_and_parse() {
        let names = [
            "_c_0f7a-lock-0000000042",
            "lock-0000000005",
            "lock-2147483647",
            "lock-2147483648",
            "lock-9999999999",
            "lock--000000001",
            "x-lock-12345678-lock-0000000007",
            "lock-lock-0000000001",
            "lock-00000000a0",
            "lock-000000000\u{e9}",
            "ü-lock-0000000003",
            "7-1234567890",
            "0000000006",
            "latch-0000000011",
            "k__lock__0000000004",
            "lock-",
            "",
        ];
        let markers = ["lock-", "-lock-", "latch-", "__lock__", "7-", "0", "-", ""];
        for name in names {
            for marker in markers {
                let (scan_at, found) = sort_key_at(name, &[marker]);
                let scan_seq = found.then(|| parse_sequence(&name[scan_at..])).flatten();
                assert_eq!(
                    key_and_sequence(name, &[marker]),
                    (scan_at, scan_seq),
                    "{name:?} {marker:?}"
                );
            }
        }
    }

    /// Comparing sequence numbers orders contenders as their keys do: mutex, read-write and
    /// kazoo names, and foreign children counted like Curator's (no sequence) among them.
    #[test]
    fn the_order_by_number_is_the_order_by_key() {
        let names: Vec<String> = [
            "_c_a-lock-0000000010",
            "_c_b-lock-0000000009",
            "x-lock-0000000100",
            "foreign",
            "_c_c-__READ__0000000011",
            "_c_d-__WRIT__0000000002",
            "k__lock__0000000003",
            "k__rlock__0000000004",
            "_c_e-lock-2147483647",
            "zzz",
            "_c_f-lock-0000000000",
        ]
        .map(String::from)
        .to_vec();
        let markers = ["lock-", READ_MARKER, WRITE_MARKER];
        let sorted = sort_children(
            listing(names),
            &markers,
            ForeignChildPolicy::CountLikeCurator,
        )
        .unwrap();
        let policy = ForeignChildPolicy::OrderKazoo;
        let kazoo = sort_children(
            listing(
                ["k__lock__0000000003", "_c_a-lock-0000000001"]
                    .map(String::from)
                    .to_vec(),
            ),
            &markers,
            policy,
        )
        .unwrap();
        for list in [&sorted, &kazoo] {
            for a in list.iter() {
                for b in list.iter() {
                    assert_eq!(a.cmp_key(b), a.key().cmp(b.key()), "{} {}", a.name, b.name);
                }
            }
        }
    }

    fn names(v: &[String]) -> Vec<String> {
        v.to_vec()
    }

    fn sorted(children: &[String], markers: &[&str]) -> Vec<String> {
        sort_children(
            listing(names(children)),
            markers,
            ForeignChildPolicy::Reject,
        )
        .unwrap()
        .into_iter()
        .map(|c| c.name.to_owned())
        .collect()
    }

    #[test]
    fn keys_follow_curator_standard_fix_for_sorting() {
        let n = format!("{U1}lock-0000000759");
        let (at, found) = sort_key_at(&n, MUTEX_MARKERS);
        assert!(found);
        assert_eq!(&n[at..], "0000000759");
        // The LAST occurrence counts.
        let n = "lock-lock-0000000003";
        assert_eq!(&n[sort_key_at(n, MUTEX_MARKERS).0..], "0000000003");
        // No marker: the whole name.
        assert_eq!(sort_key_at("foo", MUTEX_MARKERS), (0, false));
        // Read/write: __READ__ then __WRIT__.
        let r = format!("{U1}__READ__0000000002");
        let w = format!("{U1}__WRIT__0000000001");
        assert_eq!(&r[sort_key_at(&r, RW_MARKERS).0..], "0000000002");
        assert_eq!(&w[sort_key_at(&w, RW_MARKERS).0..], "0000000001");
    }

    #[test]
    fn the_uuid_never_affects_the_order() {
        let kids = vec![
            format!("{U3}lock-0000000001"),
            format!("{U1}lock-0000000003"),
            format!("{U2}lock-0000000002"),
            "lock-0000000000".to_owned(), // unprotected (e.g. an older client) still counts
        ];
        assert_eq!(
            sorted(&kids, MUTEX_MARKERS),
            ["lock-0000000000", &kids[0], &kids[2], &kids[1]].map(str::to_owned)
        );
    }

    #[test]
    fn kazoo_contenders_are_ordered_by_their_sequence() {
        let kazoo = "4f1c0a3e9b7d4c2a8e6f1b3d5a7c9e0f";
        let kids = vec![
            format!("{U1}lock-0000000004"),
            format!("{kazoo}__lock__0000000002"),
            format!("{U2}lock-0000000003"),
            format!("{kazoo}__rlock__0000000001"),
        ];
        let order = sort_children(
            listing(kids.clone()),
            MUTEX_MARKERS,
            ForeignChildPolicy::OrderKazoo,
        )
        .unwrap();
        assert_eq!(
            order.iter().map(|c| c.name).collect::<Vec<_>>(),
            [&kids[3], &kids[1], &kids[2], &kids[0]]
        );
        let writers: Vec<bool> = order.iter().map(Contender::is_writer).collect();
        assert_eq!(writers, [false, true, false, false]);
        assert_eq!(exclusive(&order, &kids[2]), Decision::Wait(kids[1].clone()));
        // Readers of a read/write lock wait for kazoo's writers, not for its readers.
        let rw = vec![
            format!("{kazoo}__rlock__0000000001"),
            format!("{U1}__READ__0000000002"),
            format!("{kazoo}__lock__0000000003"),
            format!("{U2}__READ__0000000004"),
        ];
        let order = sort_children(
            listing(rw.clone()),
            RW_MARKERS,
            ForeignChildPolicy::OrderKazoo,
        )
        .unwrap();
        assert_eq!(shared(&order, &rw[1]), Decision::Held);
        assert_eq!(shared(&order, &rw[3]), Decision::Wait(rw[2].clone()));
        // Other foreign children, and kazoo names under the other policies, stay foreign.
        for policy in [ForeignChildPolicy::OrderKazoo, ForeignChildPolicy::Reject] {
            let r = sort_children(listing(["config"]), MUTEX_MARKERS, policy);
            assert!(matches!(r, Err(LockError::ForeignChild { .. })));
        }
        let r = sort_children(
            listing(vec![kids[1].clone()]),
            MUTEX_MARKERS,
            ForeignChildPolicy::Reject,
        );
        assert!(matches!(r, Err(LockError::ForeignChild { .. })));
        let r = sort_children(
            listing(vec![format!("{kazoo}__lock__-000000001")]),
            MUTEX_MARKERS,
            ForeignChildPolicy::OrderKazoo,
        );
        assert!(matches!(r, Err(LockError::SequenceWrapped { .. })));
    }

    #[test]
    fn foreign_children_rejected_or_counted_like_curator() {
        let kids = vec![format!("{U1}lock-0000000001"), "config".to_owned()];
        assert_eq!(
            sort_children(
                listing(kids.clone()),
                MUTEX_MARKERS,
                ForeignChildPolicy::Reject
            ),
            Err(LockError::ForeignChild {
                name: "config".into()
            })
        );
        let counted = sort_children(
            listing(kids.clone()),
            MUTEX_MARKERS,
            ForeignChildPolicy::CountLikeCurator,
        )
        .unwrap();
        // "0…" < "c…": the foreign child sorts after the lock node, keyed by its whole name.
        assert_eq!(
            counted.iter().map(|c| c.name).collect::<Vec<_>>(),
            [&kids[0], "config"]
        );
        assert_eq!(counted[1].seq, None);
        // A marker with a malformed tail, or a read/write node in a mutex dir, is foreign too.
        for bad in [
            "lock-12",
            "lock-abcdefghij",
            "x-lock-00000000001",
            "_c_x-__WRIT__0000000001",
        ] {
            let r = sort_children(
                listing(vec![bad.to_owned()]),
                MUTEX_MARKERS,
                ForeignChildPolicy::Reject,
            );
            assert_eq!(
                r,
                Err(LockError::ForeignChild { name: bad.into() }),
                "{bad}"
            );
        }
    }

    #[test]
    fn any_negative_suffix_is_a_wrap() {
        let mixed = vec![
            format!("{U1}lock-0000000001"),
            format!("{U2}lock--2147483648"),
        ];
        assert_eq!(
            sort_children(
                listing(mixed),
                MUTEX_MARKERS,
                ForeignChildPolicy::CountLikeCurator
            ),
            Err(LockError::SequenceWrapped {
                name: format!("{U2}lock--2147483648")
            })
        );
        // Negatives only are mis-ordered as well: -2147483648 was created first but sorts last.
        let negatives = vec![
            format!("{U1}lock--2147483647"),
            format!("{U2}lock--000000042"),
        ];
        assert!(matches!(
            sort_children(
                listing(negatives),
                MUTEX_MARKERS,
                ForeignChildPolicy::Reject
            ),
            Err(LockError::SequenceWrapped { .. })
        ));
    }

    #[test]
    fn exclusive_waits_on_the_immediate_predecessor() {
        let kids = vec![
            format!("{U1}lock-0000000004"),
            format!("{U2}lock-0000000001"),
            format!("{U3}lock-0000000002"),
        ];
        let s = sort_children(
            listing(kids.clone()),
            MUTEX_MARKERS,
            ForeignChildPolicy::Reject,
        )
        .unwrap();
        assert_eq!(exclusive(&s, &kids[1]), Decision::Held);
        assert_eq!(exclusive(&s, &kids[2]), Decision::Wait(kids[1].clone()));
        assert_eq!(exclusive(&s, &kids[0]), Decision::Wait(kids[2].clone()));
        assert_eq!(exclusive(&s, "nope"), Decision::Missing);
    }

    #[test]
    fn readers_wait_on_the_nearest_lower_writer_and_tolerate_ties() {
        let w1 = format!("{U1}__WRIT__0000000001");
        let r2 = format!("{U2}__READ__0000000002");
        let w3 = format!("{U3}__WRIT__0000000003");
        let r4 = format!("{U2}__READ__0000000004");
        let kids = vec![r4.clone(), w3.clone(), r2.clone(), w1.clone()];
        let s = sort_children(listing(kids), RW_MARKERS, ForeignChildPolicy::Reject).unwrap();
        assert_eq!(
            shared(&s, &r4),
            Decision::Wait(w3.clone()),
            "nearest, not first, writer"
        );
        assert_eq!(shared(&s, &r2), Decision::Wait(w1.clone()));
        assert_eq!(exclusive(&s, &w1), Decision::Held);
        assert_eq!(exclusive(&s, &w3), Decision::Wait(r2.clone()));

        // Curator >= 5.5 downgrade: a non-sequential read node tied with its writer's suffix.
        let tie = format!("{U3}__READ__0000000001");
        let s = sort_children(
            listing(vec![w3.clone(), tie.clone(), w1.clone(), r2.clone()]),
            RW_MARKERS,
            ForeignChildPolicy::Reject,
        )
        .unwrap();
        assert_eq!(
            shared(&s, &tie),
            Decision::Held,
            "a tie with a writer does not block the reader"
        );
        assert_eq!(shared(&s, &r2), Decision::Wait(w1.clone()));
        // Once the writer is gone, the tie read node blocks later writers but not readers.
        let s = sort_children(
            listing(vec![w3.clone(), tie.clone(), r2.clone()]),
            RW_MARKERS,
            ForeignChildPolicy::Reject,
        )
        .unwrap();
        assert_eq!(shared(&s, &r2), Decision::Held);
        assert_eq!(exclusive(&s, &w3), Decision::Wait(r2.clone()));
        // A writer tied with another node is never granted.
        let s = sort_children(
            listing(vec![w1.clone(), tie.clone()]),
            RW_MARKERS,
            ForeignChildPolicy::Reject,
        )
        .unwrap();
        assert!(matches!(exclusive(&s, &w1), Decision::Wait(_)));
    }

    #[test]
    fn suffix_of_our_node() {
        assert_eq!(
            suffix_after(&format!("{U1}__WRIT__0000000042"), WRITE_MARKER),
            Some("0000000042")
        );
        assert_eq!(suffix_after("__WRIT__42", WRITE_MARKER), None);
    }
}
