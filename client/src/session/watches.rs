//! The local watch registry: which watcher fires for which event, and the SetWatches batches
//! that restore the server's registrations after a reconnect.

use std::collections::HashMap;

use super::types::{IdMap, WatchKind, WatcherId};
use crate::path;
use crate::proto::{EventType, SetWatches, SetWatches2, WatcherType};

/// The most path bytes one SetWatches frame carries (the Java client's
/// `SET_WATCHES_MAX_LENGTH`), so that re-registering many watches never builds a frame the
/// server would refuse (ZOOKEEPER-706).
pub const SET_WATCHES_MAX_PATH_BYTES: usize = 128 * 1024;

/// Local watchers by server path and kind.
///
/// The server keeps one registration per (connection, path, kind) however many local
/// watchers share it (ZOOKEEPER-1910); the registry fans one notification out to all of them.
///
/// Paths keep the default hasher, which resists chosen collisions (a path can come from
/// anyone); a notification looks its path up once, and walks the ancestors only while some
/// recursive watch exists.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    by_path: HashMap<String, [Vec<WatcherId>; 5]>,
    by_id: IdMap<WatcherId, (String, WatchKind)>,
    /// How many watchers are [`WatchKind::PersistentRecursive`].
    recursive: usize,
}

impl Watches {
    /// Registers `watcher`; a watcher lives under one (path, kind) only.
    pub(crate) fn add(&mut self, path: &str, kind: WatchKind, watcher: WatcherId) {
        self.remove(watcher);
        self.by_path.entry(path.to_owned()).or_default()[slot(kind)].push(watcher);
        self.by_id.insert(watcher, (path.to_owned(), kind));
        self.recursive += usize::from(kind == WatchKind::PersistentRecursive);
    }

    /// Unregisters `watcher`; returns whether it was registered.
    pub(crate) fn remove(&mut self, watcher: WatcherId) -> bool {
        let Some((path, kind)) = self.by_id.remove(&watcher) else {
            return false;
        };
        self.recursive -= usize::from(kind == WatchKind::PersistentRecursive);
        if let Some(slots) = self.by_path.get_mut(&path) {
            slots[slot(kind)].retain(|w| *w != watcher);
            if slots.iter().all(Vec::is_empty) {
                self.by_path.remove(&path);
            }
        }
        true
    }

