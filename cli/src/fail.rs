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
/// The command was not found (kind `command_not_found`: a missing *node* is `no_node`).
pub(crate) const NOT_FOUND: u8 = 127;
/// zkw was interrupted (Ctrl-C) before the command started.
pub(crate) const INTERRUPTED: u8 = 130;

/// Why `zkw` stops: one line for stderr, the exit code, and for `--json` the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The process exit code.
    pub(crate) code: u8,
    /// One line, without the `zkw: ` prefix.
    pub(crate) message: String,
    /// The cause, as `--json` names it: scripts branch on it, not on the message.
    pub(crate) kind: &'static str,
    /// A version check that failed: the version given and the node's (when it could be read).
    pub(crate) versions: Option<Versions>,
}

/// The versions of a failed `-v VERSION` check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Versions {
    /// The version the command line asked for.
    pub(crate) expected: i32,
    /// The node's version read after the failure; `None` when it could not be read (the
    /// node deleted meanwhile, say).
    pub(crate) actual: Option<i32>,
}

impl Failure {
    /// A failure with an exit code (its kind follows from the code).
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: one_line(&message.into()),
            kind: code_kind(code),
            versions: None,
        }
    }

    /// A command-line error (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// The same failure (code and kind), said otherwise.
    pub(crate) fn with_message(self, message: impl Into<String>) -> Self {
        Self {
            message: one_line(&message.into()),
            ..self
        }
    }

    /// The same failure with another `--json` kind.
    pub(crate) fn with_kind(self, kind: &'static str) -> Self {
        Self { kind, ..self }
    }

    /// A ZooKeeper error while working on `context` (usually a path).
    pub(crate) fn zk(context: &str, error: &Error) -> Self {
        let code = zk_code(error);
        let failure =
            Self::new(code, format!("{context}: {error}")).with_kind(zk_kind(error, code));
        match error {
            Error::NoAuth => failure.with_hint("--auth or --sasl authenticates the session"),
            _ => failure,
        }
    }

    /// The same failure, its message followed by what to do about it.
    pub(crate) fn with_hint(mut self, hint: &str) -> Self {
        self.message = format!("{}; {hint}", self.message);
        self
    }

    /// A version check on `path` failed: `expected` was given, the node has `actual` (`None`:
    /// it could not be read); `acl`: the ACL version. The message says both, so that the
    /// next try can be right.
    pub(crate) fn bad_version(path: &str, acl: bool, expected: i32, actual: Option<i32>) -> Self {
        let what = if acl { "ACL version" } else { "version" };
        let found = actual.map_or_else(
            || "the current one could not be read".to_owned(),
            |v| format!("the node has {what} {v}"),
        );
        let message = format!("{path}: {what} does not match: expected {expected}, {found}");
        Self {
            versions: Some(Versions { expected, actual }),
            ..Self::new(FAILED, message).with_kind("bad_version")
        }
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

/// Every value [`Failure::kind`] takes: the tests check that `zkw --help` names each.
#[cfg(test)]
pub(crate) const KINDS: [&str; 18] = [
    "no_node",
    "node_exists",
    "bad_version",
    "not_empty",
    "no_auth",
    "invalid_acl",
    "invalid_path",
    "bad_arguments",
    "unimplemented",
    "failed",
    "usage",
    "unavailable",
    "timeout",
    "lost",
    "revoked",
    "cannot_run",
    "command_not_found",
    "signal",
];

/// A failure as the JSON document `--json` writes on standard error:
/// `{"error":MESSAGE,"exit_code":N,"kind":KIND}`, the kinds listed in `zkw --help`; a failed
/// version check adds `"expected":V` and `"actual":V` (`null` when it could not be read).
/// Prints `failure` on stderr: its message, or with `json` its JSON document; nothing when it
/// has no message (said already: a broken pipe, a command's own exit status).
pub(crate) fn print(failure: &Failure, json: bool) {
    if failure.message.is_empty() {
        return;
    }
    if json {
        let mut stderr = std::io::stderr().lock();
        let document = format!("{}\n", failure_json(failure));
        let _ = std::io::Write::write_all(&mut stderr, document.as_bytes());
    } else {
        crate::out::note(&failure.message);
    }
}

pub(crate) fn failure_json(failure: &Failure) -> serde_json::Value {
    let mut doc = serde_json::json!({
        "error": failure.message,
        "exit_code": failure.code,
        "kind": failure.kind,
    });
    if let (Some(v), serde_json::Value::Object(fields)) = (failure.versions, &mut doc) {
        fields.insert("expected".into(), v.expected.into());
        fields.insert("actual".into(), v.actual.into());
    }
    doc
}

/// The kind of a failure that has only an exit code to tell it by.
fn code_kind(code: u8) -> &'static str {
    match code {
        FAILED => "failed",
        USAGE => "usage",
        UNAVAILABLE => "unavailable",
        LOCK_TIMEOUT => "timeout",
        LOCK_LOST => "lost",
        REVOKED => "revoked",
        CANNOT_EXEC => "cannot_run",
        NOT_FOUND => "command_not_found",
        _ => "signal",
    }
}

