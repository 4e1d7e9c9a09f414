//! The command line, declared with `clap`: global options, the verbs, their flags and help.
//!
//! Parsing, `--help`, typo suggestions, `--` handling and the completion scripts all come from
//! these declarations; the verbs receive typed values.

use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The text after `zkw --help`'s options: durations, exit codes and `--json` error kinds (the
/// one list of them: `fail::KINDS` is checked against it).
const AFTER_HELP: &str = "\
Durations: 500ms, 5s, 1.5s, 2m, 1h 30m (humantime; a bare number is seconds).

Exit codes: 0 ok · 1 the operation failed (no node, bad version, …) · 2 bad command line ·
69 ZooKeeper unreachable or session lost · 73 lock not acquired before --timeout ·
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

/// The heading of the options that say how to reach and authenticate to ZooKeeper: grouped
/// apart, so that a verb's own options come first in its help.
const CONNECTION: &str = "Connection";

/// Options every command accepts, before or after it (but `-v`, which goes before it: the
/// verbs' own `-v` is `--version`).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct GlobalArgs {
    /// One JSON document per result, for scripts; errors as JSON on stderr
    // After a verb's own options, which are what its help is read for.
    #[arg(long, global = true, display_order = 100)]
    pub(crate) json: bool,
    /// The library's log on stderr: -v info, -vv debug ($RUST_LOG, when set, decides)
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Connect string (default: $ZOOKEEPER, else 127.0.0.1:2181)
    #[arg(long, global = true, value_name = "HOSTS[/CHROOT]", help_heading = CONNECTION)]
    pub(crate) server: Option<String>,
    /// Session timeout, also the limit for connecting [default: 10s]
    #[arg(long, global = true, value_name = "D", value_parser = duration,
          allow_hyphen_values = true, help_heading = CONNECTION)]
    pub(crate) session_timeout: Option<Duration>,
    /// The ensemble's tickTime, which holds' leases wait on [default: 2s] ($ZKW_SERVER_TICK)
    #[arg(
        long,
        global = true,
        value_name = "D",
        value_parser = duration,
        env = "ZKW_SERVER_TICK",
        hide_env = true,
        help_heading = CONNECTION
    )]
    pub(crate) server_tick: Option<Duration>,
    /// Authenticate, e.g. digest:alice:secret (repeatable)
    #[arg(long, global = true, value_name = "SCHEME:CREDENTIALS", help_heading = CONNECTION)]
    pub(crate) auth: Vec<String>,
    /// Speak TLS, trusting the CA certificates in FILE (PEM; $ZKW_TLS_CA)
    #[arg(long, global = true, value_name = "FILE", help_heading = CONNECTION)]
    pub(crate) tls_ca: Option<String>,
    /// Client certificate (PEM) for mutual TLS ($ZKW_TLS_CERT)
    #[arg(long, global = true, value_name = "FILE", help_heading = CONNECTION)]
    pub(crate) tls_cert: Option<String>,
    /// Client key (PEM) for mutual TLS ($ZKW_TLS_KEY)
    #[arg(long, global = true, value_name = "FILE", help_heading = CONNECTION)]
    pub(crate) tls_key: Option<String>,
    /// SASL: `digest:USER[:PASSWORD]` or `kerberos[:PRINCIPAL]`.
    #[arg(
        long,
        global = true,
        value_name = "MECHANISM",
        help = "SASL digest:USER[:PASSWORD] or kerberos[:PRINCIPAL] ($ZKW_SASL)",
        help_heading = CONNECTION
    )]
    pub(crate) sasl: Option<String>,
}

/// The ids of the global options that say how to connect.
const CONNECTION_ARGS: [&str; 8] = [
    "server",
    "session_timeout",
    "server_tick",
    "auth",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "sasl",
];

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
    #[command(name = "__demo-worker", hide = true)]
    DemoWorker(DemoWorkerArgs),
}

/// A node path.
#[derive(Debug, Clone, Args)]
pub(crate) struct PathArg {
    /// The node
    #[arg(value_name = "PATH")]
    pub(crate) path: String,
}

/// `ls`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LsArgs {
    /// The node
    pub(crate) path: String,
    /// Every path of the subtree (PATH first, depth first)
    #[arg(short = 'R', long)]
    pub(crate) recursive: bool,
    /// The Stat of PATH too
    #[arg(short, long)]
    pub(crate) stat: bool,
}

