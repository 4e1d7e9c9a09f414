//! The signals zkw handles while it waits for a lock or a command (SIGINT, SIGQUIT, SIGTERM,
//! SIGHUP), how it passes them on to the command, and the exit codes they give.

use rustix::process::Signal;
use tokio::signal::unix::SignalKind;

use crate::child::Running;
use crate::fail::{Failure, INTERRUPTED};
use crate::interrupt::listen;

/// Passes a signal zkw received on to the command. In the foreground the terminal already
/// sent Ctrl-C (and `Ctrl-\`) to the command too, so SIGINT and SIGQUIT are not passed twice.
pub(crate) fn forward(running: &Running, name: &str, foreground: bool) {
    let signal = match name {
        "INT" | "QUIT" if foreground => return,
        "INT" => Signal::INT,
        "QUIT" => Signal::QUIT,
        "HUP" => Signal::HUP,
        _ => Signal::TERM,
    };
    running.signal(signal);
}

/// zkw's exit code when a signal stops it: 128 + the signal's number.
pub(crate) fn signal_exit_code(name: &str) -> u8 {
    match name {
        "HUP" => 129,
        "QUIT" => 131,
        "TERM" => 143,
        _ => INTERRUPTED,
    }
}

/// The signals zkw handles while it waits for a lock or a command: SIGINT, SIGQUIT, SIGTERM
/// and SIGHUP. Left to their default, SIGQUIT (`Ctrl-\`) would kill zkw alone and leave the
/// command running, in its own process group, after the lock could pass; SIGHUP is left
/// alone when zkw was started with it ignored (`nohup`), so that the command inherits that.
pub(crate) struct Signals {
    int: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    pub(crate) fn new() -> Result<Self, Failure> {
        let hup = if ignored_at_start(Signal::HUP) {
            None
        } else {
            Some(listen(SignalKind::hangup())?)
        };
        Ok(Self {
            int: listen(SignalKind::interrupt())?,
            quit: listen(SignalKind::quit())?,
            term: listen(SignalKind::terminate())?,
            hup,
        })
    }

    /// The failure of the next signal received while `doing`: zkw's exit code for it.
    pub(crate) async fn interrupted(&mut self, doing: &str) -> Failure {
        let name = self.any().await;
        Failure::new(
            signal_exit_code(name),
            format!("interrupted by SIG{name} while {doing}"),
        )
    }

    /// The name of the next signal received (`INT`, `QUIT`, `TERM` or `HUP`).
    pub(crate) async fn any(&mut self) -> &'static str {
        let hup = async {
            match &mut self.hup {
                Some(hup) => hup.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.int.recv() => "INT",
            _ = self.quit.recv() => "QUIT",
            _ = self.term.recv() => "TERM",
            _ = hup => "HUP",
        }
    }
}

/// Whether `signal` was ignored when zkw started (and nothing here has handled it since):
/// read from the kernel's record of the process (`SigIgn` in `/proc/self/status`), as the
/// disposition itself can only be read through an unsafe call. Not ignored when unreadable.
fn ignored_at_start(signal: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    ignored_in(&status, signal.as_raw())
}

/// Whether the `SigIgn` mask of a `/proc/PID/status` text has signal number `number` set.
fn ignored_in(status: &str, number: i32) -> bool {
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok());
    let bit = u32::try_from(number - 1).ok().filter(|bit| *bit < 64);
    matches!((mask, bit), (Some(mask), Some(bit)) if mask & (1 << bit) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ignored_mask_is_read_by_signal_number() {
        // SIGHUP (1) and SIGQUIT (3) ignored: bits 0 and 2.
        let status = "Name:\tzkw\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000005\n";
        assert!(ignored_in(status, Signal::HUP.as_raw()));
        assert!(ignored_in(status, Signal::QUIT.as_raw()));
        assert!(!ignored_in(status, Signal::INT.as_raw()));
        assert!(!ignored_in("SigIgn:\tnot hex\n", 1));
        assert!(!ignored_in("", 1));
    }
}
