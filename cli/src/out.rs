//! Writing to standard output without panicking on a closed pipe (`zkw ls -R / | head`).

use std::io::{self, Write};

use crate::fail::Failure;
use serde_json::Value;

/// The exit code when standard output was closed under us (as if killed by SIGPIPE).
pub(crate) const BROKEN_PIPE: u8 = 141;

/// Writes `text` and a newline to standard output, and flushes.
///
/// # Errors
/// A silent failure (code 141) when the reader went away; a failure for other write errors.
pub(crate) fn line(text: &str) -> Result<(), Failure> {
    bytes_line(text.as_bytes())
}

/// Writes raw `bytes` and a newline to standard output, and flushes.
///
/// # Errors
/// As [`line()`].
pub(crate) fn bytes_line(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush())
        .map_err(write_failure)
}

/// Writes a JSON document on one line.
///
/// # Errors
/// As [`line()`].
pub(crate) fn json(doc: &Value) -> Result<(), Failure> {
    line(&doc.to_string())
}

/// Writes `bytes` exactly (no newline added), and flushes.
///
/// # Errors
/// As [`line()`].
pub(crate) fn raw(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(write_failure)
}

/// Writes several lines.
///
/// # Errors
/// As [`line()`].
pub(crate) fn lines<S: AsRef<str>>(items: &[S]) -> Result<(), Failure> {
    items.iter().try_for_each(|l| line(l.as_ref()))
}

fn write_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        // The reader has all it wanted: stop quietly.
        Failure::new(BROKEN_PIPE, "")
    } else {
        Failure::new(
            crate::fail::FAILED,
            format!("cannot write to standard output: {e}"),
        )
    }
}

/// Writes a line to standard error (`zkw: ` prefixed); errors are ignored (nowhere to report).
pub(crate) fn note(text: &str) {
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "zkw: {text}");
}
