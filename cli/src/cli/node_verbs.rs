//! The verbs on nodes: `ls`, `get`, `stat`, `set`, `create`, `rm`, `watch`, `cache`, `acl`,
//! `sync`.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::durations::duration;

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

pub(super) const LS_HELP: &str = "\
Lists the children of PATH, sorted, one per line. -R lists every path of the subtree (PATH
first, depth first); nodes that cannot be listed (no READ permission, say) are reported on
standard error, the rest is printed, and zkw exits 1. -s prints the Stat of PATH after the
list. With --json -R: {\"path\":…,\"paths\":[…],\"unreadable\":[{\"path\":…,\"error\":…,
\"kind\":K}]}, K an error kind of zkw --help (no_auth, …).";

pub(super) const GET_HELP: &str = "\
Prints the data of PATH and a newline; --raw writes the bytes exactly, nothing added. With
--json: {\"path\":…,\"data\":TEXT or null,\"data_base64\":…,\"stat\":{…}} where data is the
bytes as UTF-8 text when they are valid UTF-8 (else null) and data_base64 is always there.";

pub(super) const RM_HELP: &str = "\
Deletes PATH (only if its version is VERSION when given); -r deletes everything below it
first. Deleting `/` recursively, or more than 100 nodes, asks for confirmation on standard
input (y to go on); --yes skips the question.";

pub(super) const WATCH_HELP: &str = "\
Adds a persistent watch on PATH (which need not exist) and prints one line per event,
'<EventType> <path>', until Ctrl-C. --recursive covers everything below PATH too. The watch
survives reconnections.";

pub(super) const CACHE_HELP: &str = "\
Keeps a local copy of the subtree at PATH (a TreeCache: one persistent recursive watch) and
prints it, one line 'created <path> <data>' per node, then 'initialized', then one line per
change until Ctrl-C: 'created <path> <data>', 'changed <path> <data>' (the new data),
'deleted <path>'. A node this session may not read is printed once as 'unreadable <path>'
(in the tree or later); it is not kept, nor anything below it. Data is shown as text,
control characters escaped. After a reconnection the copy is read again and only the
differences are printed. If the output stalls for over a second with 1024 events waiting
(a paused terminal, a stopped pipe), the events it missed are replaced by one line
'lagged <count>'; the copy itself stays current. PATH need not exist yet. With --json, one object per line:
{\"event\":…,\"path\":…,\"data\":…,\"data_base64\":…,\"version\":…,\"mzxid\":…}
(no data, version or mzxid for 'deleted' and 'unreadable'; {\"event\":\"lagged\",\"missed\":N}).";

const ACL_SET_HELP: &str = "\
ACL entries are scheme:id:perms, comma-separated; perms are letters from cdrwa (create,
delete, read, write, admin). E.g. world:anyone:r,digest:alice:<hash>:cdrwa. A digest id is
USER:BASE64(SHA1(USER:PASSWORD)); with --plain-password, digest entries are
digest:USER:PASSWORD:PERMS and zkw computes the hash. A digest id that does not look hashed
is set as given, with a warning: a plain password there locks everyone out.";
