//! The servers' files: unique temporary directories, whether to keep them, and reading the
//! end of a log.

use std::env;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{ServerError, KEEP_LOGS_ENV};

/// Numbers the directories (and ensembles) of this process.
pub(super) static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new directory under the system's temporary directory, named after `tag`.
pub(super) fn unique_dir(tag: &str) -> Result<PathBuf, ServerError> {
    let base = env::temp_dir();
    let mut last = None;
    for _ in 0..16 {
        let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = base.join(format!("zkwire-{tag}-{}-{n}-{nanos}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(ServerError::io(format!("creating {}", dir.display()), e));
            }
        }
    }
    Err(ServerError::io(
        format!("creating a unique directory in {}", base.display()),
        last.unwrap_or_else(|| io::Error::other("no attempt made")),
    ))
}

/// Whether [`KEEP_LOGS_ENV`] asks to keep the directories.
pub(crate) fn keep_logs() -> bool {
    env::var_os(KEEP_LOGS_ENV).is_some_and(|v| v == "1")
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Returns the last `lines` lines (at most 16 KiB) of the file at `path`,
/// or a note saying why it could not be read.
pub(super) fn tail_of(path: &Path, lines: usize) -> String {
    const MAX: u64 = 16 * 1024;
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return format!("<cannot open {}: {e}>", path.display()),
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = Vec::new();
    let skip = len.saturating_sub(MAX);
    if skip > 0 {
        let mut sink = Vec::new();
        if let Err(e) = (&mut file).take(skip).read_to_end(&mut sink) {
            return format!("<cannot read {}: {e}>", path.display());
        }
    }
    if let Err(e) = file.take(MAX).read_to_end(&mut buf) {
        return format!("<cannot read {}: {e}>", path.display());
    }
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Writes `contents` to `path`.
pub(super) fn write_file(path: &Path, contents: &str) -> Result<(), ServerError> {
    fs::write(path, contents).map_err(|e| ServerError::io(format!("writing {}", path.display()), e))
}
