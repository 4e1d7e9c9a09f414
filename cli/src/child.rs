//! Running a command under a lock: spawning it, forwarding signals, terminating it.
//!
//! Signals are sent with the `kill` built into `sh` (no `unsafe`, no libc), to the command's
//! process group when it has its own (the default), so that a lost lock stops the whole tree.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::fail::{Failure, CANNOT_EXEC, NOT_FOUND};

/// A running command.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    pid: u32,
    /// Whether it leads its own process group (signals go to the whole group).
    own_group: bool,
}

/// How the command was stopped by [`Running::terminate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It exited within the grace period after SIGTERM (or had already exited).
    Terminated(ExitStatus),
    /// It had to be killed with SIGKILL.
    Killed,
}

impl Running {
    /// Starts `argv` with extra environment variables, standard streams inherited; in its
    /// own process group unless `foreground`.
    ///
    /// # Errors
    /// Exit code 127 when the program is not found, 126 when it cannot be run.
    pub(crate) fn spawn(
        argv: &[String],
        env: &[(&str, String)],
        foreground: bool,
    ) -> Result<Self, Failure> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| Failure::usage("missing command to run"))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .stdin(Stdio::inherit());
        if !foreground {
            command.process_group(0);
        }
        let child = command.spawn().map_err(|e| spawn_failure(program, &e))?;
        let pid = child.id().ok_or_else(|| {
            Failure::new(
                CANNOT_EXEC,
                format!("{program}: exited before it could be watched"),
            )
        })?;
        Ok(Self {
            child,
            pid,
            own_group: !foreground,
        })
    }

    /// Waits for the command to exit.
    ///
    /// # Errors
    /// An I/O error from waiting (should not happen).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Sends `signal` (a name such as `TERM`) to the command (its whole group when it has
    /// its own). Best effort: the command may be gone already.
    pub(crate) fn signal(&self, signal: &str) {
        let target = if self.own_group {
            format!("-{}", self.pid)
        } else {
            self.pid.to_string()
        };
        send_signal(signal, &target);
    }

    /// SIGTERM, then SIGKILL if it is still running after `grace`.
    pub(crate) async fn terminate(&mut self, grace: Duration) -> Stopped {
        self.signal("TERM");
        let deadline = tokio::time::Instant::now() + grace;
        let stopped = match tokio::time::timeout_at(deadline, self.child.wait()).await {
            Ok(Ok(status)) => Stopped::Terminated(status),
            _ => {
                let _ = self.child.kill().await;
                Stopped::Killed
            }
        };
        // The rest of the group (the command's own children) gets the rest of the grace.
        while self.own_group && self.group_alive() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.own_group {
            self.signal("KILL");
        }
        stopped
    }

    /// Whether any process of the command's group is still running (zombies waiting to be
    /// reaped do not count).
    fn group_alive(&self) -> bool {
        live_in_group(self.pid).unwrap_or_else(|| send_signal("0", &format!("-{}", self.pid)))
    }
}

/// Whether `/proc` shows a process of group `pgid` that is not a zombie; `None` without a
/// readable `/proc`.
fn live_in_group(pgid: u32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(entries.filter_map(Result::ok).any(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid pgrp …`; comm may contain anything, so split after the last ')'.
        let fields: Vec<&str> = stat.rsplit_once(')').map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
        matches!(fields.as_slice(), [state, _, pgrp, ..] if pgrp.parse() == Ok(pgid) && !matches!(*state, "Z" | "X"))
    }))
}

/// Runs `sh -c 'kill -SIGNAL TARGET'` (TARGET is a pid, or `-pgid` for a group); whether
/// the signal was delivered.
fn send_signal(signal: &str, target: &str) -> bool {
    let script = format!("kill -{signal} {target}");
    std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The exit code that reports `status`: the command's own, or 128 + the signal that ended it.
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(255),
        (None, None) => 1,
    }
}

fn spawn_failure(program: &str, error: &io::Error) -> Failure {
    let code = if error.kind() == io::ErrorKind::NotFound {
        NOT_FOUND
    } else {
        CANNOT_EXEC
    };
    Failure::new(code, format!("cannot run {program:?}: {error}"))
}
