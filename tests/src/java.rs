//! Java programs for interop tests: compiled from source with `javac` when a test needs
//! them, run with `java`, and never left behind.
//!
//! [`compile`] builds one or more `.java` files against a classpath into a fresh temporary
//! directory (removed when the [`JavaProgram`] is dropped); [`JavaProgram::spawn`] starts a
//! class with its stdin, stdout and stderr piped. The child is killed when its
//! [`JavaChild`] is dropped, and a program that reads its stdin until end-of-file exits by
//! itself when the test process dies (the kernel closes the pipe).
//!
//! [`curator_classpath`] is the classpath of Apache Curator 5 from the Debian package
//! `libcurator-recipes-java` (with ZooKeeper, Guava and slf4j). Every missing piece is an
//! error naming what to install: interop tests fail, they never skip.
//!
//! # Environment variables
//! * `ZKWIRE_CURATOR_CLASSPATH` — a complete classpath replacing [`curator_classpath`]'s
//!   jars.
//! * `JAVA`, `JAVA_HOME` — as for the servers ([`crate::server`]); `javac` is looked up
//!   next to the `java` binary, then on `PATH` (the lookups are [`zkwire_sandbox::java`]'s).

use std::env;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub use zkwire_sandbox::java::JDK_INSTALL_HINT;
use zkwire_sandbox::java::{self as sandbox_java, jar_classpath, JdkNotFound};

/// Environment variable holding a complete classpath that replaces [`curator_classpath`]'s.
pub const CURATOR_CLASSPATH_ENV: &str = "ZKWIRE_CURATOR_CLASSPATH";

/// What to install when Curator is missing.
pub const CURATOR_INSTALL_HINT: &str =
    "Apache Curator not found: install it with `apt-get install -y libcurator-recipes-java` (Debian) \
     or set ZKWIRE_CURATOR_CLASSPATH";

/// The jars (in [`DEFAULT_JAR_DIR`]) a Curator 5.4 recipes program needs.
///
/// [`DEFAULT_JAR_DIR`]: zkwire_sandbox::java::DEFAULT_JAR_DIR
const CURATOR_JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
];

/// Added when present: Guava's `failureaccess` when packaged apart, and slf4j's no-op
/// binding (which keeps the child's stderr free of logging).
const OPTIONAL_JARS: &[&str] = &["failureaccess.jar", "slf4j-nop.jar"];

/// JVM flags for a small, quick-starting test program.
const JVM_FLAGS: &[&str] = &[
    "-Xmx128m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
];