/// `get`.
#[derive(Debug, Clone, Args)]
pub(crate) struct GetArgs {
    /// The node
    pub(crate) path: String,
    /// The Stat too
    #[arg(short, long, conflicts_with = "raw")]
    pub(crate) stat: bool,
    /// The bytes exactly, with no newline added
    #[arg(long)]
    pub(crate) raw: bool,
}

/// `set`.
#[derive(Debug, Clone, Args)]
pub(crate) struct SetArgs {
    /// The node
    pub(crate) path: String,
    /// The data ('-': standard input)
    pub(crate) data: String,
    /// Only if the data version is VERSION
    #[arg(short, long)]
    pub(crate) version: Option<i32>,
}

/// `create`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CreateArgs {
    /// The node (its parent must exist, unless -p)
    pub(crate) path: String,
    /// The data ('-': standard input)
    pub(crate) data: Option<String>,
    /// Create missing parents first (persistent, empty, with the same ACL)
    #[arg(short, long)]
    pub(crate) parents: bool,
    /// Ephemeral: deleted when the session ends, that is when zkw exits
    #[arg(short, long)]
    pub(crate) ephemeral: bool,
    /// Sequential: the server appends a 10-digit sequence number
    #[arg(short, long)]
    pub(crate) sequential: bool,
    /// Container: deleted by the server once its last child is gone
    #[arg(short, long, conflicts_with_all = ["ephemeral", "sequential", "ttl"])]
    pub(crate) container: bool,
    /// Persistent with a time to live (the server must enable extended types)
    #[arg(long, value_name = "D", value_parser = duration, conflicts_with = "ephemeral",
          allow_hyphen_values = true)]
    pub(crate) ttl: Option<Duration>,
}

/// `rm`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RmArgs {
    /// The node
    pub(crate) path: String,
    /// Everything below PATH too
    #[arg(short, long, conflicts_with = "version")]
    pub(crate) recursive: bool,
    /// Only if the data version is VERSION
    #[arg(short, long)]
    pub(crate) version: Option<i32>,
    /// Do not ask before deleting `/` or a large subtree
    #[arg(short, long)]
    pub(crate) yes: bool,
}

/// `watch`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WatchArgs {
    /// The node (need not exist)
    pub(crate) path: String,
    /// Everything below PATH too
    #[arg(long)]
    pub(crate) recursive: bool,
}

/// `cache`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CacheArgs {
    /// The root of the subtree (need not exist)
    pub(crate) path: String,
    /// Hold only N levels below PATH (0: PATH alone)
    #[arg(long, value_name = "N")]
    pub(crate) depth: Option<usize>,
}

/// `acl get` / `acl set`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum AclCommand {
    /// Print the ACL of PATH
    Get(PathArg),
    /// Set the ACL of PATH
    #[command(long_about = ACL_SET_HELP)]
    Set(AclSetArgs),
}

/// `acl set`.
#[derive(Debug, Clone, Args)]
pub(crate) struct AclSetArgs {
    /// The node
    pub(crate) path: String,
    /// scheme:id:perms[,…]
    pub(crate) acl: String,
    /// Only if the ACL version is VERSION
    #[arg(short, long)]
    pub(crate) version: Option<i32>,
    /// digest entries are digest:USER:PASSWORD:PERMS; the digest is computed here
    #[arg(long)]
    pub(crate) plain_password: bool,
}

/// The options every lock verb shares.
#[derive(Debug, Clone, Args)]
pub(crate) struct HoldArgs {
    /// The lock's path
    pub(crate) path: String,
    /// Give up waiting after D (0: try once): exit 73
    #[arg(long, value_name = "D", value_parser = duration_or_zero, allow_hyphen_values = true)]
    pub(crate) timeout: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL [default: 5s, less if the session timeout requires]
    #[arg(long, value_name = "D", value_parser = duration_or_zero, allow_hyphen_values = true)]
    pub(crate) kill_after: Option<Duration>,
    /// Run CMD in zkw's process group (for commands that read the terminal)
    #[arg(long)]
    pub(crate) foreground: bool,
    /// The command and its arguments
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub(crate) command: Vec<String>,
}

/// `lock`, `rlock`, `wlock`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LockArgs {
    /// What every lock verb takes.
    #[command(flatten)]
    pub(crate) hold: HoldArgs,
    /// A revocation request stops CMD and releases the lock (exit 76)
    #[arg(long)]
    pub(crate) revocable: bool,
}

