//! Every `zkw` example of README.md, run against a real server in README order.
//!
//! The examples are the `zkw …` lines (also `VAR=… zkw …` and `… && zkw …`) of the
//! README's ```` ```sh ```` blocks and the `$ zkw …` lines of its ```` ```text ````
//! transcripts;
//! lines joined with `; ` or ` && ` are separate commands, a trailing `# comment` is dropped
//! and a trailing `&` means "in the background". Each runs through `sh -c 'exec LINE'` in a
//! scratch directory (where `./nightly.sh`, `./crawl.sh` and `./report-loop.sh` are stubs
//! that exit 0 at once, and which is `$HOME`), with `ZOOKEEPER` naming a fresh chroot on the
//! shared test server, and must exit 0, or the code its comment documents (`(else 73)`).
//!
//! [`SPECIAL`] lists the examples that cannot run as written in a plain test, why, and what
//! is done instead. The test fails if a README example is neither run nor listed there (so
//! a new example cannot be forgotten), or if a listed one is no longer in the README.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use common::{chroot, finish, scratch, signal, spawn_holder, Out, ZKW};

/// The README, as built into the test (a change to it rebuilds the test).
const README: &str = include_str!("../../README.md");

/// How long one example may run (or take to be ready, for one stopped with Ctrl-C).
const LIMIT: Duration = Duration::from_secs(20);

/// How long the whole test may take.
const TOTAL_LIMIT: Duration = Duration::from_secs(120);

/// What the test does with a listed example.
enum How {
    /// Runs it as written (after the entry's `setup`).
    AsWritten,
    /// Runs it as written with this text on standard input.
    Stdin(&'static str),
    /// Runs it as written until a line containing `ready` appears (on stdout or stderr),
    /// then sends SIGINT (Ctrl-C) and expects exit `code`.
    CtrlC { ready: &'static str, code: i32 },
    /// Runs it as written while `zkw HOLDER -- sh -c 'sleep SECONDS'` holds a lock, then
    /// expects the holder to exit with `code`.
    WhileHeld {
        holder: &'static [&'static str],
        seconds: u32,
        code: i32,
    },
    /// Not run.
    NotRun,
}

impl How {
    const fn ctrl_c(ready: &'static str, code: i32) -> Self {
        Self::CtrlC { ready, code }
    }

    const fn held(holder: &'static [&'static str], seconds: u32, code: i32) -> Self {
        Self::WhileHeld {
            holder,
            seconds,
            code,
        }
    }
}

