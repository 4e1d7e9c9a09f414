//! Helpers shared by the interop tests, `interop.rs` and `revoke.rs` (Apache Curator) and
//! `kazoo.rs` (kazoo): the referee, the stdio of a contender process, the compiled Curator
//! program, and small zkwire helpers.
//!
//! Each test binary includes this module with `mod support;` and uses its own part of it.
#![allow(dead_code)]

pub(crate) mod jvm;
pub(crate) mod process;
pub(crate) mod referee;

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use std::sync::Arc;

use tokio::task::JoinHandle;
use zkwire::Client;
use zkwire_recipes::{LockOptions, Mutex, RwLock};
use zkwire_testing::java::{self, JavaProgram};

use referee::{Kind, Referee};

/// A client with a 10 s session, as the contender programs use.
pub(crate) async fn connect(cs: &str) -> Client {
    zkwire_testing::support::builder()
        .with_session_timeout(Duration::from_secs(10))
        .connect(cs)
        .await
        .unwrap()
}

/// A short hold of 0–2 ms.
pub(crate) async fn hold(step: usize) {
    match step % 3 {
        0 => tokio::task::yield_now().await,
        ms => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
    }
}

/// The Curator program `recipes/interop/<file>`, compiled with `javac` against Debian's
/// Curator jars once per test binary (each binary drives one program). Panics with what to
/// install when Java or Curator is missing: these tests never skip.
pub(crate) fn curator_program(file: &'static str) -> &'static JavaProgram {
    static PROGRAM: OnceLock<(&'static str, Result<JavaProgram, String>)> = OnceLock::new();
    let (compiled, built) = PROGRAM.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("interop")
            .join(file);
        let build = || {
            let classpath = java::curator_classpath().map_err(|e| e.to_string())?;
            let started = Instant::now();
            let program = java::compile(&[&source], &classpath).map_err(|e| e.to_string())?;
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

    /// Lets the program's contenders go.
    pub(crate) fn go(&mut self) {
        self.io.send("GO");
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
