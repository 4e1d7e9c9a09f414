//! Running a command under a lock: spawning it, forwarding signals, stopping it.
//!
//! Signals go straight to the command's process group (`kill(-pgid, sig)` through rustix)
//! when it has its own (the default), so that stopping the command stops its whole tree; to
//! the command alone otherwise.
//!
//! Nothing here blocks the runtime thread, which also drives the session's pings: tokio
//! reaps the command, a group is probed with one `kill(-pgid, 0)`, and the `/proc` look for
//! zombies, needed only while that probe still finds a member, runs on the blocking pool.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{kill_process, kill_process_group, test_kill_process_group, Pid, Signal};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::fail::{Failure, CANNOT_EXEC};
use crate::tied;

/// How often a stopping command's process group is probed for members still running.
const GROUP_PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// How long zkw waits, after SIGKILL, for the command to be reaped.
const REAP_LIMIT: Duration = Duration::from_secs(1);

/// A running command.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    pid: Pid,
    /// Whether it leads its own process group (signals go to the whole group).
    own_group: bool,
    /// Whether the group was seen empty: its id may be reused from then on, so no more
    /// signals go to it.
    group_gone: bool,
}

/// How the command was stopped by [`Running::stop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It exited before the SIGKILL deadline (or had already exited).
    Terminated(ExitStatus),
    /// It had to be killed with SIGKILL.
    Killed,
}

impl Running {
    /// Starts `argv` with extra environment variables, standard streams inherited; in its
    /// own process group unless `foreground`; tied to this process's life (`crate::tied`),
    /// which reports, as JSON documents with `json`, why it could not start the command.
    ///
    /// # Errors
    /// Exit code 126 when `zkw` cannot start itself to run the command. The command's own
    /// start fails later, as its exit code: 127 when the program is not found, 126 when it
    /// cannot be run.
    pub(crate) fn spawn(
        argv: &[String],
        env: &[(&str, String)],
        foreground: bool,
        json: bool,
    ) -> Result<Self, Failure> {
        let program = argv
            .first()
            .ok_or_else(|| Failure::usage("missing command to run"))?;
        let mut command = Command::new(tied::SELF_EXE);
        command
            .args(tied::arguments(argv, json))
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .stdin(Stdio::inherit());
        if !foreground {
            command.process_group(0);
        }
        let child = command.spawn().map_err(|e| {
            let failure = tied::spawn_failure(program, &e);
            Failure::new(
                CANNOT_EXEC,
                format!("{} (starting {})", failure.message, tied::SELF_EXE),
            )
        })?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw)
            .ok_or_else(|| {
                Failure::new(
                    CANNOT_EXEC,
                    format!("{program}: exited before it could be watched"),
                )
            })?;
        Ok(Self {
            child,
            pid,
            own_group: !foreground,
            group_gone: false,
        })
    }

    /// Waits for the command to exit and then, when it has a process group of its own, for
    /// every other process of that group (background jobs it left behind, `sh -c 'job &'`)
    /// to end as well: what ran under a lock must be over before the lock is released.
    /// Processes that left the group (`setsid`, a daemon) are not seen.
    ///
    /// # Errors
    /// An I/O error from waiting (should not happen).
    ///
    /// # Cancel safety
    /// Cancel safe: the command's status is kept once reaped, and the group is probed
    /// again.
    pub(crate) async fn wait_group(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        self.group_stopped().await;
        Ok(status)
    }

    /// Sends `signal` to the command (its whole group when it has its own). Best effort:
    /// the command may be gone already.
    pub(crate) fn signal(&self, signal: Signal) {
        let _ = if self.own_group {
            if self.group_gone {
                return;
            }
            kill_process_group(self.pid, signal)
        } else {
            // Once reaped (tokio then forgets the id), the pid may belong to another process.
            if self.child.id().is_none() {
                return;
            }
            kill_process(self.pid, signal)
        };
    }

    /// Stops the command: SIGTERM now, then SIGKILL at `kill_at` if the command, or any
    /// process of its group, still runs by then.
    pub(crate) async fn stop(&mut self, kill_at: Instant) -> Stopped {
        self.signal(Signal::TERM);
        let stopped = match tokio::time::timeout_at(kill_at, self.child.wait()).await {
            Ok(Ok(status)) => Stopped::Terminated(status),
            _ => Stopped::Killed,
        };
        // The rest of the group (the command's own children) gets the rest of the grace.
        let all_gone = stopped != Stopped::Killed
            && tokio::time::timeout_at(kill_at, self.group_stopped())
                .await
                .is_ok();
        if !all_gone {
            self.signal(Signal::KILL);
            let _ = tokio::time::timeout(REAP_LIMIT, self.child.wait()).await;
        }
        stopped
    }

    /// Resolves once no process of the command's group runs (at once without a group of
    /// its own). Call once the command itself has been reaped.
    async fn group_stopped(&mut self) {
        while self.own_group && !self.group_gone {
            if group_running(self.pid).await {
                tokio::time::sleep(GROUP_PROBE_INTERVAL).await;
            } else {
                self.group_gone = true;
            }
        }
    }
}

/// Whether a process of group `pgid` still runs. `kill(-pgid, 0)` failing with ESRCH says
/// the group is empty; when it finds a member, that member may be a zombie nobody reaps (an
/// orphan handed to an init that does not reap, as in many containers), so `/proc` decides,
/// read on the blocking pool.
async fn group_running(pgid: Pid) -> bool {
    match test_kill_process_group(pgid) {
        Err(Errno::SRCH) => false,
        _ => tokio::task::spawn_blocking(move || live_in_group(pgid))
            .await
            .ok()
            .flatten()
            .unwrap_or(true),
    }
}

/// Whether `/proc` shows a process of group `pgid` that is not a zombie; `None` without a
/// readable `/proc`.
fn live_in_group(pgid: Pid) -> Option<bool> {
    let pgid = pgid.as_raw_pid();
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(entries.filter_map(Result::ok).any(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid pgrp …`; comm may contain anything, so split after the last ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
        matches!(fields.as_slice(), [state, _, pgrp, ..] if pgrp.parse() == Ok(pgid) && !matches!(*state, "Z" | "X"))
    }))
}

/// The exit code that reports `status`: the command's own, or 128 + the signal that ended it.
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(255),
        (None, None) => 1,
    }
}
