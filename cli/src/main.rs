//! `zkw`: a ZooKeeper command-line client whose `lock` runs any command under a distributed
//! lock. Run `zkw --help` for the verbs and the exit codes.
//!
//! Errors are one line on standard error (`zkw: …`) and a non-zero exit code; never a panic.
#![forbid(unsafe_code)]

mod args;
mod cache;
mod child;
mod connect;
mod demo;
mod demo_worker;
mod duration;
mod fail;
mod format;
mod json;
mod lock;
mod nodes;
mod out;
mod sandbox;
mod secure;
mod usage;
mod watch;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use args::{Invocation, Parsed, VerbSpec};
use connect::Global;
use fail::{Failure, FAILED};
use lock::Kind;

fn main() -> ExitCode {
    let argv: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect()
    {
        Ok(argv) => argv,
        Err(bad) => {
            return report(&Failure::usage(format!(
                "argument is not valid UTF-8: {bad:?}"
            )))
        }
    };
    match execute(&argv) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => report(&failure),
    }
}

/// Prints the failure's line (if any) and returns its code.
fn report(failure: &Failure) -> ExitCode {
    if !failure.message.is_empty() {
        out::note(&failure.message);
    }
    ExitCode::from(failure.code)
}

/// Parses the command line and runs it; returns the exit code.
fn execute(argv: &[String]) -> Result<u8, Failure> {
    match args::parse(argv, usage::VERBS)? {
        Invocation::Help if argv.is_empty() => {
            let _ = std::io::Write::write_all(&mut std::io::stderr(), usage::MAIN.as_bytes());
            Ok(fail::USAGE)
        }
        Invocation::Help => out::line(usage::MAIN.trim_end()).map(|()| 0),
        Invocation::Version => out::line(concat!("zkw ", env!("CARGO_PKG_VERSION"))).map(|()| 0),
        Invocation::Verb(spec, parsed) if parsed.has("help") => {
            out::line(usage::verb_help(spec.name)).map(|()| 0)
        }
        Invocation::Verb(spec, parsed) if spec.name == "__demo-worker" => {
            let dir = parsed.expect_operands(&["DIR"])?.remove(0);
            demo_worker::run(Path::new(&dir))
        }
        Invocation::Verb(spec, parsed) => run_async(spec, &parsed),
    }
}

/// Runs a verb on a single-threaded tokio runtime.
fn run_async(spec: VerbSpec, parsed: &Parsed) -> Result<u8, Failure> {
    let global = Global::from_parsed(parsed)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(FAILED, format!("cannot start the runtime: {e}")))?;
    let result = runtime.block_on(dispatch(spec.name, &global, parsed));
    // Background work (a server still starting after Ctrl-C, say) must not hold up the exit.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}

/// Runs one verb.
async fn dispatch(verb: &str, g: &Global, p: &Parsed) -> Result<u8, Failure> {
    let done = |r: Result<(), Failure>| r.map(|()| 0);
    match verb {
        "ls" => done(nodes::ls(g, p).await),
        "get" => done(nodes::get(g, p).await),
        "stat" => done(nodes::stat(g, p).await),
        "set" => done(nodes::set(g, p).await),
        "create" => done(nodes::create(g, p).await),
        "rm" => done(nodes::rm(g, p).await),
        "sync" => done(nodes::sync(g, p).await),
        "whoami" => done(nodes::whoami(g, p).await),
        "acl" => done(nodes::acl(g, p).await),
        "watch" => done(watch::watch(g, p).await),
        "lock" => lock::run(g, p, Kind::Mutex).await,
        "rlock" => lock::run(g, p, Kind::Read).await,
        "wlock" => lock::run(g, p, Kind::Write).await,
        "sem" => lock::run(g, p, Kind::Semaphore(lock::leases(p)?)).await,
        "leader" => lock::run(g, p, Kind::Leader).await,
        "cache" => done(cache::cache(g, p).await),
        "revoke" => done(lock::revoke(g, p).await),
        "sandbox" => done(sandbox::sandbox(g, p).await),
        "demo" => demo::demo(p).await,
        other => Err(Failure::usage(format!(
            "unknown command {other:?} (see zkw --help)"
        ))),
    }
}
