//! Node operations: create, delete, exists, data, ACLs, children, sync, check, reconfig.
//!
//! Each record mirrors the jute class of the same name; the field list is the wire order.

use bytes::Bytes;

use super::sample::samples;
use super::{Acl, Acls, CreateMode, Stat};
#[cfg(any(test, feature = "unstable"))]
use super::{SAMPLE_DATA, SAMPLE_STAT};
use crate::jute::record;

record! {
    /// `create` (1), `create2` (15) and `createContainer` (19).
    ///
    /// `class CreateRequest { ustring path; buffer data; vector<ACL> acl; int flags; }`
    pub struct CreateRequest as "CreateRequest" {
        /// Server path of the node (a sequential path may end with `/`).
        pub path: String,
        /// Initial data; `None` is stored as null.
        pub data: Option<Bytes>,
        /// The node's ACL (must not be empty).
        pub acl: Acls,
        /// The create mode.
        pub mode: CreateMode,
    }
}

record! {
    /// `createTTL` (21).
    ///
    /// ```text
    /// class CreateTTLRequest { ustring path; buffer data; vector<ACL> acl; int flags; long ttl; }
    /// ```
    pub struct CreateTtlRequest as "CreateTTLRequest" {
        /// Server path of the node.
        pub path: String,
        /// Initial data.
        pub data: Option<Bytes>,
        /// The node's ACL.
        pub acl: Acls,
        /// A TTL create mode.
        pub mode: CreateMode,
        /// TTL in ms, `1..=0xFF_FFFF_FFFF`.
        pub ttl: i64,
    }
}

record! {
    /// Reply to `create` (1): `class CreateResponse { ustring path; }`
    pub struct CreateResponse as "CreateResponse" {
        /// Server path of the created node (with the sequence number, if any).
        pub path: String,
    }
}

