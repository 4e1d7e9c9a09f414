//! Hostile input: truncations, bad lengths, impossible counts and invalid UTF-8.
//!
//! Every case must produce a decode error naming the record, never a panic, and must not
//! allocate at all: `decode_exact` validates a whole frame before it allocates. The counting
//! allocator is global, so this binary holds a single test to keep other threads' allocations
//! out of the measurement.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::alloc::System;

use bytes::Bytes;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use zkwire::jute::{
    Decode, DecodeError, DecodeErrorKind, FrameDecoder, FrameError, DEFAULT_MAX_FRAME_LEN,
};
use zkwire::proto::*;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

type DecodeFn = fn(&Bytes) -> Result<(), DecodeError>;

fn d<T: Decode>(bytes: &Bytes) -> Result<(), DecodeError> {
    T::decode_exact(bytes).map(drop)
}

/// The record type and jute name each fixture holds.
fn decoder_for(name: &str) -> Option<(DecodeFn, &'static str)> {
    macro_rules! pick {
        ($($prefix:literal => $ty:ty,)*) => {
            $( if name.starts_with($prefix) { return Some((d::<$ty>, <$ty as Decode>::NAME)); } )*
        };
    }
    pick! {
        "connect_request" => ConnectRequest,
        "connect_response" => ConnectResponse,
        "request_header" => RequestHeader,
        "reply_header" => ReplyHeader,
        "stat" => Stat,
        "id" => Id,
        "acl" => Acl,
        "create_request" => CreateRequest,
        "create_ttl_request" => CreateTtlRequest,
        "create_response" => CreateResponse,
        "create2_response" => Create2Response,
        "delete_request" => DeleteRequest,
        "exists_request" => ExistsRequest,
        "exists_response" => ExistsResponse,
        "get_data_request" => GetDataRequest,
        "get_data_response" => GetDataResponse,
        "set_data_request" => SetDataRequest,
        "set_data_response" => SetDataResponse,
        "get_acl_request" => GetAclRequest,
        "get_acl_response" => GetAclResponse,
        "set_acl_request" => SetAclRequest,
        "set_acl_response" => SetAclResponse,
        "get_children_request" => GetChildrenRequest,
        "get_children_response" => GetChildrenResponse,
        "get_children2_request" => GetChildren2Request,
        "get_children2_response" => GetChildren2Response,
        "get_all_children_number_request" => GetAllChildrenNumberRequest,
        "get_all_children_number_response" => GetAllChildrenNumberResponse,
        "get_ephemerals_request" => GetEphemeralsRequest,
        "get_ephemerals_response" => GetEphemeralsResponse,
        "sync_request" => SyncRequest,
        "sync_response" => SyncResponse,
        "check_version_request" => CheckVersionRequest,
        "multi_request" => MultiRequest,
        "multi_read_request" => MultiRequest,
        "multi_response" => MultiResponse,
        "multi_read_response" => MultiResponse,
        "reconfig_request" => ReconfigRequest,
        "check_watches_request" => CheckWatchesRequest,
        "remove_watches_request" => RemoveWatchesRequest,
        "add_watch_request" => AddWatchRequest,
        "error_response" => ErrorResponse,
        "set_watches2" => SetWatches2,
        "set_watches" => SetWatches,
        "auth_packet" => AuthPacket,
        "who_am_i_response" => WhoAmIResponse,
        "watcher_event" => WatcherEvent,
    }
    None
}

fn fixtures() -> Vec<(String, Bytes)> {
    include_str!("../golden/fixtures.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("frame_"))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, hex)| {
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect::<Vec<u8>>();
            (name.to_owned(), Bytes::from(bytes))
        })
        .collect()
}

/// Runs `decode` and returns its outcome with the bytes it allocated.
fn measured(decode: DecodeFn, bytes: &Bytes) -> (Result<(), DecodeError>, usize) {
    fewest_allocated(|| decode(bytes))
}

/// Runs `work` three times; returns its first outcome and the fewest bytes a run allocated.
///
/// The counter is process-wide, and the test harness's own threads allocate now and then (a CI
/// run once counted 148 bytes that were not the decoder's). The work is deterministic, so the
/// fewest bytes seen over a few runs is what the work itself allocates.
fn fewest_allocated<R>(mut work: impl FnMut() -> R) -> (R, usize) {
    let mut fewest = usize::MAX;
    let mut first = None;
    for _ in 0..3 {
        let region = Region::new(GLOBAL);
        let outcome = work();
        fewest = fewest.min(region.change().bytes_allocated);
        first.get_or_insert(outcome);
    }
    (first.expect("ran three times"), fewest)
}

fn expect_error(what: &str, decode: DecodeFn, record: &str, bytes: &[u8]) -> DecodeError {
    let bytes = Bytes::copy_from_slice(bytes);
    let (result, allocated) = measured(decode, &bytes);
    let err = match result {
        Ok(()) => panic!("{what}: decoded without error"),
        Err(err) => err,
    };
    assert_eq!(
        err.outer_record(),
        record,
        "{what}: error must name the record: {err}"
    );
    assert!(
        err.to_string().contains(record),
        "{what}: message must name the record: {err}"
    );
    // Frames are validated in full before decoding allocates anything.
    assert_eq!(
        allocated,
        0,
        "{what}: allocated {allocated} bytes for a {}-byte frame",
        bytes.len()
    );
    err
}

