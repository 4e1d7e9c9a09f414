//! The command line, declared with `clap`: global options, the verbs, their flags and help.
//!
//! Parsing, `--help`, typo suggestions, `--` handling and the completion scripts all come from
//! these declarations; the verbs receive typed values.
//!
//! The whole command line and the list of verbs are here; each group of verbs declares its
//! arguments and long help in a file of its own (`node_verbs.rs`, `lock_verbs.rs`,
//! `member_verbs.rs`, `tool_verbs.rs`), the command that the running verbs take in
//! `run_args.rs`, the global options in `global.rs`, and durations are read and shown by
//! `durations.rs`.

mod durations;
mod global;
mod lock_verbs;
mod member_verbs;
mod node_verbs;
mod run_args;
#[cfg(test)]
mod tests;
mod tool_verbs;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub(crate) use durations::show;
pub(crate) use global::GlobalArgs;
pub(crate) use lock_verbs::{HoldArgs, LeaderArgs, LockArgs, LocksArgs, RevokeArgs, SemArgs};
pub(crate) use member_verbs::{BarrierArgs, MembersArgs, RegisterArgs, ServicesArgs};
pub(crate) use node_verbs::{
    AclCommand, AclSetArgs, CacheArgs, CreateArgs, GetArgs, LsArgs, PathArg, RmArgs, SetArgs,
    WatchArgs,
};
pub(crate) use tool_verbs::{CompletionsArgs, DemoArgs, DemoWorkerArgs, SandboxArgs};

pub(crate) use global::CONNECTION_ARGS;

/// The hidden verb `zkw demo` runs under each lock.
pub(crate) const DEMO_WORKER: &str = "__demo-worker";
use lock_verbs::{LEADER_HELP, LOCKS_HELP, LOCK_HELP, REVOKE_HELP};
use member_verbs::{BARRIER_HELP, MEMBERS_HELP, REGISTER_HELP, SERVICES_HELP};
use node_verbs::{CACHE_HELP, GET_HELP, LS_HELP, RM_HELP, WATCH_HELP};
use tool_verbs::{COMPLETIONS_HELP, DEMO_HELP, SANDBOX_HELP, SHELL_HELP};

/// The text after `zkw --help`'s options: durations, exit codes and `--json` error kinds (the
/// one list of them: `fail::KINDS` is checked against it).
const AFTER_HELP: &str = "\
Durations: 500ms, 5s, 1.5s, 2m, 1h 30m (humantime; a bare number is seconds).

Exit codes: 0 ok · 1 the operation failed (no node, bad version, …) · 2 bad command line ·
69 ZooKeeper unreachable, too busy (throttled, timed out) or session lost: a retry may help ·
73 lock not acquired before --timeout ·
75 lock lost while CMD ran (CMD terminated) · 76 lock revoked (--revocable) ·
126/127 CMD cannot run / not found · 128+N CMD (or zkw) ended by signal N ·
otherwise CMD's own exit code.

