//! `multi` (14) and `multiRead` (22): op lists and per-op results.
//!
//! Request, per op: `MultiHeader{type=op, done=false, err=-1}` + the op's request record; the
//! list ends with `MultiHeader{type=-1, done=true, err=-1}`. Reply, per result:
//! `MultiHeader{type, done=false, err}` + the result body, ending the same way. A failed
//! transaction still has header `err = 0`: the failure is inside, the ops before it as
//! `Error(Ok)`, the failing one with its code, those after it as `RuntimeInconsistency`.

use bytes::BufMut;

use super::{
    op, Create2Response, CreateResponse, ErrorCode, ErrorResponse, GetChildrenResponse,
    GetDataResponse, OpCode, Operation, SetDataResponse,
};
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
            pub fn path(&self) -> &str {
                match self {
                    $( Self::$op(r) => &r.path, )*
                }
            }

            fn body_len(&self) -> usize {
                match self {
                    $( Self::$op(r) => r.encoded_len(), )*
                }
            }

            fn encode_body<B: BufMut>(&self, buf: &mut B) {
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

impl Encode for MultiRequest {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        for op in &self.ops {
            MultiHeader::op(op.op_code()).encode(buf);
            op.encode_body(buf);
        }
        MultiHeader::TERMINATOR.encode(buf);
    }

    fn encoded_len(&self) -> usize {
        self.ops
            .iter()
            .map(|op| HEADER_LEN + op.body_len())
            .sum::<usize>()
            + HEADER_LEN
    }
}

impl Decode for MultiRequest {
    const NAME: &'static str = "MultiOperationRecord";
    const MIN_LEN: usize = HEADER_LEN;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut ops = Vec::new();
        loop {
            let header = r.read::<MultiHeader>()?;
            if header.done {
                return Ok(Self { ops });
            }
            ops.push(MultiOp::decode_body(header.op, r)?);
        }
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        loop {
            let header = r.read::<MultiHeader>()?;
            if header.done {
                return Ok(());
            }
            MultiOp::skip_body(header.op, r)?;
        }
    }
}

/// The outcome of one op in a [`MultiResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MultiResult {
    /// `create` succeeded: the server path created.
    Create(CreateResponse),
    /// `create2`, `createContainer` or `createTTL` succeeded.
    Create2(Create2Response),
    /// `delete` succeeded.
    Delete,
    /// `setData` succeeded.
    SetData(SetDataResponse),
    /// `check` succeeded.
    Check,
    /// `getChildren` succeeded (multiRead).
    GetChildren(GetChildrenResponse),
    /// `getData` succeeded (multiRead).
    GetData(GetDataResponse),
    /// The op failed with this code, or was rolled back (`Ok` before the failing op,
    /// `RuntimeInconsistency` after it).
    Error(ErrorCode),
}

impl MultiResult {
    fn header(&self) -> MultiHeader {
        let (op, err) = match self {
            Self::Create(_) => (OpCode::Create, ErrorCode::Ok),
            Self::Create2(_) => (OpCode::Create2, ErrorCode::Ok),
            Self::Delete => (OpCode::Delete, ErrorCode::Ok),
            Self::SetData(_) => (OpCode::SetData, ErrorCode::Ok),
            Self::Check => (OpCode::Check, ErrorCode::Ok),
            Self::GetChildren(_) => (OpCode::GetChildren, ErrorCode::Ok),
            Self::GetData(_) => (OpCode::GetData, ErrorCode::Ok),
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
            Self::Create(r) => r.encoded_len(),
            Self::Create2(r) => r.encoded_len(),
            Self::SetData(r) => r.encoded_len(),
            Self::GetChildren(r) => r.encoded_len(),
            Self::GetData(r) => r.encoded_len(),
            Self::Error(_) => 4,
            Self::Delete | Self::Check => 0,
        }
    }

    fn encode_body<B: BufMut>(&self, buf: &mut B) {
        match self {
            Self::Create(r) => r.encode(buf),
            Self::Create2(r) => r.encode(buf),
            Self::SetData(r) => r.encode(buf),
            Self::GetChildren(r) => r.encode(buf),
            Self::GetData(r) => r.encode(buf),
            Self::Error(err) => ErrorResponse { err: *err }.encode(buf),
            Self::Delete | Self::Check => {}
        }
    }

    fn decode_body(op: OpCode, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match op {
            OpCode::Create => Self::Create(r.read()?),
            OpCode::Create2 => Self::Create2(r.read()?),
            OpCode::Delete => Self::Delete,
            OpCode::SetData => Self::SetData(r.read()?),
            OpCode::Check => Self::Check,
            OpCode::GetChildren => Self::GetChildren(r.read()?),
            OpCode::GetData => Self::GetData(r.read()?),
            // Java takes the code from the body, not the header; so do we.
            OpCode::Error => Self::Error(r.read::<ErrorResponse>()?.err),
            other => return Err(unknown_op(other)),
        })
    }

    fn skip_body(op: OpCode, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        match op {
            OpCode::Create => r.skip::<CreateResponse>(),
            OpCode::Create2 => r.skip::<Create2Response>(),
            OpCode::Delete | OpCode::Check => Ok(()),
            OpCode::SetData => r.skip::<SetDataResponse>(),
            OpCode::GetChildren => r.skip::<GetChildrenResponse>(),
            OpCode::GetData => r.skip::<GetDataResponse>(),
            OpCode::Error => r.skip::<ErrorResponse>(),
            other => Err(unknown_op(other)),
        }
    }
}

/// The body of a `multi` or `multiRead` reply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiResponse {
    /// One result per op, in op order.
    pub results: Vec<MultiResult>,
}

impl Encode for MultiResponse {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        for result in &self.results {
            result.header().encode(buf);
            result.encode_body(buf);
        }
        MultiHeader::TERMINATOR.encode(buf);
    }

    fn encoded_len(&self) -> usize {
        self.results
            .iter()
            .map(|r| HEADER_LEN + r.body_len())
            .sum::<usize>()
            + HEADER_LEN
    }
}

impl Decode for MultiResponse {
    const NAME: &'static str = "MultiResponse";
    const MIN_LEN: usize = HEADER_LEN;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut results = Vec::new();
        loop {
            let header = r.read::<MultiHeader>()?;
            if header.done {
                return Ok(Self { results });
            }
            results.push(MultiResult::decode_body(header.op, r)?);
        }
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        loop {
            let header = r.read::<MultiHeader>()?;
            if header.done {
                return Ok(());
            }
            MultiResult::skip_body(header.op, r)?;
        }
    }
}

/// Encoded size of a `MultiHeader`.
const HEADER_LEN: usize = 9;

fn unknown_op(op: OpCode) -> DecodeError {
    DecodeError::new(DecodeErrorKind::UnknownValue {
        what: "multi op type",
        value: op.as_i32(),
    })
}
