//! Property tests for the jute codec and the frame decoder.
//!
//! For every record in [`zkwire::proto`]:
//! * encode → decode is the identity and `encoded_len` matches what `encode` writes;
//! * decode → encode is the identity on valid encodings (also when they sit inside a larger
//!   buffer);
//! * every strict prefix is rejected, a trailing byte is rejected, and two encodings back to
//!   back decode as two values (the decoder stops exactly at the end of its record);
//! * decoding arbitrary bytes, or a valid encoding with a few bytes overwritten, never panics,
//!   and whatever it accepts re-encodes to a value that decodes to itself (and, for records
//!   without lenient fields, to the very same bytes);
//! * `Decode::skip` agrees with `Decode::decode` on every input: same acceptance, same error,
//!   same end position.
//!
//! For the frame decoder: any list of frames survives any chunking of the stream, and an
//! oversized or negative length is reported once the frames before it are drained.

use std::fmt::Debug;

use bytes::{BufMut, Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::Index;
use zkwire::jute::{
    encode_frame, Decode, DecodeErrorKind, Encode, FrameDecoder, FrameError, Reader,
};
use zkwire::proto::{
    Acl, AddWatchMode, AddWatchRequest, AuthPacket, CheckVersionRequest, CheckWatchesRequest,
    ClientInfo, ConnectRequest, ConnectResponse, Create2Response, CreateMode, CreateRequest,
    CreateResponse, CreateTtlRequest, DeleteRequest, ErrorCode, ErrorResponse, EventType,
    ExistsRequest, ExistsResponse, GetAclRequest, GetAclResponse, GetAllChildrenNumberRequest,
    GetAllChildrenNumberResponse, GetChildren2Request, GetChildren2Response, GetChildrenRequest,
    GetChildrenResponse, GetDataRequest, GetDataResponse, GetEphemeralsRequest,
    GetEphemeralsResponse, Id, KeeperState, MultiHeader, MultiOp, MultiRequest, MultiResponse,
    MultiResult, OpCode, Perms, ReconfigRequest, RemoveWatchesRequest, ReplyHeader, RequestHeader,
    SetAclRequest, SetAclResponse, SetDataRequest, SetDataResponse, SetWatches, SetWatches2, Stat,
    SyncRequest, SyncResponse, WatcherEvent, WatcherType, WhoAmIResponse,
};

type Check = Result<(), TestCaseError>;

// ---------------------------------------------------------------------------------------------
// Checks shared by every record.
// ---------------------------------------------------------------------------------------------

/// How faithfully a value decoded from arbitrary (possibly non-canonical) bytes re-encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Canon {
    /// Every accepted input is the canonical encoding of its value: re-encoding gives it back.
    Exact,
    /// Booleans accept any nonzero byte (and multi headers carry fields the decoder ignores):
    /// re-encoding may change bytes, never the length.
    SameLen,
    /// Lenient strings (`Id`, `ClientInfo`) turn invalid UTF-8 into U+FFFD: re-encoding may
    /// change the length too.
    Lossy,
}

/// Whether a record's decoder stops exactly at the end of its encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// It does: prefixes and trailing bytes are errors, back-to-back encodings split cleanly.
    Delimited,
    /// `ConnectResponse`: its last byte is optional and read whenever one is left.
    Greedy,
}

fn decoded<T: Decode>(bytes: &Bytes) -> Result<T, TestCaseError> {
    T::decode_exact(bytes).map_err(|e| TestCaseError::fail(format!("{e} ({e:?})")))
}

/// Property 1: encode → decode is the identity, and `encoded_len` is what `encode` writes.
fn check_encode_decode<T>(v: &T) -> Check
where
    T: Encode + Decode + PartialEq + Debug,
{
    let bytes = v.to_bytes();
    prop_assert_eq!(
        v.encoded_len(),
        bytes.len(),
        "encoded_len disagrees with to_bytes"
    );
    // `encode` appends exactly those bytes and leaves what was already there alone.
    let mut buf = BytesMut::from(&b"head"[..]);
    v.encode(&mut buf);
    prop_assert_eq!(&buf[..4], b"head");
    prop_assert_eq!(&buf[4..], &bytes[..]);
    let back = T::decode_exact(&bytes);
    prop_assert_eq!(back.as_ref(), Ok(v));
    // `skip` walks exactly the same bytes.
    let mut r = Reader::new(&bytes);
    prop_assert_eq!(r.skip::<T>(), Ok(()));
    prop_assert_eq!(r.position(), bytes.len());
    Ok(())
}

/// Property 2: decode → encode is the identity on valid bytes, wherever they sit in a buffer.
fn check_decode_encode<T>(v: &T, before: &[u8], after: &[u8]) -> Check
where
    T: Encode + Decode + PartialEq + Debug,
{
    let bytes = v.to_bytes();
    let value: T = decoded(&bytes)?;
    prop_assert_eq!(value.to_bytes(), bytes.clone());

    // The same bytes as a slice in the middle of a larger frame.
    let mut frame = BytesMut::new();
    frame.put_slice(before);
    frame.put_slice(&bytes);
    frame.put_slice(after);
    let frame = frame.freeze();
    let inner = frame.slice(before.len()..before.len() + bytes.len());
    let value: T = decoded(&inner)?;
    prop_assert_eq!(value.to_bytes(), bytes);
    Ok(())
}

