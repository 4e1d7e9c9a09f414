//! The lock verbs: `lock`, `rlock`, `wlock`, `sem`, `leader` (a command run under a hold),
//! `revoke` and `locks`.

use std::time::Duration;

use clap::Args;

use super::durations::duration_or_zero;
use super::run_args::RunArgs;

/// The options every lock verb shares.
#[derive(Debug, Clone, Args)]
pub(crate) struct HoldArgs {
    /// The lock's path (for leader, the election's)
    pub(crate) path: String,
    /// Give up waiting after D (0: try once): exit 73
    #[arg(long, value_name = "D", value_parser = duration_or_zero, allow_hyphen_values = true)]
    pub(crate) timeout: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL [default: 5s, less if the session timeout requires]
    #[arg(long, value_name = "D", value_parser = duration_or_zero, allow_hyphen_values = true)]
    pub(crate) kill_after: Option<Duration>,
    /// The command to run.
    #[command(flatten)]
    pub(crate) run: RunArgs,
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

pub(super) const LOCK_HELP: &str = "\
Waits for the lock at PATH (lock: the mutex; rlock/wlock: the read or write side of the
read/write lock; sem: one of N leases of the semaphore, every participant using the same N),
runs CMD with
  ZKW_FENCING_TOKEN  a number that only grows across holders (pass it to what you protect)
  ZKW_LOCK_NODE      the lock node's path
in its environment, releases the lock when CMD exits and exits with CMD's code. The layouts
are Apache Curator's: zkw and Curator clients exclude each other on the same path.

CMD is stopped before the lock can pass to anyone else. The lock is trusted until the
session's lease ends (the session timeout after the sending of the newest request the
quorum's leader is known to have heard, less a margin; see --server-tick); if the lease is
not renewed in time, CMD's process group gets SIGTERM --kill-after before that instant and
SIGKILL at it. If the lock is lost otherwise (lock node deleted,
session ended), CMD gets SIGTERM at once and SIGKILL after --kill-after (or when the lease
ends, if sooner). Either way zkw exits with 75 (also when the loss is seen just as CMD exits:
its run may not have been exclusive). If zkw is killed, even by SIGKILL, the kernel kills
CMD at once (not the processes CMD started, nor a set-user-ID CMD). This holds while zkw
itself runs: if zkw is paused (stopped, swapped out, frozen VM), only ZKW_FENCING_TOKEN
protects the resource. It covers CMD's process group: a process that leaves the group (setsid, a daemon)
is neither waited for nor stopped, and with --foreground only CMD itself is.

--timeout 0 tries once: a free lock is taken, a held one fails at once (exit 73).
--kill-after must fit in the session timeout together with how far the lease may lag on a
healthy session (two --server-tick plus the ping interval, about a third of the session
timeout), the margin (a 15th of the session timeout, at least 100ms) and room for a late
renewal (the margin again, at least 500ms), else exit 2; without it, 5s or the longest that
fits. --revocable: a revocation request (zkw revoke,
Curator's Revoker) stops CMD as a loss does, releases the lock, exit 76; without it a request
is noted on stderr and CMD keeps the lock. Ctrl-C, Ctrl-\\, SIGTERM and SIGHUP are passed on
to CMD (a SIGHUP ignored when zkw started, as under nohup, stays ignored, for CMD too); before
CMD starts they stop the wait (exit 130, 131, 143, 129) without leaving a lock node behind.
CMD's own exit code may equal one of zkw's: --json tells them apart (an error document on
stderr is zkw's).";

pub(super) const LEADER_HELP: &str = "\
Joins the leader election at PATH in Apache Curator's LeaderLatch layout (zkw and Curator
LeaderLatch participants elect one leader among them), waits until this participant leads,
runs CMD with ZKW_FENCING_TOKEN and ZKW_LOCK_NODE set (the latch node), leaves the election
when CMD exits and exits with CMD's code. Leadership is trusted, and CMD stopped, exactly as
for `zkw lock` (see zkw lock --help): SIGTERM --kill-after before the session's lease could
end, at once if the latch node goes or the session ends; exit 75. --id is the latch node's
data: Curator's getParticipants() and `zkw locks` show it.";

pub(super) const REVOKE_HELP: &str = "\
Asks the current holder of the mutex at PATH, or the holder of the lock node NODE (a child of
PATH or a full path; any lock kind, zkw's or Curator's), to release: writes __REVOKE__ into
the node, as Curator's Revoker does. A `zkw lock --revocable` holder stops its command and
releases (exit 76); a Curator holder must have called makeRevocable. Exit 1 when no one holds
the lock or NODE does not exist.";

pub(super) const LOCKS_HELP: &str = "\
Shows who holds the lock at PATH and who waits, in Curator's order (by sequence number): one
line per contender with its role (holder, waiting; for a leader latch, leader; for a
semaphore, lease, pending for the lease of the contender acquiring its locks mutex,
acquiring, waiting), node, sequence,
session id (the node's ephemeralOwner), age and data (a leader latch's participant id). The
kind (mutex, rwlock, semaphore, leader latch) is told from the node names. --json prints one
document {\"path\":…,\"kind\":…,\"contenders\":[{\"role\",\"node\",\"sequence\",\"session\",
\"age_ms\",\"data\",\"data_base64\"}]}; --watch prints it again at every change.";
