//! The stdio of a contender program (the Curator JVM, the kazoo Python program): commands
//! on its stdin, its stdout read line by line, its stderr kept for failure messages.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStderr, ChildStdin, ChildStdout};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::mpsc;

/// A running contender program's pipes.
pub(crate) struct ProcessIo {
    /// Names the program in failure messages.
    name: &'static str,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<StdMutex<String>>,
}

impl ProcessIo {
    /// Starts reading `stdout` (by line) and `stderr` (kept whole) on threads of their own.
    pub(crate) fn new(
        name: &'static str,
        stdin: ChildStdin,
        stdout: ChildStdout,
        mut stderr_pipe: ChildStderr,
    ) -> Self {
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(StdMutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    return;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self {
            name,
            stdin: Some(stdin),
            lines,
            stderr,
        }
    }

    /// Writes `line` and a newline on the program's stdin.
    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Closes the program's stdin (the contender programs take it as the signal to end).
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next line of stdout; panics with the program's stderr when it ends or stays
    /// silent for `within`.
    pub(crate) async fn next_line(&mut self, within: Duration) -> String {
        match tokio::time::timeout(within, self.lines.recv()).await {
            Ok(Some(line)) => line,
            Ok(None) => panic!("the {} program ended early: {}", self.name, self.stderr()),
            Err(_) => panic!(
                "no output from the {} program in {within:?}: {}",
                self.name,
                self.stderr()
            ),
        }
    }

    /// What the program wrote on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}