/// Prefixes, trailing bytes and back-to-back encodings.
fn check_framing<T>(v: &T, cut: Index, extra: u8, framing: Framing) -> Check
where
    T: Encode + Decode + PartialEq + Debug,
{
    let bytes = v.to_bytes();
    prop_assert!(bytes.len() >= T::MIN_LEN, "encoding shorter than MIN_LEN");

    // A strict prefix is truncated: an error naming the record, never a panic.
    let n = cut.index(bytes.len().max(1));
    if n < bytes.len() {
        let prefix = bytes.slice(..n);
        check_skip_agrees::<T>(&prefix)?;
        match T::decode_exact(&prefix) {
            Err(e) => {
                prop_assert_eq!(e.outer_record(), T::NAME);
                prop_assert!(!e.record().is_empty());
                prop_assert!(
                    matches!(
                        e.kind(),
                        DecodeErrorKind::UnexpectedEnd { .. } | DecodeErrorKind::BadCount { .. }
                    ),
                    "prefix of {} bytes: {:?}",
                    n,
                    e
                );
                let _ = e.to_string();
            }
            Ok(got) => prop_assert!(
                framing == Framing::Greedy && n + 1 == bytes.len(),
                "a {}-byte prefix of a {}-byte encoding decoded as {:?}",
                n,
                bytes.len(),
                got
            ),
        }
    }

    // One byte too many.
    let mut longer = BytesMut::from(&bytes[..]);
    longer.put_u8(extra);
    let longer = longer.freeze();
    match (T::decode_exact(&longer), framing) {
        (Err(e), _) => {
            if framing == Framing::Delimited {
                prop_assert_eq!(e.kind(), &DecodeErrorKind::TrailingBytes { len: 1 });
            }
            prop_assert_eq!(e.outer_record(), T::NAME);
        }
        (Ok(got), Framing::Greedy) => check_reencode(&got, &longer, Canon::SameLen)?,
        (Ok(got), Framing::Delimited) => {
            prop_assert!(false, "trailing byte accepted: {:?}", got);
        }
    }

    // Two encodings back to back read as two values, nothing left over.
    if framing == Framing::Delimited {
        let mut twice = BytesMut::from(&bytes[..]);
        twice.put_slice(&bytes);
        let twice = twice.freeze();
        let mut r = Reader::new(&twice);
        for _ in 0..2 {
            let start = r.position();
            let back = r.read::<T>();
            prop_assert_eq!(back.as_ref(), Ok(v));
            prop_assert_eq!(r.position() - start, bytes.len());
        }
        prop_assert_eq!(r.finish(), Ok(()));
    }
    Ok(())
}

/// `skip` accepts exactly what `decode` accepts, reports the same error and stops at the same
/// place (the contract `decode_exact` relies on when it validates with `skip` first).
fn check_skip_agrees<T>(input: &Bytes) -> Check
where
    T: Decode + Debug,
{
    let mut read = Reader::new(input);
    let decoded = read.read::<T>();
    let mut skip = Reader::new(input);
    let skipped = skip.skip::<T>();
    match (&decoded, &skipped) {
        (Ok(_), Ok(())) => prop_assert_eq!(
            skip.position(),
            read.position(),
            "skip and decode stop at different offsets"
        ),
        (Err(d), Err(s)) => prop_assert_eq!(s, d, "skip and decode report different errors"),
        _ => prop_assert!(
            false,
            "skip and decode disagree: decode {:?}, skip {:?}",
            decoded,
            skipped
        ),
    }
    Ok(())
}

/// A value decoded from `input` re-encodes consistently.
fn check_reencode<T>(v: &T, input: &Bytes, canon: Canon) -> Check
where
    T: Encode + Decode + PartialEq + Debug,
{
    let out = v.to_bytes();
    prop_assert_eq!(v.encoded_len(), out.len());
    // Whatever the decoder accepted, its value round-trips.
    let back = T::decode_exact(&out);
    prop_assert_eq!(back.as_ref(), Ok(v));
    match canon {
        Canon::Exact => prop_assert_eq!(&out, input, "accepted a non-canonical encoding"),
        Canon::SameLen => prop_assert_eq!(out.len(), input.len()),
        Canon::Lossy => {}
    }
    Ok(())
}

/// Property 4: hostile bytes never panic; an error names the record; a value re-encodes.
fn check_hostile<T>(input: &Bytes, canon: Canon) -> Check
where
    T: Encode + Decode + PartialEq + Debug,
{
    check_skip_agrees::<T>(input)?;
    match T::decode_exact(input) {
        Ok(v) => check_reencode(&v, input, canon),
        Err(e) => {
            prop_assert_eq!(e.outer_record(), T::NAME);
            let _ = e.to_string();
            Ok(())
        }
    }
}