    /// Number of local watchers.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The watchers a server notification fires, as docs/protocol.md §5.2 (Java's
    /// `ZKWatchManager.materialize`). One-shot watchers are removed; persistent ones stay.
    pub(crate) fn fire(&mut self, event_type: EventType, path: &str) -> Vec<WatcherId> {
        let mut fired = Vec::new();
        let one_shot: &[WatchKind] = match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                &[WatchKind::Data, WatchKind::Exist]
            }
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Exist, WatchKind::Child],
            EventType::NodeChildrenChanged => &[WatchKind::Child],
            _ => return fired,
        };
        if let Some(slots) = self.by_path.get_mut(path) {
            for &kind in one_shot {
                let taken = std::mem::take(&mut slots[slot(kind)]);
                for watcher in &taken {
                    self.by_id.remove(watcher);
                }
                fired.extend(taken);
            }
            fired.extend_from_slice(&slots[slot(WatchKind::Persistent)]);
            if slots.iter().all(Vec::is_empty) {
                self.by_path.remove(path);
            }
        }
        // A recursive watch never sees NodeChildrenChanged: the server sends one only because
        // a standard child watch exists somewhere below (Java filters it the same way).
        if event_type != EventType::NodeChildrenChanged && self.recursive > 0 {
            let mut at = Some(path);
            while let Some(p) = at {
                fired.extend(self.get(p, WatchKind::PersistentRecursive));
                at = path::parent(p);
            }
        }
        fired
    }

    /// Removes the watchers a successful removeWatches covers, with the event each gets.
    pub(crate) fn remove_matching(
        &mut self,
        path: &str,
        watcher_type: WatcherType,
    ) -> Vec<(WatcherId, EventType)> {
        let kinds: &[WatchKind] = match watcher_type {
            WatcherType::Children => &[WatchKind::Child],
            WatcherType::Data => &[WatchKind::Data, WatchKind::Exist],
            WatcherType::Persistent => &[WatchKind::Persistent],
            WatcherType::PersistentRecursive => &[WatchKind::PersistentRecursive],
            _ => &ALL_KINDS,
        };
        let mut removed = Vec::new();
        for &kind in kinds {
            let event = removal_event(kind);
            removed.extend(self.take(path, kind).into_iter().map(|w| (w, event)));
        }
        removed
    }

    /// Removes the one-shot watchers and returns them, with the persistent ones, which stay:
    /// as when a session is replaced by a new one.
    pub(crate) fn drain_one_shot(&mut self) -> (Vec<WatcherId>, Vec<WatcherId>) {
        let (mut ended, mut kept) = (Vec::new(), Vec::new());
        for (&id, (_, kind)) in &self.by_id {
            match kind {
                WatchKind::Persistent | WatchKind::PersistentRecursive => kept.push(id),
                _ => ended.push(id),
            }
        }
        for &id in &ended {
            self.remove(id);
        }
        ended.sort_unstable();
        kept.sort_unstable();
        (ended, kept)
    }

    /// Whether `watcher` is registered.
    pub(crate) fn contains(&self, watcher: WatcherId) -> bool {
        self.by_id.contains_key(&watcher)
    }

    /// Removes and returns every watcher, as when the session ends.
    pub(crate) fn drain(&mut self) -> Vec<WatcherId> {
        self.by_path.clear();
        self.recursive = 0;
        let mut all: Vec<WatcherId> = self.by_id.drain().map(|(id, _)| id).collect();
        all.sort_unstable();
        all
    }

    /// The frames that re-register every watch on a new connection, each carrying at most
    /// [`SET_WATCHES_MAX_PATH_BYTES`] of paths (a longer single path travels alone).
    ///
    /// Paths go in the order data, exist, child, persistent, recursive. A batch without
    /// persistent paths is a `SetWatches`, so servers older than 3.6 keep working.
    pub(crate) fn set_watches_batches(&self, relative_zxid: i64) -> Vec<SetWatchesBatch> {
        let mut batches = Vec::new();
        let mut current = SetWatches2 {
            relative_zxid,
            ..empty_set_watches2()
        };
        let mut bytes = 0;
        for kind in ALL_KINDS {
            for path in self.paths(kind) {
                if bytes > 0 && bytes + path.len() > SET_WATCHES_MAX_PATH_BYTES {
                    batches.push(SetWatchesBatch::from(std::mem::replace(
                        &mut current,
                        SetWatches2 {
                            relative_zxid,
                            ..empty_set_watches2()
                        },
                    )));
                    bytes = 0;
                }
                bytes += path.len();
                list_for(&mut current, kind).push(path.to_owned());
            }
        }
        if bytes > 0 {
            batches.push(SetWatchesBatch::from(current));
        }
        batches
    }

    fn paths(&self, kind: WatchKind) -> Vec<&str> {
        let mut paths: Vec<&str> = self
            .by_path
            .iter()
            .filter(|(_, slots)| !slots[slot(kind)].is_empty())
            .map(|(p, _)| p.as_str())
            .collect();
        paths.sort_unstable();
        paths
    }

    fn get(&self, path: &str, kind: WatchKind) -> Vec<WatcherId> {
        self.by_path
            .get(path)
            .map(|s| s[slot(kind)].clone())
            .unwrap_or_default()
    }

    fn take(&mut self, path: &str, kind: WatchKind) -> Vec<WatcherId> {
        let taken = self.get(path, kind);
        for w in &taken {
            self.remove(*w);
        }
        taken
    }
}

/// One SetWatches frame: `SetWatches` (101) when it has no persistent paths, else
/// `SetWatches2` (105).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetWatchesBatch {
    /// Only one-shot watches.
    V1(SetWatches),
    /// Some persistent or recursive watches.
    V2(SetWatches2),
}

