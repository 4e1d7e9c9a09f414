//! Helpers for the CLI tests: run the built `zkw` with a deadline, make a chroot on the
//! shared server, send signals, wait for files.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test binary uses a part

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// The binary under test.
pub(crate) const ZKW: &str = env!("CARGO_BIN_EXE_zkw");

/// How long any one `zkw` run may take before the test fails.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(60);

// `zkw`'s exit codes that the tests look for, as cli/src/fail.rs names them.
/// No server would take the session.
pub(crate) const UNAVAILABLE: i32 = 69;
/// A lock not acquired within `--timeout`.
pub(crate) const LOCK_TIMEOUT: i32 = 73;
/// A lock lost under the command.
pub(crate) const LOCK_LOST: i32 = 75;

/// What a finished `zkw` did.
#[derive(Debug)]
pub(crate) struct Out {
    /// Exit code (`None`: killed by a signal).
    pub(crate) code: Option<i32>,
    /// Standard output.
    pub(crate) stdout: String,
    /// Standard error.
    pub(crate) stderr: String,
    /// How long it ran.
    pub(crate) elapsed: Duration,
}

impl Out {
    /// Asserts success and returns stdout.
    pub(crate) fn ok(&self) -> &str {
        assert_eq!(self.code, Some(0), "zkw failed: {self:?}");
        &self.stdout
    }

    /// Asserts failure with `code` and exactly one line on stderr, `zkw: …`; returns it.
    pub(crate) fn fails(&self, code: i32) -> &str {
        assert_eq!(self.code, Some(code), "{self:?}");
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "expected one error line: {self:?}");
        assert!(lines[0].starts_with("zkw: "), "{self:?}");
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "{self:?}"
        );
        lines[0]
    }
}

/// `zkw register` of an instance of service `api` at 10.0.0.7:8080, before its other options.
pub(crate) const REGISTER_API: [&str; 6] =
    ["register", "api", "--address", "10.0.0.7", "--port", "8080"];

/// A `zkw` command with a clean environment (no `ZOOKEEPER`), standard input empty and the
/// output piped.
pub(crate) fn command(args: &[&str]) -> Command {
    let mut command = clean_command(args);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// `WRAPPER zkw ARGS` (`nohup`, …), as [`command`] otherwise.
pub(crate) fn command_under(wrapper: &str, args: &[&str]) -> Command {
    let mut command = with_clean_env(Command::new(wrapper), &[ZKW]);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// A `zkw` command with a clean environment (no `ZOOKEEPER`), its standard streams not set:
/// inherited, or the caller's to set (a pseudo-terminal must find them untouched).
fn clean_command(args: &[&str]) -> Command {
    with_clean_env(Command::new(ZKW), args)
}

/// `command` with `args` and the environment every `zkw` of the tests runs in.
fn with_clean_env(mut command: Command, args: &[&str]) -> Command {
    command
        .args(args)
        .env_remove("ZOOKEEPER")
        // The library's log would mix into stderr, which the tests read.
        .env_remove("RUST_LOG")
        // The harness's servers tick every 200 ms.
        .env("ZKW_SERVER_TICK", "200ms");
    command
}

/// `zkw --server CS shell` with a clean environment, keeping its history under `data_home`
/// (`XDG_DATA_HOME`); its standard streams are the caller's to set.
pub(crate) fn shell_command(cs: &str, data_home: &Path) -> Command {
    let mut command = clean_command(&["--server", cs, "shell"]);
    command.env("XDG_DATA_HOME", data_home);
    command
}

/// [`shell_command`] with `options` after `shell`, started on a pseudo-terminal
/// (`TERM=xterm`), as someone typing at it; each expectation waits at most 30 s.
pub(crate) fn spawn_shell_pty(
    cs: &str,
    data_home: &Path,
    options: &[&str],
) -> rexpect::session::PtySession {
    let mut command = shell_command(cs, data_home);
    command.args(options).env("TERM", "xterm");
    rexpect::session::spawn_command(command, Some(30_000)).unwrap()
}

/// Runs `zkw ARGS`, failing the test if it outlives [`RUN_LIMIT`].
pub(crate) fn run(args: &[&str]) -> Out {
    finish(command(args).spawn().expect("spawn zkw"), RUN_LIMIT)
}

/// Runs `zkw --server SERVER ARGS`.
pub(crate) fn zkw(server: &str, args: &[&str]) -> Out {
    let mut all = vec!["--server", server];
    all.extend_from_slice(args);
    run(&all)
}

/// Runs `zkw --server SERVER ARGS -- sh -c SCRIPT` (ARGS: a verb, its path and options).
pub(crate) fn zkw_sh(server: &str, args: &[&str], script: &str) -> Out {
    let mut all = args.to_vec();
    all.extend(["--", "sh", "-c", script]);
    zkw(server, &all)
}

/// Starts `zkw --server SERVER ARGS` (stdout and stderr piped).
pub(crate) fn spawn_zkw(server: &str, args: &[&str]) -> Child {
    let mut all = vec!["--server", server];
    all.extend_from_slice(args);
    command(&all).spawn().expect("spawn zkw")
}

/// Waits for a spawned `zkw` (stdout and stderr piped), killing it and failing after `limit`.
pub(crate) fn finish(mut child: Child, limit: Duration) -> Out {
    let started = Instant::now();
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "zkw still running after {limit:?}; stderr so far: {}",
                stderr.join().unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    let elapsed = started.elapsed();
    Out {
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed,
    }
}

fn drain(stream: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stream {
            let _ = s.read_to_string(&mut text);
        }
        text
    })
}

