#!/usr/bin/python3
"""kazoo contenders for zkwire-recipes' interop tests (recipes/tests/kazoo.rs).

Started by the Rust test with Debian's /usr/bin/python3 and python3-kazoo (2.8). Each thread
has its own KazooClient (its own session) and cycles: acquire, ENTER at the referee, hold
0-2 ms, EXIT at the referee, release. The referee is a TCP server run by the test on
127.0.0.1 that checks exclusion across both sides; it answers every line with "OK" once it
has recorded it (so its "inside" interval lies within the real hold), or with "STOP" when
the test wants the run to end early (the control run, once it has seen a violation): the
thread then finishes its cycle and stops.

Usage:
  kazoo_contender.py --hosts HOST:PORT --chroot /CHROOT --referee-port N --recipe mutex|rw
                     --path /lock --threads T --cycles C [--write-percent P]
                     [--lock-pattern S]... [--read-pattern S]... [--deadline SECONDS]
                     [--backport-kazoo-650]

  --lock-pattern   extra_lock_patterns of each Lock (mutex) or WriteLock (rw), repeatable;
                   none given means kazoo ignores every other client's nodes
  --read-pattern   extra_lock_patterns of each ReadLock (rw), repeatable
  --backport-kazoo-650
                   rw only: replace kazoo 2.8's Lock._get_predecessor with the one of
                   kazoo >= 2.9 (python-zk/kazoo#650, the fix of #649: a 2.8 ReadLock
                   waits for writers queued after it, which deadlocks against them)

Protocol on stdout: "READY" once every thread is connected (to ZooKeeper and the referee),
then, after the test writes "GO" on stdin, "DONE <acquisitions>" when every thread is
finished. The sessions stay open (so that the test can check that no lock node is left)
until the test writes "QUIT" or closes stdin; then the program closes them and exits 0.

Bounded: every loop has a count, every acquire a timeout, and the whole run the deadline
(default 50 s) after which the program exits with status 5. It exits with status 3 when
stdin closes early (the test is gone), 2 on any error (traceback on stderr) and 4 when
kazoo cannot be imported.
"""

import argparse
import os
import random
import socket
import sys
import threading
import time
import traceback

try:
    import kazoo
    from kazoo.client import KazooClient
    from kazoo.recipe import lock as kazoo_lock
    from kazoo.retry import ForceRetryError
except ImportError as e:  # pragma: no cover - the test reports it
    print(
        "kazoo_contender: cannot import kazoo (%s); install it with "
        "`apt-get install -y python3-kazoo` and run this with /usr/bin/python3" % e,
        file=sys.stderr,
    )
    sys.exit(4)


def backport_kazoo_650():
    """Makes kazoo 2.8 follow the rule of kazoo >= 2.9 (python-zk/kazoo#650): a contender
    waits for the one with the largest sequence number below its own, never for one queued
    after it. Written here from that rule, not taken from kazoo."""

    def nearest_lower_contender(self, node):
        ours = node[len(self.prefix):]
        names = self.client.get_children(self.path)
        if node not in names:
            # Our node is gone (a session loss): kazoo's retry creates a new one.
            raise ForceRetryError()
        lower = [
            (m.group(1), name)
            for name, m in ((n, self._contenders_re.search(n)) for n in names)
            if m is not None and m.group(1) < ours
        ]
        return max(lower)[1] if lower else None

    kazoo_lock.Lock._get_predecessor = nearest_lower_contender


def log(message):
    print("kazoo_contender: %s" % message, file=sys.stderr, flush=True)


class Stop(Exception):
    """The referee asked us to stop after this cycle."""


