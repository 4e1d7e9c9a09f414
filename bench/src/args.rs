//! The command line (clap): the run's flags, and the `chart` subcommand.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;

use crate::locks::Release;
use crate::pipeline::Shape;
use crate::{Who, WORKLOADS};

/// `zkwire-bench`'s command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "zkwire-bench",
    about = "zkwire side by side with kezhuw's zookeeper-client and a raw socket",
    after_help = "workloads: codec, pipeline, write-latency, lock-cycle, lock-contention, \
                  lock-shared-client, sessions\n\
                  The lock soak (mutual exclusion under faults) is a binary of its own: \
                  cargo run --release -p zkwire-soak -- --help"
)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// Stdout holds only the JSON lines (one per workload, client and param); the tables go
    /// to stderr
    #[arg(long)]
    pub(crate) json: bool,
    /// Measure against this server instead of starting one
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) server: Option<String>,
    /// Run only these workloads (default: all)
    #[arg(long, value_name = "W1,W2,...", value_delimiter = ',', value_parser = workload)]
    pub(crate) only: Vec<String>,
    /// What is measured, and for how long.
    #[command(flatten)]
    pub(crate) measure: Measure,
    /// For profiling runs: no 2 s of server warm-up traffic in the profile
    #[arg(long)]
    pub(crate) skip_server_warmup: bool,
    /// Worker threads of the runtime every client runs on (default: one per core). With 1,
    /// a task woken by another never waits for a second thread to wake: the hand-off costs
    /// what the runtime's queue costs, which tells that part of a client's CPU from the rest
    #[arg(long, value_name = "N", value_parser = count)]
    pub(crate) worker_threads: Option<usize>,
    /// Runs the server workloads twice, plain then over TLS (params marked "tls"): zkwire and
    /// kezhuw only (the raw client has no TLS)
    #[arg(long)]
    pub(crate) tls: bool,
    /// Writes one SVG chart per workload here at the end
    #[arg(long, value_name = "DIR")]
    pub(crate) svg: Option<PathBuf>,
    /// The server fsyncs its transaction log (`zookeeper.forceSync=yes`)
    #[arg(long)]
    pub(crate) force_sync: bool,
    /// Runs against node 1 of an ensemble of this many servers started for the run
    #[arg(long, value_name = "N", value_parser = count)]
    pub(crate) ensemble: Option<usize>,
    /// Internal: one client's idle sessions, in a process of their own
    #[arg(long, value_name = "CLIENT", value_parser = who, hide = true)]
    pub(crate) child_sessions: Option<Who>,
}

/// What a run measures and for how long: the settings every workload reads (the run's
/// [`Ctx`](crate::Ctx) holds them as given).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Measure {
    /// The clients compared; `relay` (not run by default) is the raw recipes behind a
    /// connection task, the floor of any client with a driver task (every workload but codec
    /// and lock-shared-client)
    #[arg(long, value_name = "zkwire,kezhuw,raw,relay", value_delimiter = ',', value_parser = who,
        default_value = "zkwire,kezhuw,raw")]
    pub(crate) clients: Vec<Who>,
    /// Requests in flight in `pipeline`
    #[arg(long, value_name = "1,16,256", value_delimiter = ',', default_value = "1,16,256",
        value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub(crate) depths: Vec<usize>,
    /// How the client libraries keep K > 1 requests in flight in `pipeline`: K tasks, or one
    /// task polling K futures (the raw client's one shape is measured beside each)
    #[arg(
        long,
        value_name = "tasks,one-task",
        value_delimiter = ',',
        default_value = "tasks,one-task"
    )]
    pub(crate) shapes: Vec<Shape>,
    /// How the client libraries release in `lock-cycle`: awaiting the delete, or dropping the
    /// guard (its delete sent in the background); the raw recipe's one style runs either way.
    /// One style alone is what a profile of that path wants
    #[arg(long, value_delimiter = ',', default_value = "await,drop")]
    pub(crate) releases: Vec<Release>,
    /// Seconds measured per cell and round
    #[arg(long, value_name = "SECS", value_parser = secs, default_value = "1.5")]
    pub(crate) duration: Duration,
    /// Seconds of warm-up before each measurement
    #[arg(long, value_name = "SECS", value_parser = secs, default_value = "0.3")]
    pub(crate) warmup: Duration,
    /// Rounds: the clients of one cell run one after another, round after round (at least 1)
    #[arg(long, value_name = "N", value_parser = count, default_value = "2")]
    pub(crate) rounds: usize,
    /// Idle sessions per client in `sessions` (at least 1)
    #[arg(long, value_name = "N", value_parser = count, default_value = "1000")]
    pub(crate) sessions: usize,
    /// Self-test of the exclusion check: raw contenders take the lock without waiting, so
    /// lock-contention must report violations and the run must exit non-zero
    #[arg(long)]
    pub(crate) break_exclusion: bool,
}

