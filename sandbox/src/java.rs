//! Finding the Java runtime and the jars of Debian's Java packages: the one place the sandbox
//! (and the interop tests built on it) look for `java`, `javac` and jars.
//!
//! # Environment variables
//! * `JAVA` — the `java` binary (a path, or a name looked up on `PATH`);
//! * `JAVA_HOME` — `$JAVA_HOME/bin/java` (and `javac`) when they are not on `PATH`.

use std::env;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// Environment variable naming the java binary (a path or a name on `PATH`).
pub const JAVA_ENV: &str = "JAVA";

/// Directory holding the jars of Debian's Java packages (`zookeeper`, `libcurator-*-java`, …).
pub const DEFAULT_JAR_DIR: &str = "/usr/share/java";

/// What to install when the JDK is missing.
pub const JDK_INSTALL_HINT: &str =
    "javac/java not found: install a JDK with `apt-get install -y openjdk-17-jdk-headless` (Debian), \
     or set JAVA / JAVA_HOME";

/// No `java` or `javac` binary was found.
///
/// Its `Display` is [`JDK_INSTALL_HINT`] followed by where we looked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JdkNotFound {
    detail: String,
}

impl JdkNotFound {
    fn new(detail: String) -> Self {
        Self { detail }
    }

    /// Where we looked, without the installation hint.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for JdkNotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{JDK_INSTALL_HINT} ({})", self.detail)
    }
}

impl std::error::Error for JdkNotFound {}

/// A classpath of jars in [`DEFAULT_JAR_DIR`]: every `required` one, and the `optional` ones
/// that are present. The one place the harness looks for jars (servers and Java programs).
///
/// # Errors
/// The missing required jars (or a jar path the platform cannot join), as one line.
pub fn jar_classpath(required: &[&str], optional: &[&str]) -> Result<OsString, String> {
    let dir = Path::new(DEFAULT_JAR_DIR);
    let missing: Vec<String> = required
        .iter()
        .map(|jar| dir.join(jar))
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(missing.join(", "));
    }
    let jars = required.iter().map(|jar| dir.join(jar)).chain(
        optional
            .iter()
            .map(|jar| dir.join(jar))
            .filter(|p| p.is_file()),
    );
    env::join_paths(jars).map_err(|e| format!("bad jar path: {e}"))
}

/// The `java` binary: `$JAVA`, `java` on `PATH`, or `$JAVA_HOME/bin/java`.
///
/// # Errors
/// [`JdkNotFound`].
pub fn java_binary() -> Result<PathBuf, JdkNotFound> {
    if let Some(java) = env::var_os(JAVA_ENV).filter(|v| !v.is_empty()) {
        let java = PathBuf::from(java);
        if java.components().count() > 1 {
            return if java.is_file() {
                Ok(java)
            } else {
                Err(JdkNotFound::new(format!(
                    "{JAVA_ENV}={} does not exist",
                    java.display()
                )))
            };
        }
        return find_on_path(java.as_os_str()).ok_or_else(|| {
            JdkNotFound::new(format!("{JAVA_ENV}={} is not on PATH", java.display()))
        });
    }
    find_tool("java")
}

/// The `javac` binary: next to [`java_binary`] (following symlinks), on `PATH`, or in
/// `$JAVA_HOME/bin`.
///
/// # Errors
/// [`JdkNotFound`].
pub fn javac_binary() -> Result<PathBuf, JdkNotFound> {
    if let Ok(java) = java_binary() {
        let real = fs::canonicalize(&java).unwrap_or(java);
        if let Some(sibling) = real
            .parent()
            .map(|d| d.join("javac"))
            .filter(|p| p.is_file())
        {
            return Ok(sibling);
        }
    }
    find_tool("javac")
}

fn find_tool(name: &str) -> Result<PathBuf, JdkNotFound> {
    if let Some(found) = find_on_path(OsStr::new(name)) {
        return Ok(found);
    }
    if let Some(home) = env::var_os("JAVA_HOME").filter(|v| !v.is_empty()) {
        let candidate = PathBuf::from(home).join("bin").join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(JdkNotFound::new(format!(
        "no `{name}` on PATH or in $JAVA_HOME/bin"
    )))
}

/// `name` in a directory of `PATH`.
pub fn find_on_path(name: &OsStr) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
