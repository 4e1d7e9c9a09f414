//! Stateless targets: the frame splitter, reply decoding per op, record round trips.

use std::fmt::Debug;

use bytes::Bytes;

use crate::error::Error;
use crate::jute::{Decode, Encode, FrameDecoder, FrameError, Reader, DEFAULT_MAX_FRAME_LEN};
use crate::path::{self, Chroot};
use crate::proto::*;

/// Splits a byte stream into frames under an arbitrary chunking.
///
/// Input: `cap selector | n | n chunk-size bytes | stream`. The cap is one of a few sizes from
/// 0 to [`DEFAULT_MAX_FRAME_LEN`]. Chunk sizes cycle; a size byte's low 6 bits are the length
/// (at least 1), bit 6 multiplies it by 64 and bit 7 writes through
/// [`FrameDecoder::buffer_mut`] (as the driver does) instead of [`FrameDecoder::push`].
///
/// # Panics
/// When the frames, the error or the leftover bytes differ from a one-shot reference split of
/// the same stream, a payload exceeds the cap, or an error does not repeat until `clear`.
pub fn frame_decoder(data: &[u8]) {
    let [cap, n, rest @ ..] = data else { return };
    let cap = FRAME_CAPS[usize::from(*cap) % FRAME_CAPS.len()];
    let (sizes, stream) = rest.split_at(usize::from(n % 8).min(rest.len()));
    let (expected, outcome) = reference_split(stream, cap);

    let mut decoder = FrameDecoder::new(cap);
    let mut frames = Vec::new();
    let mut error = None;
    let mut pos = 0;
    for size in sizes.iter().copied().cycle().chain(std::iter::repeat(0x7f)) {
        if pos >= stream.len() || error.is_some() {
            break;
        }
        let len = usize::from(size & 0x3f).max(1) * if size & 0x40 == 0 { 1 } else { 64 };
        let chunk = &stream[pos..(pos + len).min(stream.len())];
        pos += chunk.len();
        if size & 0x80 == 0 {
            decoder.push(chunk);
        } else {
            decoder.buffer_mut().extend_from_slice(chunk);
        }
        error = drain_frames(&mut decoder, &mut frames);
    }
    if stream.is_empty() {
        error = drain_frames(&mut decoder, &mut frames);
    }

    assert_eq!(
        frames.len(),
        expected.len(),
        "frame count differs from the reference split"
    );
    for (got, want) in frames.iter().zip(&expected) {
        assert!(
            got.len() <= cap,
            "payload of {} bytes over the {cap}-byte cap",
            got.len()
        );
        assert_eq!(&got[..], *want, "payload differs from the reference split");
    }
    match (error, outcome) {
        (Some(e), Err(want)) => {
            assert_eq!(e, want, "error differs from the reference split");
            assert_eq!(
                decoder.next_frame(),
                Err(e),
                "a frame error must repeat until clear"
            );
            decoder.clear();
            assert_eq!(decoder.buffered_len(), 0);
            assert_eq!(decoder.next_frame(), Ok(None));
        }
        (None, Ok(tail)) => {
            let used: usize = frames.iter().map(|f| 4 + f.len()).sum();
            assert_eq!(
                decoder.buffered_len(),
                tail,
                "leftover bytes differ from the reference"
            );
            assert_eq!(
                used + tail,
                stream.len(),
                "frames and leftover do not add up to the input"
            );
        }
        (got, want) => panic!("decoder ended with {got:?}, the reference with {want:?}"),
    }
}

/// Decodes a reply frame the way the session and the `Client` do for one op.
///
/// Input: `selector | frame payload` (no length prefix). The selector picks the op whose reply
/// this is; two selectors stand for the handshake (a bare `ConnectResponse`) and for a watch
/// notification. Every record decoded on the way is also checked as [`roundtrip`] does.
///
/// # Panics
/// When a record's `skip` and `decode` disagree, or a decoded record does not re-encode to
/// itself.
pub fn decode_reply(data: &[u8]) {
    let Some((&selector, payload)) = data.split_first() else {
        return;
    };
    let frame = Bytes::copy_from_slice(payload);
    let pick = usize::from(selector) % (REPLY_OPS.len() + 2);
    match REPLY_OPS.get(pick) {
        Some(&op) => reply(op, &frame),
        None if pick == REPLY_OPS.len() => {
            if let Some(response) = check::<ConnectResponse>(&frame, false) {
                let _ = response.is_expired();
            }
        }
        None => {
            let header = ReplyHeader {
                xid: NOTIFICATION_XID,
                zxid: -1,
                err: ErrorCode::Ok,
            };
            let mut with_header = header.to_bytes().to_vec();
            with_header.extend_from_slice(payload);
            reply(OpCode::Notification, &Bytes::from(with_header));
        }
    }
}