/// `sem`.
#[derive(Debug, Clone, Args)]
pub(crate) struct SemArgs {
    /// What every lock verb takes.
    #[command(flatten)]
    pub(crate) hold: HoldArgs,
    /// How many leases the semaphore has (every participant uses the same N)
    #[arg(long, value_name = "N", required = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) leases: u32,
    /// A revocation request stops CMD and releases the lease (exit 76)
    #[arg(long)]
    pub(crate) revocable: bool,
}

/// `leader`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LeaderArgs {
    /// What every lock verb takes.
    #[command(flatten)]
    pub(crate) hold: HoldArgs,
    /// This participant's id, the latch node's data [default: HOST-PID]
    #[arg(long)]
    pub(crate) id: Option<String>,
}

/// `revoke`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RevokeArgs {
    /// The lock's path
    pub(crate) path: String,
    /// The lock node (a child of PATH or a full path) [default: the mutex's holder]
    pub(crate) node: Option<String>,
}

/// `locks`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LocksArgs {
    /// The lock's path
    pub(crate) path: String,
    /// Print again at every change, until Ctrl-C
    #[arg(long)]
    pub(crate) watch: bool,
}

/// `members`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MembersArgs {
    /// The group's path
    pub(crate) path: String,
    /// Print again at every change, until Ctrl-C
    #[arg(long)]
    pub(crate) watch: bool,
}

/// The base path of service discovery, Curator's usual one.
const SERVICES_BASE: &str = "/services";

/// `services`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServicesArgs {
    /// The service whose instances to list [default: list the service names]
    pub(crate) name: Option<String>,
    /// The base path of service discovery
    #[arg(long, value_name = "PATH", default_value = SERVICES_BASE)]
    pub(crate) base: String,
    /// Print again at every change, until Ctrl-C
    #[arg(long)]
    pub(crate) watch: bool,
}

/// `register`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RegisterArgs {
    /// The service's name
    pub(crate) name: String,
    /// The address (host or IP) the instance serves on
    #[arg(long, value_name = "A", required = true)]
    pub(crate) address: String,
    /// The port the instance serves on
    #[arg(long, value_name = "P", required = true)]
    pub(crate) port: u16,
    /// The instance's TLS port
    #[arg(long, value_name = "P")]
    pub(crate) ssl_port: Option<u16>,
    /// The instance's id, unique in the service [default: a random UUID]
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// The instance's payload, a JSON value
    #[arg(long, value_name = "JSON", value_parser = json_value)]
    pub(crate) payload: Option<serde_json::Value>,
    /// The base path of service discovery
    #[arg(long, value_name = "PATH", default_value = SERVICES_BASE)]
    pub(crate) base: String,
    /// Run CMD in zkw's process group (for commands that read the terminal)
    #[arg(long)]
    pub(crate) foreground: bool,
    /// The command and its arguments
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub(crate) command: Vec<String>,
}

/// `barrier`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BarrierArgs {
    /// The barrier's path
    pub(crate) path: String,
    /// How many members the barrier waits for (every member uses the same N)
    #[arg(long, value_name = "N", required = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) members: u32,
    /// Give up waiting for the others to enter after D: exit 73
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    pub(crate) timeout: Option<Duration>,
    /// Run CMD in zkw's process group (for commands that read the terminal)
    #[arg(long)]
    pub(crate) foreground: bool,
    /// The command and its arguments
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub(crate) command: Vec<String>,
}

/// `sandbox`.
#[derive(Debug, Clone, Args)]
pub(crate) struct SandboxArgs {
    /// How many servers (1: standalone)
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=9))]
    pub(crate) ensemble: u16,
    /// Listen on 127.0.0.1:N (an ensemble: N, N+1, …) [default: free ports]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) port: Option<u16>,
    /// TLS servers, with certificates made for the run
    #[arg(long)]
    pub(crate) tls: bool,
}

/// `demo`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DemoArgs {
    /// Worker processes
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub(crate) workers: usize,
    /// Acquisitions per worker
    #[arg(long, value_name = "M", default_value_t = 50)]
    pub(crate) rounds: usize,
}

/// `completions`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell
    pub(crate) shell: clap_complete::Shell,
}

/// `__demo-worker`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DemoWorkerArgs {
    /// The demo's shared directory
    pub(crate) dir: String,
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

/// A positive duration: humantime's `500ms`, `1.5s`, `2m`, `1h 30m`, or a bare number of
/// seconds.
///
/// # Errors
/// What is wrong with `text`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    match duration_or_zero(text)? {
        d if d.is_zero() => Err("must be positive".to_owned()),
        d => Ok(d),
    }
}

