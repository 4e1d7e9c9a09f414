//! The table of operations: for each op code the client sends, its request record and the
//! record a successful reply carries.
//!
//! The table is written once, in the `operations!` invocation below, and everything that
//! depends on which record goes with which op code reads it:
//! - [`Operation`], implemented by one marker type per op code in [`op`], gives typed calls
//!   (`Client` encodes `O::Request` under `O::OP` and decodes `O::Reply`);
//! - [`visit_reply`] hands a reply record's type to a [`ReplyVisitor`], so the session's
//!   reply check and the fuzz oracles check the same record for the same op code;
//! - [`MultiOp`](super::MultiOp) holds, for each op allowed inside a multi, the request
//!   record the table gives that op code;
//! - [`OPERATIONS`] lists the op codes in table order;
//! - `visit_op` (tests and the `unstable` feature) hands a [`Operation`] whose records have
//!   [`Sample`](super::Sample)s to an `OpVisitor`: the hostile server's healthy replies, the
//!   session fuzz target's requests, the round-trip samples and the fuzz seeds come from it.
//!
//! The replies are the ones ZooKeeper's `FinalRequestProcessor` builds (servers 3.8 and 3.9).
//! A reply whose header carries an error has no record, whatever the op.

use std::fmt::Debug;

use bytes::BytesMut;

#[cfg(any(test, feature = "unstable"))]
use super::Sample;
use super::{
    AddWatchRequest, AuthPacket, CheckVersionRequest, CheckWatchesRequest, Create2Response,
    CreateRequest, CreateResponse, CreateTtlRequest, DeleteRequest, ErrorResponse, ExistsRequest,
    ExistsResponse, GetAclRequest, GetAclResponse, GetAllChildrenNumberRequest,
    GetAllChildrenNumberResponse, GetChildren2Request, GetChildren2Response, GetChildrenRequest,
    GetChildrenResponse, GetDataRequest, GetDataResponse, GetEphemeralsRequest,
    GetEphemeralsResponse, MultiRequest, MultiResponse, OpCode, ReconfigRequest,
    RemoveWatchesRequest, SaslToken, SetAclRequest, SetAclResponse, SetDataRequest,
    SetDataResponse, SetWatches, SetWatches2, SyncRequest, SyncResponse, WhoAmIResponse,
};
use crate::jute::{Decode, DecodeError, Encode, Reader};

/// One operation of the protocol: the op code of its request header, the record after that
/// header, and the record after the header of a successful reply.
///
/// Implemented by the marker types in [`op`], one per row of the table.
pub trait Operation {
    /// The op code of the request header.
    const OP: OpCode;
    /// The record that follows the request header (`()` when there is none).
    type Request: Encode;
    /// The record that follows the header of a reply whose `err` is `Ok` (`()` when there is
    /// none).
    type Reply: ReplyRecord;
}

/// What every reply record provides: the codec, and what tests and oracles compare.
pub trait ReplyRecord: Decode + Encode + Debug + PartialEq + 'static {}

impl<T: Decode + Encode + Debug + PartialEq + 'static> ReplyRecord for T {}

/// Something to do with the reply record of an op code, whose type [`visit_reply`] picks.
pub trait ReplyVisitor {
    /// What the visit returns.
    type Output;

    /// Called with the record a successful reply carries: the table's reply record for the
    /// op codes it lists, `()` for the named op codes a client never sends (notification,
    /// deleteContainer, createSession, error).
    fn record<T: ReplyRecord>(self) -> Self::Output;

    /// Called for an op code this client does not know ([`OpCode::Unknown`]), whose reply it
    /// cannot check.
    fn unknown(self) -> Self::Output;
}

/// Something to do with an operation of the table, whose marker type [`visit_op`] picks.
#[cfg(any(test, feature = "unstable"))]
pub trait OpVisitor {
    /// What the visit returns.
    type Output;

    /// Called with the operation's marker type; its request and reply records have samples.
    fn op<O: Operation<Request: Sample, Reply: Sample>>(self) -> Self::Output;
}