/// A README example that cannot run as written in a plain test.
struct Special {
    /// The command, as extracted from the README (comment and `&` removed).
    example: &'static str,
    /// Why it cannot run as written, and what the test does instead.
    reason: &'static str,
    /// `zkw` commands (in the chroot) run first, each of which must succeed.
    setup: &'static [&'static [&'static str]],
    /// What the test does.
    how: How,
}

/// The examples that cannot run as written, with the reason and what is done instead.
const SPECIAL: &[Special] = &[
    Special {
        example: "zkw sandbox --port 2181",
        reason: "starts a server on a fixed port (which may be taken) in the background; \
                 the test uses the shared test server instead (a fresh chroot in $ZOOKEEPER); \
                 `zkw sandbox` itself runs below and in tests/local.rs",
        setup: &[],
        how: How::NotRun,
    },
    Special {
        example: "zkw watch /jobs --recursive",
        reason: "runs until Ctrl-C: stopped with SIGINT once watching (exit 0)",
        setup: &[],
        how: How::ctrl_c("watching /jobs", 0),
    },
    Special {
        example: "zkw cache /config --json",
        reason: "runs until Ctrl-C, and /config does not exist: the test creates it, then \
                 stops the cache with SIGINT once initialized (exit 0)",
        setup: &[&["create", "/config", "x"]],
        how: How::ctrl_c("initialized", 0),
    },
    Special {
        example: "zkw revoke /locks/nightly",
        reason: "after `;` no one holds the lock any more (exit 1, no one holds the lock): \
                 the README means a holder running elsewhere; the test runs it while \
                 `zkw lock --revocable /locks/nightly` holds it, which then exits 76 (revoked)",
        setup: &[],
        how: How::held(&["lock", "--revocable", "/locks/nightly"], 30, 76),
    },
    Special {
        example: "zkw locks /locks/nightly --watch",
        reason: "runs until Ctrl-C: stopped with SIGINT once it has printed the contenders \
                 (exit 0), while `zkw lock /locks/nightly` holds the lock",
        setup: &[],
        how: How::held(&["lock", "/locks/nightly"], 2, 0),
    },
    Special {
        example: "zkw sandbox --ensemble 3",
        reason: "runs until Ctrl-C: stopped with SIGINT once it prints its export line (exit 0)",
        setup: &[],
        how: How::ctrl_c("export ZOOKEEPER=", 0),
    },
    Special {
        example: "zkw sandbox --tls",
        reason: "runs until Ctrl-C: stopped with SIGINT once it prints its export line (exit 0)",
        setup: &[],
        how: How::ctrl_c("export ZOOKEEPER=", 0),
    },
    Special {
        example: "zkw --tls-ca ca.pem --sasl digest:bob ls /",
        reason: "needs an ensemble with TLS and SASL DIGEST-MD5 and its ca.pem; not run \
                 (the options are tested in tests/local.rs: sandbox_tls_and_the_tls_options, \
                 sasl_digest_options)",
        setup: &[],
        how: How::NotRun,
    },
    Special {
        example: "zkw completions bash > ~/.local/share/bash-completion/completions/zkw",
        reason: "writes under ~: $HOME is the scratch directory, where the test makes \
                 .local/share/bash-completion/completions first",
        setup: &[],
        how: How::AsWritten,
    },
    Special {
        example: "zkw shell",
        reason: "interactive: run with the transcript's lines (cd /jobs, ls, exit) on a \
                 non-terminal standard input",
        setup: &[],
        how: How::Stdin("cd /jobs\nls\nexit\n"),
    },
    Special {
        example: "zkw locks /locks/nightly",
        reason: "the transcript shows a holder: run while `zkw lock /locks/nightly` holds it",
        setup: &[],
        how: How::held(&["lock", "/locks/nightly"], 2, 0),
    },
    Special {
        example: "zkw --server zk1.example:2281 --tls-ca ca.pem --tls-cert client.pem \
                  --tls-key client-key.pem whoami",
        reason: "zk1.example:2281 and the .pem files stand for a TLS ensemble; not run \
                 (tests/local.rs sandbox_tls_and_the_tls_options runs these options)",
        setup: &[],
        how: How::NotRun,
    },
    Special {
        example: "ZKW_TLS_CA=ca.pem zkw --server zk1.example:2281 ls /",
        reason: "zk1.example:2281 and ca.pem stand for a TLS ensemble; not run \
                 (tests/local.rs sandbox_tls_and_the_tls_options sets ZKW_TLS_CA)",
        setup: &[],
        how: How::NotRun,
    },
    Special {
        example: "ZKW_SASL_PASSWORD=… zkw --server zk1.example:2181 --sasl digest:bob ls /",
        reason: "zk1.example and … stand for a SASL ensemble and bob's password; not run \
                 (tests/local.rs sasl_digest_options)",
        setup: &[],
        how: How::NotRun,
    },
    Special {
        example: "zkw --server zk1.example:2181 --sasl kerberos whoami",
        reason: "needs a Kerberos realm (EXAMPLE.COM, after kinit) and a Kerberos ensemble; \
                 not run (tests/local.rs sasl_kerberos_option, with a throwaway KDC)",
        setup: &[],
        how: How::NotRun,
    },
    Special {
        example: "KRB5_CLIENT_KTNAME=/etc/app.keytab zkw --server zk1.example:2181 \
                  --sasl kerberos:app@EXAMPLE.COM ls /",
        reason: "needs a Kerberos realm, /etc/app.keytab and a Kerberos ensemble; not run \
                 (tests/local.rs sasl_kerberos_option)",
        setup: &[],
        how: How::NotRun,
    },
];

/// One `zkw` command of the README.
#[derive(Debug)]
struct Example {
    /// Its line in README.md (1-based).
    line: usize,
    /// The command (comment and `&` removed).
    command: String,
    /// Whether it ends with `&`.
    background: bool,
    /// Another exit code its comment documents (`(else 73)`).
    documented: Option<i32>,
}

/// The `zkw` commands of the README's `sh` blocks and `text` transcripts, in order.
fn examples(readme: &str) -> Vec<Example> {
    let mut found = Vec::new();
    let mut block: Option<String> = None;
    for (i, raw) in readme.lines().enumerate() {
        let line = raw.trim();
        if let Some(lang) = line.strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(lang.trim().to_owned()),
            };
            continue;
        }
        let text = match block.as_deref() {
            Some("sh" | "bash" | "shell" | "console") => line,
            Some("text") => match line.strip_prefix("$ ") {
                Some(command) => command,
                None => continue,
            },
            _ => continue,
        };
        let (code, comment) = strip_comment(text);
        let documented = comment.and_then(documented_code);
        for part in code.split("; ").flat_map(|p| p.split(" && ")) {
            let mut part = part.trim();
            let background = part.ends_with('&') && !part.ends_with("&&");
            if background {
                part = part[..part.len() - 1].trim_end();
            }
            if is_zkw(part) {
                found.push(Example {
                    line: i + 1,
                    command: part.to_owned(),
                    background,
                    documented,
                });
            }
        }
    }
    found
}

