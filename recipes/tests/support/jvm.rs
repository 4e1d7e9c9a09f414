//! A Java program given as source text in a test, and its running process spoken to line by
//! line: the Curator side of the membership, discovery and barrier interop tests.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zkwire_testing::java::{self, JavaChild, JavaProgram};

use super::process::ProcessIo;

/// Compiles `source`, the Java class `class`, against `classpath`. Panics with what to
/// install when Java or Curator is missing: these tests never skip.
pub(crate) fn compile_inline(class: &str, source: &str, classpath: &OsStr) -> JavaProgram {
    // A directory per call: tests of one binary may compile the same class at once.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let name = format!("zkwire-{class}-{}-{call}", std::process::id());
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{class}.java"));
    std::fs::write(&file, source).unwrap();
    let started = Instant::now();
    let program = java::compile(&[&file], classpath).unwrap_or_else(|e| panic!("{e}"));
    println!("{class}.java compiled in {:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
    program
}

/// [`compile_inline`] against Debian's Curator jars.
pub(crate) fn compile_curator(class: &str, source: &str) -> JavaProgram {
    let classpath = java::curator_classpath().unwrap_or_else(|e| panic!("{e}"));
    compile_inline(class, source, &classpath)
}

/// A running program that prints `READY` once started, then answers commands on stdin with
/// lines on stdout.
pub(crate) struct Jvm {
    _child: JavaChild,
    /// Its pipes.
    pub(crate) io: ProcessIo,
}

impl Jvm {
    /// Starts `class` of `program` with `args` and waits (up to a minute) for `READY`.
    pub(crate) async fn start(program: &JavaProgram, class: &str, args: &[&str]) -> Self {
        let mut child = program.spawn(class, args).unwrap_or_else(|e| panic!("{e}"));
        let mut io = ProcessIo::new(
            "Curator",
            child.take_stdin().unwrap(),
            child.take_stdout().unwrap(),
            child.take_stderr().unwrap(),
        );
        let ready = io.next_line(Duration::from_secs(60)).await;
        assert_eq!(ready, "READY", "{}", io.stderr());
        Self { _child: child, io }
    }

    /// Sends `command` and returns the answer line, waiting at most `within`.
    pub(crate) async fn ask(&mut self, command: &str, within: Duration) -> String {
        self.io.send(command);
        self.io.next_line(within).await
    }
}

/// A Curator command server, the skeleton every inline Curator program of these tests shares:
/// a class `class` whose `main` connects a `CuratorFramework` named `client` to `args[0]`
/// (10 s session and connection timeouts, exponential backoff from 50 ms, 10 retries), runs
/// `setup`, prints `READY`, then runs `commands` on each line of stdin (read into `line`),
/// flushing stdout after each, then `teardown` at the end of stdin. Any exception is printed
/// and exits with status 2.
pub(crate) struct CuratorServer {
    /// The class name, also the file name.
    pub(crate) class: &'static str,
    /// `import` lines beyond the skeleton's own (the reader, the charset and the client).
    pub(crate) imports: &'static str,
    /// Statements run once connected, before `READY`.
    pub(crate) setup: &'static str,
    /// Statements run for each line of stdin, held in `line`.
    pub(crate) commands: &'static str,
    /// Statements run once stdin ends.
    pub(crate) teardown: &'static str,
}

impl CuratorServer {
    /// The Java source of the program.
    pub(crate) fn source(&self) -> String {
        let Self {
            class,
            imports,
            setup,
            commands,
            teardown,
        } = self;
        format!(
            r#"
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
{imports}
public final class {class} {{
    public static void main(String[] args) throws Exception {{
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(
                args[0], 10_000, 10_000, new ExponentialBackoffRetry(50, 10))) {{
            client.start();
            client.blockUntilConnected();
{setup}
            BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
            System.out.println("READY");
            System.out.flush();
            String line;
            while ((line = in.readLine()) != null) {{
{commands}
                System.out.flush();
            }}
{teardown}
        }} catch (Exception e) {{
            e.printStackTrace();
            System.exit(2);
        }}
    }}
}}
"#
        )
    }

    /// Starts `program`, this server compiled ([`Self::compile`], [`Self::compile_against`]),
    /// with `args`, and waits for `READY`.
    pub(crate) async fn start(&self, program: &JavaProgram, args: &[&str]) -> Jvm {
        Jvm::start(program, self.class, args).await
    }

    /// [`compile_curator`] of the program.
    pub(crate) fn compile(&self) -> JavaProgram {
        compile_curator(self.class, &self.source())
    }

    /// [`compile_inline`] of the program against `classpath`.
    pub(crate) fn compile_against(&self, classpath: &OsStr) -> JavaProgram {
        compile_inline(self.class, &self.source(), classpath)
    }
}
