//! Stateless targets: the frame splitter, reply decoding per op, record round trips.

use std::any::{type_name, Any, TypeId};
use std::fmt::Debug;

use bytes::Bytes;

use crate::error::Error;
use crate::jute::{
    Decode, DecodeError, Encode, FrameDecoder, FrameError, Reader, DEFAULT_MAX_FRAME_LEN,
};
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
/// this is (an op of the table of operations, an unknown op or the notification op code); two
/// more selectors stand for the handshake (a bare `ConnectResponse`) and for a watch
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
    let op_count = OPERATIONS.len() + MORE_REPLY_OPS.len();
    let pick = usize::from(selector) % (op_count + 2);
    match OPERATIONS.iter().chain(&MORE_REPLY_OPS).nth(pick) {
        Some(&op) => reply(op, &frame),
        None if pick == op_count => {
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
/// Input: `selector | encoding`; the selector picks one of the protocol's records (see
/// [`record_selector`]). Records
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
    let index = usize::from(selector) % record_count();
    match index.checked_sub(MORE_RECORD_CHECKS.len()) {
        None => MORE_RECORD_CHECKS[index](&bytes),
        Some(k) => {
            let reply = k % 2 == 1;
            visit_op(
                OPERATIONS[k / 2],
                CheckRecord {
                    bytes: &bytes,
                    reply,
                },
            );
        }
    }
}

/// The frame caps [`frame_decoder`] picks from.
const FRAME_CAPS: [usize; 7] = [0, 1, 5, 16, 255, 4096, DEFAULT_MAX_FRAME_LEN];
/// The selector byte of the default cap in [`FRAME_CAPS`], the one a client uses.
pub(super) const DEFAULT_CAP: u8 = 6;
const _: () = assert!(FRAME_CAPS[DEFAULT_CAP as usize] == DEFAULT_MAX_FRAME_LEN);

/// The op codes [`decode_reply`] picks from after those of the table of operations.
const MORE_REPLY_OPS: [OpCode; 2] = [OpCode::Unknown(999), OpCode::Notification];

/// Writes the table of the records [`roundtrip`] checks besides those of the table of
/// operations: each record with whether its encoding is canonical (every accepted input is the
/// one encoding of its value; [`Sample::CANONICAL`] says it for the others).
macro_rules! records {
    ($($ty:ty => $canonical:expr,)*) => {
        /// One [`check`] per record, in table order (fuzz inputs select them by index: append
        /// new rows at the end).
        const MORE_RECORD_CHECKS: &[fn(&Bytes)] = &[$(|b: &Bytes| { check::<$ty>(b, $canonical); },)*];

        /// The index of `T` in [`MORE_RECORD_CHECKS`].
        fn more_record_index<T: 'static>() -> Option<usize> {
            [$(TypeId::of::<$ty>()),*].iter().position(|&id| id == TypeId::of::<T>())
        }
    };
}

records! {
    ConnectRequest => false,
    ConnectResponse => false,
    RequestHeader => true,
    ReplyHeader => true,
    Stat => true,
    Id => false,
    Acl => false,
    Perms => true,
    MultiHeader => false,
    WatcherEvent => true,
    ClientInfo => false,
    OpCode => true,
    ErrorCode => true,
}

/// How many records [`roundtrip`] picks from: those of [`MORE_RECORD_CHECKS`], then the
/// request and the reply record of each op of the table of operations, in table order (a
/// record several ops share is picked by each of them).
fn record_count() -> usize {
    MORE_RECORD_CHECKS.len() + 2 * OPERATIONS.len()
}

/// The [`roundtrip`] selector of record `T`.
///
/// # Panics
/// When `T` is neither in [`MORE_RECORD_CHECKS`] nor a record of the table of operations.
pub(super) fn record_selector<T: 'static>() -> u8 {
    let index = more_record_index::<T>().or_else(|| {
        let ids = OPERATIONS.iter().flat_map(|&op| {
            let (request, reply) =
                visit_op(op, RecordIds).unwrap_or((TypeId::of::<()>(), TypeId::of::<()>()));
            [request, reply]
        });
        let at = ids.into_iter().position(|id| id == TypeId::of::<T>())?;
        Some(MORE_RECORD_CHECKS.len() + at)
    });
    let index =
        index.unwrap_or_else(|| panic!("{} is not a record roundtrip checks", type_name::<T>()));
    u8::try_from(index).unwrap_or_else(|_| panic!("selector {index} does not fit a byte"))
}

/// The [`decode_reply`] selector of the reply to `op`: its position among the ops of the
/// table, then [`MORE_REPLY_OPS`]; one past those is the handshake, two past a notification.
pub(super) fn reply_selector(op: Option<OpCode>) -> u8 {
    let ops = OPERATIONS.iter().chain(&MORE_REPLY_OPS);
    let index = match op {
        Some(op) => ops
            .clone()
            .position(|&o| o == op)
            .unwrap_or_else(|| panic!("{op:?} has no selector")),
        None => ops.count(),
    };
    u8::try_from(index).unwrap_or_else(|_| panic!("selector {index} does not fit a byte"))
}

/// The type ids of an operation's request and reply records.
struct RecordIds;

impl OpVisitor for RecordIds {
    type Output = (TypeId, TypeId);