/// Why a Java program could not be built or started.
#[derive(Debug)]
#[non_exhaustive]
pub enum JavaError {
    /// No `java` or `javac`; the payload says where we looked.
    JdkNotFound(String),
    /// Curator (or one of its dependencies) is missing; the payload lists what.
    CuratorNotFound(String),
    /// `javac` failed; the payload is its output.
    Compile(String),
    /// An I/O operation failed.
    Io {
        /// What the helper was doing.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl fmt::Display for JavaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::JdkNotFound(detail) => write!(f, "{JDK_INSTALL_HINT} ({detail})"),
            Self::CuratorNotFound(detail) => write!(f, "{CURATOR_INSTALL_HINT} ({detail})"),
            Self::Compile(output) => write!(f, "javac failed:\n{output}"),
            Self::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for JavaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<JdkNotFound> for JavaError {
    fn from(e: JdkNotFound) -> Self {
        Self::JdkNotFound(e.detail().to_owned())
    }
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> JavaError {
    let context = context.into();
    move |source| JavaError::Io { context, source }
}

/// The classpath of Apache Curator 5 with its dependencies: `ZKWIRE_CURATOR_CLASSPATH` if
/// set, else the Debian jars in [`DEFAULT_JAR_DIR`](zkwire_sandbox::java::DEFAULT_JAR_DIR).
///
/// # Errors
/// [`JavaError::CuratorNotFound`] naming the missing jars and the package to install.
pub fn curator_classpath() -> Result<OsString, JavaError> {
    if let Some(cp) = env::var_os(CURATOR_CLASSPATH_ENV).filter(|v| !v.is_empty()) {
        return Ok(cp);
    }
    jar_classpath(CURATOR_JARS, OPTIONAL_JARS)
        .map_err(|missing| JavaError::CuratorNotFound(format!("missing {missing}")))
}

/// The `java` binary: `$JAVA`, `java` on `PATH`, or `$JAVA_HOME/bin/java`
/// ([`zkwire_sandbox::java::java_binary`]).
///
/// # Errors
/// [`JavaError::JdkNotFound`].
pub fn java_binary() -> Result<PathBuf, JavaError> {
    Ok(sandbox_java::java_binary()?)
}

/// The `javac` binary: next to [`java_binary`] (following symlinks), on `PATH`, or in
/// `$JAVA_HOME/bin` ([`zkwire_sandbox::java::javac_binary`]).
///
/// # Errors
/// [`JavaError::JdkNotFound`].
pub fn javac_binary() -> Result<PathBuf, JavaError> {
    Ok(sandbox_java::javac_binary()?)
}

/// A compiled Java program: its classes in a temporary directory (removed on drop) and the
/// classpath it was compiled against.
#[derive(Debug)]
pub struct JavaProgram {
    classes: PathBuf,
    classpath: OsString,
    java: PathBuf,
}

/// Compiles `sources` against `classpath` (e.g. [`curator_classpath`]) into a fresh
/// temporary directory.
///
/// # Errors
/// [`JavaError::JdkNotFound`], [`JavaError::Compile`] with javac's output, I/O errors.
pub fn compile(sources: &[&Path], classpath: &OsStr) -> Result<JavaProgram, JavaError> {
    let javac = javac_binary()?;
    let java = java_binary()?;
    let classes = temp_dir()?;
    let program = JavaProgram {
        classes,
        classpath: classpath.to_owned(),
        java,
    };
    let output = Command::new(&javac)
        .args(["-encoding", "UTF-8", "-nowarn", "-d"])
        .arg(&program.classes)
        .arg("-cp")
        .arg(classpath)
        .args(sources)
        .stdin(Stdio::null())
        .output()
        .map_err(io_error(format!("running {}", javac.display())))?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        return Err(JavaError::Compile(text));
    }
    Ok(program)
}

/// Compiles `source`, runs `main_class` with `args` to completion (stdin closed), and
/// returns its output.
///
/// # Errors
/// As [`compile`], and I/O errors running it.
pub fn compile_and_run(
    source: &Path,
    classpath: &OsStr,
    main_class: &str,
    args: &[&str],
) -> Result<Output, JavaError> {
    let program = compile(&[source], classpath)?;
    program
        .command(main_class)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(io_error(format!("running {main_class}")))
}

impl JavaProgram {
    /// The directory holding the compiled classes.
    pub fn classes(&self) -> &Path {
        &self.classes
    }

    /// A `java` command for `main_class`, with the classes and the classpath, small-JVM
    /// flags and `-Dfile.encoding=UTF-8`. Add arguments and stdio as needed.
    pub fn command(&self, main_class: &str) -> Command {
        let mut classpath = self.classes.clone().into_os_string();
        if !self.classpath.is_empty() {
            classpath.push(":");
            classpath.push(&self.classpath);
        }
        let mut command = Command::new(&self.java);
        command
            .args(JVM_FLAGS)
            .arg("-Dfile.encoding=UTF-8")
            .arg("-cp")
            .arg(classpath)
            .arg(main_class);
        command
    }

    /// Starts `main_class` with `args`, stdin, stdout and stderr piped.
    ///
    /// # Errors
    /// I/O errors spawning `java`.
    pub fn spawn(&self, main_class: &str, args: &[&str]) -> Result<JavaChild, JavaError> {
        let child = self
            .command(main_class)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_error(format!("starting {main_class}")))?;
        Ok(JavaChild { child })
    }
}

impl Drop for JavaProgram {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.classes);
    }
}

/// A running Java program, killed (and reaped) when dropped.
#[derive(Debug)]
pub struct JavaChild {
    child: Child,
}

impl JavaChild {
    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its stdin (once; `None` afterwards). Dropping it closes the pipe, which a program
    /// that watches its stdin takes as the signal to exit.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Its stdout (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Its stderr (once).
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Waits for it to exit.
    ///
    /// # Errors
    /// I/O errors.
    pub fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        self.child.wait()
    }

    /// Its exit status if it has exited.
    ///
    /// # Errors
    /// I/O errors.
    pub fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }
}

impl Drop for JavaChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A fresh directory under the system's temporary directory.
fn temp_dir() -> Result<PathBuf, JavaError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        "zkwire-java-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let dir = env::temp_dir().join(name);
    fs::create_dir_all(&dir).map_err(io_error(format!("creating {}", dir.display())))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A Curator program compiles and runs against the Debian jars (or fails naming what
    /// to install).
    #[test]
    fn curator_program_compiles_and_runs() {
        let classpath = curator_classpath().unwrap_or_else(|e| panic!("{e}"));
        let dir = temp_dir().unwrap();
        let source = dir.join("Probe.java");
        fs::write(
            &source,
            "public final class Probe { public static void main(String[] a) { \
             System.out.println(org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2.LOCK_SCHEMA \
             + \" \" + a[0]); } }",
        )
        .unwrap();
        let output = compile_and_run(&source, &classpath, "Probe", &["ok"])
            .unwrap_or_else(|e| panic!("{e}"));
        let _ = fs::remove_dir_all(&dir);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("locks")
                && stdout.contains("leases")
                && stdout.trim_end().ends_with("ok"),
            "{stdout}"
        );
    }

    #[test]
    fn missing_jars_name_the_package() {
        let e = JavaError::CuratorNotFound("missing /usr/share/java/curator-recipes.jar".into());
        assert!(
            e.to_string()
                .contains("apt-get install -y libcurator-recipes-java"),
            "{e}"
        );
    }
}