impl From<SetWatches2> for SetWatchesBatch {
    fn from(w: SetWatches2) -> Self {
        if w.persistent_watches.is_empty() && w.persistent_recursive_watches.is_empty() {
            Self::V1(SetWatches {
                relative_zxid: w.relative_zxid,
                data_watches: w.data_watches,
                exist_watches: w.exist_watches,
                child_watches: w.child_watches,
            })
        } else {
            Self::V2(w)
        }
    }
}

const ALL_KINDS: [WatchKind; 5] = [
    WatchKind::Data,
    WatchKind::Exist,
    WatchKind::Child,
    WatchKind::Persistent,
    WatchKind::PersistentRecursive,
];

fn slot(kind: WatchKind) -> usize {
    match kind {
        WatchKind::Data => 0,
        WatchKind::Exist => 1,
        WatchKind::Child => 2,
        WatchKind::Persistent => 3,
        WatchKind::PersistentRecursive => 4,
    }
}

fn removal_event(kind: WatchKind) -> EventType {
    match kind {
        WatchKind::Data | WatchKind::Exist => EventType::DataWatchRemoved,
        WatchKind::Child => EventType::ChildWatchRemoved,
        WatchKind::Persistent | WatchKind::PersistentRecursive => EventType::PersistentWatchRemoved,
    }
}

fn empty_set_watches2() -> SetWatches2 {
    SetWatches2 {
        relative_zxid: 0,
        data_watches: Vec::new(),
        exist_watches: Vec::new(),
        child_watches: Vec::new(),
        persistent_watches: Vec::new(),
        persistent_recursive_watches: Vec::new(),
    }
}