/// What `zkwire-bench` does instead of a run.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// The SVG charts of a --json run, written to DIR (default: the current directory)
    Chart {
        /// The JSON lines of a run
        #[arg(value_name = "FILE.jsonl")]
        file: PathBuf,
        #[arg(value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Moved: the soak is `zkwire-soak` now (says so)
    #[command(hide = true, disable_help_flag = true)]
    Soak {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn workload(w: &str) -> Result<String, String> {
    if WORKLOADS.contains(&w) {
        Ok(w.to_owned())
    } else {
        Err(format!("unknown workload {w}"))
    }
}

fn who(c: &str) -> Result<Who, String> {
    Who::parse(c).ok_or_else(|| format!("unknown client {c}"))
}

/// A number of seconds (finite, not negative).
fn secs(v: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("not a number of seconds: {v}"))
}

/// A count, 0 taken as 1.
fn count(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .map(|n| n.max(1))
        .map_err(|_| format!("not a count: {v}"))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("zkwire-bench").chain(args.iter().copied()))
    }

    #[test]
    fn the_defaults_are_those_of_the_hand_written_parser() {
        let a = parse(&[]).unwrap();
        assert!(a.command.is_none() && !a.json && a.server.is_none() && a.only.is_empty());
        assert_eq!(a.measure.clients, [Who::Zkwire, Who::Kezhuw, Who::Raw]);
        assert_eq!(a.measure.depths, [1, 16, 256]);
        assert_eq!(a.measure.shapes, [Shape::Tasks, Shape::OneTask]);
        assert_eq!(a.measure.releases, [Release::Await, Release::Drop]);
        assert_eq!(a.measure.duration, Duration::from_millis(1500));
        assert_eq!(a.measure.warmup, Duration::from_millis(300));
        assert_eq!((a.measure.rounds, a.measure.sessions), (2, 1000));
        assert!(!a.skip_server_warmup && !a.measure.break_exclusion && !a.tls && !a.force_sync);
        assert!(a.svg.is_none() && a.ensemble.is_none() && a.child_sessions.is_none());
    }

    #[test]
    fn flags_parse_and_bad_values_are_refused() {
        let a = parse(&[
            "--only",
            "codec,lock-cycle",
            "--clients",
            "zkwire,raw",
            "--depths",
            "4",
            "--shapes",
            "one-task",
            "--releases",
            "drop",
            "--rounds",
            "0",
            "--duration",
            "0.25",
            "--ensemble",
            "3",
            "--child-sessions",
            "kezhuw",
        ])
        .unwrap();
        assert_eq!(a.only, ["codec", "lock-cycle"]);
        assert_eq!(a.measure.clients, [Who::Zkwire, Who::Raw]);
        assert_eq!(a.measure.depths, [4]);
        assert_eq!(a.measure.shapes, [Shape::OneTask]);
        assert_eq!(a.measure.releases, [Release::Drop]);
        assert_eq!(a.measure.rounds, 1);
        assert_eq!(a.measure.duration, Duration::from_millis(250));
        assert_eq!(a.ensemble, Some(3));
        assert_eq!(a.child_sessions, Some(Who::Kezhuw));
        for bad in [
            &["--only", "codec,nope"][..],
            &["--clients", "zk"],
            &["--depths", "0"],
            &["--shapes", "threads"],
            &["--releases", "never"],
            &["--duration", "-1"],
            &["--rounds", "x"],
            &["--bogus"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn chart_takes_a_file_and_an_optional_dir() {
        let a = parse(&["chart", "run.jsonl"]).unwrap();
        assert!(
            matches!(a.command, Some(Command::Chart { ref dir, .. }) if dir.as_os_str() == ".")
        );
        let a = parse(&["chart", "run.jsonl", "out"]).unwrap();
        assert!(
            matches!(a.command, Some(Command::Chart { ref dir, .. }) if dir.as_os_str() == "out")
        );
        assert!(parse(&["chart"]).is_err());
    }
}
