// Apache Curator counter clients for zkwire-recipes' counter interop test
// (recipes/tests/counter.rs), compiled and run by the Rust test against the Debian Curator
// 5.4.0 jars.
//
// Usage: CuratorCounter <connect string> <kind> <path> <increments>
//   kind shared  SharedCount: each increment is getVersionedValue + trySetCount, retried
//                until it wins
//   kind atomic  DistributedAtomicLong: each increment is increment(), retried until it
//                reports success
//   kind promoted  the same in promoted mode: one optimistic try, then InterProcessMutex
//                <path>-lock (PromotedToLock, waiting up to 30 s) and up to 1001 tries
//                under it
//
// Protocol on stdout: "READY" once connected, then (after the test writes "GO" on stdin)
// "DONE <final value seen>" at the end. Exits with status 2 on any error.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public final class CuratorCounter {
    public static void main(String[] args) throws Exception {
        Interop.expectArgs(args, 4, "CuratorCounter <connect> <shared|atomic|promoted> <path> <increments>");
        String kind = args[1];
        String path = args[2];
        int increments = Integer.parseInt(args[3]);
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(
                args[0], 10_000, 10_000, new ExponentialBackoffRetry(50, 10))) {
            client.start();
            client.blockUntilConnected();
            BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
            System.out.println("READY");
            System.out.flush();
            if (!"GO".equals(in.readLine())) {
                System.exit(2);
            }
            long last;
            if (kind.equals("shared")) {
                last = shared(client, path, increments);
            } else {
                last = atomic(client, path, increments, kind.equals("promoted"));
            }
            System.out.println("DONE " + last);
            System.out.flush();
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(2);
        }
    }

    private static long shared(CuratorFramework client, String path, int increments) throws Exception {
        try (SharedCount count = new SharedCount(client, path, 0)) {
            count.start();
            int last = 0;
            for (int i = 0; i < increments; i++) {
                while (true) {
                    VersionedValue<Integer> seen = count.getVersionedValue();
                    if (count.trySetCount(seen, seen.getValue() + 1)) {
                        last = seen.getValue() + 1;
                        break;
                    }
                }
            }
            return last;
        }
    }

    private static long atomic(CuratorFramework client, String path, int increments, boolean promoted)
            throws Exception {
        DistributedAtomicLong counter = promoted
            ? new DistributedAtomicLong(client, path, new RetryNTimes(0, 0),
                PromotedToLock.builder()
                    .lockPath(path + "-lock")
                    .retryPolicy(new RetryNTimes(1000, 1))
                    .timeout(30, TimeUnit.SECONDS)
                    .build())
            : new DistributedAtomicLong(client, path, new RetryNTimes(1000, 1));
        long last = 0;
        for (int i = 0; i < increments; i++) {
            while (true) {
                AtomicValue<Long> result = counter.increment();
                if (result.succeeded()) {
                    last = result.postValue();
                    break;
                }
            }
        }
        return last;
    }
}
