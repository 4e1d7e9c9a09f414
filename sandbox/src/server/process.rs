//! A node's process: the watchdog and its JVM, started, signalled and reaped.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::MutexGuard;
use std::thread;
use std::time::{Duration, Instant};

use super::files::{tail_of, unix_now};
use super::node::Node;
use super::ports::lock;
use super::watchdog::WATCHDOG;
use super::{ServerError, ERROR_LOG_LINES};

/// JVM flags keeping each server small and quick to start on a small box.
const JVM_FLAGS: &[&str] = &[
    "-Xmx256m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
];

/// How long to wait for the watchdog (and so the JVM) to exit after `kill`.
const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long to wait after `term` (the watchdog escalates to SIGKILL at 5 s).
const TERM_WAIT: Duration = Duration::from_secs(15);

/// A running watchdog + JVM pair.
#[derive(Debug)]
pub(super) struct Proc {
    watchdog: Child,
    stdin: Option<ChildStdin>,
    java_pid: Option<u32>,
}

/// Where a node's process stands after a status check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Liveness {
    Running,
    Exited,
}

impl Node {
    fn proc(&self) -> MutexGuard<'_, Option<Proc>> {
        lock(&self.proc)
    }

    /// Launches the watchdog + JVM. The caller must have made sure no
    /// previous process is running.
    pub(super) fn spawn(&self, event: &str) -> Result<(), ServerError> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| ServerError::io(format!("opening {}", self.log_path.display()), e))?;
        // Marker line; failure to write it is harmless.
        let _ = writeln!(
            log,
            "===== zkwire-sandbox: {event} {} at unix time {} =====",
            self.label,
            unix_now()
        );
        let log_err = log
            .try_clone()
            .map_err(|e| ServerError::io("duplicating the log file handle", e))?;
        match fs::remove_file(self.pid_path()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ServerError::io(
                    format!("removing {}", self.pid_path().display()),
                    e,
                ));
            }
        }

        let mut classpath = OsString::from(self.dir.as_os_str());
        classpath.push(":");
        classpath.push(&self.runtime.classpath);

        let mut cmd = Command::new(&self.runtime.bash);
        cmd.arg("-c")
            .arg(WATCHDOG)
            .arg("zkwire-zk-watchdog")
            .arg(&self.dir)
            .arg(self.pid_path())
            .arg(std::process::id().to_string())
            .arg(if self.keep { "1" } else { "0" })
            .arg(&self.runtime.java)
            .args(JVM_FLAGS)
            .arg(format!("-Dzookeeper.log.dir={}", self.dir.display()))
            .args(self.jvm_props.iter().map(|(k, v)| format!("-D{k}={v}")))
            .arg("-cp")
            .arg(classpath)
            .arg(self.main_class)
            .arg(self.cfg_path())
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let mut watchdog = cmd.spawn().map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                ServerError::BashNotFound(format!("{}: {e}", self.runtime.bash.display()))
            } else {
                ServerError::io(format!("spawning {}", self.label), e)
            }
        })?;
        let stdin = watchdog.stdin.take();
        *self.proc() = Some(Proc {
            watchdog,
            stdin,
            java_pid: None,
        });
        Ok(())
    }

    /// Whether the watchdog (and so the JVM) is still running. Reaps it if not.
    pub(super) fn liveness(&self) -> Liveness {
        let mut guard = self.proc();
        match guard.as_mut() {
            None => Liveness::Exited,
            Some(p) => match p.watchdog.try_wait() {
                Ok(None) => Liveness::Running,
                Ok(Some(_)) | Err(_) => Liveness::Exited,
            },
        }
    }

    pub(super) fn java_pid(&self) -> Option<u32> {
        let mut guard = self.proc();
        let p = guard.as_mut()?;
        if p.java_pid.is_none() {
            // The watchdog writes the file with one `printf`; only trust a
            // complete line.
            if let Ok(text) = fs::read_to_string(self.pid_path()) {
                if let Some(line) = text.strip_suffix('\n') {
                    p.java_pid = line.trim().parse().ok();
                }
            }
        }
        p.java_pid
    }

    /// Sends `kill` or `term` to the watchdog and closes its stdin. Does
    /// not wait. Returns the process (if any) for [`Self::reap`].
    pub(super) fn signal(&self, command: &str) -> Option<Proc> {
        // Cache the java pid for the fallback path before it is needed.
        let _ = self.java_pid();
        let mut p = self.proc().take()?;
        if let Some(mut stdin) = p.stdin.take() {
            // The watchdog may already be gone (EPIPE); that is fine.
            let _ = stdin.write_all(format!("{command}\n").as_bytes());
            let _ = stdin.flush();
        }
        Some(p)
    }

    /// Waits for the watchdog to exit (it exits only after reaping the
    /// JVM). After `timeout`, kills JVM and watchdog with SIGKILL directly.
    pub(super) fn reap(&self, mut p: Proc, timeout: Duration) -> Result<(), ServerError> {
        let deadline = Instant::now() + timeout;
        loop {
            match p.watchdog.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                Ok(None) | Err(_) => break,
            }
        }
        // Fallback: the watchdog is stuck. Kill the JVM ourselves, then it.
        if let Some(pid) = p.java_pid {
            let _ = Command::new(&self.runtime.bash)
                .arg("-c")
                .arg("kill -KILL \"$1\" 2>/dev/null")
                .arg("zkwire-kill")
                .arg(pid.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = p.watchdog.kill();
        let _ = p.watchdog.wait();
        Err(ServerError::Startup {
            what: self.label.clone(),
            reason: format!(
                "did not exit within {timeout:?}; killed watchdog and JVM (pid {:?}) forcibly",
                p.java_pid
            ),
            log_path: self.log_path.clone(),
            log_tail: tail_of(&self.log_path, ERROR_LOG_LINES),
        })
    }

    /// SIGKILL the JVM and wait until it is gone. No-op when not running.
    pub(super) fn kill(&self) -> Result<(), ServerError> {
        match self.signal("kill") {
            Some(p) => self.reap(p, KILL_WAIT),
            None => Ok(()),
        }
    }

    /// SIGTERM the JVM (SIGKILL after 5 s) and wait until it is gone.
    pub(super) fn stop(&self) -> Result<(), ServerError> {
        match self.signal("term") {
            Some(p) => self.reap(p, TERM_WAIT),
            None => Ok(()),
        }
    }
}

/// Kills all `nodes` concurrently (one command each, then wait for all).
pub(super) fn kill_all(nodes: &[Node]) {
    let procs: Vec<_> = nodes.iter().map(|n| n.signal("kill")).collect();
    for (node, p) in nodes.iter().zip(procs) {
        if let Some(p) = p {
            let _ = node.reap(p, KILL_WAIT);
        }
    }
}