/// As [`duration`], zero allowed (`--timeout 0`: try once).
///
/// # Errors
/// What is wrong with `text`.
pub(crate) fn duration_or_zero(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err("must be positive".to_owned());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| "out of range".to_owned());
    }
    humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 500ms, 5s, 2m)"))
}

/// A JSON value (`--payload`).
///
/// # Errors
/// Why `text` is not JSON.
fn json_value(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

/// A duration for messages, rounded: `250ms`, `2s 501ms`, `1m 30s`.
pub(crate) fn show(d: Duration) -> String {
    let unit: u128 = if d >= Duration::from_secs(60) {
        1_000_000_000
    } else {
        1_000_000
    };
    let nanos = (d.as_nanos() + unit / 2) / unit * unit;
    let rounded = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
    humantime::format_duration(rounded).to_string()
}

const LS_HELP: &str = "\
Lists the children of PATH, sorted, one per line. -R lists every path of the subtree (PATH
first, depth first); nodes that cannot be listed (no READ permission, say) are reported on
standard error, the rest is printed, and zkw exits 1. -s prints the Stat of PATH after the
list.";

const GET_HELP: &str = "\
Prints the data of PATH and a newline; --raw writes the bytes exactly, nothing added. With
--json: {\"path\":…,\"data\":TEXT or null,\"data_base64\":…,\"stat\":{…}} where data is the
bytes as UTF-8 text when they are valid UTF-8 (else null) and data_base64 is always there.";

const RM_HELP: &str = "\
Deletes PATH (only if its version is VERSION when given); -r deletes everything below it
first. Deleting `/` recursively, or more than 100 nodes, asks for confirmation on standard
input (y to go on); --yes skips the question.";

const WATCH_HELP: &str = "\
Adds a persistent watch on PATH (which need not exist) and prints one line per event,
'<EventType> <path>', until Ctrl-C. --recursive covers everything below PATH too. The watch
survives reconnections.";

const CACHE_HELP: &str = "\
Keeps a local copy of the subtree at PATH (a TreeCache: one persistent recursive watch) and
prints it, one line 'created <path> <data>' per node, then 'initialized', then one line per
change until Ctrl-C: 'created <path> <data>', 'changed <path> <data>' (the new data),
'deleted <path>'. A node this session may not read is printed once as 'unreadable <path>'
(in the tree or later); it is not kept, nor anything below it. Data is shown as text,
control characters escaped. After a reconnection the copy is read again and only the
differences are printed. PATH need not exist yet. With --json, one object per line:
{\"event\":…,\"path\":…,\"data\":…,\"data_base64\":…,\"version\":…,\"mzxid\":…}
(no data, version or mzxid for 'deleted' and 'unreadable').";

const ACL_SET_HELP: &str = "\
ACL entries are scheme:id:perms, comma-separated; perms are letters from cdrwa (create,
delete, read, write, admin). E.g. world:anyone:r,digest:alice:<hash>:cdrwa. A digest id is
USER:BASE64(SHA1(USER:PASSWORD)); with --plain-password, digest entries are
digest:USER:PASSWORD:PERMS and zkw computes the hash. A digest id that does not look hashed
is set as given, with a warning: a plain password there locks everyone out.";

const LOCK_HELP: &str = "\
Waits for the lock at PATH (lock: the mutex; rlock/wlock: the read or write side of the
read/write lock; sem: one of N leases of the semaphore, every participant using the same N),
runs CMD with
  ZKW_FENCING_TOKEN  a number that only grows across holders (pass it to what you protect)
  ZKW_LOCK_NODE      the lock node's path
in its environment, releases the lock when CMD exits and exits with CMD's code. The layouts
are Apache Curator's: zkw and Curator clients exclude each other on the same path.

CMD is stopped before the lock can pass to anyone else. The lock is trusted until the
session's lease ends (the session timeout after the newest request the server answered, less
a margin); if the lease is not renewed in time, CMD's process group gets SIGTERM --kill-after
before that instant and SIGKILL at it. If the lock is lost otherwise (lock node deleted,
session ended), CMD gets SIGTERM at once and SIGKILL after --kill-after (or when the lease
ends, if sooner). Either way zkw exits with 75 (also when the loss is seen just as CMD exits:
its run may not have been exclusive). This holds while zkw itself runs: if zkw is paused
(stopped, swapped out, frozen VM), only ZKW_FENCING_TOKEN protects the resource.

