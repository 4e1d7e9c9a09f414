//! Two reads of a subtree compared: the [`CacheEvent`]s that turn one into the other.

use std::collections::{BTreeMap, BTreeSet};

use zkwire::Stat;

use super::{CacheEvent, CachedNode};

/// Whether `new` is a later version of the same node's data than `old`. The child counters
/// (`cversion`, `numChildren`, `pzxid`) are as of the node's last read: a recursive watch
/// says nothing to a parent whose children change.
pub(super) fn newer(new: &Stat, old: &Stat) -> bool {
    new.mzxid > old.mzxid
}

/// The events that turn `old` into `new`: deletions (descendants first), then creations
/// (parents first) and changes.
///
/// A node of `old` that is gone or was replaced (another `czxid`) leaves with everything held
/// below it, even descendants that `new` still has: the copy may have held a stale parent
/// over a current child (events for a node can come before the resync that finds its parent
/// replaced), and a deletion is only ever announced after its descendants'. Those
/// descendants then come back as creations.
pub(super) fn differences(
    old: &BTreeMap<String, CachedNode>,
    new: &BTreeMap<String, CachedNode>,
) -> Vec<CacheEvent> {
    let mut removed: BTreeSet<&str> = BTreeSet::new();
    // Sorted order visits every ancestor before its descendants.
    for (path, before) in old {
        let replaced = new
            .get(path)
            .is_none_or(|after| after.stat.czxid != before.stat.czxid);
        if replaced || ancestors(path).any(|a| removed.contains(a)) {
            removed.insert(path);
        }
    }
    let mut events: Vec<CacheEvent> = removed
        .iter()
        .rev()
        .map(|path| CacheEvent::Deleted {
            path: (*path).to_owned(),
            old: old[*path].clone(),
        })
        .collect();
    for (path, after) in new {
        match old.get(path) {
            Some(before) if !removed.contains(path.as_str()) => {
                if before != after {
                    events.push(CacheEvent::Changed {
                        path: path.clone(),
                        old: before.clone(),
                        new: after.clone(),
                    });
                }
            }
            _ => events.push(CacheEvent::Created {
                path: path.clone(),
                node: after.clone(),
            }),
        }
    }
    events
}

/// The proper ancestors of an absolute path, nearest first (`/a/b/c`: `/a/b`, `/a`, `/`).
pub(super) fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let cut = rest.rfind('/')?;
        rest = if cut == 0 && rest.len() > 1 {
            "/"
        } else if cut == 0 {
            return None;
        } else {
            &rest[..cut]
        };
        Some(rest)
    })
}