record! {
    /// Reply to `create2`, `createContainer` and `createTTL`:
    /// `class Create2Response { ustring path; Stat stat; }`
    pub struct Create2Response as "Create2Response" {
        /// Server path of the created node.
        pub path: String,
        /// The new node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `delete` (2): `class DeleteRequest { ustring path; int version; }`
    pub struct DeleteRequest as "DeleteRequest" {
        /// Server path.
        pub path: String,
        /// Expected data version, -1 for any.
        pub version: i32,
    }
}

record! {
    /// `exists` (3): `class ExistsRequest { ustring path; boolean watch; }`
    pub struct ExistsRequest as "ExistsRequest" {
        /// Server path.
        pub path: String,
        /// Whether to leave a data (or exist) watch.
        pub watch: bool,
    }
}

record! {
    /// Reply to `exists`: `class ExistsResponse { Stat stat; }`
    pub struct ExistsResponse as "ExistsResponse" {
        /// The node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `getData` (4): `class GetDataRequest { ustring path; boolean watch; }`
    pub struct GetDataRequest as "GetDataRequest" {
        /// Server path.
        pub path: String,
        /// Whether to leave a data watch.
        pub watch: bool,
    }
}

record! {
    /// Reply to `getData` and `reconfig`: `class GetDataResponse { buffer data; Stat stat; }`
    pub struct GetDataResponse as "GetDataResponse" {
        /// The data; `None` for a node created with null data.
        pub data: Option<Bytes>,
        /// The node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `setData` (5): `class SetDataRequest { ustring path; buffer data; int version; }`
    pub struct SetDataRequest as "SetDataRequest" {
        /// Server path.
        pub path: String,
        /// The new data.
        pub data: Option<Bytes>,
        /// Expected data version, -1 for any.
        pub version: i32,
    }
}

record! {
    /// Reply to `setData`: `class SetDataResponse { Stat stat; }`
    pub struct SetDataResponse as "SetDataResponse" {
        /// The node's new Stat.
        pub stat: Stat,
    }
}

record! {
    /// `getACL` (6): `class GetACLRequest { ustring path; }`
    pub struct GetAclRequest as "GetACLRequest" {
        /// Server path.
        pub path: String,
    }
}

record! {
    /// Reply to `getACL`: `class GetACLResponse { vector<ACL> acl; Stat stat; }`
    pub struct GetAclResponse as "GetACLResponse" {
        /// The node's ACL.
        pub acl: Vec<Acl>,
        /// The node's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `setACL` (7): `class SetACLRequest { ustring path; vector<ACL> acl; int version; }`
    pub struct SetAclRequest as "SetACLRequest" {
        /// Server path.
        pub path: String,
        /// The new ACL.
        pub acl: Vec<Acl>,
        /// Expected ACL version (aversion), -1 for any.
        pub version: i32,
    }
}

record! {
    /// Reply to `setACL`: `class SetACLResponse { Stat stat; }`
    pub struct SetAclResponse as "SetACLResponse" {
        /// The node's new Stat.
        pub stat: Stat,
    }
}

record! {
    /// `getChildren` (8): `class GetChildrenRequest { ustring path; boolean watch; }`
    pub struct GetChildrenRequest as "GetChildrenRequest" {
        /// Server path.
        pub path: String,
        /// Whether to leave a child watch.
        pub watch: bool,
    }
}

record! {
    /// Reply to `getChildren`: `class GetChildrenResponse { vector<ustring> children; }`
    pub struct GetChildrenResponse as "GetChildrenResponse" {
        /// Child names, in no defined order.
        pub children: Vec<String>,
    }
}

record! {
    /// `getChildren2` (12): `class GetChildren2Request { ustring path; boolean watch; }`
    pub struct GetChildren2Request as "GetChildren2Request" {
        /// Server path.
        pub path: String,
        /// Whether to leave a child watch.
        pub watch: bool,
    }
}

record! {
    /// Reply to `getChildren2`:
    /// `class GetChildren2Response { vector<ustring> children; Stat stat; }`
    pub struct GetChildren2Response as "GetChildren2Response" {
        /// Child names, in no defined order.
        pub children: Vec<String>,
        /// The parent's Stat.
        pub stat: Stat,
    }
}

record! {
    /// `getAllChildrenNumber` (104): `class GetAllChildrenNumberRequest { ustring path; }`
    pub struct GetAllChildrenNumberRequest as "GetAllChildrenNumberRequest" {
        /// Server path.
        pub path: String,
    }
}

record! {
    /// Reply to `getAllChildrenNumber`:
    /// `class GetAllChildrenNumberResponse { int totalNumber; }`
    pub struct GetAllChildrenNumberResponse as "GetAllChildrenNumberResponse" {
        /// The number of descendants.
        pub total_number: i32,
    }
}

record! {
    /// `getEphemerals` (103): `class GetEphemeralsRequest { ustring prefixPath; }`
    pub struct GetEphemeralsRequest as "GetEphemeralsRequest" {
        /// Server path prefix (a plain string prefix, not a subtree).
        pub prefix_path: String,
    }
}

record! {
    /// Reply to `getEphemerals`: `class GetEphemeralsResponse { vector<ustring> ephemerals; }`
    pub struct GetEphemeralsResponse as "GetEphemeralsResponse" {
        /// Server paths of the session's ephemeral nodes.
        pub ephemerals: Vec<String>,
    }
}

record! {
    /// `sync` (9): `class SyncRequest { ustring path; }`
    pub struct SyncRequest as "SyncRequest" {
        /// Server path.
        pub path: String,
    }
}

record! {
    /// Reply to `sync`: `class SyncResponse { ustring path; }`
    pub struct SyncResponse as "SyncResponse" {
        /// Server path.
        pub path: String,
    }
}

record! {
    /// `check` (13, inside multi): `class CheckVersionRequest { ustring path; int version; }`
    pub struct CheckVersionRequest as "CheckVersionRequest" {
        /// Server path.
        pub path: String,
        /// Expected data version.
        pub version: i32,
    }
}

record! {
    /// `reconfig` (16):
    /// `class ReconfigRequest { ustring joiningServers; ustring leavingServers;
    /// ustring newMembers; long curConfigId; }`
    pub struct ReconfigRequest as "ReconfigRequest" {
        /// Servers to add (incremental), or `None`.
        pub joining_servers: Option<String>,
        /// Server ids to remove (incremental), or `None`.
        pub leaving_servers: Option<String>,
        /// The whole new membership (non-incremental), or `None`.
        pub new_members: Option<String>,
        /// Expected current config version, -1 for any.
        pub cur_config_id: i64,
    }
}

samples! {
    CreateRequest: false, |path| Self {
        path: path.to_owned(),
        data: Some(Bytes::from_static(SAMPLE_DATA)),
        acl: Acl::open_unsafe().into(),
        mode: CreateMode::Persistent,
    };
    CreateTtlRequest: false, |path| Self {
        path: path.to_owned(),
        data: Some(Bytes::from_static(SAMPLE_DATA)),
        acl: Acl::open_unsafe().into(),
        mode: CreateMode::PersistentWithTtl,
        ttl: 60_000,
    };
    CreateResponse: true, |path| Self { path: path.to_owned() };
    Create2Response: true, |path| Self { path: path.to_owned(), stat: SAMPLE_STAT };
    DeleteRequest: true, |path| Self { path: path.to_owned(), version: -1 };
    ExistsRequest: false, |path| Self { path: path.to_owned(), watch: false };
    ExistsResponse: true, |_path| Self { stat: SAMPLE_STAT };
    GetDataRequest: false, |path| Self { path: path.to_owned(), watch: false };
    GetDataResponse: true, |_path| Self {
        data: Some(Bytes::from_static(SAMPLE_DATA)),
        stat: SAMPLE_STAT,
    };
    SetDataRequest: true, |path| Self {
        path: path.to_owned(),
        data: Some(Bytes::from_static(SAMPLE_DATA)),
        version: -1,
    };
    SetDataResponse: true, |_path| Self { stat: SAMPLE_STAT };
    GetAclRequest: true, |path| Self { path: path.to_owned() };
    GetAclResponse: false, |_path| Self { acl: Acl::open_unsafe(), stat: SAMPLE_STAT };
    SetAclRequest: false, |path| Self {
        path: path.to_owned(),
        acl: Acl::open_unsafe(),
        version: -1,
    };
    SetAclResponse: true, |_path| Self { stat: SAMPLE_STAT };
    GetChildrenRequest: false, |path| Self { path: path.to_owned(), watch: false };
    GetChildrenResponse: true, |_path| Self { children: vec!["a".to_owned()] };
    GetChildren2Request: false, |path| Self { path: path.to_owned(), watch: false };
    GetChildren2Response: true, |_path| Self {
        children: vec!["a".to_owned()],
        stat: SAMPLE_STAT,
    };
    GetAllChildrenNumberRequest: true, |path| Self { path: path.to_owned() };
    GetAllChildrenNumberResponse: true, |_path| Self { total_number: 1 };
    GetEphemeralsRequest: true, |path| Self { prefix_path: path.to_owned() };
    GetEphemeralsResponse: true, |path| Self { ephemerals: vec![path.to_owned()] };
    SyncRequest: true, |path| Self { path: path.to_owned() };
    SyncResponse: true, |path| Self { path: path.to_owned() };
    CheckVersionRequest: true, |path| Self { path: path.to_owned(), version: 0 };
    ReconfigRequest: true, |_path| Self {
        joining_servers: Some("server.4=127.0.0.1:2891:3891;2184".to_owned()),
        leaving_servers: None,
        new_members: None,
        cur_config_id: -1,
    };
}