With --json, errors are {\"error\":…,\"exit_code\":N,\"kind\":K} on stderr, K the cause:
no_node, node_exists, bad_version (with \"expected\" and \"actual\", the version given and
the node's), not_empty, no_auth, invalid_acl, bad_arguments, unimplemented, failed (exit 1;
invalid_acl and bad_arguments are 2 when zkw itself refuses the value); usage, invalid_path
(2); unavailable (69); timeout (73); lost (75); revoked (76); cannot_run (126);
command_not_found (127); signal (128+N).";

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "zkw",
    version,
    about = "zkw: a ZooKeeper command-line client that can run any command under a distributed \
             lock\nWithout a command, on a terminal: the interactive shell (zkw shell).",
    long_about = None,
    after_help = AFTER_HELP,
    disable_help_subcommand = true
)]
pub(crate) struct Cli {
    /// Options every command accepts.
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    /// The command (none: the shell on a terminal).
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// The command line as clap parses it and prints its help: [`Cli`]'s declarations, with the
/// global options that a verb has no use for hidden from that verb's help (`sandbox` starts
/// servers and connects to none; `demo` and `completions` print no result either).
pub(crate) fn command() -> clap::Command {
    let mut command = Cli::command();
    // Global options reach the verbs when the command is built; only then can they be hidden.
    command.build();
    command.mut_subcommands(|verb| {
        let json_too = match verb.get_name() {
            "sandbox" => false,
            "demo" | "completions" => true,
            _ => return verb,
        };
        // `mut_args` keeps every option in its place: a built command's index stays right.
        verb.mut_args(|arg| {
            let id = arg.get_id().as_str();
            if CONNECTION_ARGS.contains(&id) || (json_too && id == "json") {
                arg.hide(true)
            } else {
                arg
            }
        })
    })
}

/// Parses `args` as a command line.
///
/// # Errors
/// clap's error: a bad command line, or `--help` / `--version`.
pub(crate) fn parse<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command().try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

/// The verbs.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum Command {
    /// Children of PATH (sorted); -R every path below
    #[command(long_about = LS_HELP)]
    Ls(LsArgs),
    /// Data of PATH (and its Stat)
    #[command(long_about = GET_HELP)]
    Get(GetArgs),
    /// Stat of PATH (times in UTC; ms since the epoch with --json)
    Stat(PathArg),
    /// Set the data of PATH (DATA '-' reads standard input)
    Set(SetArgs),
    /// Create a node; prints its path
    Create(CreateArgs),
    /// Delete a node (-r: and everything below)
    #[command(long_about = RM_HELP)]
    Rm(RmArgs),
    /// Print events on PATH until Ctrl-C
    #[command(long_about = WATCH_HELP)]
    Watch(WatchArgs),
    /// Print the subtree, then every change (a TreeCache)
    #[command(long_about = CACHE_HELP)]
    Cache(CacheArgs),
    /// Get or set an ACL (scheme:id:perms[,…], e.g. world:anyone:cdrwa)
    #[command(subcommand)]
    Acl(AclCommand),
    /// Let the connected server catch up with the leader
    Sync(PathArg),
    /// The session's identities
    Whoami,
    /// Run CMD under the mutex at PATH
    #[command(long_about = LOCK_HELP)]
    Lock(LockArgs),
    /// Run CMD under the read lock of the read/write lock at PATH
    #[command(long_about = LOCK_HELP)]
    Rlock(LockArgs),
    /// Run CMD under the write lock of the read/write lock at PATH
    #[command(long_about = LOCK_HELP)]
    Wlock(LockArgs),
    /// Run CMD under one of N leases of the semaphore at PATH
    #[command(long_about = LOCK_HELP)]
    Sem(SemArgs),
    /// Run CMD while leader of the election at PATH (Curator's LeaderLatch)
    #[command(long_about = LEADER_HELP)]
    Leader(LeaderArgs),
    /// Run CMD registered as an instance of service NAME (Curator's ServiceDiscovery)
    #[command(long_about = REGISTER_HELP)]
    Register(RegisterArgs),
    /// Run CMD between entering and leaving the double barrier of N members at PATH
    #[command(long_about = BARRIER_HELP)]
    Barrier(BarrierArgs),
    /// Ask the holder of a lock to release (`lock --revocable` then stops CMD)
    #[command(long_about = REVOKE_HELP)]
    Revoke(RevokeArgs),
    /// Who holds the lock, rwlock, semaphore or leader latch at PATH, and who waits
    #[command(long_about = LOCKS_HELP)]
    Locks(LocksArgs),
    /// The members of the group at PATH (Curator's GroupMember)
    #[command(long_about = MEMBERS_HELP)]
    Members(MembersArgs),
    /// The services under --base, or the instances of service NAME
    #[command(long_about = SERVICES_HELP)]
    Services(ServicesArgs),
    /// An interactive shell on one session (also: zkw alone on a terminal)
    #[command(long_about = SHELL_HELP)]
    Shell,
    /// Start ZooKeeper locally and print `export ZOOKEEPER=…`; Ctrl-C stops it
    #[command(long_about = SANDBOX_HELP)]
    Sandbox(SandboxArgs),
    /// Contending `zkw lock` processes on a local ensemble, leader killed mid-run
    #[command(long_about = DEMO_HELP)]
    Demo(DemoArgs),
    /// Print a shell completion script (bash, zsh, fish, …)
    #[command(long_about = COMPLETIONS_HELP)]
    Completions(CompletionsArgs),
    /// One worker of `zkw demo`.
    #[command(name = DEMO_WORKER, hide = true)]
    DemoWorker(DemoWorkerArgs),
}

impl Command {
    /// The node paths among the operands, to resolve against the shell's working node.
    pub(crate) fn paths_mut(&mut self) -> Vec<&mut String> {
        match self {
            Self::Ls(a) => vec![&mut a.path],
            Self::Get(a) => vec![&mut a.path],
            Self::Stat(a) | Self::Sync(a) | Self::Acl(AclCommand::Get(a)) => vec![&mut a.path],
            Self::Set(a) => vec![&mut a.path],
            Self::Create(a) => vec![&mut a.path],
            Self::Rm(a) => vec![&mut a.path],
            Self::Watch(a) => vec![&mut a.path],
            Self::Cache(a) => vec![&mut a.path],
            Self::Acl(AclCommand::Set(a)) => vec![&mut a.path],
            Self::Lock(a) | Self::Rlock(a) | Self::Wlock(a) => vec![&mut a.hold.path],
            Self::Sem(a) => vec![&mut a.hold.path],
            Self::Leader(a) => vec![&mut a.hold.path],
            Self::Revoke(a) => vec![&mut a.path],
            Self::Locks(a) => vec![&mut a.path],
            Self::Members(a) => vec![&mut a.path],
            Self::Services(a) => vec![&mut a.base],
            Self::Register(a) => vec![&mut a.base],
            Self::Barrier(a) => vec![&mut a.path],
            _ => Vec::new(),
        }
    }
}