    fn op<O: Operation<Request: Sample, Reply: Sample>>(self) -> Self::Output {
        (TypeId::of::<O::Request>(), TypeId::of::<O::Reply>())
    }
}

/// [`check`]s bytes as an operation's request record (`reply` false) or reply record.
struct CheckRecord<'a> {
    bytes: &'a Bytes,
    reply: bool,
}

impl OpVisitor for CheckRecord<'_> {
    type Output = ();

    fn op<O: Operation<Request: Sample, Reply: Sample>>(self) {
        if self.reply {
            check::<O::Reply>(self.bytes, O::Reply::CANONICAL);
        } else {
            check::<O::Request>(self.bytes, O::Request::CANONICAL);
        }
    }
}

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
    } else if visit_op(op, AsClient(&body)).is_none() && !matches!(op, OpCode::Unknown(_)) {
        // A named op code the client never sends: its reply has no record.
        check::<()>(&body, true);
    } else if op == OpCode::GetChildren {
        let _ = compact_listing(&body);
    }
}

/// A `getChildren` record read as a compact [`Children`] (as `get_children_compact` reads
/// it) gives the record's names, or the record's error, and ends where the record does.
/// Read without the check pass before it, as a reply is once the session has checked it.
/// Returns the listing's names (the unit tests of `Children` use it too).
///
/// # Panics
/// When the two readings disagree.
pub(crate) fn compact_listing(body: &Bytes) -> Result<Vec<String>, DecodeError> {
    let mut by_record = Reader::new(body);
    let record = by_record.read::<GetChildrenResponse>().map(|r| r.children);
    let mut by_listing = Reader::new(body);
    let listing = by_listing.read::<Children>().map(|c| c.to_vec());
    assert_eq!(
        listing, record,
        "the listing and the record disagree: {body:?}"
    );
    if record.is_ok() {
        assert_eq!(
            by_listing.position(),
            by_record.position(),
            "they end apart"
        );
    }
    listing
}

/// Decodes a successful reply's record as the `Client` does (the record the table of
/// operations names), and uses it as the `Client` would.
struct AsClient<'a>(&'a Bytes);

impl OpVisitor for AsClient<'_> {
    type Output = ();

    fn op<O: Operation<Request: Sample, Reply: Sample>>(self) {
        if let Some(value) = check::<O::Reply>(self.0, O::Reply::CANONICAL) {
            client_use(&value);
        }
    }
}

/// What the `Client` makes of a reply record: server paths mapped back under a chroot, child
/// names read for sequence suffixes, multi results turned into errors. Other records it only
/// returns.
fn client_use(record: &dyn Any) {
    if let Some(r) = record.downcast_ref::<CreateResponse>() {
        client_path(&r.path);
    } else if let Some(r) = record.downcast_ref::<Create2Response>() {
        client_path(&r.path);
    } else if let Some(r) = record.downcast_ref::<GetChildrenResponse>() {
        children(&r.children);
    } else if let Some(r) = record.downcast_ref::<GetChildren2Response>() {
        children(&r.children);
    } else if let Some(r) = record.downcast_ref::<GetEphemeralsResponse>() {
        r.ephemerals.iter().for_each(|p| client_path(p));
    } else if let Some(r) = record.downcast_ref::<MultiResponse>() {
        r.results.iter().for_each(multi_result);
    }
}

/// What the `Client` makes of one multi result.
fn multi_result(result: &MultiResult) {
    match result {
        MultiResult::Create(r) => client_path(&r.path),
        MultiResult::Create2(r) => client_path(&r.path),
        MultiResult::GetChildren(r) => children(&r.children),
        MultiResult::Error(code) => drop(Error::from_code(*code)),
        _ => {}
    }
}

/// Child names as recipes read them: sequence suffixes.
fn children(names: &[String]) {
    for name in names {
        let _ = path::sequence_suffix(name);
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
/// When `canonical`, re-encoding must give the input back; otherwise it must give bytes that
/// decode to the same value.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks an operation's request and reply samples as [`roundtrip`] does.
    struct CheckSamples;

    impl OpVisitor for CheckSamples {
        type Output = ();

        fn op<O: Operation<Request: Sample, Reply: Sample>>(self) {
            let request = O::Request::sample("/a/b").to_bytes();
            let reply = O::Reply::sample("/a/b").to_bytes();
            assert!(check::<O::Request>(&request, O::Request::CANONICAL).is_some());
            assert!(check::<O::Reply>(&reply, O::Reply::CANONICAL).is_some());
        }
    }

    #[test]
    fn every_operations_samples_pass_the_record_checks() {
        for &op in OPERATIONS {
            assert!(visit_op(op, CheckSamples).is_some());
        }
    }

    #[test]
    fn selectors_pick_the_records_and_replies_they_name() {
        let create = usize::from(record_selector::<CreateRequest>());
        assert_eq!(create, MORE_RECORD_CHECKS.len());
        assert_eq!(usize::from(record_selector::<Stat>()), 4);
        assert_eq!(reply_selector(Some(OpCode::Create)), 0);
        let notification = reply_selector(Some(OpCode::Notification));
        assert_eq!(reply_selector(None), notification + 1);
    }
}
