//! A command tied to `zkw`'s life: when `zkw` dies, even by SIGKILL, the kernel kills the
//! command, so that it does not run on without the lock once the session expires.
//!
//! Linux's `PR_SET_PDEATHSIG` does that, but it must be set in the command's own process,
//! between fork and exec, and setting it there takes an `unsafe` `pre_exec` hook. So `zkw`
//! starts the command through itself instead: `zkw` runs `/proc/self/exe` with [`MARKER`]
//! first, that process asks for SIGKILL at its parent's death, checks that the parent is
//! still the `zkw` that started it (it may have died before the signal was armed), and then
//! becomes the command with `execvp`, keeping its pid, its process group and the signal.
//!
//! What it does not cover: the processes the command starts (the signal is not inherited
//! across fork; `zkw`'s own stop reaches them through the process group, SIGKILL of `zkw`
//! does not), and set-user-ID programs (the kernel clears the signal when it runs one).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use rustix::io::Errno;
use rustix::process::{getppid, set_parent_process_death_signal, Pid, Signal};

use crate::fail::{Failure, CANNOT_EXEC, NOT_FOUND};

/// The first argument that makes `zkw` this step rather than its command line.
const MARKER: &str = "__zkw-exec-tied";
/// The program that is `zkw` itself, however it was started (even if its file was replaced).
pub(crate) const SELF_EXE: &str = "/proc/self/exe";

/// The arguments after [`SELF_EXE`] that start `argv` tied to this process: the marker, this
/// process's pid, whether failures are JSON documents, then the command.
pub(crate) fn arguments(argv: &[String], json: bool) -> Vec<OsString> {
    let head = [
        MARKER.to_owned(),
        std::process::id().to_string(),
        u8::from(json).to_string(),
    ];
    head.into_iter()
        .chain(argv.iter().cloned())
        .map(OsString::from)
        .collect()
}

/// When this process was started by [`arguments`]: becomes the command, or returns the exit
/// code of why it could not (the failure printed). `None` for any other command line.
pub(crate) fn run_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(MARKER)) {
        return None;
    }
    let parent = args.next().and_then(|a| a.to_str()?.parse::<i32>().ok());
    let json = args.next().as_deref() == Some(OsStr::new("1"));
    let argv: Vec<OsString> = args.collect();
    let failure = become_command(parent.and_then(Pid::from_raw), &argv);
    crate::fail::print(&failure, json);
    Some(ExitCode::from(failure.code))
}

/// Arms the death signal and replaces this process with `argv`; returns only on failure.
fn become_command(parent: Option<Pid>, argv: &[OsString]) -> Failure {
    let Some((program, args)) = argv.split_first() else {
        return Failure::usage("missing command to run");
    };
    let shown = program.to_string_lossy();
    if let Err(e) = set_parent_process_death_signal(Some(Signal::KILL)) {
        return Failure::new(CANNOT_EXEC, format!("cannot run {shown:?}: {e}"));
    }
    // Armed only now: a `zkw` that died before would not have this process killed.
    if parent.is_none() || getppid() != parent {
        return Failure::new(
            CANNOT_EXEC,
            format!("cannot run {shown:?}: zkw ended before it started"),
        );
    }
    let error = Command::new(program).args(args).exec();
    // A script without a `#!` line: the shell runs it, as a shell's own command search and
    // `execvp` do.
    let error = if error.raw_os_error() == Some(Errno::NOEXEC.raw_os_error()) {
        Command::new("/bin/sh").args(argv).exec()
    } else {
        error
    };
    spawn_failure(&shown, &error)
}

/// Why `program` could not be started: 127 when it is not found, 126 otherwise.
pub(crate) fn spawn_failure(program: &str, error: &io::Error) -> Failure {
    let code = if error.kind() == io::ErrorKind::NotFound {
        NOT_FOUND
    } else {
        CANNOT_EXEC
    };
    Failure::new(code, format!("cannot run {program:?}: {error}"))
}
