#!/usr/bin/env python3
"""Runs the workspace's test binaries a few at a time: `make test`'s test step.

    tests/run-suite.py [--jobs N] [--beside CMD] [CARGO TEST OPTIONS...] [-- TEST BINARY ARGS...]

`cargo test` runs one test binary after another. Most of ours spend their time waiting for
ZooKeeper (session expiries, partitions healing, an ensemble electing), not computing, so
running two at once halves the wall time of the suite without loading the machine much.
Each binary still runs alone in its process, with its own shared server and chroots, as under
`cargo test`; cargo-nextest's process per test would start a server per test instead.

Builds everything first (`cargo test --no-run` with the given options), then runs the
binaries, longest first (the names below, from the timings this script prints), and the
doctests (`cargo test --doc`) as one more job. Each binary's output is printed whole when it
ends, under cargo's own `Running` header, so logs read as cargo's do. Runs everything even when
something fails (like `--no-fail-fast`) and exits 1 if anything failed, naming it.

`--beside CMD` runs the shell command CMD at the lowest priority (`nice -n 19`) while the
binaries run, once they are built: it gets the CPU the tests leave idle, and next to none while
they compute. Its output is printed at the end; its failure fails the run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Started first, in this order: the binaries that took longest in a sequential run on a
# 2-core machine (this script prints the ten longest after each run; update when they change).
SLOW_FIRST = [
    "zkwire-recipes/partition",
    "zkwire-cli/partition",
    "zkwire-recipes/lease",
    "zkwire-recipes/discovery_faults",
    "zkwire-recipes/leader",
    "zkwire-testing/partition_harness",
    "zkwire-recipes/mutex",
    "zkwire-cli/lease",
    "zkwire-recipes/chaos",
]
DOCTESTS = "doctests"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=int(os.environ.get("ZKWIRE_TEST_JOBS", "2")),
                   help="binaries at once (default 2, or $ZKWIRE_TEST_JOBS)")
    p.add_argument("--beside", metavar="CMD",
                   help="a shell command run at the lowest priority beside the binaries")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    a, cargo = p.parse_known_args(argv[:split])
    a.cargo, a.binary_args = cargo, argv[split + 1:]
    if a.jobs < 1:
        p.error("--jobs takes a whole number of 1 or more")
    return a


def build(cargo, options):
    """Builds every test target; returns (key, source, executable, package dir) for each."""
    cmd = [cargo, "test", *options, "--no-run", "--message-format=json-render-diagnostics"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    found = []
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        target = msg["target"]
        package = Path(msg["manifest_path"]).parent
        found.append({
            "key": f"{manifest_name(msg['manifest_path'])}/{target['name']}",
            "source": target["src_path"],
            "exe": msg["executable"],
            "dir": package,
        })
    if proc.wait() != 0:
        sys.exit(f"run-suite: `{' '.join(cmd)}` failed")
    return found


def manifest_name(manifest_path):
    """The package name of a Cargo.toml (its first `name = "…"` line)."""
    for line in Path(manifest_path).read_text().splitlines():
        if line.startswith("name = "):
            return line.split('"')[1]
    return Path(manifest_path).parent.name


# Options of `cargo test` that pick targets: with one of them, only what it picks runs.
TARGET_OPTIONS = ("--lib", "--bin", "--bins", "--test", "--tests", "--example", "--examples",
                  "--bench", "--benches", "--all-targets", "--doc")


def order(binaries, cargo_options):
    """Longest first: the named slow ones, then the doctests, then the rest as built."""
    rank = {key: i for i, key in enumerate(SLOW_FIRST)}
    slow = sorted((b for b in binaries if b["key"] in rank), key=lambda b: rank[b["key"]])
    rest = [b for b in binaries if b["key"] not in rank]
    picked = any(o.split("=")[0] in TARGET_OPTIONS for o in cargo_options)
    return slow + ([] if picked else [{"key": DOCTESTS}]) + rest


class Runner:
    def __init__(self, args, root):
        self.args = args
        self.root = root
        self.lock = threading.Lock()
        self.failed = []
        self.times = []

    def command(self, job):
        if job["key"] == DOCTESTS:
            cargo = os.environ.get("CARGO", "cargo")
            return [cargo, "test", *self.args.cargo, "--doc", "--", *self.args.binary_args], self.root
        return [job["exe"], *self.args.binary_args], job["dir"]

    def run(self, job):
        cmd, cwd = self.command(job)
        env = dict(os.environ)
        if job["key"] != DOCTESTS:
            # What cargo sets for a test binary it runs.
            env["CARGO_MANIFEST_DIR"] = str(job["dir"])
        started = time.monotonic()
        with tempfile.TemporaryFile(mode="w+") as out:
            code = subprocess.call(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
            out.seek(0)
            text = out.read()
        took = time.monotonic() - started
        with self.lock:
            header = job["key"] if job["key"] == DOCTESTS else \
                f"{os.path.relpath(job['source'], job['dir'])} ({os.path.relpath(job['exe'], self.root)})"
            print(f"     Running {header} [{job['key']}, {took:.1f} s]", flush=True)
            sys.stdout.write(text)
            sys.stdout.flush()
            self.times.append((took, job["key"]))
            if code != 0:
                self.failed.append(job["key"])

    def run_all(self, jobs):
        queue = list(jobs)
        threads = []

        def worker():
            while True:
                with self.lock:
                    if not queue:
                        return
                    job = queue.pop(0)
                self.run(job)

        for _ in range(min(self.args.jobs, len(queue))):
            t = threading.Thread(target=worker)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()


class Beside:
    """A command run at the lowest priority while the binaries run."""

    def __init__(self, command, root):
        self.command = command
        self.out = tempfile.TemporaryFile(mode="w+")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(["nice", "-n", "19", "sh", "-c", command], cwd=root,
                                     stdout=self.out, stderr=subprocess.STDOUT)
        self.took = None
        # Waited for at once, so that its own duration is known, not the binaries'.
        self.waiter = threading.Thread(target=self.wait)
        self.waiter.start()

    def wait(self):
        self.proc.wait()
        self.took = time.monotonic() - self.started

    def finish(self):
        """Waits for the command, prints its output; returns whether it succeeded."""
        self.waiter.join()
        code = self.proc.returncode
        self.out.seek(0)
        print(f"\n     Beside: {self.command} [{self.took:.1f} s, exit {code}]", flush=True)
        sys.stdout.write(self.out.read())
        sys.stdout.flush()
        self.out.close()
        return code == 0


def main():
    args = parse_args()
    root = Path(__file__).resolve().parent.parent
    cargo = os.environ.get("CARGO", "cargo")
    binaries = build(cargo, args.cargo)
    runner = Runner(args, root)
    started = time.monotonic()
    beside = Beside(args.beside, root) if args.beside else None
    runner.run_all(order(binaries, args.cargo))
    wall = time.monotonic() - started
    if beside and not beside.finish():
        runner.failed.append(f"--beside {args.beside!r}")
    busy = sum(t for t, _ in runner.times)
    print(f"\nrun-suite: {len(runner.times)} jobs in {wall:.0f} s with {args.jobs} at once "
          f"({busy:.0f} s one after another); the longest:")
    for took, key in sorted(runner.times, reverse=True)[:10]:
        print(f"  {took:7.1f} s  {key}")
    if runner.failed:
        print("run-suite: FAILED: " + ", ".join(runner.failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
