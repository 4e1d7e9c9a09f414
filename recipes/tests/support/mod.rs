//! Helpers shared by the recipes' integration tests: for the interop tests, `interop.rs` and
//! `revoke.rs` (Apache Curator) and `kazoo.rs` (kazoo), the referee, the stdio of a contender
//! process and the compiled Curator program; for the chaos tests, [`chaos`]; and small zkwire
//! helpers.
//!
//! Each test binary includes this module with `mod support;` and uses its own part of it.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

pub(crate) mod chaos;
pub(crate) mod jvm;
pub(crate) mod process;
pub(crate) mod referee;

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use std::sync::Arc;

use tokio::task::JoinHandle;
use zkwire::Client;
use zkwire::CreateOptions;
use zkwire_recipes::{LockOptions, Mutex, NodeEvent, NodeEvents, RwLock};
use zkwire_testing::java::{self, JavaProgram};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{connect_with_timeout, fresh_chroot, kill_client_session};

use referee::{Kind, Referee};

/// A client with a 10 s session, as the contender programs use.
pub(crate) async fn connect(cs: &str) -> Client {
    zkwire_testing::support::builder()
        .with_session_timeout(Duration::from_secs(10))
        .connect(cs)
        .await
        .unwrap()
}

/// `n` clients of [`connect`], each with its own session.
pub(crate) async fn connect_all(cs: &str, n: usize) -> Vec<Client> {
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        clients.push(connect(cs).await);
    }
    clients
}

/// Closes every client.
pub(crate) async fn close_all(clients: impl IntoIterator<Item = Client>) {
    for client in clients {
        client.close().await.unwrap();
    }
}

/// A fresh chroot `name` (its connect string) and `N` clients on it, each with its own
/// session of `session_timeout`.
pub(crate) async fn fresh_clients<const N: usize>(
    name: &str,
    session_timeout: Duration,
) -> (String, [Client; N]) {
    let cs = fresh_chroot(name).await;
    let mut clients = Vec::with_capacity(N);
    for _ in 0..N {
        clients.push(connect_with_timeout(&cs, session_timeout).await);
    }
    let clients = clients
        .try_into()
        .unwrap_or_else(|_| unreachable!("N clients"));
    (cs, clients)
}

/// A fresh chroot `name` on the shared server, a fault proxy in front of the server, and the
/// chroot's connect string through the proxy: `(direct, proxy, through the proxy)`.
pub(crate) async fn proxied(name: &str) -> (String, FaultProxy, String) {
    let cs = fresh_chroot(name).await;
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let chroot = cs.rsplit_once('/').map(|(_, c)| c.to_owned()).unwrap();
    let via = format!("{}/{chroot}", proxy.connect_string());
    (cs, proxy, via)
}

/// Creates the persistent node `path` holding `data`.
pub(crate) async fn create_persistent(client: &Client, path: &str, data: &[u8]) {
    let options = CreateOptions::persistent();
    client.create(path, data, &options).await.unwrap();
}

/// Creates the empty ephemeral node `path`.
pub(crate) async fn create_ephemeral(client: &Client, path: &str) {
    let options = CreateOptions::ephemeral();
    client.create(path, b"", &options).await.unwrap();
}

/// Awaits every task; a panic in one fails the test.
pub(crate) async fn join_all(tasks: impl IntoIterator<Item = JoinHandle<()>>) {
    for task in tasks {
        task.await.unwrap();
    }
}

/// The output of `task`, which must end within `limit`.
pub(crate) async fn joined<T>(task: JoinHandle<T>, limit: Duration) -> T {
    tokio::time::timeout(limit, task).await.unwrap().unwrap()
}