/// One corruption of a valid encoding.
#[derive(Debug, Clone)]
enum Edit {
    /// Overwrite one byte.
    Byte(Index, u8),
    /// Overwrite four bytes with a big-endian int: hits length and count fields whole.
    Int(Index, i32),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), edit_byte()).prop_map(|(at, b)| Edit::Byte(at, b)),
        (any::<Index>(), edit_int()).prop_map(|(at, v)| Edit::Int(at, v)),
    ]
}

/// Replacement bytes biased towards the values that matter to jute: 0, 1, -1 and friends.
fn edit_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(0u8),
        Just(1),
        Just(0x7f),
        Just(0x80),
        Just(0xff),
        any::<u8>()
    ]
}

/// Replacement ints biased towards null (-1), bad lengths and small counts.
fn edit_int() -> impl Strategy<Value = i32> {
    prop_oneof![
        Just(-1i32),
        Just(-2),
        Just(i32::MIN),
        Just(i32::MAX),
        0..=8i32,
        any::<i32>(),
    ]
}

/// A valid encoding with some bytes overwritten and perhaps cut short.
fn mutate(bytes: &Bytes, edits: &[Edit], cut: Option<Index>) -> Bytes {
    let mut out = bytes.to_vec();
    for edit in edits {
        match *edit {
            Edit::Byte(at, b) if !out.is_empty() => {
                let i = at.index(out.len());
                out[i] = b;
            }
            Edit::Int(at, v) if out.len() >= 4 => {
                let i = at.index(out.len() - 3);
                out[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            _ => {}
        }
    }
    if let Some(cut) = cut {
        out.truncate(cut.index(out.len() + 1));
    }
    Bytes::from(out)
}

/// Selects a [`Framing`] from an optional `greedy` marker in a `codec_props!` row.
macro_rules! framing {
    () => {
        Framing::Delimited
    };
    (greedy) => {
        Framing::Greedy
    };
}

/// Generates, for each family `family(cases) { name: Type, Canon [, greedy]; ... }`, a module
/// `family` holding, for each row, a module `name` with the codec properties of `Type` over
/// values from the strategy function `name()`, each property tried on `cases` values.
///
/// The checks are grouped into two `#[test]`s per type (compiling one proptest function per
/// check would double this file's build time); a failure names the check that failed.
macro_rules! codec_props {
    ($( $family:ident($cases:expr) { $($rows:tt)* } )*) => {
        $( codec_family!($family, $cases; $($rows)*); )*
    };
}

/// One family of [`codec_props!`].
macro_rules! codec_family {
    (
        $family:ident, $cases:expr;
        $( $name:ident : $ty:ty, $canon:ident $(, $greedy:ident)? ; )*
    ) => {
        mod $family {
            use super::*;

            $(
                mod $name {
                    use super::*;

                    proptest! {
                        #![proptest_config(ProptestConfig::with_cases($cases))]

                        /// Properties 1 and 2, prefixes, trailing bytes and concatenation.
                        #[test]
                        fn round_trip(
                            v in $name(),
                            before in vec(any::<u8>(), 0..8),
                            after in vec(any::<u8>(), 0..8),
                            cut in any::<Index>(),
                            extra in any::<u8>(),
                        ) {
                            check_encode_decode::<$ty>(&v)?;
                            check_decode_encode::<$ty>(&v, &before, &after)?;
                            check_framing::<$ty>(&v, cut, extra, framing!($($greedy)?))?;
                        }

                        /// Property 4, on random bytes and on corrupted valid encodings.
                        #[test]
                        fn hostile_bytes(
                            random in vec(any::<u8>(), 0..256),
                            v in $name(),
                            edits in vec(edit(), 1..4),
                            cut in option::weighted(0.25, any::<Index>()),
                        ) {
                            check_hostile::<$ty>(&Bytes::from(random), Canon::$canon)?;
                            let mutated = mutate(&v.to_bytes(), &edits, cut);
                            check_hostile::<$ty>(&mutated, Canon::$canon)?;
                        }
                    }
                }
            )*
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------------------------

/// Any Unicode: printable, arbitrary scalar values (controls, NUL, non-BMP), and path-like.
fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,24}",
        vec(any::<char>(), 0..12).prop_map(String::from_iter),
        "(/[a-zA-Z0-9._-]{1,8}){0,4}",
    ]
}

fn strings() -> impl Strategy<Value = Vec<String>> {
    vec(string(), 0..5)
}

fn opt_string() -> impl Strategy<Value = Option<String>> {
    option::of(string())
}

fn bytes() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..48).prop_map(Bytes::from)
}

fn opt_bytes() -> impl Strategy<Value = Option<Bytes>> {
    option::of(bytes())
}

