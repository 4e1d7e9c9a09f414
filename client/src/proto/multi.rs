//! `multi` (14) and `multiRead` (22): op lists and per-op results.
//!
//! Request, per op: `MultiHeader{type=op, done=false, err=-1}` + the op's request record; the
//! list ends with `MultiHeader{type=-1, done=true, err=-1}`. Reply, per result:
//! `MultiHeader{type, done=false, err}` + the result body, ending the same way. A failed
//! transaction still has header `err = 0`: the failure is inside, the ops before it as
//! `Error(Ok)`, the failing one with its code, those after it as `RuntimeInconsistency`.

use bytes::BytesMut;

use super::sample::samples;
#[cfg(any(test, feature = "unstable"))]
use super::CheckVersionRequest;
use super::{op, ErrorCode, ErrorResponse, OpCode, Operation};
use crate::jute::{record, Decode, DecodeError, DecodeErrorKind, Encode, Reader};

record! {
    /// Precedes each op or result: `class MultiHeader { int type; boolean done; int err; }`
    pub struct MultiHeader as "MultiHeader" {
        /// The op code (`Error` for an error result or the terminator).
        pub op: OpCode,
        /// True only on the terminator.
        pub done: bool,
        /// -1 in requests; the error code in results (0 for success).
        pub err: ErrorCode,
    }
}

impl MultiHeader {
    const TERMINATOR: Self = Self {
        op: OpCode::Error,
        done: true,
        err: ErrorCode::SystemError,
    };

    const fn op(op: OpCode) -> Self {
        Self {
            op,
            done: false,
            err: ErrorCode::SystemError,
        }
    }
}

/// Implements [`Encode`] and [`Decode`] for the body of a multi request or reply: each item
/// (`header`, `body_len`, `encode_body`, `decode_body`, `skip_body`) after its header, then
/// the terminator.
macro_rules! multi_list {
    ($list:ident { $items:ident: $item:ident } as $jute:literal) => {
        impl Encode for $list {
            fn encode(&self, buf: &mut BytesMut) {
                for item in &self.$items {
                    item.header().encode(buf);
                    item.encode_body(buf);
                }
                MultiHeader::TERMINATOR.encode(buf);
            }

            fn encoded_len(&self) -> usize {
                self.$items
                    .iter()
                    .map(|item| HEADER_LEN + item.body_len())
                    .sum::<usize>()
                    + HEADER_LEN
            }
        }

        impl Decode for $list {
            const NAME: &'static str = $jute;
            const MIN_LEN: usize = HEADER_LEN;

            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                let mut $items = Vec::new();
                loop {
                    let header = r.read::<MultiHeader>()?;
                    if header.done {
                        return Ok(Self { $items });
                    }
                    $items.push($item::decode_body(header.op, r)?);
                }
            }

            fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
                loop {
                    let header = r.read::<MultiHeader>()?;
                    if header.done {
                        return Ok(());
                    }
                    $item::skip_body(header.op, r)?;
                }
            }
        }
    };
}

