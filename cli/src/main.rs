//! `zkw`: a ZooKeeper command-line client whose `lock` runs any command under a distributed
//! lock. Run `zkw --help` for the verbs and the exit codes.
//!
//! Errors are one line on standard error (`zkw: …`, or a JSON document under `--json`) and a
//! non-zero exit code; never a panic.
#![forbid(unsafe_code)]

mod cache;
mod child;
mod cli;
mod connect;
mod demo;
mod demo_worker;
mod discovery;
mod fail;
mod follow;
mod format;
mod interrupt;
mod lock;
mod locks;
mod nodes;
mod out;
mod register;
mod sandbox;
mod secure;
mod shell;
mod tied;
mod watch;

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use cli::Command;
use connect::Global;
use fail::{Failure, FAILED, USAGE};
use lock::Kind;

fn main() -> ExitCode {
    // The step between `zkw` and a command it runs under a lock: it becomes the command.
    if let Some(code) = tied::run_if_asked() {
        return code;
    }
    // Known before parsing, so that a bad command line is reported as JSON too (a command's
    // own `--json`, after `--`, is not ours).
    let json = std::env::args_os()
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    match execute() {
        Ok(code) => ExitCode::from(code),
        Err(failure) => report(&failure, json),
    }
}

/// Prints the failure (if it has a message) and returns its code.
fn report(failure: &Failure, json: bool) -> ExitCode {
    fail::print(failure, json);
    ExitCode::from(failure.code)
}

/// Parses the command line and runs it; returns the exit code.
fn execute() -> Result<u8, Failure> {
    let cli = cli::parse(std::env::args_os()).map_err(|e| clap_failure(e, command_line_help))?;
    init_logging(cli.global.verbose);
    let Some(command) = cli.command else {
        return bare(&cli.global);
    };
    match command {
        Command::DemoWorker(a) => demo_worker::run(Path::new(&a.dir)),
        Command::Completions(a) => completions(a.shell),
        command => run_async(&Global::from_args(&cli.global)?, command),
    }
}

/// `zkw` alone: the shell on a terminal, else the help on standard error (exit 2).
fn bare(global: &cli::GlobalArgs) -> Result<u8, Failure> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        return run_async(&Global::from_args(global)?, Command::Shell);
    }
    let help = cli::command().render_help().to_string();
    let _ = std::io::Write::write_all(&mut std::io::stderr(), help.as_bytes());
    Ok(USAGE)
}

/// The environment variable whose filter, when set, decides which events are logged.
const LOG_ENV: &str = "RUST_LOG";

/// Sends the library's `tracing` events to standard error, for seeing what a connection or
/// a lock is doing: `RUST_LOG`'s filter when set, else zkwire's events from info up (`-v`),
/// debug up (`-vv`) or all (`-vvv`). Neither: no subscriber, so events cost nothing and
/// stderr keeps only zkw's own lines.
fn init_logging(verbose: u8) {
    let from_env = std::env::var(LOG_ENV).ok().filter(|v| !v.trim().is_empty());
    let filter = match from_env.map(EnvFilter::try_new) {
        Some(Ok(filter)) => filter,
        Some(Err(e)) => {
            out::note(&format!("{LOG_ENV} ignored: {e}"));
            return init_logging_level(verbose);
        }
        None => return init_logging_level(verbose),
    };
    install(filter);
}

/// The filter of `-v` (info), `-vv` (debug), `-vvv` (trace) for zkwire's crates; none without.
fn init_logging_level(verbose: u8) {
    let level = match verbose {
        0 => return,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    install(EnvFilter::new(format!(
        "zkwire={level},zkwire_recipes={level}"
    )));
}

fn install(filter: EnvFilter) {
    // Fails only if a subscriber is set already: there is one, then.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .try_init();
}

/// `--help` and `--version` on standard output (exit 0); any other clap error as one line
/// (exit 2), its first line and its tip (a typo's correction, say), then where to read more:
/// `help` of the verb the usage line names (`None`: no verb), in the caller's words.
fn clap_failure(error: clap::Error, help: fn(Option<&str>) -> String) -> Failure {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        return match out::raw(error.render().to_string().as_bytes()) {
            Ok(()) => Failure::new(0, ""),
            Err(f) => f,
        };
    }
    let rendered = error.render().to_string();
    let (message, verb) = one_line(&rendered);
    Failure::usage(format!("{message} (see {})", help(verb)))
}

