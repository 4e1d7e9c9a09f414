// What the Curator interop programs of this directory share; compiled with each of them by
// the Rust tests (recipes/tests/support/mod.rs): the argument check, the client, the link to
// the test's referee, and the READY / GO / DONE protocol of the contender programs.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;

final class Interop {
    private Interop() {
    }

    /** Exits with status 2, printing "usage: <usage>", unless there are `count` arguments. */
    static void expectArgs(String[] args, int count, String usage) {
        if (args.length != count) {
            System.err.println("usage: " + usage);
            System.exit(2);
        }
    }

    /**
     * A started client of its own session on `connect` (10 s session, 5 s connection
     * timeout, exponential backoff from 50 ms, 10 retries), connected within 20 s.
     */
    static CuratorFramework connect(String connect) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new ExponentialBackoffRetry(50, 10))
                // The connect string carries a chroot; the tracker would drop it.
                .ensembleTracker(false)
                .build();
        client.start();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            client.close();
            throw new IllegalStateException("not connected to " + connect);
        }
        return client;
    }

    /**
     * Prints READY and waits for GO on stdin (exits with status 3 on anything else); from
     * then on, exits with status 3 once stdin ends (the test is gone).
     */
    static void readyThenGo() throws Exception {
        System.out.println("READY");
        System.out.flush();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (!"GO".equals(stdin.readLine())) {
            System.exit(3);
        }
        Thread watchdog = new Thread(() -> {
            try {
                while (stdin.readLine() != null) {
                    // Nothing else is expected; end-of-file means the test is gone.
                }
            } catch (Exception e) {
                // Same: the pipe is gone.
            }
            System.exit(3);
        });
        watchdog.setDaemon(true);
        watchdog.start();
    }

    /** A piece of work of one thread of {@link #runAll}. */
    interface Work<T> {
        void run(T on) throws Exception;
    }

    /**
     * Runs `work` on each of `on`, a thread each, and waits for all; closes each, then
     * exits: with status 2 if any failed (stack traces on stderr), else with status 0 after
     * printing "DONE <count>", `count` read once all are done.
     */
    static <T extends AutoCloseable> void runAll(List<T> on, Work<T> work, AtomicInteger count)
            throws Exception {
        CountDownLatch done = new CountDownLatch(on.size());
        AtomicInteger failures = new AtomicInteger();
        for (T each : on) {
            new Thread(() -> {
                try {
                    work.run(each);
                } catch (Throwable e) {
                    failures.incrementAndGet();
                    e.printStackTrace();
                } finally {
                    done.countDown();
                }
            }).start();
        }
        done.await();
        for (T each : on) {
            try {
                each.close();
            } catch (Exception e) {
                // Closing anyway.
            }
        }
        if (failures.get() > 0) {
            System.exit(2);
        }
        System.out.println("DONE " + count.get());
        System.out.flush();
        System.exit(0);
    }

    /** A connection to the test's referee (TCP on 127.0.0.1), which answers each line "OK". */
    static final class Referee implements AutoCloseable {
        private final Socket socket;
        private final BufferedReader from;
        private final PrintWriter to;

        Referee(int port) throws Exception {
            socket = new Socket("127.0.0.1", port);
            socket.setTcpNoDelay(true);
            from = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            to = new PrintWriter(new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8), true);
        }

        /** Sends `line` and waits for the referee's "OK". */
        void call(String line) throws Exception {
            to.println(line);
            String reply = from.readLine();
            if (!"OK".equals(reply)) {
                throw new IllegalStateException("referee answered " + reply + " to " + line);
            }
        }

        @Override
        public void close() throws Exception {
            socket.close();
        }
    }
}