/// Decodes bytes as one record and, if that succeeds, re-encodes it.
///
/// Input: `selector | encoding`; the selector picks one of the protocol's records. Records
/// whose encoding is canonical must re-encode to the very same bytes. Records with a lenient
/// field (a boolean, where any nonzero byte is true; a lossy-UTF-8 ACL id or `whoAmI` string; a
/// multi header whose fields the decoder ignores) must re-encode to bytes that decode to an
/// equal value.
///
/// # Panics
/// When `skip` and `decode` disagree (acceptance, error or end position), `decode_exact`
/// disagrees with them, `encoded_len` is wrong, or the re-encoding differs as above.
pub fn roundtrip(data: &[u8]) {
    let Some((&selector, encoding)) = data.split_first() else {
        return;
    };
    let bytes = Bytes::copy_from_slice(encoding);
    macro_rules! table {
        ($($ty:ty => $canonical:expr,)*) => {
            [$(|b: &Bytes| { check::<$ty>(b, $canonical); },)*]
        };
    }
    let checks: [fn(&Bytes); 50] = table! {
        ConnectRequest => false,
        ConnectResponse => false,
        RequestHeader => true,
        ReplyHeader => true,
        Stat => true,
        Id => false,
        Acl => false,
        Perms => true,
        CreateRequest => false,
        CreateTtlRequest => false,
        CreateResponse => true,
        Create2Response => true,
        DeleteRequest => true,
        ExistsRequest => false,
        ExistsResponse => true,
        GetDataRequest => false,
        GetDataResponse => true,
        SetDataRequest => true,
        SetDataResponse => true,
        GetAclRequest => true,
        GetAclResponse => false,
        SetAclRequest => false,
        SetAclResponse => true,
        GetChildrenRequest => false,
        GetChildrenResponse => true,
        GetChildren2Request => false,
        GetChildren2Response => true,
        GetAllChildrenNumberRequest => true,
        GetAllChildrenNumberResponse => true,
        GetEphemeralsRequest => true,
        GetEphemeralsResponse => true,
        SyncRequest => true,
        SyncResponse => true,
        CheckVersionRequest => true,
        ReconfigRequest => true,
        MultiHeader => false,
        MultiRequest => false,
        MultiResponse => false,
        WatcherEvent => true,
        SetWatches => true,
        SetWatches2 => true,
        AddWatchRequest => true,
        RemoveWatchesRequest => true,
        CheckWatchesRequest => true,
        ErrorResponse => true,
        AuthPacket => true,
        ClientInfo => false,
        WhoAmIResponse => false,
        OpCode => true,
        ErrorCode => true,
    };
    checks[usize::from(selector) % checks.len()](&bytes);
}

/// The frame caps [`frame_decoder`] picks from.
const FRAME_CAPS: [usize; 7] = [0, 1, 5, 16, 255, 4096, DEFAULT_MAX_FRAME_LEN];

/// The ops [`decode_reply`] picks from: every op a client sends, plus an unknown one.
const REPLY_OPS: [OpCode; 30] = [
    OpCode::Create,
    OpCode::Create2,
    OpCode::CreateContainer,
    OpCode::CreateTtl,
    OpCode::Delete,
    OpCode::Exists,
    OpCode::GetData,
    OpCode::SetData,
    OpCode::GetAcl,
    OpCode::SetAcl,
    OpCode::GetChildren,
    OpCode::GetChildren2,
    OpCode::Sync,
    OpCode::Check,
    OpCode::Multi,
    OpCode::MultiRead,
    OpCode::Reconfig,
    OpCode::CheckWatches,
    OpCode::RemoveWatches,
    OpCode::AddWatch,
    OpCode::GetEphemerals,
    OpCode::GetAllChildrenNumber,
    OpCode::WhoAmI,
    OpCode::Auth,
    OpCode::SetWatches,
    OpCode::SetWatches2,
    OpCode::Ping,
    OpCode::CloseSession,
    OpCode::Unknown(999),
    OpCode::Notification,
];

/// Splits a whole stream at once: the frames, then the bytes left over or the error.
fn reference_split(stream: &[u8], cap: usize) -> (Vec<&[u8]>, Result<usize, FrameError>) {
    let mut frames = Vec::new();
    let mut rest = stream;
    loop {
        let [a, b, c, d, body @ ..] = rest else {
            return (frames, Ok(rest.len()));
        };
        let len = i32::from_be_bytes([*a, *b, *c, *d]);
        let Ok(len) = usize::try_from(len) else {
            return (frames, Err(FrameError::NegativeLength(len)));
        };
        if len > cap {
            return (frames, Err(FrameError::TooLong { len, max: cap }));
        }
        if body.len() < len {
            return (frames, Ok(rest.len()));
        }
        let (payload, next) = body.split_at(len);
        frames.push(payload);
        rest = next;
    }
}