--timeout 0 tries once: a free lock is taken, a held one fails at once (exit 73).
--kill-after plus the margin (a 15th of the session timeout, at least 100ms) must fit in
half the session timeout, else exit 2. --revocable: a revocation request (zkw revoke,
Curator's Revoker) stops CMD as a loss does, releases the lock, exit 76; without it a request
is noted on stderr and CMD keeps the lock. Ctrl-C, SIGTERM and SIGHUP are passed on to CMD;
before CMD starts they stop the wait (exit 130, 143, 129) without leaving a lock node behind.";

const LEADER_HELP: &str = "\
Joins the leader election at PATH in Apache Curator's LeaderLatch layout (zkw and Curator
LeaderLatch participants elect one leader among them), waits until this participant leads,
runs CMD with ZKW_FENCING_TOKEN and ZKW_LOCK_NODE set (the latch node), leaves the election
when CMD exits and exits with CMD's code. Leadership is trusted, and CMD stopped, exactly as
for `zkw lock` (see zkw lock --help): SIGTERM --kill-after before the session's lease could
end, at once if the latch node goes or the session ends; exit 75. --id is the latch node's
data: Curator's getParticipants() and `zkw locks` show it.";

const REVOKE_HELP: &str = "\
Asks the current holder of the mutex at PATH, or the holder of the lock node NODE (a child of
PATH or a full path; any lock kind, zkw's or Curator's), to release: writes __REVOKE__ into
the node, as Curator's Revoker does. A `zkw lock --revocable` holder stops its command and
releases (exit 76); a Curator holder must have called makeRevocable. Exit 1 when no one holds
the lock or NODE does not exist.";