/// A wire code: anything, or one in the range of the known tables (-130..=110).
fn code() -> impl Strategy<Value = i32> {
    prop_oneof![any::<i32>(), -130..=110i32]
}

/// A strategy per wire enum, each over any code (named values and unknown ones alike).
macro_rules! code_strategies {
    ($($name:ident: $ty:ty,)*) => {$(
        fn $name() -> impl Strategy<Value = $ty> {
            code().prop_map(<$ty>::from_i32)
        }
    )*};
}

code_strategies! {
    op_code: OpCode,
    error_code: ErrorCode,
    event_type: EventType,
    keeper_state: KeeperState,
    watcher_type: WatcherType,
    add_watch_mode: AddWatchMode,
    create_mode: CreateMode,
}

fn stat() -> impl Strategy<Value = Stat> {
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<i32>(), any::<i32>()),
        (any::<i64>(), any::<i32>(), any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |(
                (czxid, mzxid, ctime, mtime),
                (version, cversion, aversion),
                (ephemeral_owner, data_length, num_children, pzxid),
            )| Stat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner,
                data_length,
                num_children,
                pzxid,
            },
        )
}

/// A strategy per record whose fields are drawn independently, each field from its own
/// strategy.
macro_rules! record_strategies {
    ($($name:ident: $ty:ident { $($field:ident: $strategy:expr),* $(,)? },)*) => {$(
        fn $name() -> impl Strategy<Value = $ty> {
            ($($strategy,)*).prop_map(|($($field,)*)| $ty { $($field),* })
        }
    )*};
}

record_strategies! {
    id: Id { scheme: string(), id: string() },
    acl: Acl { perms: perms(), id: id() },
    request_header: RequestHeader { xid: any::<i32>(), op: op_code() },
    reply_header: ReplyHeader { xid: any::<i32>(), zxid: any::<i64>(), err: error_code() },
    auth_packet: AuthPacket { auth_type: any::<i32>(), scheme: string(), auth: opt_bytes() },
    client_info: ClientInfo { auth_scheme: string(), user: string() },
    create_response: CreateResponse { path: string() },
    create2_response: Create2Response { path: string(), stat: stat() },
    delete_request: DeleteRequest { path: string(), version: any::<i32>() },
    exists_request: ExistsRequest { path: string(), watch: any::<bool>() },
    exists_response: ExistsResponse { stat: stat() },
    get_data_request: GetDataRequest { path: string(), watch: any::<bool>() },
    get_data_response: GetDataResponse { data: opt_bytes(), stat: stat() },
    set_data_request: SetDataRequest { path: string(), data: opt_bytes(), version: any::<i32>() },
    set_data_response: SetDataResponse { stat: stat() },
    get_acl_request: GetAclRequest { path: string() },
    get_acl_response: GetAclResponse { acl: acls(), stat: stat() },
    set_acl_request: SetAclRequest { path: string(), acl: acls(), version: any::<i32>() },
    set_acl_response: SetAclResponse { stat: stat() },
    get_children_request: GetChildrenRequest { path: string(), watch: any::<bool>() },
    get_children_response: GetChildrenResponse { children: strings() },
    get_children2_request: GetChildren2Request { path: string(), watch: any::<bool>() },
    get_children2_response: GetChildren2Response { children: strings(), stat: stat() },
    get_all_children_number_request: GetAllChildrenNumberRequest { path: string() },
    get_all_children_number_response: GetAllChildrenNumberResponse { total_number: any::<i32>() },
    get_ephemerals_request: GetEphemeralsRequest { prefix_path: string() },
    get_ephemerals_response: GetEphemeralsResponse { ephemerals: strings() },
    sync_request: SyncRequest { path: string() },
    sync_response: SyncResponse { path: string() },
    check_version_request: CheckVersionRequest { path: string(), version: any::<i32>() },
    watcher_event: WatcherEvent { event_type: event_type(), state: keeper_state(), path: string() },
    add_watch_request: AddWatchRequest { path: string(), mode: add_watch_mode() },
    error_response: ErrorResponse { err: error_code() },
    multi_header: MultiHeader { op: op_code(), done: any::<bool>(), err: error_code() },
    connect_request: ConnectRequest {
        protocol_version: any::<i32>(),
        last_zxid_seen: any::<i64>(),
        timeout: any::<i32>(),
        session_id: any::<i64>(),
        passwd: bytes(),
        read_only: any::<bool>(),
    },
    connect_response: ConnectResponse {
        protocol_version: any::<i32>(),
        timeout: any::<i32>(),
        session_id: any::<i64>(),
        passwd: bytes(),
        read_only: option::of(any::<bool>()),
    },
    who_am_i_response: WhoAmIResponse { client_info: vec(client_info(), 0..4) },
    reconfig_request: ReconfigRequest {
        joining_servers: opt_string(),
        leaving_servers: opt_string(),
        new_members: opt_string(),
        cur_config_id: any::<i64>(),
    },
    set_watches: SetWatches {
        relative_zxid: any::<i64>(),
        data_watches: strings(),
        exist_watches: strings(),
        child_watches: strings(),
    },
    set_watches2: SetWatches2 {
        relative_zxid: any::<i64>(),
        data_watches: strings(),
        exist_watches: strings(),
        child_watches: strings(),
        persistent_watches: strings(),
        persistent_recursive_watches: strings(),
    },
}