/// Takes every whole frame; returns the error that stopped it, if any.
fn drain_frames(decoder: &mut FrameDecoder, frames: &mut Vec<Bytes>) -> Option<FrameError> {
    loop {
        match decoder.next_frame() {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    }
}

/// A reply as the session routes it, then its body as the `Client` decodes it for `op`.
fn reply(op: OpCode, frame: &Bytes) {
    let mut r = Reader::new(frame);
    let Ok(header) = r.read::<ReplyHeader>() else {
        return;
    };
    let body = frame.slice(r.position()..);
    if header.xid == NOTIFICATION_XID {
        if let Some(event) = check::<WatcherEvent>(&body, true) {
            client_path(&event.path);
            let mut at = Some(event.path.as_str());
            while let Some(p) = at {
                at = path::parent(p);
            }
        }
    } else if header.err != ErrorCode::Ok {
        let e = Error::from_code(header.err);
        let _ = (e.is_retryable(), e.is_terminal(), e.to_string());
    } else {
        reply_body(op, &body);
    }
}

/// Decodes a successful reply's record the way the `Client` method for `op` does.
fn reply_body(op: OpCode, body: &Bytes) {
    match op {
        OpCode::Create => {
            if let Some(r) = check::<CreateResponse>(body, true) {
                client_path(&r.path);
            }
        }
        OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => {
            if let Some(r) = check::<Create2Response>(body, true) {
                client_path(&r.path);
            }
        }
        OpCode::Exists => {
            check::<ExistsResponse>(body, true);
        }
        OpCode::GetData | OpCode::Reconfig => {
            check::<GetDataResponse>(body, true);
        }
        OpCode::SetData => {
            check::<SetDataResponse>(body, true);
        }
        OpCode::GetAcl => {
            check::<GetAclResponse>(body, false);
        }
        OpCode::SetAcl => {
            check::<SetAclResponse>(body, true);
        }
        OpCode::GetChildren => {
            children(check::<GetChildrenResponse>(body, true).map(|r| r.children))
        }
        OpCode::GetChildren2 => {
            children(check::<GetChildren2Response>(body, true).map(|r| r.children))
        }
        OpCode::Sync => {
            check::<SyncResponse>(body, true);
        }
        OpCode::Multi | OpCode::MultiRead => multi(body),
        OpCode::GetEphemerals => {
            for p in check::<GetEphemeralsResponse>(body, true)
                .map(|r| r.ephemerals)
                .unwrap_or_default()
            {
                client_path(&p);
            }
        }
        OpCode::GetAllChildrenNumber => {
            check::<GetAllChildrenNumberResponse>(body, true);
        }
        OpCode::WhoAmI => {
            check::<WhoAmIResponse>(body, false);
        }
        OpCode::AddWatch | OpCode::Check => {
            check::<ErrorResponse>(body, true);
        }
        // The Client ignores the body of every other reply.
        _ => {}
    }
}

/// A multi reply, and what the Client makes of each result.
fn multi(body: &Bytes) {
    let Some(response) = check::<MultiResponse>(body, false) else {
        return;
    };
    for result in response.results {
        match result {
            MultiResult::Create(r) => client_path(&r.path),
            MultiResult::Create2(r) => client_path(&r.path),
            MultiResult::GetChildren(r) => children(Some(r.children)),
            MultiResult::Error(code) => drop(Error::from_code(code)),
            _ => {}
        }
    }
}

/// Child names as recipes read them: sequence suffixes.
fn children(names: Option<Vec<String>>) {
    for name in names.unwrap_or_default() {
        let _ = path::sequence_suffix(&name);
    }
}

/// A server path as the Client maps it back under a chroot.
fn client_path(server_path: &str) {
    if let Ok(Some(chroot)) = Chroot::new("/app") {
        let _ = path::strip_or_pass(Some(&chroot), server_path);
    }
    let _ = path::strip_or_pass(None, server_path);
}

/// Decodes `bytes` as a whole `T`, checking `skip` against `decode` and the re-encoding.
///
/// `canonical`: every accepted input is the one encoding of its value, so re-encoding must
/// give the input back; otherwise re-encoding must give bytes that decode to the same value.
fn check<T: Decode + Encode + PartialEq + Debug>(bytes: &Bytes, canonical: bool) -> Option<T> {
    let mut skipper = Reader::new(bytes);
    let skipped = skipper.skip::<T>();
    let mut reader = Reader::new(bytes);
    let decoded = reader.read::<T>();
    match (&skipped, &decoded) {
        (Ok(()), Ok(_)) => {
            assert_eq!(
                skipper.position(),
                reader.position(),
                "skip and decode end apart"
            );
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "skip and decode report different errors"),
        _ => panic!("skip ({skipped:?}) and decode ({decoded:?}) disagree"),
    }
    let exact = T::decode_exact(bytes);
    let whole = decoded.is_ok() && reader.remaining() == 0;
    assert_eq!(
        exact.is_ok(),
        whole,
        "decode_exact disagrees with decode: {exact:?}"
    );
    let value = exact.ok()?;
    let encoded = value.to_bytes();
    assert_eq!(
        encoded.len(),
        value.encoded_len(),
        "encoded_len is wrong for {value:?}"
    );
    if canonical {
        assert_eq!(
            &encoded, bytes,
            "re-encoding of {value:?} differs from its input"
        );
    } else {
        let again = T::decode_exact(&encoded);
        assert_eq!(
            again.as_ref(),
            Ok(&value),
            "re-encoding of {value:?} does not decode to it"
        );
    }
    Some(value)
}
