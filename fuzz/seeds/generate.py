#!/usr/bin/env python3
"""Writes the committed seed corpus: fuzz/seeds/<target>/<name>.

Codec seeds come from the golden fixtures (tests/golden/fixtures.txt, bytes written by
ZooKeeper 3.8.0's own serializer); session seeds are hand-built scripts in the op language
documented on `zkwire::fuzzing::session`. The selector tables below mirror the ones in
client/src/fuzzing/codec.rs: keep them in step. Run from anywhere; rewrites the seed dirs.
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "tests", "golden", "fixtures.txt")

# client/src/fuzzing/codec.rs `roundtrip` table, in order.
ROUNDTRIP = [
    "ConnectRequest", "ConnectResponse", "RequestHeader", "ReplyHeader", "Stat", "Id", "Acl",
    "Perms", "CreateRequest", "CreateTtlRequest", "CreateResponse", "Create2Response",
    "DeleteRequest", "ExistsRequest", "ExistsResponse", "GetDataRequest", "GetDataResponse",
    "SetDataRequest", "SetDataResponse", "GetAclRequest", "GetAclResponse", "SetAclRequest",
    "SetAclResponse", "GetChildrenRequest", "GetChildrenResponse", "GetChildren2Request",
    "GetChildren2Response", "GetAllChildrenNumberRequest", "GetAllChildrenNumberResponse",
    "GetEphemeralsRequest", "GetEphemeralsResponse", "SyncRequest", "SyncResponse",
    "CheckVersionRequest", "ReconfigRequest", "MultiHeader", "MultiRequest", "MultiResponse",
    "WatcherEvent", "SetWatches", "SetWatches2", "AddWatchRequest", "RemoveWatchesRequest",
    "CheckWatchesRequest", "ErrorResponse", "AuthPacket", "ClientInfo", "WhoAmIResponse",
    "OpCode", "ErrorCode",
]

# Fixture name prefix -> record type (longest prefixes first where they overlap).
FIXTURE_TYPES = [
    ("connect_request", "ConnectRequest"), ("connect_response", "ConnectResponse"),
    ("request_header", "RequestHeader"), ("reply_header", "ReplyHeader"), ("stat", "Stat"),
    ("id", "Id"), ("acl", "Acl"), ("create_ttl_request", "CreateTtlRequest"),
    ("create_request", "CreateRequest"), ("create2_response", "Create2Response"),
    ("create_response", "CreateResponse"), ("delete_request", "DeleteRequest"),
    ("exists_request", "ExistsRequest"), ("exists_response", "ExistsResponse"),
    ("get_data_request", "GetDataRequest"), ("get_data_response", "GetDataResponse"),
    ("set_data_request", "SetDataRequest"), ("set_data_response", "SetDataResponse"),
    ("get_acl_request", "GetAclRequest"), ("get_acl_response", "GetAclResponse"),
    ("set_acl_request", "SetAclRequest"), ("set_acl_response", "SetAclResponse"),
    ("get_children2_request", "GetChildren2Request"),
    ("get_children2_response", "GetChildren2Response"),
    ("get_children_request", "GetChildrenRequest"),
    ("get_children_response", "GetChildrenResponse"),
    ("get_all_children_number_request", "GetAllChildrenNumberRequest"),
    ("get_all_children_number_response", "GetAllChildrenNumberResponse"),
    ("get_ephemerals_request", "GetEphemeralsRequest"),
    ("get_ephemerals_response", "GetEphemeralsResponse"), ("sync_request", "SyncRequest"),
    ("sync_response", "SyncResponse"), ("check_version_request", "CheckVersionRequest"),
    ("multi_read_request", "MultiRequest"), ("multi_request", "MultiRequest"),
    ("multi_read_response", "MultiResponse"), ("multi_response", "MultiResponse"),
    ("reconfig_request", "ReconfigRequest"), ("check_watches_request", "CheckWatchesRequest"),
    ("remove_watches_request", "RemoveWatchesRequest"), ("add_watch_request", "AddWatchRequest"),
    ("error_response", "ErrorResponse"), ("set_watches2", "SetWatches2"),
    ("set_watches", "SetWatches"), ("auth_packet", "AuthPacket"),
    ("who_am_i_response", "WhoAmIResponse"), ("watcher_event", "WatcherEvent"),
]

TRIVIAL = {
    "RequestHeader", "ReplyHeader", "DeleteRequest", "ExistsResponse", "SetDataResponse",
    "GetAclRequest", "SetAclResponse", "GetChildrenRequest", "GetChildren2Request",
    "GetAllChildrenNumberRequest", "GetAllChildrenNumberResponse", "GetEphemeralsRequest",
    "SyncRequest", "SyncResponse", "CheckVersionRequest", "CheckWatchesRequest",
    "RemoveWatchesRequest", "AddWatchRequest", "ErrorResponse", "CreateResponse",
}

# client/src/fuzzing/codec.rs REPLY_OPS, in order; then 30 = ConnectResponse, 31 = notification.
REPLY_OPS = [
    "Create", "Create2", "CreateContainer", "CreateTtl", "Delete", "Exists", "GetData",
    "SetData", "GetAcl", "SetAcl", "GetChildren", "GetChildren2", "Sync", "Check", "Multi",
    "MultiRead", "Reconfig", "CheckWatches", "RemoveWatches", "AddWatch", "GetEphemerals",
    "GetAllChildrenNumber", "WhoAmI", "Auth", "SetWatches", "SetWatches2", "Ping",
    "CloseSession", "Unknown", "Notification",
]
CONNECT, NOTIFICATION = len(REPLY_OPS), len(REPLY_OPS) + 1

# Response fixture -> the op it answers.
REPLIES = {
    "create_response": "Create", "create2_response": "Create2", "exists_response": "Exists",
    "get_data_response": "GetData", "get_data_response_null": "GetData",
    "set_data_response": "SetData", "get_acl_response": "GetAcl", "set_acl_response": "SetAcl",
    "get_children_response": "GetChildren", "get_children2_response": "GetChildren2",
    "get_all_children_number_response": "GetAllChildrenNumber",
    "get_ephemerals_response": "GetEphemerals", "sync_response": "Sync",
    "multi_response": "Multi", "multi_response_error": "Multi", "multi_read_response": "MultiRead",
    "who_am_i_response": "WhoAmI", "error_response": "AddWatch",
}


def fixtures():
    out = {}
    with open(FIXTURES) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, hexbytes = line.split()
            out[name] = bytes.fromhex(hexbytes)
    return out


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def reply_header(xid, zxid=5, err=0):
    return struct.pack(">iqi", xid, zxid, err)


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def codec_seeds(fx):
    # roundtrip: one seed per record with more than a path and an int or two (the fuzzer
    # reaches those from these through the selector byte).
    seen = set()
    for name, data in fx.items():
        ty = next((t for p, t in FIXTURE_TYPES if name.startswith(p)), None)
        if ty is None or ty in seen or ty in TRIVIAL:
            continue
        seen.add(ty)
        write("roundtrip", name, bytes([ROUNDTRIP.index(ty)]) + data)
    write("roundtrip", "multi_response_error", bytes([ROUNDTRIP.index("MultiResponse")]) + fx["multi_response_error"])
    write("roundtrip", "vector_count_max", bytes([ROUNDTRIP.index("GetChildrenResponse")]) + b"\x7f\xff\xff\xff\x00\x00\x00\x00")

    # decode_reply: a selected subset of replies with their header.
    for name in ["get_data_response", "get_children2_response", "multi_response", "multi_response_error",
                 "get_acl_response", "who_am_i_response", "create2_response", "get_ephemerals_response"]:
        op = REPLY_OPS.index(REPLIES[name])
        write("decode_reply", name, bytes([op]) + reply_header(7) + fx[name])
    write("decode_reply", "error_reply", bytes([REPLY_OPS.index("GetData")]) + reply_header(7, 5, -101))
    write("decode_reply", "connect_response", bytes([CONNECT]) + fx["connect_response"])
    write("decode_reply", "connect_response_no_ro", bytes([CONNECT]) + fx["connect_response_no_ro"])
    write("decode_reply", "watcher_event", bytes([NOTIFICATION]) + fx["watcher_event"])
    write("decode_reply", "watcher_event_unknown", bytes([NOTIFICATION]) + fx["watcher_event_unknown"])

    # frame_decoder: cap selector, chunk-size count, chunk sizes, stream.
    default_cap = 6
    stream = b"".join(fx[n] for n in ["frame_connect", "frame_ping", "frame_get_data", "frame_close_session", "frame_auth"])
    write("frame_decoder", "frames_whole", bytes([default_cap, 0]) + stream)
    write("frame_decoder", "frames_bytewise", bytes([default_cap, 1, 1]) + stream)
    write("frame_decoder", "frames_mixed_chunks", bytes([default_cap, 3, 3, 0x80 | 7, 0x41]) + stream)
    write("frame_decoder", "small_cap", bytes([2, 1, 2]) + stream)
    for name, prefix in [("len_minus_one", b"\xff\xff\xff\xff"), ("len_i32_max", b"\x7f\xff\xff\xff"),
                         ("len_http", b"HTTP/1.1 400"), ("len_1mib_plus_one", struct.pack(">i", (1 << 20) + 1))]:
        write("frame_decoder", name, bytes([default_cap, 1, 5]) + fx["frame_ping"] + prefix)


# ----- session scripts (see the op table on zkwire::fuzzing::session) -----

SUBMIT, CONNECT_OP, REPLY, XID_REPLY, NOTIFY, RAW, ADVANCE, DISCONNECT, CANCEL, CLOSE, \
    REMOVE_WATCHER, SET_XID, REPLY_ALL, TO_DEADLINE = range(14)

# config(a, b): a % 6 = timeout index (3 = 2 s, 4 = 30 s); (a >> 3) % 3 = connect timeout;
# b % 4 hosts, b & 4 read-only, b & 8 small requests, b & 16 small frames, b & 32 resume,
# b & 64 configured auth.
CFG_30S = bytes([4, 1])
CFG_2S = bytes([3, 1])
WELCOME = [REPLY, 3 << 3 | 5, 0]  # ConnectResponse: 30 s, read-only byte present; no split
OK = [REPLY, 0, 0, 0]             # Ok reply to the oldest request, empty body, no split


def get_data(path=1, watch=False, deadline=None):
    flags = path | (8 if watch else 0) | (0x80 if deadline is not None else 0)
    return [SUBMIT, 0, flags] + ([deadline] if deadline is not None else [])


def session_seeds():
    s = {}
    s["handshake_reply_watch_close"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + get_data(1, True) + OK + [NOTIFY, 2, 0, 1] + [CLOSE, REPLY_ALL])
    s["handshake_expired"] = CFG_30S + bytes([SUBMIT, 7, 1, CONNECT_OP, REPLY, 0, 0])
    s["xid_mismatch_then_reconnect"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + get_data() + get_data(2) + [XID_REPLY, 0]
        + [CONNECT_OP] + WELCOME + get_data() + OK)
    s["duplicate_and_unknown_xid"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + get_data() + OK + [XID_REPLY, 2, CONNECT_OP] + WELCOME + [XID_REPLY, 3])
    s["reply_with_nothing_pending"] = CFG_30S + bytes([CONNECT_OP] + WELCOME + [XID_REPLY, 4])
    s["deadlines_and_pings"] = CFG_2S + bytes(
        [CONNECT_OP] + WELCOME + get_data(1, False, 50) + [ADVANCE, 0x40 | 40, TO_DEADLINE, TO_DEADLINE]
        + OK + [ADVANCE, 0x80 | 20, TO_DEADLINE])
    s["local_expiry"] = CFG_2S + bytes([CONNECT_OP] + WELCOME + get_data() + [DISCONNECT, ADVANCE, 0xc0 | 10])
    s["auth_failed"] = CFG_30S + bytes([CONNECT_OP] + WELCOME + [SUBMIT, 11, 0] + [REPLY, 1 | (9 << 1), 0])
    s["configured_auth_replay"] = bytes([4, 1 | 64]) + bytes(
        [CONNECT_OP] + WELCOME + [REPLY_ALL, DISCONNECT, CONNECT_OP] + WELCOME + [REPLY_ALL])
    s["watches_restored_after_reconnect"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + get_data(1, True) + OK + [SUBMIT, 4, 2] + OK + [SUBMIT, 1, 3 | 8]
        + [REPLY, 4 << 1, 0] + [DISCONNECT, CONNECT_OP] + WELCOME + [REPLY_ALL, NOTIFY, 0, 0, 3])
    s["persistent_watch_removed"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + [SUBMIT, 5, 1] + OK + [NOTIFY, 2, 0, 2, SUBMIT, 6, 1 | (2 << 4)] + OK)
    s["xid_rollover"] = CFG_30S + bytes(
        [SET_XID, 3, CONNECT_OP] + WELCOME + get_data() * 6 + [REPLY_ALL] + get_data() * 4 + [REPLY_ALL])
    s["hostile_raw_lengths"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + get_data() + [RAW, 4, 0xff, 0xff, 0xff, 0xff, CONNECT_OP] + WELCOME
        + get_data() + [RAW, 4] + list(b"HTTP"))
    s["notification_bad_utf8_unknown_type"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + [NOTIFY, 7, 4, 1, NOTIFY, 2, 1, 8])
    s["read_only_then_read_write"] = bytes([4, 1 | 4]) + bytes(
        [CONNECT_OP, REPLY, 3 << 3 | 2, 0, DISCONNECT, CONNECT_OP] + WELCOME + get_data() + OK)
    s["split_reply_and_cancel"] = CFG_30S + bytes(
        [CONNECT_OP] + WELCOME + get_data() + get_data(2) + [CANCEL, 0, REPLY, 0, 3, 1, 2, 3, 7]
        + OK + [REMOVE_WATCHER, 0])
    s["small_limits_oversized_request"] = bytes([4, 1 | 8 | 16]) + bytes(
        [SUBMIT, 13, 0, CONNECT_OP] + WELCOME + get_data() + [REPLY, 0, 23] + list(range(23)) + [0]
        + get_data() + [RAW, 4, 0, 0, 0, 65])
    for name, data in s.items():
        write("session", name, data)


def main():
    fx = fixtures()
    codec_seeds(fx)
    session_seeds()


if __name__ == "__main__":
    main()
