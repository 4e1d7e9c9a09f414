//! Interop with kazoo 2.8 (Debian `python3-kazoo`): zkwire and kazoo contenders on the same
//! path for the mutex and the read/write lock, checked by the referee of interop.rs
//! (`support/referee.rs`).
//!
//! zkwire orders kazoo's nodes with its own under [`ForeignChildPolicy::OrderKazoo`]; kazoo
//! sees ours through `extra_lock_patterns`. `recipes/interop/kazoo_contender.py` runs as
//! one `/usr/bin/python3` process of N threads, each with its own kazoo session. Every
//! holder — kazoo thread or zkwire task — reports `ENTER` after its acquire returns and
//! `EXIT` before it releases (kazoo over TCP on 127.0.0.1, zkwire in process); the referee
//! answers only after recording, so any overlap it sees is a real exclusion violation.
//!
//! The control runs kazoo without `extra_lock_patterns`: kazoo then ignores our nodes, and
//! the referee must see a violation, which shows that the checks can fail.
//!
//! kazoo 2.8's `ReadLock` waits for writers queued after it and deadlocks against them
//! (python-zk/kazoo#649, fixed in 2.9 by #650): the read/write test runs kazoo with the
//! 2.9 `_get_predecessor` put back into 2.8 (`--backport-kazoo-650`).
//!
//! A `/usr/bin/python3` that cannot import kazoo fails the tests with what to install
//! (`apt-get install -y python3-kazoo`); they never skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use support::process::ProcessIo;
use support::referee::{Referee, Side, Tally};
use support::{close_all, connect_all};
use tokio::task::JoinHandle;
use zkwire_recipes::{ForeignChildPolicy, LockOptions};
use zkwire_testing::support::fresh_chroot;

/// The tests share two cores with the server and the Python program: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Debian's interpreter, the one `python3-kazoo` installs for (a `python3` on `PATH` may be
/// another one).
const PYTHON: &str = "/usr/bin/python3";
const INSTALL_HINT: &str = "install it with `apt-get install -y python3-kazoo`";
const LOCK: &str = "/lock";
/// Each side's share of a recipe's acquisitions.
const PER_SIDE: usize = 500;
const ZKWIRE_TASKS: usize = 4;
const KAZOO_THREADS: usize = 4;
/// The kazoo program's own limit on its run (it exits by itself after it).
const KAZOO_DEADLINE: Duration = Duration::from_secs(50);
/// How long zkwire's side may take before the test gives up.
const ZKWIRE_DEADLINE: Duration = Duration::from_secs(55);

