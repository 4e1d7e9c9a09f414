// Apache Curator contenders for zkwire-recipes' interop tests (recipes/tests/interop.rs).
//
// Compiled and started by the Rust test against the Debian Curator 5.4.0 jars. Each thread
// has its own CuratorFramework (its own session) and its own recipe instance, and cycles:
// acquire, ENTER at the referee, hold 0-2 ms, EXIT at the referee, release. The referee is
// a TCP server run by the test on 127.0.0.1 that checks exclusion across both sides; it
// answers every line with "OK".
//
// Usage: CuratorContender <connect string> <referee port> <recipe> <lock path> <threads> <cycles> <param>
//   recipe mutex      param ignored
//   recipe rw         param = percentage of write acquisitions
//   recipe semaphore  param = <SharedCount path>:<max leases per acquire>
//
// Protocol on stdout: "READY" once every thread is connected, then (after the test writes
// "GO" on stdin) "DONE <acquisitions>" at the end. For the semaphore, "COUNT <n>" reports
// the limit read from the SharedCount node. The program exits when its stdin closes (the
// test process died), and with status 2 on any error (stack trace on stderr).

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;

public final class CuratorContender {
    private static final AtomicInteger acquisitions = new AtomicInteger();

    public static void main(String[] args) throws Exception {
        Interop.expectArgs(args, 7,
                "CuratorContender <connect> <referee port> <recipe> <path> <threads> <cycles> <param>");
        String connect = args[0];
        int refereePort = Integer.parseInt(args[1]);
        String recipe = args[2];
        String path = args[3];
        int threads = Integer.parseInt(args[4]);
        int cycles = Integer.parseInt(args[5]);
        String param = args[6];

        List<Contender> contenders = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            contenders.add(new Contender(i, connect, refereePort, recipe, path, cycles, param));
        }
        Interop.readyThenGo();
        Interop.runAll(contenders, Contender::run, acquisitions);
    }

    private static final class Contender implements AutoCloseable {
        private final int id;
        private final String recipe;
        private final int cycles;
        private final String param;
        private final CuratorFramework client;
        private final Interop.Referee referee;
        private final Random random;
        private final String path;
        private SharedCount count;

        Contender(int id, String connect, int refereePort, String recipe, String path, int cycles, String param)
                throws Exception {
            this.id = id;
            this.recipe = recipe;
            this.path = path;
            this.cycles = cycles;
            this.param = param;
            this.random = new Random(0x5eed_0000L + id);
            this.client = Interop.connect(connect);
            this.referee = new Interop.Referee(refereePort);
        }

        void run() throws Exception {
            switch (recipe) {
                case "mutex": {
                    InterProcessMutex mutex = new InterProcessMutex(client, path);
                    for (int i = 0; i < cycles; i++) {
                        mutex.acquire();
                        hold("M");
                        mutex.release();
                    }
                    break;
                }
                case "rw": {
                    int writePercent = Integer.parseInt(param);
                    InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
                    for (int i = 0; i < cycles; i++) {
                        boolean write = random.nextInt(100) < writePercent;
                        InterProcessMutex lock = write ? rw.writeLock() : rw.readLock();
                        lock.acquire();
                        hold(write ? "W" : "R");
                        lock.release();
                    }
                    break;
                }
                case "semaphore": {
                    int colon = param.lastIndexOf(':');
                    String countPath = param.substring(0, colon);
                    int maxPerAcquire = Integer.parseInt(param.substring(colon + 1));
                    // The seed only matters if the node is missing; the test creates it.
                    count = new SharedCount(client, countPath, 0);
                    count.start();
                    if (id == 0) {
                        System.out.println("COUNT " + count.getCount());
                        System.out.flush();
                    }
                    InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, count);
                    for (int i = 0; i < cycles; i++) {
                        int qty = 1 + random.nextInt(maxPerAcquire);
                        Collection<Lease> leases = semaphore.acquire(qty);
                        hold("S " + qty);
                        semaphore.returnAll(leases);
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown recipe " + recipe);
            }
        }

        // ENTER, a short hold, EXIT: each answered by the referee before going on.
        private void hold(String kind) throws Exception {
            acquisitions.incrementAndGet();
            referee.call("ENTER J " + kind);
            int ms = random.nextInt(3);
            if (ms > 0) {
                Thread.sleep(ms);
            }
            referee.call("EXIT J " + kind);
        }

        @Override
        public void close() {
            try {
                if (count != null) {
                    count.close();
                }
                referee.close();
            } catch (Exception e) {
                // Closing anyway.
            }
            client.close();
        }
    }
}