/// Where the command line's usage errors send the reader.
fn command_line_help(verb: Option<&str>) -> String {
    verb.map_or_else(|| "zkw --help".to_owned(), |v| format!("zkw {v} --help"))
}

/// A clap error on one line: its message without `error: ` (with the indented lines that
/// complete it, such as the missing arguments), its tips appended; and the verb its usage
/// line names, if any.
fn one_line(rendered: &str) -> (String, Option<&str>) {
    let mut message = String::new();
    let mut tips = String::new();
    let mut verb = None;
    for line in rendered.lines() {
        let trimmed = line.trim();
        if let Some(usage) = line.strip_prefix("Usage: zkw ") {
            verb = usage
                .split_whitespace()
                .next()
                .filter(|word| !word.starts_with(['[', '<']));
            break;
        }
        if line.starts_with("For more information") {
            break;
        } else if let Some(tip) = trimmed.strip_prefix("tip: ") {
            tips.push_str(&format!("; tip: {tip}"));
        } else if !trimmed.is_empty() && tips.is_empty() {
            let sep = if message.is_empty() { "" } else { " " };
            message.push_str(sep);
            message.push_str(trimmed.trim_start_matches("error: "));
        }
    }
    (format!("{message}{tips}"), verb)
}

/// `zkw completions SHELL`: the script on standard output.
fn completions(shell: clap_complete::Shell) -> Result<u8, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli::command(), "zkw", &mut script);
    out::raw(&script).map(|()| 0)
}

/// Runs a verb on a tokio runtime (multi-threaded for the shell, whose session must keep
/// being served while it waits for a line).
fn run_async(global: &Global, command: Command) -> Result<u8, Failure> {
    let mut builder = if matches!(command, Command::Shell) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = builder
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| Failure::new(FAILED, format!("cannot start the runtime: {e}")))?;
    let result = match command {
        Command::Shell => shell::run(global, &runtime),
        command => runtime.block_on(dispatch(global, &command)),
    };
    // Background work (a server still starting after Ctrl-C, say) must not hold up the exit.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}

/// Runs one verb; returns the exit code.
pub(crate) async fn dispatch(g: &Global, command: &Command) -> Result<u8, Failure> {
    let done = |r: Result<(), Failure>| r.map(|()| 0);
    match command {
        Command::Ls(a) => done(nodes::ls(g, a).await),
        Command::Get(a) => done(nodes::get(g, a).await),
        Command::Stat(a) => done(nodes::stat(g, a).await),
        Command::Set(a) => done(nodes::set(g, a).await),
        Command::Create(a) => done(nodes::create(g, a).await),
        Command::Rm(a) => done(nodes::rm(g, a).await),
        Command::Sync(a) => done(nodes::sync(g, a).await),
        Command::Whoami => done(nodes::whoami(g).await),
        Command::Acl(a) => done(nodes::acl(g, a).await),
        Command::Watch(a) => done(watch::watch(g, a).await),
        Command::Cache(a) => done(cache::cache(g, a).await),
        Command::Lock(a) => lock::run(g, &a.hold, a.revocable, None, Kind::Mutex).await,
        Command::Rlock(a) => lock::run(g, &a.hold, a.revocable, None, Kind::Read).await,
        Command::Wlock(a) => lock::run(g, &a.hold, a.revocable, None, Kind::Write).await,
        Command::Sem(a) => {
            let kind = Kind::Semaphore(a.leases);
            lock::run(g, &a.hold, a.revocable, None, kind).await
        }
        Command::Leader(a) => lock::run(g, &a.hold, false, a.id.as_deref(), Kind::Leader).await,
        Command::Register(a) => register::register(g, a).await,
        Command::Barrier(a) => register::barrier(g, a).await,
        Command::Revoke(a) => done(lock::revoke(g, a).await),
        Command::Locks(a) => done(locks::locks(g, a).await),
        Command::Members(a) => done(discovery::members(g, a).await),
        Command::Services(a) => done(discovery::services(g, a).await),
        Command::Sandbox(a) => done(sandbox::sandbox(g, a).await),
        Command::Demo(a) => demo::demo(a).await,
        Command::Shell | Command::Completions(_) | Command::DemoWorker(_) => Err(Failure::usage(
            "not available here (run it from the command line)",
        )),
    }
}