/// The kazoo version `/usr/bin/python3` imports; panics with the install hint without it.
fn require_kazoo() -> &'static str {
    static VERSION: OnceLock<Result<String, String>> = OnceLock::new();
    let found = VERSION.get_or_init(|| {
        let out = Command::new(PYTHON)
            .args([
                "-c",
                "import kazoo.client, kazoo.version; print(kazoo.version.__version__)",
            ])
            .output()
            .map_err(|e| format!("cannot run {PYTHON} ({e}): {INSTALL_HINT}"))?;
        if !out.status.success() {
            return Err(format!(
                "{PYTHON} cannot import kazoo ({}): {INSTALL_HINT}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    });
    match found {
        Ok(version) => version,
        Err(e) => panic!("{e}"),
    }
}

/// The kazoo program, started and waiting for GO.
struct Kazoo {
    child: Child,
    io: ProcessIo,
}

impl Kazoo {
    /// Starts `kazoo_contender.py` on the chroot of `cs` (`host:port/chroot`) with the
    /// referee's port, the lock path and `args`; waits for READY.
    async fn start(cs: &str, referee: &Referee, args: &[&str]) -> Self {
        let (hosts, chroot) = cs.split_at(cs.find('/').unwrap_or(cs.len()));
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/kazoo_contender.py");
        let mut child = Command::new(PYTHON)
            // The script only: no byte-code cache in the source tree.
            .arg("-B")
            .arg(script)
            .args(["--hosts", hosts, "--chroot", chroot, "--path", LOCK])
            .arg(format!("--referee-port={}", referee.port))
            .arg(format!("--deadline={}", KAZOO_DEADLINE.as_secs()))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {PYTHON} ({e}): {INSTALL_HINT}"));
        let io = ProcessIo::new(
            "kazoo",
            child.stdin.take().unwrap(),
            child.stdout.take().unwrap(),
            child.stderr.take().unwrap(),
        );
        let mut kazoo = Self { child, io };
        let ready = kazoo.io.next_line(Duration::from_secs(60)).await;
        assert_eq!(ready, "READY", "{}", kazoo.io.stderr());
        kazoo
    }

    /// Lets kazoo go together with zkwire's tasks (`spawn`), and awaits both sides, failing
    /// (with what kazoo said) when zkwire's are not done after [`ZKWIRE_DEADLINE`]. Returns
    /// kazoo's count of acquisitions (its sessions still open) and the time taken.
    async fn race(&mut self, spawn: impl FnOnce() -> Vec<JoinHandle<()>>) -> (usize, Duration) {
        let started = Instant::now();
        self.io.send("GO");
        let deadline = tokio::time::Instant::now() + ZKWIRE_DEADLINE;
        for task in spawn() {
            match tokio::time::timeout_at(deadline, task).await {
                Ok(done) => done.unwrap(),
                Err(_) => panic!(
                    "zkwire's contenders not done after {ZKWIRE_DEADLINE:?}; kazoo: {}",
                    self.io.stderr()
                ),
            }
        }
        let kazoo_done = self.done().await;
        (kazoo_done, started.elapsed())
    }

    /// Waits for `DONE <n>` (every thread finished; the sessions are still open); returns n.
    async fn done(&mut self) -> usize {
        let line = self
            .io
            .next_line(KAZOO_DEADLINE + Duration::from_secs(10))
            .await;
        let n = line
            .strip_prefix("DONE ")
            .unwrap_or_else(|| panic!("kazoo said {line:?}, not DONE: {}", self.io.stderr()));
        n.parse().unwrap()
    }

    /// Closes the sessions (QUIT) and checks that the program exits cleanly.
    async fn quit(mut self) {
        self.io.send("QUIT");
        self.io.close_stdin();
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "kazoo: {status}: {}", self.io.stderr());
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "kazoo did not exit after QUIT: {}",
                self.io.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Kazoo {
    fn drop(&mut self) {
        // After a failure: end the program we started (and reap it).
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// kazoo's side of a run of `recipe` with `flags`: [`KAZOO_THREADS`] threads sharing
/// [`PER_SIDE`] cycles, started and waiting for GO.
async fn kazoo_side(cs: &str, referee: &Referee, recipe: &str, flags: &[&str]) -> Kazoo {
    let cycles = (PER_SIDE / KAZOO_THREADS).to_string();
    let threads = KAZOO_THREADS.to_string();
    let mut args = vec![recipe, "--threads", &threads, "--cycles", &cycles];
    args.extend_from_slice(flags);
    Kazoo::start(cs, referee, &args).await
}

fn order_kazoo() -> LockOptions {
    LockOptions::new().with_foreign_children(ForeignChildPolicy::OrderKazoo)
}

/// Prints and checks a finished run: no violation, every acquisition seen, half each side,
/// the sides interleaved.
fn report(name: &str, tally: &Tally, kazoo_done: usize, took: Duration) {
    let (kazoo, zkwire) = tally.check_run(("kazoo", "kazoo"), name, kazoo_done, took);
    assert_eq!(zkwire, PER_SIDE);
    assert_eq!(kazoo, PER_SIDE);
}

/// Mutex: 4 kazoo `Lock` threads (`extra_lock_patterns=["-lock-"]`) and 4 zkwire tasks
/// (`OrderKazoo`), 125 cycles each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_mutex_interop() {
    let version = require_kazoo();
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_kazoo_mutex").await;
    let referee = Arc::new(Referee::start(0));
    let flags = ["--lock-pattern=-lock-"];
    let mut kazoo = kazoo_side(&cs, &referee, "--recipe=mutex", &flags).await;
    let clients = connect_all(&cs, ZKWIRE_TASKS).await;
    let options = order_kazoo();
    let (kazoo_done, took) = kazoo
        .race(|| support::mutex_tasks(&clients, LOCK, &options, PER_SIDE / ZKWIRE_TASKS, &referee))
        .await;
    // Every session still open: any node left now is an orphan of a release.
    let left = clients[0].get_children(LOCK).await.unwrap();
    kazoo.quit().await;
    println!("kazoo mutex: kazoo {version}; nodes left {}", left.len());
    report("mutex", &referee.take(), kazoo_done, took);
    assert!(left.is_empty(), "nodes left: {left:?}");
    close_all(clients).await;
}

/// Read/write lock: 4 kazoo threads (`ReadLock` with `["__WRIT__"]`, `WriteLock` with
/// `["__WRIT__", "__READ__"]`, kazoo#650 back-ported) and 4 zkwire `RwLock` tasks
/// (`OrderKazoo`), 125 cycles each, 20% writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_rwlock_interop() {
    const WRITE_PERCENT: usize = 20;
    let version = require_kazoo();
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_kazoo_rw").await;
    let referee = Arc::new(Referee::start(0));
    let write_percent = WRITE_PERCENT.to_string();
    let flags = [
        "--write-percent",
        &write_percent,
        "--lock-pattern=__WRIT__",
        "--lock-pattern=__READ__",
        "--read-pattern=__WRIT__",
        "--backport-kazoo-650",
    ];
    let mut kazoo = kazoo_side(&cs, &referee, "--recipe=rw", &flags).await;
    let clients = connect_all(&cs, ZKWIRE_TASKS).await;
    let options = order_kazoo();
    let (kazoo_done, took) = kazoo
        .race(|| {
            let cycles = PER_SIDE / ZKWIRE_TASKS;
            support::rw_tasks(&clients, LOCK, &options, cycles, WRITE_PERCENT, &referee)
        })
        .await;
    let left = clients[0].get_children(LOCK).await.unwrap();
    kazoo.quit().await;
    let tally = referee.take();
    println!(
        "kazoo rw: kazoo {version}; nodes left {}; max readers together {}; reads entered \
         next to the other side's readers {}",
        left.len(),
        tally.max_readers,
        tally.shared_reads
    );
    report("rw", &tally, kazoo_done, took);
    tally.check_rw("kazoo");
    assert!(left.is_empty(), "nodes left: {left:?}");
    close_all(clients).await;
}

/// The control: kazoo without `extra_lock_patterns` ignores zkwire's nodes (zkwire still
/// waits for kazoo's), and the referee must see the broken exclusion. Shows that the mutex
/// test can fail. Short: 2 + 2 contenders of at most 100 cycles, ended at the first
/// violation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_referee_catches_a_broken_exclusion() {
    const CYCLES: usize = 100;
    require_kazoo();
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_kazoo_control").await;
    let referee = Arc::new(Referee::start(0));
    referee.stop_at_first_violation();
    let cycles = CYCLES.to_string();
    let mut kazoo = Kazoo::start(
        &cs,
        &referee,
        &["--recipe=mutex", "--threads=2", "--cycles", &cycles],
    )
    .await;
    let clients = connect_all(&cs, ZKWIRE_TASKS).await;
    let options = order_kazoo();
    let (kazoo_done, took) = kazoo
        .race(|| support::mutex_tasks(&clients[..2], LOCK, &options, CYCLES, &referee))
        .await;
    kazoo.quit().await;
    let tally = referee.take();
    println!(
        "kazoo control: {} violations in {took:.2?} with kazoo ignoring zkwire's nodes — \
         kazoo {kazoo_done} acquisitions, zkwire {}; first: {:?}",
        tally.violations.len(),
        tally.total(Side::Zkwire),
        tally.violations.first()
    );
    assert!(
        !tally.violations.is_empty(),
        "the referee missed a broken exclusion"
    );
    close_all(clients).await;
}
