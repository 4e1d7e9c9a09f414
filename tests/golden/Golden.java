// Golden-fixture generator for zkwire's jute codec.
//
// Serializes a fixed set of ZooKeeper wire records with ZooKeeper's own Java
// serializer (org.apache.jute.BinaryOutputArchive) and prints one line per
// fixture: "<name> <lowercase hex>". The Rust test-suite decodes/encodes the
// same values and compares against tests/golden/fixtures.txt.
//
// Do not run directly; use tests/golden/generate.sh (it compiles this file
// into a temporary directory against the ZooKeeper jars).
//
// Every non-ASCII character is written as a Java unicode escape (backslash-u
// plus four hex digits) so the result does not
// depend on the source file's encoding.

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.jute.BinaryOutputArchive;
import org.apache.jute.Record;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.MultiOperationRecord;
import org.apache.zookeeper.MultiResponse;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Version;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.proto.AddWatchRequest;
import org.apache.zookeeper.proto.AuthPacket;
import org.apache.zookeeper.proto.CheckVersionRequest;
import org.apache.zookeeper.proto.CheckWatchesRequest;
import org.apache.zookeeper.proto.ConnectRequest;
import org.apache.zookeeper.proto.ConnectResponse;
import org.apache.zookeeper.proto.Create2Response;
import org.apache.zookeeper.proto.CreateRequest;
import org.apache.zookeeper.proto.CreateResponse;
import org.apache.zookeeper.proto.CreateTTLRequest;
import org.apache.zookeeper.proto.DeleteRequest;
import org.apache.zookeeper.proto.ErrorResponse;
import org.apache.zookeeper.proto.ExistsRequest;
import org.apache.zookeeper.proto.ExistsResponse;
import org.apache.zookeeper.proto.GetACLRequest;
import org.apache.zookeeper.proto.GetACLResponse;
import org.apache.zookeeper.proto.GetAllChildrenNumberRequest;
import org.apache.zookeeper.proto.GetAllChildrenNumberResponse;
import org.apache.zookeeper.proto.GetChildren2Request;
import org.apache.zookeeper.proto.GetChildren2Response;
import org.apache.zookeeper.proto.GetChildrenRequest;
import org.apache.zookeeper.proto.GetChildrenResponse;
import org.apache.zookeeper.proto.GetDataRequest;
import org.apache.zookeeper.proto.GetDataResponse;
import org.apache.zookeeper.proto.GetEphemeralsRequest;
import org.apache.zookeeper.proto.GetEphemeralsResponse;
import org.apache.zookeeper.proto.ReconfigRequest;
import org.apache.zookeeper.proto.RemoveWatchesRequest;
import org.apache.zookeeper.proto.ReplyHeader;
import org.apache.zookeeper.proto.RequestHeader;
import org.apache.zookeeper.proto.SetACLRequest;
import org.apache.zookeeper.proto.SetACLResponse;
import org.apache.zookeeper.proto.SetDataRequest;
import org.apache.zookeeper.proto.SetDataResponse;
import org.apache.zookeeper.proto.SetWatches;
import org.apache.zookeeper.proto.SetWatches2;
import org.apache.zookeeper.proto.SyncRequest;
import org.apache.zookeeper.proto.SyncResponse;
import org.apache.zookeeper.proto.WatcherEvent;
import org.apache.zookeeper.proto.WhoAmIResponse;

public class Golden {

    /** Writes something onto an archive. */
    interface Body {
        void write(BinaryOutputArchive archive) throws IOException;
    }

    private static final PrintStream OUT =
        new PrintStream(System.out, false, StandardCharsets.UTF_8);

    // ---------------------------------------------------------------- values

    // Stat(czxid, mzxid, ctime, mtime, version, cversion, aversion,
    //      ephemeralOwner, dataLength, numChildren, pzxid)
    static final Stat STAT = new Stat(
        0x0102030405060708L, // czxid
        2L,                  // mzxid
        1700000000000L,      // ctime
        1700000000001L,      // mtime
        5,                   // version
        -1,                  // cversion
        7,                   // aversion
        0x0100000826a80000L, // ephemeralOwner
        11,                  // dataLength
        3,                   // numChildren
        9L);                 // pzxid

    static final List<ACL> OPEN =
        List.of(new ACL(31, new Id("world", "anyone")));

