// Apache Curator election participants for zkwire-recipes' leader interop test
// (recipes/tests/leader.rs), compiled and run by the Rust test against the Debian Curator
// 5.4.0 jars.
//
// Each thread has its own CuratorFramework (its own session) and takes part in the
// election on <path> <cycles> times, reporting each term to the test's referee (TCP on
// 127.0.0.1, "ENTER J M" / "EXIT J M", each answered "OK"):
//   recipe latch     a new LeaderLatch (id "J<thread>") per cycle: start, await, ENTER,
//                    hold 0-2 ms, EXIT, close
//   recipe selector  one LeaderSelector (id "J<thread>", autoRequeue) whose takeLeadership
//                    does ENTER, hold 0-2 ms, EXIT, and returns; closed after <cycles> terms
//
// Usage: CuratorLeader <connect string> <referee port> <recipe> <path> <threads> <cycles>
// Protocol on stdout: "READY" once every thread is connected, then (after "GO" on stdin)
// "DONE <terms>" at the end. Exits when stdin closes, and with status 2 on any error.

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;

public final class CuratorLeader {
    private static final AtomicInteger terms = new AtomicInteger();

    public static void main(String[] args) throws Exception {
        Interop.expectArgs(args, 6,
                "CuratorLeader <connect> <referee port> <latch|selector> <path> <threads> <cycles>");
        int threads = Integer.parseInt(args[4]);
        List<Participant> participants = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            participants.add(new Participant(i, args[0], Integer.parseInt(args[1]), args[3]));
        }
        Interop.readyThenGo();
        String recipe = args[2];
        int cycles = Integer.parseInt(args[5]);
        Interop.runAll(participants, p -> {
            if (recipe.equals("latch")) {
                p.latch(cycles);
            } else {
                p.selector(cycles);
            }
        }, terms);
    }

    private static final class Participant implements AutoCloseable {
        private final int id;
        private final String path;
        private final CuratorFramework client;
        private final Interop.Referee referee;
        private final Random random;

        Participant(int id, String connect, int refereePort, String path) throws Exception {
            this.id = id;
            this.path = path;
            this.random = new Random(0x1eade7L + id);
            this.client = Interop.connect(connect);
            this.referee = new Interop.Referee(refereePort);
        }

        void latch(int cycles) throws Exception {
            for (int i = 0; i < cycles; i++) {
                LeaderLatch latch = new LeaderLatch(client, path, "J" + id);
                latch.start();
                latch.await();
                if (latch.hasLeadership()) {
                    term();
                }
                latch.close();
            }
        }

        void selector(int cycles) throws Exception {
            Semaphore finished = new Semaphore(0);
            AtomicBoolean stopping = new AtomicBoolean();
            LeaderSelector selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework c) throws Exception {
                    if (!stopping.get()) {
                        term();
                        finished.release();
                    }
                }
            });
            selector.setId("J" + id);
            selector.autoRequeue();
            selector.start();
            finished.acquire(cycles);
            stopping.set(true);
            selector.close();
        }

        // ENTER, a short hold, EXIT: EXIT is sent even if the hold is interrupted, so that
        // the referee never sees a term that did not end.
        private void term() throws Exception {
            terms.incrementAndGet();
            referee.call("ENTER J M");
            boolean interrupted = false;
            int ms = random.nextInt(3);
            try {
                if (ms > 0) {
                    Thread.sleep(ms);
                }
            } catch (InterruptedException e) {
                interrupted = true;
            } finally {
                referee.call("EXIT J M");
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }

        @Override
        public void close() {
            try {
                referee.close();
            } catch (Exception e) {
                // Closing anyway.
            }
            client.close();
        }
    }
}