/// Splits `text` at a `#` that starts a shell comment (after white space, outside quotes).
fn strip_comment(text: &str) -> (&str, Option<&str>) {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => {
                return (text[..i].trim_end(), Some(&text[i + 1..]));
            }
            _ => {}
        }
        previous = c;
    }
    (text.trim_end(), None)
}

/// An exit code a comment documents: `(else N)` or `(exit N)`.
fn documented_code(comment: &str) -> Option<i32> {
    ["(else ", "(exit "].iter().find_map(|marker| {
        let rest = &comment[comment.find(marker)? + marker.len()..];
        rest[..rest.find(')')?].trim().parse().ok()
    })
}

/// Whether a command, after `NAME=value` assignments, runs `zkw`.
fn is_zkw(command: &str) -> bool {
    let mut words = command.split_whitespace();
    for word in words.by_ref() {
        let is_assignment = word.split_once('=').is_some_and(|(name, _)| is_name(name));
        if !is_assignment {
            return word == "zkw";
        }
    }
    false
}

/// Whether `name` is a shell variable name.
fn is_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The examples' world: a chroot, a scratch directory (the working directory and `$HOME`).
struct World {
    /// The chroot's connect string.
    cs: String,
    /// The scratch directory.
    dir: std::path::PathBuf,
    /// Holders' marker directories made so far.
    holders: u32,
}

impl World {
    /// `sh -c 'exec COMMAND'` with the examples' environment; `NAME=value` assignments
    /// before `zkw` are set in the environment.
    fn command(&self, command: &str) -> Command {
        let mut assignments = Vec::new();
        let mut rest = command.trim_start();
        while let Some((word, after)) = rest.split_once(' ') {
            match word.split_once('=') {
                Some((name, value)) if is_name(name) => {
                    assignments.push((name.to_owned(), value.to_owned()));
                    rest = after.trim_start();
                }
                _ => break,
            }
        }
        let bin = Path::new(ZKW).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(format!("exec {rest}"))
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("HOME", &self.dir)
            .env("HOSTNAME", "readme-host")
            .env("ZOOKEEPER", &self.cs)
            .env("ZKW_SERVER_TICK", "200ms")
            .env_remove("RUST_LOG")
            .env_remove("XDG_DATA_HOME")
            .envs(assignments)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        sh
    }