    static final List<ACL> MIXED = List.of(
        new ACL(31, new Id("world", "anyone")),
        new ACL(1, new Id("digest", "user:K4Zb3VwG6pJbQ9sLQnMcXxk0aVE=")),
        new ACL(7, new Id("ip", "127.0.0.1")));

    static final String UPATH =
        "/zkwire/\u00fcn\u00efc\u00f6d\u00e9/\u8def\u5f84";

    static final byte[] PW = new byte[] {
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
        0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    };

    static final byte[] SERVER_PW = unhex("cfaa7212b0e5b1a5c5b75b677985663e");

    // --------------------------------------------------------------- helpers

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static byte[] unhex(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xf, 16));
            sb.append(Character.forDigit(b & 0xf, 16));
        }
        return sb.toString();
    }

    static byte[] bytesOf(Body body) throws IOException {
        ByteArrayOutputStream baos = new ByteArrayOutputStream();
        BinaryOutputArchive archive = BinaryOutputArchive.getArchive(baos);
        body.write(archive);
        return baos.toByteArray();
    }

    /** Fixtures emitted so far, in order: name -> hex. */
    static final Map<String, String> EMITTED = new LinkedHashMap<>();

    static void emitBytes(String name, byte[] bytes) {
        String hex = hex(bytes);
        if (EMITTED.put(name, hex) != null) {
            throw new IllegalStateException("duplicate fixture name " + name);
        }
        OUT.println(name + " " + hex);
    }

    static void emit(String name, Body body) throws IOException {
        emitBytes(name, bytesOf(body));
    }

    /** A bare record. */
    static void emit(String name, Record record) throws IOException {
        emit(name, a -> record.serialize(a, name));
    }

    /**
     * A whole client-to-server frame, laid out like ClientCnxn.Packet's
     * buffer: 4-byte big-endian payload length, then the RequestHeader (if
     * any), then the record (if any); a ConnectRequest is followed by the
     * readOnly flag.
     */
    static void emitFrame(String name, RequestHeader header, Record request,
                          boolean readOnly) throws IOException {
        byte[] payload = bytesOf(a -> {
            if (header != null) {
                header.serialize(a, "header");
            }
            if (request instanceof ConnectRequest) {
                request.serialize(a, "connect");
                a.writeBool(readOnly, "readOnly");
            } else if (request != null) {
                request.serialize(a, "request");
            }
        });
        emit(name, a -> {
            a.writeInt(payload.length, "len");
            for (byte b : payload) {
                a.writeByte(b, "b");
            }
        });
    }

    /** Compares an emitted fixture against an independently known dump. */
    static void expect(String name, String expectedHex) {
        String got = EMITTED.get(name);
        String want = expectedHex.replace(" ", "").replace("|", "");
        if (!want.equals(got)) {
            throw new IllegalStateException(
                "sanity check failed for " + name + ": got " + got + ", want " + want);
        }
    }

    // ------------------------------------------------------------------ main

    public static void main(String[] args) throws IOException {
        OUT.println("# generated by tests/golden/generate.sh from ZooKeeper "
            + Version.getVersion() + " jars; do not edit");

        // --- session establishment (no RequestHeader; readOnly appended the
        // way ClientCnxn does it, since the 3.8 records have no such field)
        ConnectRequest connect = new ConnectRequest(0, 0x1234L, 30000, 0L, new byte[16]);
        emit("connect_request", a -> {
            connect.serialize(a, "connect");
            a.writeBool(false, "readOnly");
        });
        ConnectRequest reattach =
            new ConnectRequest(0, 0x7fffffff00000001L, 4000, 0x0100000826a80000L, PW);
        emit("connect_request_reattach_ro", a -> {
            reattach.serialize(a, "connect");
            a.writeBool(true, "readOnly");
        });
        ConnectResponse connected =
            new ConnectResponse(0, 30000, 0x010000082b730000L, SERVER_PW);
        emit("connect_response", a -> {
            connected.serialize(a, "connect");
            a.writeBool(false, "readOnly");
        });
        emit("connect_response_ro", a -> {
            connected.serialize(a, "connect");
            a.writeBool(true, "readOnly");
        });
        emit("connect_response_no_ro", connected);
        ConnectResponse expired = new ConnectResponse(0, 0, 0L, new byte[16]);
        emit("connect_response_expired", a -> {
            expired.serialize(a, "connect");
            a.writeBool(false, "readOnly");
        });

        // --- headers
        emit("request_header", new RequestHeader(5, 4));
        emit("request_header_ping", new RequestHeader(-2, 11));
        emit("request_header_unknown_op", new RequestHeader(1, 999));
        emit("reply_header", new ReplyHeader(7, 0x100000005L, 0));
        emit("reply_header_error", new ReplyHeader(8, 0x100000006L, -101));
        emit("reply_header_notification", new ReplyHeader(-1, -1L, 0));
        emit("reply_header_unknown_err", new ReplyHeader(1, 2L, -999));

        // --- data records
        emit("stat", STAT);
        emit("id", new Id("digest", "user:K4Zb3VwG6pJbQ9sLQnMcXxk0aVE="));
        emit("acl", new ACL(7, new Id("ip", "127.0.0.1")));

        // --- requests / responses
        emit("create_request", new CreateRequest(UPATH, utf8("hello"), MIXED, 0));
        emit("create_request_null_data", new CreateRequest("/a", null, OPEN, 3));
        emit("create_request_container", new CreateRequest("/c", new byte[0], OPEN, 4));
        emit("create_ttl_request", new CreateTTLRequest("/ttl", utf8("t"), OPEN, 5, 60000L));
        emit("create_response", new CreateResponse("/a0000000007"));
        emit("create2_response", new Create2Response(UPATH, STAT));
        emit("delete_request", new DeleteRequest("/a", -1));
        emit("exists_request", new ExistsRequest("/a", true));
        emit("exists_response", new ExistsResponse(STAT));
        emit("get_data_request", new GetDataRequest("/a", false));
        emit("get_data_response",
            new GetDataResponse(new byte[] {0x00, 0x01, (byte) 0xff, (byte) 0x80}, STAT));
        emit("get_data_response_null", new GetDataResponse(null, STAT));
        emit("set_data_request", new SetDataRequest("/a", utf8("v2"), 5));
        emit("set_data_request_null", new SetDataRequest("/a", null, -1));
        emit("set_data_response", new SetDataResponse(STAT));
        emit("get_acl_request", new GetACLRequest("/a"));
        emit("get_acl_response", new GetACLResponse(MIXED, STAT));
        emit("set_acl_request", new SetACLRequest("/a", MIXED, 3));
        emit("set_acl_response", new SetACLResponse(STAT));
        emit("get_children_request", new GetChildrenRequest("/", true));
        emit("get_children_response", new GetChildrenResponse(
            List.of("a", "\u00fcn\u00ef", "\u8def\u5f84-0000000001")));
        emit("get_children_response_empty", new GetChildrenResponse(List.of()));
        emit("get_children_response_null_vector", new GetChildrenResponse(null));
        emit("get_children2_request", new GetChildren2Request("/a", false));
        emit("get_children2_response", new GetChildren2Response(List.of("x", "y"), STAT));
        emit("get_all_children_number_request", new GetAllChildrenNumberRequest("/a"));
        emit("get_all_children_number_response", new GetAllChildrenNumberResponse(42));
        emit("get_ephemerals_request", new GetEphemeralsRequest("/"));
        emit("get_ephemerals_response",
            new GetEphemeralsResponse(List.of("/e1", "/e2/\u00fcn\u00ef")));
        emit("sync_request", new SyncRequest("/a"));
        emit("sync_response", new SyncResponse("/a"));
        emit("check_version_request", new CheckVersionRequest("/a", 4));

        // --- multi
        List<Op> ops = List.of(
            Op.check("/a", 0),
            Op.create("/b", utf8("d"), OPEN, CreateMode.PERSISTENT),
            Op.create("/c", null, OPEN, CreateMode.CONTAINER),
            Op.create("/t", utf8("t"), OPEN, CreateMode.PERSISTENT_WITH_TTL, 1000L),
            Op.setData("/a", utf8("new"), -1),
            Op.delete("/b", 2));
        emit("multi_request", new MultiOperationRecord(ops));
        // multi_request_single_create2 is intentionally absent: no public Op
        // factory in 3.8.0 yields opcode 15 (Op.Create.getOpcode only returns
        // 1, 19 or 21), and MultiOperationRecord.deserialize maps an incoming
        // 15 back to Op.create (opcode 1).
        emit("multi_read_request", new MultiOperationRecord(
            List.of(Op.getChildren("/a"), Op.getData("/b"))));

        MultiResponse multi = new MultiResponse();
        multi.add(new OpResult.CheckResult());
        multi.add(new OpResult.CreateResult("/b"));
        multi.add(new OpResult.CreateResult("/c", STAT));
        multi.add(new OpResult.SetDataResult(STAT));
        multi.add(new OpResult.DeleteResult());
        emit("multi_response", multi);

        MultiResponse multiError = new MultiResponse();
        multiError.add(new OpResult.ErrorResult(0));
        multiError.add(new OpResult.ErrorResult(-101));
        multiError.add(new OpResult.ErrorResult(-2));
        emit("multi_response_error", multiError);

        MultiResponse multiRead = new MultiResponse();
        multiRead.add(new OpResult.GetDataResult(utf8("x"), STAT));
        multiRead.add(new OpResult.GetChildrenResult(List.of("a", "b")));
        multiRead.add(new OpResult.ErrorResult(-101));
        emit("multi_read_response", multiRead);

        emit("multi_response_empty", new MultiResponse());

        // --- reconfig, watches, auth, misc
        emit("reconfig_request",
            new ReconfigRequest("server.4=127.0.0.4:2888:3888;2181", null, null, -1L));
        emit("reconfig_request_all",
            new ReconfigRequest(null, "1,2", "server.1=127.0.0.1:2888:3888;2181", 0x100000003L));
        emit("check_watches_request", new CheckWatchesRequest("/a", 2));
        emit("remove_watches_request", new RemoveWatchesRequest("/a", 3));
        emit("add_watch_request", new AddWatchRequest("/a", 1));
        emit("error_response", new ErrorResponse(0));
        emit("error_response_nowatcher", new ErrorResponse(-121));
        emit("set_watches", new SetWatches(
            5L, List.of("/a", "/\u00fcn\u00ef"), List.of("/b"), List.of()));
        emit("set_watches2", new SetWatches2(
            5L, List.of("/a"), List.of(), List.of(), List.of(), List.of("/b")));
        emit("auth_packet", new AuthPacket(0, "digest", utf8("u:p")));
        emit("auth_packet_null", new AuthPacket(0, "ip", null));
        emit("who_am_i_response", new WhoAmIResponse(List.of(
            new ClientInfo("ip", "127.0.0.1"), new ClientInfo("digest", "\u00fc"))));
        emit("watcher_event", new WatcherEvent(3, 3, "/p"));
        emit("watcher_event_unknown", new WatcherEvent(99, 42, "/\u00fcn\u00ef"));

        // --- whole frames
        emitFrame("frame_connect", null, connect, false);
        emitFrame("frame_ping", new RequestHeader(-2, 11), null, false);
        emitFrame("frame_get_data", new RequestHeader(1, 4), new GetDataRequest("/a", true), false);
        emitFrame("frame_close_session", new RequestHeader(5, -11), null, false);
        emitFrame("frame_auth", new RequestHeader(-4, 100),
            new AuthPacket(0, "digest", utf8("u:p")), false);

        // --- sanity checks against independently known dumps
        expect("connect_request",
            "00000000 0000000000001234 00007530 0000000000000000 00000010"
            + " 00000000000000000000000000000000 00");
        expect("multi_response_error",
            "ffffffff 00 00000000 00000000 | ffffffff 00 ffffff9b ffffff9b"
            + " | ffffffff 00 fffffffe fffffffe | ffffffff 01 ffffffff");
        expect("frame_ping", "00000008 fffffffe 0000000b");
        expect("frame_get_data", "0000000f 00000001 00000004 00000002 2f61 01");

        // With --report, print the op codes / result types Java chose (on
        // stderr, so the fixture stream stays clean).
        if (Arrays.asList(args).contains("--report")) {
            StringBuilder types = new StringBuilder("multi_request op types:");
            for (Op op : ops) {
                types.append(' ').append(op.getType());
            }
            types.append("\nmulti_read_request op types:");
            for (Op op : List.of(Op.getChildren("/a"), Op.getData("/b"))) {
                types.append(' ').append(op.getType());
            }
            for (Map.Entry<String, MultiResponse> e : Map.of(
                    "multi_response", multi,
                    "multi_response_error", multiError,
                    "multi_read_response", multiRead).entrySet().stream()
                    .sorted(Map.Entry.comparingByKey()).toList()) {
                types.append('\n').append(e.getKey()).append(" result types:");
                for (OpResult r : e.getValue()) {
                    types.append(' ').append(r.getType());
                }
            }
            System.err.println(types);
        }

        OUT.flush();
        if (OUT.checkError()) {
            System.exit(1);
        }
    }
}
