//! The verbs that act on no node: `shell`, `sandbox`, `demo`, `completions`, and the hidden
//! worker of `demo`.

use clap::Args;

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

pub(super) const SHELL_HELP: &str = "\
An interactive session on one connection: the verbs of the command line (ls, get, set, create,
rm, stat, acl, sync, whoami, watch, cache, locks, lock…), with paths relative to the working
node (cd, pwd), Tab completion of verbs and of znode paths read from the server, history in
the user's data directory (zkw/history), and the session's state changes printed as they
happen. help lists the shell's commands, help VERB shows a verb's help; exit, quit or Ctrl-D
leaves. Ctrl-C stops the verb that runs (a lock or a registration undoes what it made first;
rm -r without --yes, which may ask a question, runs to its end) and brings the prompt back.";

pub(super) const SANDBOX_HELP: &str = "\
Starts a local ZooKeeper from the installed packages (standalone, or an N-node ensemble),
prints `export ZOOKEEPER=<connect string> ZKW_SERVER_TICK=<its tick>` on standard output
(eval it, and every zkw command of that shell uses the sandbox) and waits; Ctrl-C stops it
and removes its files. --port N listens on 127.0.0.1:N (N, N+1, … for an ensemble). With
--json: {\"connect_string\":…,\"servers\":N,\"server_tick_ms\":…}.

--tls: the servers speak TLS (client certificates optional) with certificates made for the
run; the connect string names the TLS ports, and the export line adds ZKW_TLS_CA,
ZKW_TLS_CERT and ZKW_TLS_KEY (with --json: tls_ca, tls_cert, tls_key): the CA, a client
certificate and its key.";

pub(super) const DEMO_HELP: &str = "\
Starts a local 3-node ensemble and N worker processes, each taking the lock /zkw-demo/lock M
times through `zkw lock`; the critical section increments a shared counter file. The leader
is killed half-way. Prints acquisitions, hand-off latency, maximum concurrent holders,
whether fencing tokens only grew, and the counter; exits 1 if any invariant failed.";

pub(super) const COMPLETIONS_HELP: &str = "\
Prints a completion script for SHELL on standard output, e.g.
  zkw completions bash > ~/.local/share/bash-completion/completions/zkw
  zkw completions zsh > ~/.zfunc/_zkw
  zkw completions fish > ~/.config/fish/completions/zkw.fish";