/// Tests that differ only in the argument of one scenario function: `scenario_tests! { run;
/// name => argument; ... }` makes `#[tokio::test] async fn name() { run(argument).await }`
/// for each row (doc comments and other attributes of a row go to its test).
#[allow(unused_macros)] // each test binary uses its own part of this module
macro_rules! scenario_tests {
    ($run:path; $($(#[$attr:meta])* $name:ident => $argument:expr;)*) => {$(
        $(#[$attr])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            $run($argument).await;
        }
    )*};
}
#[allow(unused_imports)]
pub(crate) use scenario_tests;

/// Kills the session of `renewing` (a client that renews its session) and waits up to `within`
/// for `events` to report its node created again; returns the old session's id and the path.
pub(crate) async fn created_again(
    renewing: &Client,
    events: &mut NodeEvents,
    within: Duration,
) -> (i64, String) {
    let old = renewing.session_id();
    kill_client_session(renewing).await.unwrap();
    let created = tokio::time::timeout(within, async {
        loop {
            if let Some(NodeEvent::Created { path }) = events.next().await {
                return path;
            }
        }
    })
    .await
    .expect("created again");
    (old, created)
}

/// Checks that `path`, as `watcher` sees it, is owned by the renewed session of `renewing`,
/// not by its `old` one.
pub(crate) async fn owned_by_the_new_session(
    watcher: &Client,
    path: &str,
    renewing: &Client,
    old: i64,
) {
    let (_, stat) = watcher.get_data(path).await.unwrap();
    assert_ne!(stat.ephemeral_owner, old);
    assert_eq!(stat.ephemeral_owner, renewing.session_id());
}

/// Evaluates `$probe` — `Ok(value)` once what is polled for holds, `Err(why)` before — every
/// `$every` until it is `Ok`, and evaluates to its value; fails with the last `why` once
/// `$within` has passed.
#[allow(unused_macros)] // each test binary uses its own part of this module
macro_rules! poll_until {
    ($within:expr, $every:expr, $probe:expr) => {{
        let deadline = std::time::Instant::now() + $within;
        loop {
            match $probe {
                Ok(value) => break value,
                Err(why) => assert!(std::time::Instant::now() < deadline, "{why}"),
            }
            tokio::time::sleep($every).await;
        }
    }};
}
#[allow(unused_imports)]
pub(crate) use poll_until;

/// A short hold of 0–2 ms.
pub(crate) async fn hold(step: usize) {
    match step % 3 {
        0 => tokio::task::yield_now().await,
        ms => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
    }
}

/// The Curator program `recipes/interop/<file>`, compiled with `javac` against Debian's
/// Curator jars, together with the programs' shared `Interop.java`, once per test binary
/// (each binary drives one program). Panics with what to install when Java or Curator is
/// missing: these tests never skip.
pub(crate) fn curator_program(file: &'static str) -> &'static JavaProgram {
    static PROGRAM: OnceLock<(&'static str, Result<JavaProgram, String>)> = OnceLock::new();
    let (compiled, built) = PROGRAM.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop");
        let (source, shared) = (dir.join(file), dir.join("Interop.java"));
        let build = || {
            let classpath = java::curator_classpath().map_err(|e| e.to_string())?;
            let started = Instant::now();
            let program =
                java::compile(&[&source, &shared], &classpath).map_err(|e| e.to_string())?;
            println!("{file} compiled in {:?}", started.elapsed());
            Ok(program)
        };
        (file, build())
    });
    assert_eq!(*compiled, file, "one Curator program per test binary");
    match built {
        Ok(program) => program,
        Err(e) => panic!("cannot build {file}: {e}"),
    }
}

/// A Curator contender program (`recipes/interop/<file>`, class `class`) running with
/// `args`: started, and waiting for `GO` once it has printed `READY`.
pub(crate) struct CuratorJvm {
    child: java::JavaChild,
    io: process::ProcessIo,
}

impl CuratorJvm {
    /// Compiles (once per test binary) and starts the program; waits for `READY`.
    pub(crate) async fn start(file: &'static str, class: &str, args: &[&str]) -> Self {
        let program = tokio::task::block_in_place(|| curator_program(file));
        let mut child = program.spawn(class, args).unwrap_or_else(|e| panic!("{e}"));
        let io = process::ProcessIo::new(
            "Curator",
            child.take_stdin().unwrap(),
            child.take_stdout().unwrap(),
            child.take_stderr().unwrap(),
        );
        let mut jvm = Self { child, io };
        let ready = jvm.next_line(Duration::from_secs(60)).await;
        assert_eq!(ready, "READY", "{}", jvm.stderr());
        jvm
    }

    /// A contender program (`CuratorContender`, `CuratorLeader`) started with its common
    /// arguments — `cs`, the referee's port, `recipe`, `path`, `threads` and `cycles` — then
    /// `extra`.
    pub(crate) async fn contenders(
        (file, class): (&'static str, &str),
        cs: &str,
        referee: &Referee,
        (recipe, path): (&str, &str),
        (threads, cycles): (usize, usize),
        extra: &[&str],
    ) -> Self {
        let port = referee.port.to_string();
        let (threads, cycles) = (threads.to_string(), cycles.to_string());
        let mut args = vec![cs, &port, recipe, path, &threads, &cycles];
        args.extend_from_slice(extra);
        Self::start(file, class, &args).await
    }

    /// Lets the program's contenders go.
    pub(crate) fn go(&mut self) {
        self.io.send("GO");
    }

    /// Lets the program's contenders go together with zkwire's tasks (`spawn`), awaits
    /// zkwire's, then the program's end ([`Self::finish`]); returns the program's count and
    /// the time taken.
    pub(crate) async fn race(
        mut self,
        spawn: impl FnOnce() -> Vec<JoinHandle<()>>,
    ) -> (usize, Duration) {
        let started = Instant::now();
        self.go();
        for task in spawn() {
            task.await.unwrap();
        }
        let done = self.finish().await;
        (done, started.elapsed())
    }

    /// The program's next line of output.
    pub(crate) async fn next_line(&mut self, within: Duration) -> String {
        self.io.next_line(within).await
    }

    /// Waits for `DONE <n>` and a clean exit; returns n.
    pub(crate) async fn finish(mut self) -> usize {
        loop {
            let line = self.next_line(Duration::from_secs(180)).await;
            if let Some(n) = line.strip_prefix("DONE ") {
                let status = tokio::task::block_in_place(|| self.child.wait()).unwrap();
                assert!(status.success(), "{status}: {}", self.stderr());
                return n.parse().unwrap();
            }
        }
    }

    /// What the program wrote on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.io.stderr()
    }
}

/// zkwire mutex contenders, one task per client: `cycles` acquisitions each on `path`, every
/// hold reported to the referee. A task stops early once the referee has seen a violation
/// (only the control runs look for one).
pub(crate) fn mutex_tasks(
    clients: &[Client],
    path: &str,
    options: &LockOptions,
    cycles: usize,
    referee: &Arc<Referee>,
) -> Vec<JoinHandle<()>> {
    clients
        .iter()
        .map(|client| {
            let mutex = Mutex::with_options(client.clone(), path, options.clone());
            let referee = referee.clone();
            tokio::spawn(async move {
                for step in 0..cycles {
                    if referee.violations() > 0 {
                        return;
                    }
                    let guard = mutex.lock().await.unwrap();
                    referee.enter(Kind::Mutex);
                    hold(step + 1).await;
                    referee.exit(Kind::Mutex);
                    guard.release().await.unwrap();
                }
            })
        })
        .collect()
}

/// zkwire read/write contenders, one task per client: `cycles` acquisitions each, one in
/// `100 / write_percent` a write (staggered across tasks), every hold reported.
pub(crate) fn rw_tasks(
    clients: &[Client],
    path: &str,
    options: &LockOptions,
    cycles: usize,
    write_percent: usize,
    referee: &Arc<Referee>,
) -> Vec<JoinHandle<()>> {
    clients
        .iter()
        .enumerate()
        .map(|(t, client)| {
            let rw = RwLock::with_options(client.clone(), path, options.clone());
            let referee = referee.clone();
            tokio::spawn(async move {
                for step in 0..cycles {
                    let kind = if (step + t) % (100 / write_percent) == 0 {
                        Kind::Write
                    } else {
                        Kind::Read
                    };
                    let guard = match kind {
                        Kind::Write => Guard::Write(rw.write().await.unwrap()),
                        _ => Guard::Read(rw.read().await.unwrap()),
                    };
                    referee.enter(kind);
                    hold(step).await;
                    referee.exit(kind);
                    match guard {
                        Guard::Write(g) => g.release().await.unwrap(),
                        Guard::Read(g) => g.release().await.unwrap(),
                    }
                }
            })
        })
        .collect()
}

enum Guard {
    Read(zkwire_recipes::ReadGuard),
    Write(zkwire_recipes::WriteGuard),
}