class Contender(object):
    def __init__(self, index, args):
        self.index = index
        self.args = args
        self.random = random.Random(0x5EED0000 + index)
        self.acquisitions = 0
        self.client = KazooClient(hosts=args.hosts + args.chroot, timeout=10.0)
        self.client.start(timeout=20)
        self.referee = socket.create_connection(("127.0.0.1", args.referee_port), timeout=30)
        self.referee.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.from_referee = self.referee.makefile("r", encoding="utf-8", newline="\n")

    def remaining(self):
        return max(0.1, self.args.end - time.monotonic())

    def call(self, line):
        """Sends a line to the referee; True when it answered STOP."""
        self.referee.sendall((line + "\n").encode("utf-8"))
        reply = self.from_referee.readline().strip()
        if reply == "OK":
            return False
        if reply == "STOP":
            return True
        raise RuntimeError("referee answered %r to %r" % (reply, line))

    def hold(self, kind):
        """ENTER, a short hold, EXIT: each answered by the referee before going on."""
        self.acquisitions += 1
        stop = self.call("ENTER K " + kind)
        ms = self.random.randrange(3)
        if ms > 0:
            time.sleep(ms / 1000.0)
        return self.call("EXIT K " + kind) or stop

    def cycle(self, lock, kind):
        if not lock.acquire(timeout=self.remaining()):
            raise RuntimeError("acquire of %s timed out" % kind)
        try:
            return self.hold(kind)
        finally:
            lock.release()

    def run(self):
        args = self.args
        client = self.client
        for _ in range(args.cycles):
            if time.monotonic() >= args.end:
                raise RuntimeError("deadline reached after %d acquisitions" % self.acquisitions)
            if args.recipe == "mutex":
                lock = client.Lock(args.path, extra_lock_patterns=args.lock_pattern)
                kind = "M"
            elif self.random.randrange(100) < args.write_percent:
                lock = client.WriteLock(args.path, extra_lock_patterns=args.lock_pattern)
                kind = "W"
            else:
                lock = client.ReadLock(args.path, extra_lock_patterns=args.read_pattern)
                kind = "R"
            if self.cycle(lock, kind):
                return

    def close(self):
        try:
            self.from_referee.close()
            self.referee.close()
        except OSError:
            pass
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # closing anyway
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", required=True)
    parser.add_argument("--chroot", default="")
    parser.add_argument("--referee-port", type=int, required=True)
    parser.add_argument("--recipe", choices=["mutex", "rw"], required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--cycles", type=int, required=True)
    parser.add_argument("--write-percent", type=int, default=20)
    parser.add_argument("--lock-pattern", action="append", default=[])
    parser.add_argument("--read-pattern", action="append", default=[])
    parser.add_argument("--deadline", type=float, default=50.0)
    parser.add_argument("--backport-kazoo-650", action="store_true")
    args = parser.parse_args()

    # The overall limit: whatever happens, the process ends by itself.
    def expire():
        log("deadline of %.0f s reached; exiting" % args.deadline)
        os._exit(5)

    timer = threading.Timer(args.deadline, expire)
    timer.daemon = True
    timer.start()
    args.end = time.monotonic() + args.deadline
    if args.backport_kazoo_650:
        backport_kazoo_650()
    log(
        "kazoo %s, %s, %d threads x %d cycles, lock patterns %r, read patterns %r"
        % (
            getattr(kazoo, "__version__", "?"),
            args.recipe,
            args.threads,
            args.cycles,
            args.lock_pattern,
            args.read_pattern,
        )
    )

    contenders = [Contender(i, args) for i in range(args.threads)]
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        os._exit(3)

    # A closed stdin before the end means the test is gone: exit. QUIT ends the run.
    # After DONE, a closed stdin counts as QUIT.
    quit_event = threading.Event()
    done = threading.Event()

    def watch_stdin():
        while True:
            line = sys.stdin.readline()
            if line.strip() == "QUIT" or (not line and done.is_set()):
                quit_event.set()
                return
            if not line:
                os._exit(3)

    watchdog = threading.Thread(target=watch_stdin, daemon=True)
    watchdog.start()

    failures = []

    def run(contender):
        try:
            contender.run()
        except Exception:
            failures.append(contender.index)
            log("thread %d failed:\n%s" % (contender.index, traceback.format_exc()))

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in contenders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.1, args.end - time.monotonic()))
    if any(t.is_alive() for t in threads):
        log("threads still running at the deadline")
        os._exit(5)
    if failures:
        for c in contenders:
            c.close()
        os._exit(2)
    done.set()
    print("DONE %d" % sum(c.acquisitions for c in contenders), flush=True)
    quit_event.wait(max(0.1, args.end - time.monotonic()))
    for c in contenders:
        c.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
