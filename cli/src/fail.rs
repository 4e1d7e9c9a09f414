//! Failures: one line for the user and the exit code that goes with it.

use zkwire::Error;
use zkwire_recipes::LockError;

/// The operation failed (ZooKeeper refused it: no such node, bad version, not empty, …).
pub(crate) const FAILED: u8 = 1;
/// The command line is wrong.
pub(crate) const USAGE: u8 = 2;
/// No ZooKeeper server could be reached, or the session was lost.
pub(crate) const UNAVAILABLE: u8 = 69;
/// The lock (or lease) was not acquired before `--timeout`.
pub(crate) const LOCK_TIMEOUT: u8 = 73;
/// The lock (or lease) was lost while the command ran; the command was terminated.
pub(crate) const LOCK_LOST: u8 = 75;
/// `--revocable`: the lock was revoked by request; the command was terminated and the lock
/// released.
pub(crate) const REVOKED: u8 = 76;
/// The command could not be started.
pub(crate) const CANNOT_EXEC: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;
/// zkw was interrupted (Ctrl-C) before the command started.
pub(crate) const INTERRUPTED: u8 = 130;

/// Why `zkw` stops: one line for stderr and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The process exit code.
    pub(crate) code: u8,
    /// One line, without the `zkw: ` prefix.
    pub(crate) message: String,
}

impl Failure {
    /// A failure with an exit code.
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: one_line(&message.into()),
        }
    }

    /// A command-line error (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// A ZooKeeper error while working on `context` (usually a path).
    pub(crate) fn zk(context: &str, error: &Error) -> Self {
        Self::new(zk_code(error), format!("{context}: {error}"))
    }

    /// A lock recipe error while working on `context`.
    pub(crate) fn lock(context: &str, error: &LockError) -> Self {
        match error {
            LockError::Client(e) => Self::zk(context, e),
            LockError::Timeout => Self::new(
                LOCK_TIMEOUT,
                format!("{context}: not acquired before the timeout"),
            ),
            LockError::Lost(_) => Self::new(LOCK_LOST, format!("{context}: {error}")),
            other => Self::new(FAILED, format!("{context}: {other}")),
        }
    }
}

/// A failure as the JSON document `--json` writes on standard error:
/// `{"error":MESSAGE,"exit_code":N,"kind":KIND}`, KIND one of `failed`, `usage`,
/// `unavailable`, `timeout`, `lost`, `revoked`, `cannot_run`, `not_found`, `signal`.
pub(crate) fn failure_json(failure: &Failure) -> serde_json::Value {
    serde_json::json!({
        "error": failure.message,
        "exit_code": failure.code,
        "kind": kind(failure.code),
    })
}

/// The name `--json` gives an exit code.
fn kind(code: u8) -> &'static str {
    match code {
        FAILED => "failed",
        USAGE => "usage",
        UNAVAILABLE => "unavailable",
        LOCK_TIMEOUT => "timeout",
        LOCK_LOST => "lost",
        REVOKED => "revoked",
        CANNOT_EXEC => "cannot_run",
        NOT_FOUND => "not_found",
        _ => "signal",
    }
}

/// The exit code for a ZooKeeper error.
fn zk_code(error: &Error) -> u8 {
    match error {
        Error::InvalidPath(_) | Error::InvalidArgument(_) | Error::InvalidConnectString(_) => USAGE,
        Error::ConnectionLoss
        | Error::Timeout
        | Error::SessionExpired
        | Error::Closed
        | Error::Io(_)
        | Error::Protocol(_) => UNAVAILABLE,
        _ => FAILED,
    }
}

/// Keeps the first line of a message (errors are one line); empty stays empty (a silent exit).
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_single_lines() {
        assert_eq!(
            Failure::zk("/a", &Error::NoNode),
            Failure::new(FAILED, "/a: node does not exist")
        );
        assert_eq!(Failure::zk("/a", &Error::Timeout).code, UNAVAILABLE);
        assert_eq!(Failure::lock("/l", &LockError::Timeout).code, LOCK_TIMEOUT);
        assert_eq!(Failure::new(1, "first\nsecond").message, "first");
        let doc = failure_json(&Failure::new(UNAVAILABLE, "gone"));
        assert_eq!(
            doc.to_string(),
            r#"{"error":"gone","exit_code":69,"kind":"unavailable"}"#
        );
    }
}