/// The lines of a stream, as they come.
pub(crate) fn lines_of(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line containing `needle`, within `limit`.
pub(crate) fn wait_line(lines: &Receiver<String>, needle: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("no line containing {needle:?} within {limit:?} ({e})"),
        }
    }
}

/// A fresh, empty chroot `/<name>` on the shared server; its connect string.
pub(crate) fn chroot(name: &str) -> String {
    local_runtime().block_on(zkwire_testing::support::fresh_chroot(name))
}

/// A runtime on the calling thread, for a test that blocks on one task at a time.
pub(crate) fn local_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A runtime with one worker thread, for a test whose clients must keep their sessions
/// alive while it waits on `zkw`.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// [`chroot`] with `setup` run in it: `zkw` command lines, their arguments separated by single
/// spaces (none holds a space), each of which must succeed.
pub(crate) fn chroot_with(name: &str, setup: &[&str]) -> String {
    let cs = chroot(name);
    for line in setup {
        let args: Vec<&str> = line.split(' ').collect();
        zkw(&cs, &args).ok();
    }
    cs
}

/// Sends `signal` (e.g. `INT`) to `pid`.
pub(crate) fn signal(pid: u32, signal: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -{signal} {pid}"))
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// A fresh scratch directory for one test: removed when the test ends, and left in place
/// when it fails (a panic is unwinding), for a look at what the commands wrote.
pub(crate) fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("zkw-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A test's scratch directory ([`scratch`]); a [`Path`] to everything that takes one.
#[derive(Debug)]
pub(crate) struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Waits until `path` exists and is not empty; its contents.
pub(crate) fn wait_file(path: &Path, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.trim().is_empty() {
                return text.trim().to_owned();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} did not appear within {limit:?}",
            path.display()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is still running (not gone, not a zombie).
pub(crate) fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().next().unwrap_or("").to_owned())
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

/// A shell script that runs `first`, then waits until `$0/go` exists ([`release`]) and exits
/// with `code`.
pub(crate) fn gated(first: &str, code: i32) -> String {
    format!("{first}; while [ ! -e \"$0/go\" ]; do sleep 0.05; done; exit {code}")
}

/// Lets a [`gated`] script run with `dir` as its `$0` go on to its exit.
pub(crate) fn release(dir: &Path) {
    std::fs::write(dir.join("go"), "").unwrap();
}

/// Starts `zkw --server CS ARGS -- sh -c SCRIPT DIR` (stdout and stderr piped): SCRIPT sees
/// DIR as `$0`.
pub(crate) fn spawn_script(cs: &str, args: &[&str], script: &str, dir: &Path) -> Child {
    let mut all = vec!["--server", cs];
    all.extend_from_slice(args);
    all.extend(["--", "sh", "-c", script, dir.to_str().unwrap()]);
    command(&all).spawn().unwrap()
}

/// [`spawn_script`] with a SCRIPT that writes its lock node (`$ZKW_LOCK_NODE`) to `DIR/node`
/// and a pid (its own, or a child's) to `DIR/pid`, then keeps running; returns once both are
/// written: the child, the node and the pid.
pub(crate) fn spawn_recording(
    cs: &str,
    args: &[&str],
    script: &str,
    dir: &Path,
) -> (Child, String, u32) {
    let child = spawn_script(cs, args, script, dir);
    let node = wait_file(&dir.join("node"), Duration::from_secs(30));
    let pid = wait_file(&dir.join("pid"), Duration::from_secs(5))
        .parse()
        .unwrap();
    (child, node, pid)
}

/// Starts `zkw --server SERVER --session-timeout TIMEOUT lock PATH --kill-after KILL_AFTER --
/// sh -c SCRIPT ARGS…` (stdout and stderr piped): SCRIPT sees ARGS as `$0`, `$1`, ….
pub(crate) fn spawn_lock_script(
    server: &str,
    [timeout, path, kill_after]: [&str; 3],
    script: &str,
    args: &[&str],
) -> Child {
    let mut all = vec![
        "--server",
        server,
        "--session-timeout",
        timeout,
        "lock",
        path,
    ];
    all.extend(["--kill-after", kill_after, "--", "sh", "-c", script]);
    all.extend_from_slice(args);
    command(&all).spawn().unwrap()
}

/// Starts `zkw --server CS ARGS -- sh -c "touch DIR/held; sleep SECONDS"` (ARGS: a lock verb
/// and its path and options) and returns once the command runs, that is once ARGS' lock is
/// held.
pub(crate) fn spawn_holder(cs: &str, args: &[&str], dir: &Path, seconds: u32) -> Child {
    let script = format!("touch \"$0/held\"; sleep {seconds}");
    let child = spawn_script(cs, args, &script, dir);
    wait_file_exists(&dir.join("held"));
    child
}

/// Asserts that `zkw locks PATH` shows a free lock at `path`: no one holds it or waits.
#[track_caller]
pub(crate) fn assert_lock_free(cs: &str, path: &str) {
    assert_eq!(
        zkw(cs, &["locks", path]).ok(),
        format!("{path}: no one holds or waits\n")
    );
}

/// Asserts that `zkw VERB PATH` (`locks`, `revoke`) on a missing `path` fails with 1, saying so.
#[track_caller]
pub(crate) fn assert_no_lock_there(cs: &str, verb: &str, path: &str) {
    assert_eq!(
        zkw(cs, &[verb, path]).fails(1),
        format!("zkw: {path}: node does not exist (no lock there)")
    );
}

/// Runs `zkw --server CS ARGS --timeout TIMEOUT -- echo never` (ARGS: a lock verb, its path
/// and options) while another holds that lock, and asserts that it gives up at once: exit 73
/// with `message`, within 3 s. The run.
#[track_caller]
pub(crate) fn assert_gives_up(cs: &str, args: &[&str], timeout: &str, message: &str) -> Out {
    let mut all = args.to_vec();
    all.extend(["--timeout", timeout, "--", "echo", "never"]);
    let busy = zkw(cs, &all);
    assert_eq!(busy.fails(LOCK_TIMEOUT), message);
    assert!(busy.elapsed < Duration::from_secs(3), "{busy:?}");
    busy
}

/// Waits (at most 30 s) until `path` exists.
pub(crate) fn wait_file_exists(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        thread::sleep(Duration::from_millis(20));
    }
}