fn perms() -> impl Strategy<Value = Perms> {
    prop_oneof![any::<i32>(), 0..=31i32].prop_map(Perms)
}

fn acls() -> impl Strategy<Value = Vec<Acl>> {
    vec(acl(), 0..4)
}

fn create_request() -> impl Strategy<Value = CreateRequest> {
    (string(), opt_bytes(), acls(), create_mode()).prop_map(|(path, data, acl, mode)| {
        CreateRequest {
            path,
            data,
            acl: acl.into(),
            mode,
        }
    })
}

fn create_ttl_request() -> impl Strategy<Value = CreateTtlRequest> {
    (string(), opt_bytes(), acls(), create_mode(), any::<i64>()).prop_map(
        |(path, data, acl, mode, ttl)| CreateTtlRequest {
            path,
            data,
            acl: acl.into(),
            mode,
            ttl,
        },
    )
}

fn remove_watches_request() -> impl Strategy<Value = RemoveWatchesRequest> {
    (string(), watcher_type())
        .prop_map(|(path, watcher_type)| RemoveWatchesRequest { path, watcher_type })
}

fn check_watches_request() -> impl Strategy<Value = CheckWatchesRequest> {
    (string(), watcher_type())
        .prop_map(|(path, watcher_type)| CheckWatchesRequest { path, watcher_type })
}

/// Every `MultiOp` variant.
fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        create_request().prop_map(MultiOp::Create),
        create_request().prop_map(MultiOp::Create2),
        create_request().prop_map(MultiOp::CreateContainer),
        create_ttl_request().prop_map(MultiOp::CreateTtl),
        delete_request().prop_map(MultiOp::Delete),
        set_data_request().prop_map(MultiOp::SetData),
        check_version_request().prop_map(MultiOp::Check),
        get_children_request().prop_map(MultiOp::GetChildren),
        get_data_request().prop_map(MultiOp::GetData),
    ]
}

fn multi_request() -> impl Strategy<Value = MultiRequest> {
    vec(multi_op(), 0..6).prop_map(|ops| MultiRequest { ops })
}

/// Every `MultiResult` variant, errors with arbitrary codes.
fn multi_result() -> impl Strategy<Value = MultiResult> {
    prop_oneof![
        create_response().prop_map(MultiResult::Create),
        create2_response().prop_map(MultiResult::Create2),
        Just(MultiResult::Delete),
        set_data_response().prop_map(MultiResult::SetData),
        Just(MultiResult::Check),
        get_children_response().prop_map(MultiResult::GetChildren),
        get_data_response().prop_map(MultiResult::GetData),
        error_code().prop_map(MultiResult::Error),
    ]
}

fn multi_response() -> impl Strategy<Value = MultiResponse> {
    vec(multi_result(), 0..6).prop_map(|results| MultiResponse { results })
}

// ---------------------------------------------------------------------------------------------
// The records, family by family.
// ---------------------------------------------------------------------------------------------

codec_props! {
    codes(256) {
        op_code: OpCode, Exact;
        error_code: ErrorCode, Exact;
        event_type: EventType, Exact;
        keeper_state: KeeperState, Exact;
        watcher_type: WatcherType, Exact;
        add_watch_mode: AddWatchMode, Exact;
        create_mode: CreateMode, Exact;
    }

    connect(256) {
        connect_request: ConnectRequest, SameLen;
        connect_response: ConnectResponse, SameLen, greedy;
    }

    header(256) {
        request_header: RequestHeader, Exact;
        reply_header: ReplyHeader, Exact;
    }

    acl(256) {
        stat: Stat, Exact;
        id: Id, Lossy;
        perms: Perms, Exact;
        acl: Acl, Lossy;
    }

    auth(256) {
        auth_packet: AuthPacket, Exact;
        client_info: ClientInfo, Lossy;
        who_am_i_response: WhoAmIResponse, Lossy;
    }

    data(256) {
        create_request: CreateRequest, Lossy;
        create_ttl_request: CreateTtlRequest, Lossy;
        create_response: CreateResponse, Exact;
        create2_response: Create2Response, Exact;
        delete_request: DeleteRequest, Exact;
        exists_request: ExistsRequest, SameLen;
        exists_response: ExistsResponse, Exact;
        get_data_request: GetDataRequest, SameLen;
        get_data_response: GetDataResponse, Exact;
        set_data_request: SetDataRequest, Exact;
        set_data_response: SetDataResponse, Exact;
        get_acl_request: GetAclRequest, Exact;
        get_acl_response: GetAclResponse, Lossy;
        set_acl_request: SetAclRequest, Lossy;
        set_acl_response: SetAclResponse, Exact;
        get_children_request: GetChildrenRequest, SameLen;
        get_children_response: GetChildrenResponse, Exact;
        get_children2_request: GetChildren2Request, SameLen;
        get_children2_response: GetChildren2Response, Exact;
        get_all_children_number_request: GetAllChildrenNumberRequest, Exact;
        get_all_children_number_response: GetAllChildrenNumberResponse, Exact;
        get_ephemerals_request: GetEphemeralsRequest, Exact;
        get_ephemerals_response: GetEphemeralsResponse, Exact;
        sync_request: SyncRequest, Exact;
        sync_response: SyncResponse, Exact;
        check_version_request: CheckVersionRequest, Exact;
        reconfig_request: ReconfigRequest, Exact;
    }

    watch(256) {
        watcher_event: WatcherEvent, Exact;
        set_watches: SetWatches, Exact;
        set_watches2: SetWatches2, Exact;
        add_watch_request: AddWatchRequest, Exact;
        remove_watches_request: RemoveWatchesRequest, Exact;
        check_watches_request: CheckWatchesRequest, Exact;
        error_response: ErrorResponse, Exact;
    }

    multi(128) {
        multi_header: MultiHeader, SameLen;
        // Ops carry ACLs, whose strings decode leniently.
        multi_request: MultiRequest, Lossy;
        // The decoder ignores the header's err (taking an error result's code from its body)
        // and the terminator's op and err.
        multi_response: MultiResponse, SameLen;
    }
}