fn truncations(cases: &mut usize) {
    for (name, bytes) in fixtures() {
        let (decode, record) =
            decoder_for(&name).unwrap_or_else(|| panic!("no decoder for {name}"));
        // The whole fixture decodes.
        decode(&bytes).unwrap_or_else(|e| {
            if !name.ends_with("null_vector") {
                panic!("{name}: {e}")
            }
        });
        for cut in 0..bytes.len() {
            let truncated = bytes.slice(..cut);
            let (result, allocated) = measured(decode, &truncated);
            *cases += 1;
            // The only legal truncation: a ConnectResponse without its optional read-only byte.
            if name.starts_with("connect_response") && cut == 36 {
                assert!(
                    result.is_ok(),
                    "{name} without the read-only byte must decode"
                );
                continue;
            }
            let err = match result {
                Ok(()) => panic!("{name} truncated at {cut} decoded"),
                Err(err) => err,
            };
            assert_eq!(err.outer_record(), record, "{name} at {cut}: {err}");
            assert_eq!(
                allocated, 0,
                "{name} truncated at {cut}: allocated {allocated} bytes"
            );
        }
    }
}

/// Each case: what it is, the record type that decodes it and the jute name its error must
/// give, its bytes, and the [`DecodeErrorKind`] the error must match.
macro_rules! bad_records {
    ($($what:literal: $ty:ty, $record:literal, $bytes:expr => $kind:pat,)*) => {$(
        let e = expect_error($what, d::<$ty>, $record, &$bytes);
        assert!(matches!(e.kind(), $kind), "{}: unexpected error {e:?}", $what);
    )*};
}

fn bad_lengths_and_counts(cases: &mut usize) {
    use DecodeErrorKind::{BadCount, BadLength, BadUtf8, UnexpectedEnd, UnexpectedNull};
    // A vector count of 2^31-1 inside a 12-byte frame.
    let huge_count = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1, b'a', 0, 0, 0];
    let mut huge_buffer = vec![0x7f, 0xff, 0xff, 0xff];
    huge_buffer.extend_from_slice(&[0; 68]);
    bad_records! {
        "length -2": ExistsRequest, "ExistsRequest", [0xff, 0xff, 0xff, 0xfe, 1]
            => BadLength { len: -2, offset: 0 },
        "null path": ExistsRequest, "ExistsRequest", [0xff, 0xff, 0xff, 0xff, 1]
            => UnexpectedNull { what: "string", .. },
        "0x7fffffff path length": SyncResponse, "SyncResponse",
            [0x7f, 0xff, 0xff, 0xff, b'/', b'a'] => UnexpectedEnd { needed: 0x7fff_ffff, .. },
        "0x7fffffff data length": GetDataResponse, "GetDataResponse", huge_buffer
            => UnexpectedEnd { .. },
        "2^31-1 children": GetChildrenResponse, "GetChildrenResponse", huge_count
            => BadCount { count: i32::MAX, .. },
        "2^31-1 ACLs": GetAclResponse, "GetACLResponse", huge_count
            => BadCount { count: i32::MAX, .. },
        "2^31-1 infos": WhoAmIResponse, "WhoAmIResponse", huge_count => BadCount { .. },
        "count -2": GetEphemeralsResponse, "GetEphemeralsResponse", [0xff, 0xff, 0xff, 0xfe]
            => BadCount { count: -2, .. },
        // Invalid UTF-8 in a notification's path.
        "invalid UTF-8 event path": WatcherEvent, "WatcherEvent",
            [0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 3, b'/', 0xc3, 0x28] => BadUtf8 { offset: 12 },
        // An unknown multi result type cannot be skipped: its body length is unknown.
        "unknown multi type": MultiResponse, "MultiResponse", [0, 0, 0x03, 0xe7, 0, 0, 0, 0, 0]
            => DecodeErrorKind::UnknownValue { value: 999, .. },
    }
    // Invalid UTF-8 in a path inside a multi result: the error names the inner record.
    let mut bad_multi = vec![0, 0, 0, 1, 0, 0, 0, 0, 0];
    bad_multi.extend_from_slice(&[0, 0, 0, 2, b'/', 0xff]);
    let e = expect_error(
        "invalid UTF-8 in multi",
        d::<MultiResponse>,
        "MultiResponse",
        &bad_multi,
    );
    assert_eq!(e.record(), "CreateResponse");
    *cases += 12;
}

fn bad_frames(cases: &mut usize) {
    for (prefix, expected) in [
        ([0xff, 0xff, 0xff, 0xfe], FrameError::NegativeLength(-2)),
        ([0xff, 0xff, 0xff, 0xff], FrameError::NegativeLength(-1)),
        (
            [0x7f, 0xff, 0xff, 0xff],
            FrameError::TooLong {
                len: 0x7fff_ffff,
                max: DEFAULT_MAX_FRAME_LEN,
            },
        ),
    ] {
        let (outcome, allocated) = fewest_allocated(|| {
            let mut decoder = FrameDecoder::default();
            decoder.push(&prefix);
            decoder.push(&[0; 8]);
            decoder.next_frame()
        });
        assert_eq!(outcome, Err(expected));
        assert!(allocated <= 64, "frame error allocated {allocated} bytes");
        *cases += 1;
    }
}

#[test]
fn hostile_inputs_fail_cleanly_without_large_allocations() {
    let mut cases = 0;
    truncations(&mut cases);
    bad_lengths_and_counts(&mut cases);
    bad_frames(&mut cases);
    println!("{cases} hostile cases, none allocated");
    zkwire_testing::support::figure("hostile.cases", cases);
    assert!(cases > 1000, "only {cases} cases");
}