    /// Runs `zkw ARGS` in the chroot, which must succeed.
    fn setup(&self, args: &[&str]) {
        let mut all = vec!["--server", self.cs.as_str()];
        all.extend_from_slice(args);
        let out = finish(common::command(&all).spawn().unwrap(), LIMIT);
        assert_eq!(out.code, Some(0), "setup zkw {args:?}: {out:?}");
    }
}

/// What happened to one example.
struct Ran {
    /// Its exit code was 0 or the documented one.
    as_documented: bool,
    /// What it did, for the report.
    detail: String,
}

/// Runs `example` as `how` says.
impl Ran {
    /// Counts a run as documented, or records how `example` failed.
    fn tally(&self, example: &Example, documented: &mut usize, failures: &mut Vec<String>) {
        if self.as_documented {
            *documented += 1;
        } else {
            failures.push(format!(
                "README:{} {}: {}",
                example.line, example.command, self.detail
            ));
        }
    }
}

fn run_one(world: &mut World, example: &Example, how: &How) -> Ran {
    let expect = |out: &Out, codes: &[i32]| Ran {
        as_documented: out.code.is_some_and(|c| codes.contains(&c)),
        detail: format!(
            "exit {:?} (expected {codes:?}) in {:?}; stdout {:?}; stderr {:?}",
            out.code,
            out.elapsed,
            cut(&out.stdout),
            cut(&out.stderr)
        ),
    };
    let mut codes = vec![0];
    codes.extend(example.documented);
    match how {
        How::AsWritten => {
            let out = finish(world.command(&example.command).spawn().unwrap(), LIMIT);
            expect(&out, &codes)
        }
        How::Stdin(text) => {
            let mut child = world
                .command(&example.command)
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let text = text.to_owned();
            let writer = thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(text.as_bytes());
            });
            let out = finish(child, LIMIT);
            writer.join().unwrap();
            expect(&out, &codes)
        }
        How::CtrlC { ready, code } => {
            let child = world.command(&example.command).spawn().unwrap();
            let (child, seen) = until_ready(child, ready);
            let mut ran = stop(child, *code);
            ran.detail = format!("{ran_detail}; seen {seen:?}", ran_detail = ran.detail);
            ran
        }
        How::WhileHeld {
            holder,
            seconds,
            code,
        } => {
            world.holders += 1;
            let marks = world.dir.join(format!("holder-{}", world.holders));
            std::fs::create_dir_all(&marks).unwrap();
            let holder = spawn_holder(&world.cs, holder, &marks, *seconds);
            let mut ran = if example.command.ends_with("--watch") {
                let child = world.command(&example.command).spawn().unwrap();
                let (child, seen) = until_ready(child, "holder");
                let mut ran = stop(child, 0);
                ran.detail = format!("{}; seen {seen:?}", ran.detail);
                ran
            } else {
                let out = finish(world.command(&example.command).spawn().unwrap(), LIMIT);
                expect(&out, &codes)
            };
            let held = finish(holder, Duration::from_secs(*seconds as u64) + LIMIT);
            if held.code != Some(*code) {
                ran.as_documented = false;
            }
            ran.detail = format!(
                "{}; holder exit {:?} (expected {code})",
                ran.detail, held.code
            );
            ran
        }
        How::NotRun => unreachable!("not run"),
    }
}

/// Waits (at most [`LIMIT`]) for a line of `child`'s stdout or stderr containing `ready`;
/// the child and the line (or why there is none).
fn until_ready(mut child: Child, ready: &str) -> (Child, String) {
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stream)
                .lines()
                .map_while(Result::ok)
            {
                // Read on after the receiver is gone, so the child never blocks or gets
                // SIGPIPE.
                let _ = tx.send(line);
            }
        });
    }
    let seen = first_line_with(&rx, ready);
    (child, seen)
}

/// The first line from `lines` containing `needle` within [`LIMIT`], or why there is none.
fn first_line_with(lines: &Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + LIMIT;
    let mut before = Vec::new();
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains(needle) => return line,
            Ok(line) => before.push(line),
            Err(e) => return format!("NO line with {needle:?} ({e}); lines: {before:?}"),
        }
    }
}