// ---------------------------------------------------------------------------------------------
// Every op of the table of operations, from its records' samples.
// ---------------------------------------------------------------------------------------------

/// The request and reply records of every op of the table, from their samples: a new op is
/// covered here as soon as it has its table row (records with fields worth generating get
/// `codec_props!` rows above as well).
mod operations {
    use super::*;
    use zkwire::proto::{visit_op, OpVisitor, Operation, Sample, OPERATIONS};

    /// Properties 1 and 2 and framing on the samples, property 4 on corrupted samples.
    struct SampleProps<'a> {
        prefix: Index,
        extra: u8,
        edits: &'a [Edit],
        cut: Option<Index>,
    }

    impl SampleProps<'_> {
        fn check<T: Sample>(&self) -> Check {
            for path in ["/", "/a/b"] {
                let v = T::sample(path);
                check_encode_decode::<T>(&v)?;
                check_decode_encode::<T>(&v, b"head", b"tail")?;
                check_framing::<T>(&v, self.prefix, self.extra, Framing::Delimited)?;
                let canon = if T::CANONICAL {
                    Canon::Exact
                } else {
                    Canon::Lossy
                };
                check_hostile::<T>(&mutate(&v.to_bytes(), self.edits, self.cut), canon)?;
            }
            Ok(())
        }
    }

    impl OpVisitor for SampleProps<'_> {
        type Output = Check;

        fn op<O: Operation<Request: Sample, Reply: Sample>>(self) -> Check {
            self.check::<O::Request>()?;
            self.check::<O::Reply>()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_operation_round_trips_its_samples(
            prefix in any::<Index>(),
            extra in any::<u8>(),
            edits in vec(edit(), 1..4),
            cut in option::weighted(0.25, any::<Index>()),
        ) {
            for &op in OPERATIONS {
                let props = SampleProps { prefix, extra, edits: &edits, cut };
                visit_op(op, props).unwrap_or_else(|| panic!("{op:?} is not in the table"))?;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Properties beyond the generic ones.
// ---------------------------------------------------------------------------------------------

mod codes_extra {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Every table keeps every wire value: `as_i32` inverts `from_i32`, and the decoded
        /// value is `from_i32` of the big-endian int.
        #[test]
        fn wire_values_survive(x in code()) {
            let wire = Bytes::copy_from_slice(&x.to_be_bytes());
            macro_rules! survives {
                ($($ty:ident),*) => {$(
                    prop_assert_eq!($ty::from_i32(x).as_i32(), x);
                    prop_assert_eq!($ty::decode_exact(&wire), Ok($ty::from_i32(x)));
                )*};
            }
            survives!(
                OpCode,
                ErrorCode,
                EventType,
                KeeperState,
                WatcherType,
                AddWatchMode,
                CreateMode
            );
            prop_assert_eq!(Perms::decode_exact(&wire), Ok(Perms(x)));
        }

        /// The optional read-only byte: 36 + password bytes without it, one more with it.
        #[test]
        fn connect_response_read_only_is_optional(v in connect_response()) {
            let bytes = v.to_bytes();
            let expected = 20 + v.passwd.len() + usize::from(v.read_only.is_some());
            prop_assert_eq!(bytes.len(), expected);
            let without = ConnectResponse { read_only: None, ..v.clone() };
            prop_assert_eq!(without.to_bytes(), bytes.slice(..20 + v.passwd.len()));
        }
    }
}

mod multi_extra {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// A multi request is one header per op followed by the op's record, then the
        /// terminator.
        #[test]
        fn request_layout(v in multi_request()) {
            let bytes = v.to_bytes();
            let mut r = Reader::new(&bytes);
            for op in &v.ops {
                let header: MultiHeader = r.read().map_err(fail)?;
                prop_assert_eq!(header.op, op.op_code());
                prop_assert!(!header.done);
                prop_assert_eq!(header.err, ErrorCode::SystemError);
                let body = match op {
                    MultiOp::Create(b) | MultiOp::Create2(b) | MultiOp::CreateContainer(b) => {
                        read_eq(&mut r, b)
                    }
                    MultiOp::CreateTtl(b) => read_eq(&mut r, b),
                    MultiOp::Delete(b) => read_eq(&mut r, b),
                    MultiOp::SetData(b) => read_eq(&mut r, b),
                    MultiOp::Check(b) => read_eq(&mut r, b),
                    MultiOp::GetChildren(b) => read_eq(&mut r, b),
                    MultiOp::GetData(b) => read_eq(&mut r, b),
                    other => Err(TestCaseError::fail(format!("unexpected op {other:?}"))),
                };
                body?;
            }
            let end: MultiHeader = r.read().map_err(fail)?;
            prop_assert_eq!(end, MultiHeader { op: OpCode::Error, done: true, err: ErrorCode::SystemError });
            prop_assert_eq!(r.finish(), Ok(()));
        }

        /// An error result carries its code in both the header and the body; a decoder takes
        /// the body's.
        #[test]
        fn error_result_code_comes_from_the_body(header_err in error_code(), body_err in error_code()) {
            let mut buf = BytesMut::new();
            MultiHeader { op: OpCode::Error, done: false, err: header_err }.encode(&mut buf);
            ErrorResponse { err: body_err }.encode(&mut buf);
            MultiHeader { op: OpCode::Error, done: true, err: ErrorCode::SystemError }.encode(&mut buf);
            let v: MultiResponse = decoded(&buf.freeze())?;
            prop_assert_eq!(v.results, vec![MultiResult::Error(body_err)]);
        }
    }

    fn fail(e: zkwire::jute::DecodeError) -> TestCaseError {
        TestCaseError::fail(e.to_string())
    }

    fn read_eq<T: Decode + PartialEq + Debug>(r: &mut Reader<'_>, expected: &T) -> Check {
        let got: T = r.read().map_err(fail)?;
        prop_assert_eq!(&got, expected);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Frames.
// ---------------------------------------------------------------------------------------------

mod frames {
    use super::*;

    /// How a stream is cut into the chunks pushed into the decoder.
    #[derive(Debug, Clone)]
    enum Chunking {
        /// At these points (possibly repeated, giving empty chunks).
        Cuts(Vec<Index>),
        /// One byte at a time.
        EveryByte,
    }

    fn chunking() -> impl Strategy<Value = Chunking> {
        prop_oneof![
            6 => vec(any::<Index>(), 0..48).prop_map(Chunking::Cuts),
            1 => Just(Chunking::EveryByte),
        ]
    }

    fn chunks<'a>(stream: &'a [u8], chunking: &Chunking) -> Vec<&'a [u8]> {
        match chunking {
            Chunking::EveryByte => stream.chunks(1).collect(),
            Chunking::Cuts(cuts) => {
                let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
                at.push(0);
                at.push(stream.len());
                at.sort_unstable();
                at.windows(2).map(|w| &stream[w[0]..w[1]]).collect()
            }
        }
    }

    /// Appends the `i`th chunk either through `push` or straight into the receive buffer, as
    /// a driver reading from a socket would: bit `i % 8` of `via_buffer` chooses. Returns the
    /// chunk's length.
    fn feed(d: &mut FrameDecoder, i: usize, chunk: &[u8], via_buffer: u8) -> usize {
        if (via_buffer >> (i % 8)) & 1 == 1 {
            d.buffer_mut().extend_from_slice(chunk);
        } else {
            d.push(chunk);
        }
        chunk.len()
    }

    fn payloads(max_len: usize, max_count: usize) -> impl Strategy<Value = Vec<Vec<u8>>> {
        vec(vec(any::<u8>(), 0..=max_len), 0..=max_count)
    }

    fn frame_stream(payloads: &[Vec<u8>]) -> Result<BytesMut, TestCaseError> {
        let mut stream = BytesMut::new();
        for p in payloads {
            let start = stream.len();
            let n = encode_frame(&mut stream, |b| b.put_slice(p));
            prop_assert_eq!(n, p.len());
            prop_assert_eq!(
                &stream[start..start + 4],
                &i32::try_from(n).unwrap_or(-1).to_be_bytes()
            );
            prop_assert_eq!(&stream[start + 4..], &p[..]);
        }
        Ok(stream)
    }

    /// A length prefix the decoder must refuse under `cap`.
    fn bad_prefix(cap: u16) -> impl Strategy<Value = i32> {
        let cap = i32::from(cap);
        prop_oneof![(cap + 1)..=(cap + 1000), (1 << 20)..=i32::MAX, i32::MIN..0,]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Frames come out exactly as they went in, whatever the chunking, with the
        /// decoder's buffer holding only the bytes not yet handed out.
        #[test]
        fn any_chunking_yields_the_same_frames(
            payloads in payloads(299, 39),
            chunking in chunking(),
            via_buffer in any::<u8>(),
        ) {
            let stream = frame_stream(&payloads)?;
            let mut d = FrameDecoder::default();
            let mut got: Vec<Bytes> = Vec::new();
            let mut pushed = 0;
            let mut handed_out = 0;
            for (i, chunk) in chunks(&stream, &chunking).into_iter().enumerate() {
                pushed += feed(&mut d, i, chunk, via_buffer);
                while let Some(frame) = d.next_frame().map_err(|e| TestCaseError::fail(e.to_string()))? {
                    handed_out += 4 + frame.len();
                    got.push(frame);
                }
                prop_assert_eq!(d.buffered_len(), pushed - handed_out);
                // Drained: what is left is never a whole frame.
                if let Some(next) = payloads.get(got.len()) {
                    prop_assert!(d.buffered_len() < 4 + next.len());
                }
            }
            prop_assert_eq!(got.len(), payloads.len());
            for (frame, payload) in got.iter().zip(&payloads) {
                prop_assert_eq!(&frame[..], &payload[..]);
            }
            prop_assert_eq!(d.buffered_len(), 0);
            prop_assert_eq!(d.next_frame(), Ok(None));
        }

        /// A frame longer than the cap (or with a negative length) is an error as soon as its
        /// length arrives and the frames before it are drained; never a panic, never a big
        /// allocation, and the error repeats until `clear`.
        #[test]
        fn oversized_frame_is_rejected(
            (cap, good, prefix) in (0u16..=512).prop_flat_map(|cap| {
                (Just(cap), payloads(usize::from(cap), 19), bad_prefix(cap))
            }),
            junk in vec(any::<u8>(), 0..64),
            chunking in chunking(),
            via_buffer in any::<u8>(),
        ) {
            let cap_len = usize::from(cap);
            let mut stream = frame_stream(&good)?;
            let bad_at = stream.len();
            stream.put_i32(prefix);
            stream.put_slice(&junk);
            let expected = match usize::try_from(prefix) {
                Ok(len) => FrameError::TooLong { len, max: cap_len },
                Err(_) => FrameError::NegativeLength(prefix),
            };

            let mut d = FrameDecoder::new(cap_len);
            prop_assert_eq!(d.max_frame_len(), cap_len);
            let mut got: Vec<Bytes> = Vec::new();
            let mut error = None;
            let mut pushed = 0;
            for (i, chunk) in chunks(&stream, &chunking).into_iter().enumerate() {
                pushed += feed(&mut d, i, chunk, via_buffer);
                loop {
                    match d.next_frame() {
                        Ok(Some(frame)) => {
                            prop_assert!(error.is_none(), "frame after the error");
                            got.push(frame);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            prop_assert_eq!(e, expected);
                            error = Some(e);
                            break;
                        }
                    }
                }
                prop_assert_eq!(error.is_some(), pushed >= bad_at + 4);
            }
            prop_assert_eq!(error, Some(expected));
            prop_assert_eq!(got.len(), good.len());
            for (frame, payload) in got.iter().zip(&good) {
                prop_assert_eq!(&frame[..], &payload[..]);
            }
            prop_assert_eq!(d.next_frame(), Err(expected));
            prop_assert!(d.buffer_mut().capacity() < 1 << 20, "reserved for the bad frame");
            d.clear();
            prop_assert_eq!(d.buffered_len(), 0);
            prop_assert_eq!(d.next_frame(), Ok(None));
        }

        /// Reply frames built with `encode_frame` decode back, header then body, through any
        /// chunking.
        #[test]
        fn framed_records_round_trip(
            replies in vec((reply_header(), get_data_response()), 0..8),
            chunking in chunking(),
        ) {
            let mut stream = BytesMut::new();
            for (header, body) in &replies {
                let n = encode_frame(&mut stream, |b| {
                    header.encode(b);
                    body.encode(b);
                });
                prop_assert_eq!(n, header.encoded_len() + body.encoded_len());
            }
            let mut d = FrameDecoder::default();
            let mut got = Vec::new();
            for chunk in chunks(&stream, &chunking) {
                d.push(chunk);
                while let Some(frame) = d.next_frame().map_err(|e| TestCaseError::fail(e.to_string()))? {
                    let mut r = Reader::new(&frame);
                    let header: ReplyHeader =
                        r.read().map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let body: GetDataResponse =
                        r.read().map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(r.finish(), Ok(()));
                    got.push((header, body));
                }
            }
            prop_assert_eq!(got, replies);
            prop_assert_eq!(d.buffered_len(), 0);
        }
    }
}
