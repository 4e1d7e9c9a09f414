//! The signals zkw handles while it waits for a lock or a command (SIGINT, SIGTERM, SIGHUP),
//! how it passes them on to the command, and the exit codes they give.

use rustix::process::Signal;
use tokio::signal::unix::SignalKind;

use crate::child::Running;
use crate::fail::{Failure, INTERRUPTED};
use crate::interrupt::listen;

/// Passes a signal zkw received on to the command. In the foreground the terminal already
/// sent Ctrl-C to the command too, so SIGINT is not passed twice.
pub(crate) fn forward(running: &Running, name: &str, foreground: bool) {
    let signal = match name {
        "INT" if foreground => return,
        "INT" => Signal::INT,
        "HUP" => Signal::HUP,
        _ => Signal::TERM,
    };
    running.signal(signal);
}

/// zkw's exit code when a signal stops it: 128 + the signal's number.
pub(crate) fn signal_exit_code(name: &str) -> u8 {
    match name {
        "HUP" => 129,
        "TERM" => 143,
        _ => INTERRUPTED,
    }
}

/// The signals zkw handles while it waits for a lock or a command: SIGINT, SIGTERM, SIGHUP.
pub(crate) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn new() -> Result<Self, Failure> {
        Ok(Self {
            int: listen(SignalKind::interrupt())?,
            term: listen(SignalKind::terminate())?,
            hup: listen(SignalKind::hangup())?,
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

    /// The name of the next signal received (`INT`, `TERM` or `HUP`).
    pub(crate) async fn any(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "INT",
            _ = self.term.recv() => "TERM",
            _ = self.hup.recv() => "HUP",
        }
    }
}