/// Sends SIGINT to `child` and expects it to exit with `code` within [`LIMIT`].
fn stop(child: Child, code: i32) -> Ran {
    signal(child.id(), "INT");
    let out = finish(child, LIMIT);
    Ran {
        as_documented: out.code == Some(code),
        detail: format!(
            "stopped with SIGINT: exit {:?} (expected {code}); stderr {:?}",
            out.code,
            cut(&out.stderr)
        ),
    }
}

/// At most 300 characters of `text`.
fn cut(text: &str) -> String {
    text.chars().take(300).collect()
}

/// The examples' parser finds what the README shows.
#[test]
fn parsing() {
    let found = examples(
        "```sh\nzkw a; zkw b \"x # y\"  # c (else 73)\nzkw s &  # bg\n\
         V=1 zkw v\nkinit x && zkw k\nmake demo\n```\n```text\n$ zkw t\nzkw: out\n```\n\
         ```rust\nzkw no\n```\n",
    );
    let commands: Vec<(&str, bool, Option<i32>)> = found
        .iter()
        .map(|e| (e.command.as_str(), e.background, e.documented))
        .collect();
    assert_eq!(
        commands,
        [
            ("zkw a", false, Some(73)),
            ("zkw b \"x # y\"", false, Some(73)),
            ("zkw s", true, None),
            ("V=1 zkw v", false, None),
            ("zkw k", false, None),
            ("zkw t", false, None),
        ]
    );
}

#[test]
fn every_readme_example_runs() {
    let started = Instant::now();
    let found = examples(README);
    assert!(found.len() >= 20, "too few examples found: {found:?}");
    for special in SPECIAL {
        assert!(
            found.iter().any(|e| e.command == special.example),
            "listed as special but not in README.md any more: {}",
            special.example
        );
    }

    let dir = scratch("readme");
    for stub in ["nightly.sh", "crawl.sh", "report-loop.sh"] {
        let path = dir.join(stub);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        let status = Command::new("chmod")
            .arg("755")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
    }
    std::fs::create_dir_all(dir.join(".local/share/bash-completion/completions")).unwrap();
    let mut world = World {
        cs: chroot("cli-readme"),
        dir: dir.to_path_buf(),
        holders: 0,
    };

    let (mut run, mut documented, mut not_run) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut background = Vec::new();
    for example in &found {
        assert!(
            started.elapsed() < TOTAL_LIMIT,
            "the examples took over {TOTAL_LIMIT:?}"
        );
        let special = SPECIAL.iter().find(|s| s.example == example.command);
        if let Some(Special {
            how: How::NotRun,
            reason,
            ..
        }) = special
        {
            println!(
                "NOT RUN  README:{} {}\n         reason: {reason}",
                example.line, example.command
            );
            not_run += 1;
            continue;
        }
        for args in special.map_or(&[][..], |s| s.setup) {
            world.setup(args);
        }
        run += 1;
        if example.background && special.is_none() {
            // In the background until the end, then stopped with Ctrl-C.
            background.push((example, world.command(&example.command).spawn().unwrap()));
            println!("BACKGROUND README:{} {}", example.line, example.command);
            continue;
        }
        let how = special.map_or(&How::AsWritten, |s| &s.how);
        let ran = run_one(&mut world, example, how);
        println!(
            "{}  README:{} {}\n    {}",
            if ran.as_documented { "ok  " } else { "FAIL" },
            example.line,
            example.command,
            ran.detail
        );
        ran.tally(example, &mut documented, &mut failures);
    }
    for (example, child) in background {
        let ran = stop(child, 0);
        ran.tally(example, &mut documented, &mut failures);
    }
    println!(
        "README examples: {run} run, {documented} exited as documented, {not_run} listed as \
         not runnable with reasons (of {} found, in {:?})",
        found.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "failed examples:\n{}",
        failures.join("\n")
    );
    assert!(
        started.elapsed() < TOTAL_LIMIT,
        "the examples took over {TOTAL_LIMIT:?}"
    );
}
