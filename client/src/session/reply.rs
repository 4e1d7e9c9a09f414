//! A successful reply's record, checked against the table of operations before the reply is
//! accepted.
//!
//! A reply whose record is malformed means the server (or the stream) is broken: like the
//! Java client, the session treats it as a protocol error and drops the connection rather
//! than fail one request and carry on reading a stream it no longer trusts. The check is the
//! allocation-free [`Decode::skip`](crate::jute::Decode::skip) pass; callers decode the same
//! bytes afterwards with [`decode_checked`], which does not run that pass a second time.

use bytes::Bytes;

use crate::jute::{Decode, DecodeError, Reader};
use crate::proto::{visit_reply, OpCode, ReplyRecord, ReplyVisitor};

/// Checks that `body` is exactly one well-formed reply record for `op`, the one the table of
/// operations gives it.
///
/// Ops whose reply has no record accept only an empty body; ops this client does not know
/// are not checked (their caller decodes them).
pub(crate) fn check_reply_body(op: OpCode, body: &Bytes) -> Result<(), DecodeError> {
    visit_reply(op, Exact(body))
}

/// Decodes the record of a reply body that [`check_reply_body`] accepted for an op whose
/// reply record is `T` (the table gives both, so a typed call's `O::Reply` is the record the
/// check stepped over).
///
/// [`Decode::decode_exact`] would step over the whole body again before decoding it, so
/// that malformed bytes cost no memory; the check has done that here. A body that did not
/// pass the check still decodes safely: every field is checked again as it is read, and a
/// count is checked against the bytes left before anything is reserved for it.
///
/// # Errors
/// As [`Decode::decode_exact`].
pub(crate) fn decode_checked<T: Decode>(body: &Bytes) -> Result<T, DecodeError> {
    let mut r = Reader::new(body);
    let record = r.read::<T>()?;
    r.finish().map_err(|e| e.in_record(T::NAME))?;
    Ok(record)
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
    use crate::proto::{GetChildrenResponse, GetDataResponse, Stat};

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

    #[test]
    fn a_checked_body_decodes_as_decode_exact_does() {
        let children = GetChildrenResponse {
            children: vec!["lock-0000000001".into(), "ünïcode".into()],
        };
        let body = children.to_bytes();
        assert_eq!(check_reply_body(OpCode::GetChildren, &body), Ok(()));
        assert_eq!(decode_checked::<GetChildrenResponse>(&body), Ok(children));
        let data = GetDataResponse {
            data: Some(Bytes::from_static(b"x")),
            stat: Stat::default(),
        };
        let mut longer = data.to_bytes().to_vec();
        longer.push(0);
        let longer = Bytes::from(longer);
        assert_eq!(
            decode_checked::<GetDataResponse>(&longer),
            GetDataResponse::decode_exact(&longer)
        );
        assert!(matches!(
            decode_checked::<GetDataResponse>(&longer).unwrap_err().kind(),
            DecodeErrorKind::TrailingBytes { len: 1 }
        ));
        let cut = data.to_bytes().slice(..10);
        assert_eq!(
            decode_checked::<GetDataResponse>(&cut),
            GetDataResponse::decode_exact(&cut)
        );
    }
}