/// The kind of a ZooKeeper error: its own for the causes a script may handle (create what
/// is missing, read the version again, authenticate), else the exit code's.
fn zk_kind(error: &Error, code: u8) -> &'static str {
    match error {
        Error::NoNode => "no_node",
        Error::NodeExists => "node_exists",
        Error::BadVersion => "bad_version",
        Error::NotEmpty => "not_empty",
        // The session ended because the server refused the credentials.
        Error::NoAuth | Error::AuthFailed | Error::SessionClosedRequireSaslAuth => "no_auth",
        Error::InvalidAcl => "invalid_acl",
        Error::InvalidPath(_) => "invalid_path",
        Error::BadArguments | Error::InvalidArgument(_) => "bad_arguments",
        Error::Unimplemented => "unimplemented",
        Error::MultiFailed { error, .. } => zk_kind(error, code),
        _ => code_kind(code),
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
        // The server is there but cannot serve now: the same request later may succeed.
        Error::Throttled
        | Error::OperationTimeout
        | Error::RequestTimeout
        | Error::ReconfigInProgress
        | Error::SessionMoved => UNAVAILABLE,
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
            Failure::new(FAILED, "/a: node does not exist").with_kind("no_node")
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

    #[test]
    fn kinds_per_cause() {
        let kind = |e: Error| Failure::zk("/a", &e).kind;
        assert_eq!(kind(Error::NodeExists), "node_exists");
        assert_eq!(kind(Error::NotEmpty), "not_empty");
        assert_eq!(kind(Error::NoAuth), "no_auth");
        assert_eq!(kind(Error::ConnectionLoss), "unavailable");
        assert_eq!(kind(Error::MarshallingError), "failed");
        // Refused credentials: not a server that is down, whichever way the session ended.
        for refused in [Error::AuthFailed, Error::SessionClosedRequireSaslAuth] {
            let failure = Failure::zk("/a", &refused);
            assert_eq!(
                (failure.code, failure.kind),
                (FAILED, "no_auth"),
                "{refused:?}"
            );
        }
        // The server cannot serve now: the same request later may succeed.
        for busy in [
            Error::Throttled,
            Error::OperationTimeout,
            Error::RequestTimeout,
        ] {
            assert_eq!(Failure::zk("/a", &busy).code, UNAVAILABLE, "{busy:?}");
        }
        assert_eq!(Failure::new(NOT_FOUND, "x").kind, "command_not_found");
        let every = [
            FAILED,
            USAGE,
            UNAVAILABLE,
            LOCK_TIMEOUT,
            LOCK_LOST,
            REVOKED,
            126,
            127,
            130,
            143,
        ];
        assert!(every.iter().all(|c| KINDS.contains(&code_kind(*c))));
        let stale = Failure::bad_version("/a", false, 0, Some(3));
        assert_eq!(
            stale.message,
            "/a: version does not match: expected 0, the node has version 3"
        );
        assert_eq!(
            failure_json(&stale).to_string(),
            r#"{"error":"/a: version does not match: expected 0, the node has version 3","exit_code":1,"kind":"bad_version","expected":0,"actual":3}"#
        );
        let gone = Failure::bad_version("/a", true, 2, None);
        assert_eq!(failure_json(&gone)["actual"], serde_json::Value::Null);
        assert!(gone.message.contains("ACL version"), "{gone:?}");
    }
}
