//! Every record of the ZooKeeper client protocol (servers 3.8 and 3.9).
//!
//! The specification is ZooKeeper's `zookeeper.jute`; each record here quotes its jute class
//! and keeps the fields in wire order. Frames after the handshake are a [`RequestHeader`] or
//! [`ReplyHeader`] followed by the record the op code selects (none when a reply's `err` is not
//! [`ErrorCode::Ok`]); the handshake frames are a bare [`ConnectRequest`] and
//! [`ConnectResponse`]. Which records go with which op code is written once, in the table of
//! [`ops`].

mod acl;
mod auth;
mod children;
mod codes;
mod connect;
mod data;
#[cfg(any(test, feature = "unstable"))]
pub mod frames;
mod header;
mod multi;
pub mod ops;
mod sample;
mod stat;
mod watch;

pub use acl::{Acl, Acls, Id, Perms};
pub use auth::{AuthPacket, ClientInfo, SaslToken, WhoAmIResponse};
pub use children::{Children, Iter as ChildrenIter};
pub use codes::{AddWatchMode, CreateMode, ErrorCode, EventType, KeeperState, OpCode, WatcherType};
pub use connect::{ConnectRequest, ConnectResponse, NEW_SESSION_PASSWD};
// Every record of `data` (the node operations), so that a new op's records need no line here.
pub use data::*;
pub use header::{ReplyHeader, RequestHeader, AUTH_XID, NOTIFICATION_XID, PING_XID};
// The harness's part of this layer (items the client itself never uses) is compiled only for
// the tests and with `unstable`, so that dead code in the rest shows.
#[cfg(any(test, feature = "unstable"))]
pub use header::SET_WATCHES_XID;
#[cfg(any(test, feature = "unstable"))]
pub use multi::MultiHeader;
pub use multi::{MultiOp, MultiRequest, MultiResponse, MultiResult};
pub use ops::{op, visit_reply, Operation, ReplyRecord, ReplyVisitor};
#[cfg(any(test, feature = "unstable"))]
pub use ops::{visit_op, OpVisitor, OPERATIONS};
#[cfg(any(test, feature = "unstable"))]
pub use sample::{sample_reply, sample_request, Sample, SAMPLE_DATA, SAMPLE_STAT};
pub use stat::Stat;
pub use watch::{
    AddWatchRequest, CheckWatchesRequest, ErrorResponse, RemoveWatchesRequest, SetWatches,
    SetWatches2, WatcherEvent,
};
