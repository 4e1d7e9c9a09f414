// Apache Curator side of zkwire-recipes' revocation tests (recipes/tests/revoke.rs).
//
// Compiled and started by the Rust test against the Debian Curator 5.4.0 jars. One
// CuratorFramework (one session) on the test's chroot; one holder thread that owns an
// InterProcessMutex on the lock path (Curator requires release on the acquiring thread).
//
// Usage: CuratorRevocation <connect string> <lock path>
//
// Commands on stdin, one a line:
//   ACQUIRE <0|1>   the holder thread creates a new InterProcessMutex (made revocable BEFORE
//                   the acquire when 1: the listener asks the holder thread to release),
//                   acquires it (up to 40 s) and holds it until RELEASE or a revocation.
//   RELEASE         asks the holder thread to release.
//   REVOKE <node>   Revoker.attemptRevoke(client, node) on the main thread.
//
// Events on stdout, one a line: "<EVENT> <epoch microseconds> [details]", the time taken when
// the event happened (wall clock, comparable with the test's SystemTime on the same host):
//   READY <t>                                connected
//   ACQUIRING <t>                            the holder thread calls acquire()
//   ACQUIRED <t> <our node> <first participant>
//   REVOKE_REQUESTED <t>                     our revocation listener was called
//   RELEASED <t> <revoked|command>           release() returned
//   REVOKE_SENT <t before> <t after> <node>  attemptRevoke returned
//   ERROR <t> <message>                      anything failed (stack trace on stderr)
// The program exits when its stdin closes.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Collection;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.Revoker;

public final class CuratorRevocation {
    /** An InterProcessMutex that tells its own lock node (getLockPath is protected). */
    private static final class PathMutex extends InterProcessMutex {
        PathMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String lockNode() {
            return getLockPath();
        }
    }

    private static long micros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    private static synchronized void emit(String event, long t, String details) {
        System.out.println(details.isEmpty() ? event + " " + t : event + " " + t + " " + details);
        System.out.flush();
    }

    private static void fail(Throwable e) {
        e.printStackTrace();
        emit("ERROR", micros(), String.valueOf(e).replace('\n', ' '));
    }

    public static void main(String[] args) throws Exception {
        Interop.expectArgs(args, 2, "CuratorRevocation <connect> <lock path>");
        String path = args[1];
        CuratorFramework client;
        try {
            client = Interop.connect(args[0]);
        } catch (IllegalStateException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }
        // Why the holder thread should release: "revoked" (listener) or "command" (RELEASE).
        BlockingQueue<String> releaseSignals = new LinkedBlockingQueue<>();
        ExecutorService holder = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "holder");
            t.setDaemon(true);
            return t;
        });
        emit("READY", micros(), "");

        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null) {
            String[] words = line.trim().split(" ");
            try {
                switch (words[0]) {
                    case "ACQUIRE": {
                        boolean revocable = "1".equals(words[1]);
                        releaseSignals.clear();
                        holder.submit(() -> hold(client, path, revocable, releaseSignals));
                        break;
                    }
                    case "RELEASE":
                        releaseSignals.add("command");
                        break;
                    case "REVOKE": {
                        long before = micros();
                        Revoker.attemptRevoke(client, words[1]);
                        emit("REVOKE_SENT", before, micros() + " " + words[1]);
                        break;
                    }
                    default:
                        emit("ERROR", micros(), "unknown command " + line);
                }
            } catch (Throwable e) {
                fail(e);
            }
        }
        holder.shutdownNow();
        client.close();
        System.exit(0);
    }

    /** On the holder thread: acquire, wait for a release signal, release on this thread. */
    private static void hold(CuratorFramework client, String path, boolean revocable,
            BlockingQueue<String> releaseSignals) {
        try {
            PathMutex mutex = new PathMutex(client, path);
            if (revocable) {
                // Called on a ZooKeeper event thread: only signal the holder thread.
                mutex.makeRevocable(m -> {
                    emit("REVOKE_REQUESTED", micros(), "");
                    releaseSignals.add("revoked");
                });
            }
            emit("ACQUIRING", micros(), "");
            if (!mutex.acquire(40, TimeUnit.SECONDS)) {
                emit("ERROR", micros(), "acquire timed out");
                return;
            }
            long acquired = micros();
            Collection<String> participants = mutex.getParticipantNodes();
            String first = participants.isEmpty() ? "-" : participants.iterator().next();
            emit("ACQUIRED", acquired, mutex.lockNode() + " " + first);
            String why = releaseSignals.poll(50, TimeUnit.SECONDS);
            mutex.release();
            emit("RELEASED", micros(), why == null ? "timeout" : why);
        } catch (Throwable e) {
            fail(e);
        }
    }
}