const LOCKS_HELP: &str = "\
Shows who holds the lock at PATH and who waits, in Curator's order (by sequence number): one
line per contender with its role (holder, waiting; for a leader latch, leader; for a
semaphore, lease, pending for the lease of the contender acquiring its locks mutex,
acquiring, waiting), node, sequence,
session id (the node's ephemeralOwner), age and data (a leader latch's participant id). The
kind (mutex, rwlock, semaphore, leader latch) is told from the node names. --json prints one
document {\"path\":…,\"kind\":…,\"contenders\":[{\"role\",\"node\",\"sequence\",\"session\",
\"age_ms\",\"data\",\"data_base64\"}]}; --watch prints it again at every change.";

const MEMBERS_HELP: &str = "\
Lists the members of the group at PATH in Apache Curator's GroupMember layout (one ephemeral
child per member, named by its id, holding its data), sorted by id: one line per member, its
id and its data (as text, control characters escaped). --json prints one document
{\"path\":…,\"members\":[{\"id\",\"data\",\"data_base64\",\"session\"}]} (session: the
member node's ephemeralOwner); --watch prints it again at every change. Exit 1 when PATH
does not exist.";

const SERVICES_HELP: &str = "\
Without NAME, lists the services registered under --base (default /services) in Apache
Curator's ServiceDiscovery layout, one name per line. With NAME, lists its instances, one
line each: id, address:port, ssl port, service type, registration time (UTC) and payload
(JSON). --json prints {\"base\":…,\"services\":[…]}, or {\"base\":…,\"name\":…,
\"instances\":[{\"id\",\"address\",\"port\",\"ssl_port\",\"service_type\",
\"registration_time_utc\",\"payload\",\"uri_spec\"}]} (times in ms since the epoch);
--watch prints again at every change below --base.";

const REGISTER_HELP: &str = "\
Registers an instance of service NAME under --base (default /services) in Apache Curator's
ServiceDiscovery layout, DYNAMIC (an ephemeral node, --id or a random UUID its name, Curator's
JSON its data), runs CMD with ZKW_SERVICE_ID (the instance's id) in its environment, and
unregisters once CMD and every process of its group have exited; exits with CMD's code.
Curator's ServiceDiscovery, ServiceCache and `zkw services NAME` see the instance meanwhile.
Ctrl-C, SIGTERM and SIGHUP are passed on to CMD; before CMD starts they stop zkw (exit 130,
143, 129) without leaving the instance behind.";

const BARRIER_HELP: &str = "\
Enters the double barrier at PATH (Apache Curator's DistributedDoubleBarrier layout: zkw and
Curator members of one barrier wait for each other) and waits until N members have entered,
runs CMD with ZKW_BARRIER_NODE (this member's node) in its environment, then leaves: waits
until every member has left, and exits with CMD's code. --timeout bounds the wait to enter:
exit 73 when fewer than N members came in time (the member node is deleted). Ctrl-C, SIGTERM
and SIGHUP are passed on to CMD; while waiting they stop zkw (exit 130, 143, 129).";

const SHELL_HELP: &str = "\
An interactive session on one connection: the verbs of the command line (ls, get, set, create,
rm, stat, acl, sync, whoami, watch, cache, locks, lock…), with paths relative to the working
node (cd, pwd), Tab completion of verbs and of znode paths read from the server, history in
the user's data directory (zkw/history), and the session's state changes printed as they
happen. help lists the shell's commands, help VERB shows a verb's help; exit, quit or Ctrl-D
leaves.";

const SANDBOX_HELP: &str = "\
Starts a local ZooKeeper from the installed packages (standalone, or an N-node ensemble),
prints `export ZOOKEEPER=<connect string>` on standard output (eval it, and every zkw command
of that shell uses the sandbox) and waits; Ctrl-C stops it and removes its files. --port N
listens on 127.0.0.1:N (N, N+1, … for an ensemble). With --json:
{\"connect_string\":…,\"servers\":N}.

--tls: the servers speak TLS (client certificates optional) with certificates made for the
run; the connect string names the TLS ports, and the note on standard error (with --json:
tls_ca, tls_cert, tls_key) gives the CA, a client certificate and its key.";

const DEMO_HELP: &str = "\
Starts a local 3-node ensemble and N worker processes, each taking the lock /zkw-demo/lock M
times through `zkw lock`; the critical section increments a shared counter file. The leader
is killed half-way. Prints acquisitions, hand-off latency, maximum concurrent holders,
whether fencing tokens only grew, and the counter; exits 1 if any invariant failed.";

const COMPLETIONS_HELP: &str = "\
Prints a completion script for SHELL on standard output, e.g.
  zkw completions bash > ~/.local/share/bash-completion/completions/zkw
  zkw completions zsh > ~/.zfunc/_zkw
  zkw completions fish > ~/.config/fish/completions/zkw.fish";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn declarations_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_names_every_error_kind() {
        for kind in crate::fail::KINDS {
            assert!(AFTER_HELP.contains(kind), "{kind} is not in zkw --help");
        }
    }

    /// `sandbox` connects to nothing: its help leaves the connection options out, which the
    /// verbs that connect keep (grouped under their own heading).
    #[test]
    fn connection_options_only_where_they_count() {
        let help = |verb: &str| {
            let mut command = command();
            let sub = command
                .find_subcommand_mut(verb)
                .map(|c| c.render_long_help());
            sub.map(|h| h.to_string()).unwrap_or_default()
        };
        let sandbox = help("sandbox");
        assert!(
            !sandbox.contains("--sasl") && !sandbox.contains("--server"),
            "{sandbox}"
        );
        assert!(
            sandbox.contains("--json") && sandbox.contains("--tls"),
            "{sandbox}"
        );
        assert!(!help("demo").contains("--json"));
        let ls = help("ls");
        assert!(
            ls.contains("Connection:\n") && ls.contains("--sasl"),
            "{ls}"
        );
        assert!(ls.find("--recursive") < ls.find("Connection:"), "{ls}");
        assert!(parse(["zkw", "sandbox", "--sasl", "kerberos"]).is_ok());
    }

    #[test]
    fn durations() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("-1s"), Err("must be positive".to_owned()));
        assert_eq!(duration("0"), Err("must be positive".to_owned()));
        assert_eq!(duration_or_zero("0"), Ok(Duration::ZERO));
        assert!(duration("5x").is_err() && duration("").is_err() && duration("1e400").is_err());
        assert_eq!(show(Duration::from_nanos(2_501_739_003)), "2s 502ms");
        assert_eq!(show(Duration::from_millis(90_400)), "1m 30s");
        assert_eq!(show(Duration::from_nanos(266_666_667)), "267ms");
    }

    #[test]
    fn commands_take_everything_after_the_path() {
        let cli = Cli::try_parse_from(["zkw", "lock", "/l", "echo", "--timeout"]);
        let Ok(Cli {
            command: Some(Command::Lock(args)),
            ..
        }) = cli
        else {
            panic!("{cli:?}");
        };
        assert_eq!(args.hold.command, ["echo", "--timeout"]);
        assert_eq!(args.hold.timeout, None);
    }
}