fn list_for(w: &mut SetWatches2, kind: WatchKind) -> &mut Vec<String> {
    match kind {
        WatchKind::Data => &mut w.data_watches,
        WatchKind::Exist => &mut w.exist_watches,
        WatchKind::Child => &mut w.child_watches,
        WatchKind::Persistent => &mut w.persistent_watches,
        WatchKind::PersistentRecursive => &mut w.persistent_recursive_watches,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: WatcherId = WatcherId(1);
    const B: WatcherId = WatcherId(2);
    const C: WatcherId = WatcherId(3);
    const D: WatcherId = WatcherId(4);

    #[test]
    fn data_changed_fires_data_exist_persistent_and_recursive_ancestors() {
        let mut w = Watches::default();
        w.add("/a/b", WatchKind::Data, A);
        w.add("/a/b", WatchKind::Child, B);
        w.add("/a/b", WatchKind::Persistent, C);
        w.add("/a", WatchKind::PersistentRecursive, D);
        let mut fired = w.fire(EventType::NodeDataChanged, "/a/b");
        fired.sort();
        assert_eq!(fired, vec![A, C, D]);
        // One-shot A is gone, the persistent ones stay, the child watch is untouched.
        assert_eq!(w.len(), 3);
        let mut again = w.fire(EventType::NodeDataChanged, "/a/b");
        again.sort();
        assert_eq!(again, vec![C, D]);
    }

    #[test]
    fn deleted_fires_child_watches_too_and_children_changed_skips_recursive() {
        let mut w = Watches::default();
        w.add("/a", WatchKind::Child, A);
        w.add("/", WatchKind::PersistentRecursive, B);
        assert_eq!(w.fire(EventType::NodeChildrenChanged, "/a"), vec![A]);
        w.add("/a", WatchKind::Child, A);
        let mut fired = w.fire(EventType::NodeDeleted, "/a");
        fired.sort();
        assert_eq!(fired, vec![A, B]);
    }

    #[test]
    fn remove_watches_by_type() {
        let mut w = Watches::default();
        w.add("/a", WatchKind::Data, A);
        w.add("/a", WatchKind::Exist, B);
        w.add("/a", WatchKind::Child, C);
        let removed = w.remove_matching("/a", WatcherType::Data);
        assert_eq!(
            removed,
            vec![
                (A, EventType::DataWatchRemoved),
                (B, EventType::DataWatchRemoved)
            ]
        );
        assert_eq!(
            w.remove_matching("/a", WatcherType::Any),
            vec![(C, EventType::ChildWatchRemoved)]
        );
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn set_watches_batches_respect_the_path_byte_limit() {
        let mut w = Watches::default();
        let long = "x".repeat(1000);
        for i in 0..300u64 {
            w.add(&format!("/{long}{i:04}"), WatchKind::Data, WatcherId(i));
        }
        w.add("/p", WatchKind::PersistentRecursive, WatcherId(1000));
        let batches = w.set_watches_batches(7);
        assert!(batches.len() >= 3);
        let mut total = 0;
        for batch in &batches {
            let paths: Vec<&String> = match batch {
                SetWatchesBatch::V1(b) => b.data_watches.iter().chain(&b.exist_watches).collect(),
                SetWatchesBatch::V2(b) => b
                    .data_watches
                    .iter()
                    .chain(&b.persistent_recursive_watches)
                    .collect(),
            };
            let bytes: usize = paths.iter().map(|p| p.len()).sum();
            assert!(bytes <= SET_WATCHES_MAX_PATH_BYTES, "{bytes}");
            total += paths.len();
        }
        assert_eq!(total, 301);
        assert!(matches!(batches.last(), Some(SetWatchesBatch::V2(b)) if b.relative_zxid == 7));
        assert!(matches!(batches[0], SetWatchesBatch::V1(_)));
    }

    /// The rules of a notification, restated over a plain list of registrations.
    fn model_fire(
        model: &mut Vec<(WatcherId, &'static str, WatchKind)>,
        event_type: EventType,
        path: &str,
    ) -> Vec<WatcherId> {
        let one_shot: &[WatchKind] = match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                &[WatchKind::Data, WatchKind::Exist]
            }
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Exist, WatchKind::Child],
            _ => &[WatchKind::Child],
        };
        let at = |model: &[(WatcherId, &str, WatchKind)], p: &str, kind| -> Vec<WatcherId> {
            model
                .iter()
                .filter(|(_, q, k)| *q == p && *k == kind)
                .map(|(w, _, _)| *w)
                .collect()
        };
        let mut fired = Vec::new();
        for &kind in one_shot {
            fired.extend(at(model, path, kind));
            model.retain(|(_, q, k)| !(*q == path && *k == kind));
        }
        fired.extend(at(model, path, WatchKind::Persistent));
        if event_type != EventType::NodeChildrenChanged {
            let mut p = Some(path);
            while let Some(q) = p {
                fired.extend(at(model, q, WatchKind::PersistentRecursive));
                p = path::parent(q);
            }
        }
        fired
    }

    proptest::proptest! {
        /// Registrations, removals and notifications in any order fire what the rules say,
        /// in the same order, and leave the same registrations.
        #[test]
        fn fire_agrees_with_a_list_of_registrations(
            steps in proptest::collection::vec((0u8..4, 0usize..5, 0usize..5, 0u64..6), 1..60)
        ) {
            const PATHS: [&str; 5] = ["/", "/a", "/a/b", "/a/b/c", "/x"];
            const EVENTS: [EventType; 4] = [
                EventType::NodeCreated,
                EventType::NodeDeleted,
                EventType::NodeDataChanged,
                EventType::NodeChildrenChanged,
            ];
            let mut watches = Watches::default();
            let mut model: Vec<(WatcherId, &'static str, WatchKind)> = Vec::new();
            for (action, p, k, id) in steps {
                let (path, watcher) = (PATHS[p], WatcherId(id));
                match action {
                    0 | 1 => {
                        watches.add(path, ALL_KINDS[k], watcher);
                        model.retain(|(w, _, _)| *w != watcher);
                        model.push((watcher, path, ALL_KINDS[k]));
                    }
                    2 => {
                        let was = model.iter().any(|(w, _, _)| *w == watcher);
                        model.retain(|(w, _, _)| *w != watcher);
                        proptest::prop_assert_eq!(watches.remove(watcher), was);
                    }
                    _ => {
                        let event = EVENTS[k % EVENTS.len()];
                        let expected = model_fire(&mut model, event, path);
                        proptest::prop_assert_eq!(watches.fire(event, path), expected);
                    }
                }
                proptest::prop_assert_eq!(watches.len(), model.len());
            }
        }
    }
}
