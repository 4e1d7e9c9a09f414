//! Watch records: notifications, SetWatches, addWatch, removeWatches, checkWatches.

use super::sample::samples;
use super::{AddWatchMode, ErrorCode, EventType, KeeperState, WatcherType};
use crate::jute::record;

record! {
    /// The body of a notification (xid -1).
    ///
    /// `class WatcherEvent { int type; int state; ustring path; }`
    pub struct WatcherEvent as "WatcherEvent" {
        /// What happened.
        pub event_type: EventType,
        /// Always `SyncConnected` from a server.
        pub state: KeeperState,
        /// Server path of the node.
        pub path: String,
    }
}

record! {
    /// `setWatches` (101): re-arms one-shot watches after a reconnect.
    ///
    /// `class SetWatches { long relativeZxid; vector<ustring> dataWatches;
    /// vector<ustring> existWatches; vector<ustring> childWatches; }`
    pub struct SetWatches as "SetWatches" {
        /// The last zxid the client saw; changes after it fire at once.
        pub relative_zxid: i64,
        /// Server paths with data watches.
        pub data_watches: Vec<String>,
        /// Server paths with exist watches.
        pub exist_watches: Vec<String>,
        /// Server paths with child watches.
        pub child_watches: Vec<String>,
    }
}

record! {
    /// `setWatches2` (105, 3.6+): `SetWatches` plus persistent and recursive watches.
    pub struct SetWatches2 as "SetWatches2" {
        /// The last zxid the client saw.
        pub relative_zxid: i64,
        /// Server paths with data watches.
        pub data_watches: Vec<String>,
        /// Server paths with exist watches.
        pub exist_watches: Vec<String>,
        /// Server paths with child watches.
        pub child_watches: Vec<String>,
        /// Server paths with persistent watches.
        pub persistent_watches: Vec<String>,
        /// Server paths with persistent recursive watches.
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    /// `addWatch` (106, 3.6+): `class AddWatchRequest { ustring path; int mode; }`
    pub struct AddWatchRequest as "AddWatchRequest" {
        /// Server path (the node need not exist).
        pub path: String,
        /// Persistent or persistent recursive.
        pub mode: AddWatchMode,
    }
}

record! {
    /// `removeWatches` (18): `class RemoveWatchesRequest { ustring path; int type; }`
    pub struct RemoveWatchesRequest as "RemoveWatchesRequest" {
        /// Server path.
        pub path: String,
        /// Which watches.
        pub watcher_type: WatcherType,
    }
}

record! {
    /// `checkWatches` (17): `class CheckWatchesRequest { ustring path; int type; }`
    pub struct CheckWatchesRequest as "CheckWatchesRequest" {
        /// Server path.
        pub path: String,
        /// Which watches.
        pub watcher_type: WatcherType,
    }
}

record! {
    /// The reply body of `addWatch`, and of a multi error result:
    /// `class ErrorResponse { int err; }`
    pub struct ErrorResponse as "ErrorResponse" {
        /// The error code (0 for addWatch).
        pub err: ErrorCode,
    }
}

samples! {
    SetWatches: true, |path| Self {
        relative_zxid: 1,
        data_watches: vec![path.to_owned()],
        exist_watches: Vec::new(),
        child_watches: Vec::new(),
    };
    SetWatches2: true, |path| Self {
        relative_zxid: 1,
        data_watches: vec![path.to_owned()],
        exist_watches: Vec::new(),
        child_watches: Vec::new(),
        persistent_watches: Vec::new(),
        persistent_recursive_watches: Vec::new(),
    };
    AddWatchRequest: true, |path| Self {
        path: path.to_owned(),
        mode: AddWatchMode::PersistentRecursive,
    };
    RemoveWatchesRequest: true, |path| Self {
        path: path.to_owned(),
        watcher_type: WatcherType::Any,
    };
    CheckWatchesRequest: true, |path| Self {
        path: path.to_owned(),
        watcher_type: WatcherType::Any,
    };
    ErrorResponse: true, |_path| Self { err: ErrorCode::Ok };
}