/// Writes the table: the marker types, their [`Operation`] impls, [`OPERATIONS`],
/// [`visit_reply`] and `visit_op`.
macro_rules! operations {
    ($( $(#[$doc:meta])* $op:ident: $request:ty => $reply:ty; )*) => {
        /// Marker types naming the operations, one per op code of the table; see
        /// [`Operation`].
        pub mod op {
            $(
                $(#[$doc])*
                #[derive(Debug)]
                // Only `visit_op` (tests, `unstable`) names the session's own ops (ping,
                // auth, setWatches...): the client sends them without their marker.
                #[cfg_attr(not(any(test, feature = "unstable")), allow(dead_code))]
                pub enum $op {}
            )*
        }

        $(
            impl Operation for op::$op {
                const OP: OpCode = OpCode::$op;
                type Request = $request;
                type Reply = $reply;
            }
        )*

        /// Every op code of the table, in table order (which fuzz inputs rely on: append
        /// new rows at the end).
        #[cfg(any(test, feature = "unstable"))]
        pub const OPERATIONS: &[OpCode] = &[$(OpCode::$op),*];

        /// Calls `visitor` with the record a successful reply to `op` carries.
        pub fn visit_reply<V: ReplyVisitor>(op: OpCode, visitor: V) -> V::Output {
            match op {
                $( OpCode::$op => visitor.record::<$reply>(), )*
                OpCode::Unknown(_) => visitor.unknown(),
                _ => visitor.record::<()>(),
            }
        }

        /// Calls `visitor` with the operation of `op`; `None` for an op code not in the
        /// table.
        #[cfg(any(test, feature = "unstable"))]
        pub fn visit_op<V: OpVisitor>(op: OpCode, visitor: V) -> Option<V::Output> {
            match op {
                $( OpCode::$op => Some(visitor.op::<op::$op>()), )*
                _ => None,
            }
        }
    };
}

operations! {
    /// `create` (1): alone, the client sends `create2` instead (for the Stat); inside a
    /// multi, where every server accepts it.
    Create: CreateRequest => CreateResponse;
    /// `create2` (15): a create whose reply has the new node's Stat.
    Create2: CreateRequest => Create2Response;
    /// `createContainer` (19).
    CreateContainer: CreateRequest => Create2Response;
    /// `createTTL` (21).
    CreateTtl: CreateTtlRequest => Create2Response;
    /// `delete` (2).
    Delete: DeleteRequest => ();
    /// `exists` (3).
    Exists: ExistsRequest => ExistsResponse;
    /// `getData` (4).
    GetData: GetDataRequest => GetDataResponse;
    /// `setData` (5).
    SetData: SetDataRequest => SetDataResponse;
    /// `getACL` (6).
    GetAcl: GetAclRequest => GetAclResponse;
    /// `setACL` (7).
    SetAcl: SetAclRequest => SetAclResponse;
    /// `getChildren` (8).
    GetChildren: GetChildrenRequest => GetChildrenResponse;
    /// `getChildren2` (12): children with the parent's Stat.
    GetChildren2: GetChildren2Request => GetChildren2Response;
    /// `sync` (9).
    Sync: SyncRequest => SyncResponse;
    /// `check` (13), a version check: send it inside a multi only. There a passed check has
    /// no result record and a failed one an `ErrorResponse`, as any failed op. Alone, a
    /// failed check is answered with its error code; for a passed one the server builds a
    /// `SetDataResponse` with no Stat and fails to serialize it: the NIO connection factory
    /// sends no reply at all, and under Netty the server shuts down.
    Check: CheckVersionRequest => SetDataResponse;
    /// `multi` (14): a transaction.
    Multi: MultiRequest => MultiResponse;
    /// `multiRead` (22): independent reads in one round trip.
    MultiRead: MultiRequest => MultiResponse;
    /// `reconfig` (16): the reply holds the new configuration as data.
    Reconfig: ReconfigRequest => GetDataResponse;
    /// `checkWatches` (17).
    CheckWatches: CheckWatchesRequest => ();
    /// `removeWatches` (18).
    RemoveWatches: RemoveWatchesRequest => ();
    /// `addWatch` (106): the reply record holds error code 0.
    AddWatch: AddWatchRequest => ErrorResponse;
    /// `getEphemerals` (103).
    GetEphemerals: GetEphemeralsRequest => GetEphemeralsResponse;
    /// `getAllChildrenNumber` (104).
    GetAllChildrenNumber: GetAllChildrenNumberRequest => GetAllChildrenNumberResponse;
    /// `whoAmI` (107).
    WhoAmI: () => WhoAmIResponse;
    /// `auth` (100), sent with xid -4.
    Auth: AuthPacket => ();
    /// `setWatches` (101).
    SetWatches: SetWatches => ();
    /// `setWatches2` (105).
    SetWatches2: SetWatches2 => ();
    /// `ping` (11), sent with xid -2.
    Ping: () => ();
    /// `closeSession` (-11).
    CloseSession: () => ();
    /// `sasl` (102): one step of a SASL exchange, before any other request.
    Sasl: SaslToken => SaslToken;
}

/// The record of a request or reply that has none: it encodes to no bytes and decodes from
/// none. Its `NAME` is empty, so a decode error is not attributed to a record.
impl Encode for () {
    fn encode(&self, _buf: &mut BytesMut) {}

    fn encoded_len(&self) -> usize {
        0
    }
}

impl Decode for () {
    const NAME: &'static str = "";
    const MIN_LEN: usize = 0;

    fn decode(_r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(())
    }

    fn skip(_r: &mut Reader<'_>) -> Result<(), DecodeError> {
        Ok(())
    }
}

#[cfg(any(test, feature = "unstable"))]
impl Sample for () {
    const CANONICAL: bool = true;

    fn sample(_path: &str) -> Self {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name of the reply record `visit_reply` picks, `None` for an unknown op.
    struct Name;

    impl ReplyVisitor for Name {
        type Output = Option<&'static str>;

        fn record<T: ReplyRecord>(self) -> Self::Output {
            Some(std::any::type_name::<T>())
        }

        fn unknown(self) -> Self::Output {
            None
        }
    }

    #[test]
    fn the_visitor_sees_the_tables_reply_record() {
        let name = |op| visit_reply(op, Name).map(|n| n.rsplit("::").next().unwrap_or(n));
        assert_eq!(name(OpCode::Create2), Some("Create2Response"));
        assert_eq!(name(OpCode::Check), Some("SetDataResponse"));
        assert_eq!(name(OpCode::Delete), Some("()"));
        assert_eq!(name(OpCode::Sasl), Some("SaslToken"));
        assert_eq!(name(OpCode::CreateSession), Some("()"));
        assert_eq!(name(OpCode::Unknown(999)), None);
    }

    #[test]
    fn every_row_has_its_own_op_code() {
        let mut codes: Vec<i32> = OPERATIONS.iter().map(|op| op.as_i32()).collect();
        assert!(!codes
            .iter()
            .any(|&c| OpCode::from_i32(c) == OpCode::Unknown(c)));
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), OPERATIONS.len());
        assert_eq!(<op::WhoAmI as Operation>::OP, OpCode::WhoAmI);
    }
}