/// Defines [`MultiOp`]: one variant per op code allowed inside a multi, holding the request
/// record the table of operations gives that op code.
macro_rules! multi_ops {
    ($( $(#[$doc:meta])* $op:ident, )*) => {
        /// One operation of a `multi` or `multiRead` request.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum MultiOp {
            $( $(#[$doc])* $op(<op::$op as Operation>::Request), )*
        }

        impl MultiOp {
            /// The op code this op is sent with.
            pub fn op_code(&self) -> OpCode {
                match self {
                    $( Self::$op(_) => OpCode::$op, )*
                }
            }

            /// The server path the op acts on.
            #[cfg(any(test, feature = "unstable"))]
            pub fn path(&self) -> &str {
                match self {
                    $( Self::$op(r) => &r.path, )*
                }
            }

            fn header(&self) -> MultiHeader {
                MultiHeader::op(self.op_code())
            }

            fn body_len(&self) -> usize {
                match self {
                    $( Self::$op(r) => r.encoded_len(), )*
                }
            }

            fn encode_body(&self, buf: &mut BytesMut) {
                match self {
                    $( Self::$op(r) => r.encode(buf), )*
                }
            }

            fn decode_body(code: OpCode, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                match code {
                    $( OpCode::$op => Ok(Self::$op(r.read()?)), )*
                    other => Err(unknown_op(other)),
                }
            }

            fn skip_body(code: OpCode, r: &mut Reader<'_>) -> Result<(), DecodeError> {
                match code {
                    $( OpCode::$op => r.skip::<<op::$op as Operation>::Request>(), )*
                    other => Err(unknown_op(other)),
                }
            }
        }
    };
}

multi_ops! {
    /// `create` (1).
    Create,
    /// `create2` (15).
    Create2,
    /// `createContainer` (19).
    CreateContainer,
    /// `createTTL` (21).
    CreateTtl,
    /// `delete` (2).
    Delete,
    /// `setData` (5).
    SetData,
    /// `check` (13).
    Check,
    /// `getChildren` (8), multiRead only.
    GetChildren,
    /// `getData` (4), multiRead only.
    GetData,
}

impl MultiOp {
    /// Whether the op is a read (allowed in multiRead only).
    #[cfg(any(test, feature = "unstable"))]
    pub fn is_read(&self) -> bool {
        matches!(self, Self::GetChildren(_) | Self::GetData(_))
    }
}

/// The body of a `multi` or `multiRead` request (`MultiOperationRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiRequest {
    /// The ops, in order.
    pub ops: Vec<MultiOp>,
}

multi_list!(MultiRequest { ops: MultiOp } as "MultiOperationRecord");

/// Defines [`MultiResult`]: one variant per op code a successful multi result may carry,
/// holding the reply record the table of operations gives that op code, or none.
macro_rules! multi_results {
    (
        with_record { $( $(#[$doc:meta])* $op:ident, )* }
        without_record { $( $(#[$empty_doc:meta])* $empty:ident, )* }
    ) => {
        /// The outcome of one op in a [`MultiResponse`].
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum MultiResult {
            $( $(#[$doc])* $op(<op::$op as Operation>::Reply), )*
            $( $(#[$empty_doc])* $empty, )*
            /// The op failed with this code, or was rolled back (`Ok` before the failing op,
            /// `RuntimeInconsistency` after it).
            Error(ErrorCode),
        }

        impl MultiResult {
            fn header(&self) -> MultiHeader {
                let (op, err) = match self {
                    $( Self::$op(_) => (OpCode::$op, ErrorCode::Ok), )*
                    $( Self::$empty => (OpCode::$empty, ErrorCode::Ok), )*
                    Self::Error(err) => (OpCode::Error, *err),
                };
                MultiHeader {
                    op,
                    done: false,
                    err,
                }
            }

            fn body_len(&self) -> usize {
                match self {
                    $( Self::$op(r) => r.encoded_len(), )*
                    $( Self::$empty => 0, )*
                    Self::Error(err) => ErrorResponse { err: *err }.encoded_len(),
                }
            }

            fn encode_body(&self, buf: &mut BytesMut) {
                match self {
                    $( Self::$op(r) => r.encode(buf), )*
                    $( Self::$empty => {} )*
                    Self::Error(err) => ErrorResponse { err: *err }.encode(buf),
                }
            }

            fn decode_body(op: OpCode, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(match op {
                    $( OpCode::$op => Self::$op(r.read()?), )*
                    $( OpCode::$empty => Self::$empty, )*
                    // Java takes the code from the body, not the header; so do we.
                    OpCode::Error => Self::Error(r.read::<ErrorResponse>()?.err),
                    other => return Err(unknown_op(other)),
                })
            }

            fn skip_body(op: OpCode, r: &mut Reader<'_>) -> Result<(), DecodeError> {
                match op {
                    $( OpCode::$op => r.skip::<<op::$op as Operation>::Reply>(), )*
                    $( OpCode::$empty => Ok(()), )*
                    OpCode::Error => r.skip::<ErrorResponse>(),
                    other => Err(unknown_op(other)),
                }
            }
        }
    };
}

multi_results! {
    with_record {
        /// `create` succeeded: the server path created.
        Create,
        /// `create2`, `createContainer` or `createTTL` succeeded.
        Create2,
        /// `setData` succeeded.
        SetData,
        /// `getChildren` succeeded (multiRead).
        GetChildren,
        /// `getData` succeeded (multiRead).
        GetData,
    }
    without_record {
        /// `delete` succeeded.
        Delete,
        /// `check` succeeded.
        Check,
    }
}

/// The body of a `multi` or `multiRead` reply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiResponse {
    /// One result per op, in op order.
    pub results: Vec<MultiResult>,
}

multi_list!(MultiResponse { results: MultiResult } as "MultiResponse");

/// Encoded size of a `MultiHeader` (fixed: integers and a boolean).
const HEADER_LEN: usize = <MultiHeader as Decode>::MIN_LEN;

fn unknown_op(op: OpCode) -> DecodeError {
    DecodeError::new(DecodeErrorKind::UnknownValue {
        what: "multi op type",
        value: op.as_i32(),
    })
}

samples! {
    MultiRequest: false, |path| Self {
        ops: vec![MultiOp::Check(CheckVersionRequest {
            path: path.to_owned(),
            version: 0,
        })],
    };
    MultiResponse: false, |_path| Self {
        results: vec![MultiResult::Check],
    };
}
