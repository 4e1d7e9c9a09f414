//! A successful reply's record, checked against the table of operations before the reply is
//! accepted.
//!
//! A reply whose record is malformed means the server (or the stream) is broken: like the
//! Java client, the session treats it as a protocol error and drops the connection rather
//! than fail one request and carry on reading a stream it no longer trusts. The check is the
//! allocation-free [`Decode::skip`](crate::jute::Decode::skip) pass; callers decode the same
//! bytes afterwards.

use bytes::Bytes;

use crate::jute::{DecodeError, Reader};
use crate::proto::{visit_reply, OpCode, ReplyRecord, ReplyVisitor};

/// Checks that `body` is exactly one well-formed reply record for `op`, the one the table of
/// operations gives it.
///
/// Ops whose reply has no record accept only an empty body; ops this client does not know
/// are not checked (their caller decodes them).
pub(crate) fn check_reply_body(op: OpCode, body: &Bytes) -> Result<(), DecodeError> {
    visit_reply(op, Exact(body))
}

/// Skips one record of the visited type over the whole body.
struct Exact<'a>(&'a Bytes);

impl ReplyVisitor for Exact<'_> {
    type Output = Result<(), DecodeError>;

    fn record<T: ReplyRecord>(self) -> Self::Output {
        let mut r = Reader::new(self.0);
        r.skip::<T>()?;
        r.finish().map_err(|e| e.in_record(T::NAME))
    }

    fn unknown(self) -> Self::Output {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jute::{DecodeErrorKind, Encode};
    use crate::proto::GetChildrenResponse;

    #[test]
    fn well_formed_records_pass_and_malformed_ones_fail() {
        let body = GetChildrenResponse {
            children: vec!["a".into()],
        }
        .to_bytes();
        assert_eq!(check_reply_body(OpCode::GetChildren, &body), Ok(()));
        let huge_count = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        let err = check_reply_body(OpCode::GetChildren, &huge_count).unwrap_err();
        assert!(matches!(err.kind(), DecodeErrorKind::BadCount { .. }));
        assert_eq!(check_reply_body(OpCode::Delete, &Bytes::new()), Ok(()));
        assert!(check_reply_body(OpCode::Delete, &Bytes::from_static(&[0])).is_err());
        assert_eq!(
            check_reply_body(OpCode::Unknown(999), &Bytes::from_static(&[1, 2])),
            Ok(())
        );
    }
}
