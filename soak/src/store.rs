//! The protected resource, a fenced store that records every critical section, and the
//! check of those sections for overlaps.

use std::fmt;
use std::time::Instant;

use zkwire_recipes::LostReason;

/// Who writes to the store: a contender, the session it holds the lock with, and the fencing
/// token of that hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holder {
    pub(crate) who: usize,
    pub(crate) session: i64,
    pub(crate) token: i64,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "contender {} session {:#x} token {:#x}",
            self.who, self.session, self.token
        )
    }
}

/// One critical section as the store saw it.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub(crate) holder: Holder,
    pub(crate) enter: Instant,
    /// When the section ended: after its last write, or the instant `lost()` fired.
    pub(crate) exit: Instant,
    /// When `lost()` fired during the section, and why.
    pub(crate) lost: Option<(Instant, LostReason)>,
    /// The guard's `trusted_until()` when the section was entered.
    pub(crate) trusted_until: Option<Instant>,
    /// A long hold (0.5–1.5 T) rather than 0–2 ms.
    pub(crate) long: bool,
}

/// Two sections of different contenders that intersect: indices into the sections,
/// earlier-entered first, and whether the earlier one's `lost()` fired before the later
/// one entered.
pub(crate) struct Overlap {
    pub(crate) first: usize,
    pub(crate) second: usize,
    pub(crate) excused: bool,
}

/// The overlaps among `sections`, by entry order.
pub(crate) fn overlaps(sections: &[Section]) -> Vec<Overlap> {
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| (sections[i].enter, i));
    let mut open: Vec<usize> = Vec::new();
    let mut found = Vec::new();
    for b in order {
        let sb = &sections[b];
        open.retain(|&a| sections[a].exit > sb.enter);
        for &a in &open {
            let sa = &sections[a];
            if sa.holder.who == sb.holder.who {
                continue;
            }
            let excused = sa.lost.is_some_and(|(at, _)| at <= sb.enter);
            found.push(Overlap {
                first: a,
                second: b,
                excused,
            });
        }
        open.push(b);
    }
    found
}

/// The protected resource: it accepts a write only with a token at least as new as the
/// newest it has accepted, and records every critical section.
#[derive(Debug, Default)]
pub(crate) struct FencedStore {
    newest: i64,
    pub(crate) writes: u64,
    pub(crate) sections: Vec<Section>,
    pub(crate) refused: Vec<Refusal>,
}

impl FencedStore {
    /// Writes with the holder's token; false (and recorded) when the token is stale.
    pub(crate) fn write(&mut self, holder: Holder, at: Instant) -> bool {
        if holder.token < self.newest {
            self.refused.push(Refusal {
                holder,
                newest: self.newest,
                at,
            });
            return false;
        }
        self.newest = holder.token;
        self.writes += 1;
        true
    }
}

/// A write the store refused: the holder's token older than `newest`.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub(crate) holder: Holder,
    pub(crate) newest: i64,
    pub(crate) at: Instant,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn section(
        who: usize,
        enter_ms: u64,
        exit_ms: u64,
        lost_ms: Option<u64>,
        t0: Instant,
    ) -> Section {
        let at = |ms| t0 + Duration::from_millis(ms);
        Section {
            holder: Holder {
                who,
                session: 0,
                token: 0,
            },
            enter: at(enter_ms),
            exit: at(exit_ms),
            lost: lost_ms.map(|ms| (at(ms), LostReason::Unacknowledged(Duration::ZERO))),
            trusted_until: None,
            long: false,
        }
    }

    #[test]
    fn overlaps_are_found_and_excused_only_by_an_earlier_lost() {
        let t0 = Instant::now();
        let sections = vec![
            section(0, 0, 10, None, t0),
            section(1, 10, 20, None, t0),     // touches, no overlap
            section(2, 15, 30, Some(18), t0), // overlaps 1, not excused
            section(3, 25, 26, None, t0),     // overlaps 2 after its lost: excused
            section(0, 40, 50, None, t0),
            section(0, 45, 46, None, t0), // same contender: ignored
        ];
        let found = overlaps(&sections);
        let pairs: Vec<(usize, usize, bool)> = found
            .iter()
            .map(|o| (o.first, o.second, o.excused))
            .collect();
        assert_eq!(pairs, vec![(1, 2, false), (2, 3, true)]);
    }

    #[test]
    fn the_store_refuses_older_tokens_only() {
        let mut store = FencedStore::default();
        let now = Instant::now();
        let holder = |who, token| Holder {
            who,
            session: 0,
            token,
        };
        assert!(store.write(holder(0, 5), now));
        assert!(store.write(holder(0, 5), now));
        assert!(store.write(holder(1, 7), now));
        assert!(!store.write(holder(0, 5), now));
        assert_eq!(store.refused.len(), 1);
        assert_eq!(store.writes, 3);
    }
}
