//! Which record each op's successful reply carries, checked before the reply is accepted.
//!
//! A reply whose record is malformed means the server (or the stream) is broken: like the
//! Java client, the session treats it as a protocol error and drops the connection rather
//! than fail one request and carry on reading a stream it no longer trusts. The check is the
//! allocation-free [`Decode::skip`] pass; callers decode the same bytes afterwards.

use bytes::Bytes;

use crate::jute::{Decode, DecodeError, Reader};
use crate::proto::*;

/// Checks that `body` is exactly one well-formed reply record for `op`.
///
/// Ops whose reply has no record accept only an empty body; ops this client does not know
/// are not checked (their caller decodes them).
pub(crate) fn check_reply_body(op: OpCode, body: &Bytes) -> Result<(), DecodeError> {
    match op {
        OpCode::Create => exact::<CreateResponse>(body),
        OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => {
            exact::<Create2Response>(body)
        }
        OpCode::Exists => exact::<ExistsResponse>(body),
        OpCode::GetData | OpCode::Reconfig => exact::<GetDataResponse>(body),
        OpCode::SetData | OpCode::Check => exact::<SetDataResponse>(body),
        OpCode::GetAcl => exact::<GetAclResponse>(body),
        OpCode::SetAcl => exact::<SetAclResponse>(body),
        OpCode::GetChildren => exact::<GetChildrenResponse>(body),
        OpCode::GetChildren2 => exact::<GetChildren2Response>(body),
        OpCode::Sync => exact::<SyncResponse>(body),
        OpCode::Multi | OpCode::MultiRead => exact::<MultiResponse>(body),
        OpCode::GetAllChildrenNumber => exact::<GetAllChildrenNumberResponse>(body),
        OpCode::GetEphemerals => exact::<GetEphemeralsResponse>(body),
        OpCode::AddWatch => exact::<ErrorResponse>(body),
        OpCode::WhoAmI => exact::<WhoAmIResponse>(body),
        OpCode::Unknown(_) => Ok(()),
        // delete, ping, setWatches(2), check/removeWatches, closeSession, auth: no record.
        _ => Reader::new(body).finish(),
    }
}

fn exact<T: Decode>(body: &Bytes) -> Result<(), DecodeError> {
    let mut r = Reader::new(body);
    r.skip::<T>()?;
    r.finish().map_err(|e| e.in_record(T::NAME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jute::{DecodeErrorKind, Encode};

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
