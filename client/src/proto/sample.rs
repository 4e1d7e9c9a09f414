//! Sample values of the records the table of operations names: what the scripted hostile
//! server answers, what the session fuzz target submits, and what the round-trip tests and the
//! seed corpus start from.
//!
//! Each record's sample sits beside the record (a [`samples!`] row), so that adding an op is
//! its table row plus its records; [`visit_op`](super::ops::visit_op) will not compile until
//! every record of the table has one.

#[cfg(any(test, feature = "unstable"))]
use bytes::Bytes;

#[cfg(any(test, feature = "unstable"))]
use super::{visit_op, OpCode, OpVisitor, Operation, ReplyRecord, Stat};
#[cfg(any(test, feature = "unstable"))]
use crate::jute::Encode;

/// A well-formed value of a record, built without a server (the codec and the comparisons
/// come with [`ReplyRecord`]).
#[cfg(any(test, feature = "unstable"))]
pub trait Sample: ReplyRecord {
    /// Whether every encoding the decoder accepts is the one encoding of its value. False for
    /// a record with a lenient field: a boolean (any nonzero byte is true), a lossy UTF-8
    /// string (ACL ids, `whoAmI` identities), a multi header whose fields the decoder ignores.
    const CANONICAL: bool;

    /// A value about the node at server path `path`, as a healthy client or server sends it:
    /// a node's Stat is [`SAMPLE_STAT`], its data [`SAMPLE_DATA`], its children `["a"]`.
    fn sample(path: &str) -> Self;
}

/// The data of every sample node.
#[cfg(any(test, feature = "unstable"))]
pub const SAMPLE_DATA: &[u8] = b"healthy";

/// The Stat of every sample node: created and last changed in zxid 1, version 0.
#[cfg(any(test, feature = "unstable"))]
pub const SAMPLE_STAT: Stat = Stat {
    czxid: 1,
    mzxid: 1,
    ctime: 0,
    mtime: 0,
    version: 0,
    cversion: 0,
    aversion: 0,
    ephemeral_owner: 0,
    data_length: 0,
    num_children: 0,
    pzxid: 0,
};

/// The encoded sample of the request record the table of operations gives `op`, about server
/// path `path`; `None` for an op code not in the table.
#[cfg(any(test, feature = "unstable"))]
pub fn sample_request(op: OpCode, path: &str) -> Option<Bytes> {
    visit_op(op, Encoded { path, reply: false })
}

/// The encoded sample of the record a successful reply to `op` carries, about server path
/// `path`; `None` for an op code not in the table.
#[cfg(any(test, feature = "unstable"))]
pub fn sample_reply(op: OpCode, path: &str) -> Option<Bytes> {
    visit_op(op, Encoded { path, reply: true })
}

/// Encodes an operation's request sample, or its reply sample.
#[cfg(any(test, feature = "unstable"))]
struct Encoded<'a> {
    path: &'a str,
    reply: bool,
}

#[cfg(any(test, feature = "unstable"))]
impl OpVisitor for Encoded<'_> {
    type Output = Bytes;

    fn op<O: Operation<Request: Sample, Reply: Sample>>(self) -> Bytes {
        if self.reply {
            O::Reply::sample(self.path).to_bytes()
        } else {
            O::Request::sample(self.path).to_bytes()
        }
    }
}

/// Implements [`Sample`] (under the `unstable` feature and in tests):
/// `Record: canonical, |path| value;` per row.
macro_rules! samples {
    ($( $ty:ty: $canonical:literal, |$path:ident| $value:expr; )*) => {
        $(
            #[cfg(any(test, feature = "unstable"))]
            impl $crate::proto::Sample for $ty {
                const CANONICAL: bool = $canonical;

                fn sample($path: &str) -> Self {
                    $value
                }
            }
        )*
    };
}
pub(super) use samples;
