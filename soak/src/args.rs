//! The command line (clap), and the settings of a run drawn from it.

use std::time::Duration;

use clap::builder::RangedU64ValueParser;
use zkwire_testing::rng::SplitMix64;

/// Ensemble members by default (`--nodes`).
const NODES: usize = 3;

/// `zkwire-soak`'s command line, which is the run's settings: each value parsed straight into
/// the type the run reads (the flags and defaults `zkwire-bench soak` had).
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "zkwire-soak",
    about = "Mutual exclusion of zkwire's Mutex under faults, partitions and leader kills",
    after_help = "Exit code 2 when a safety check failed (an overlap not preceded by lost(), a \
                  stale write, an orphan lock node)."
)]
pub(crate) struct Settings {
    /// Stop after N acquisitions in all
    #[arg(long, value_name = "N", default_value_t = 100_000,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) acquisitions: u64,
    /// Sessions contending for the lock (2..=64)
    #[arg(long, value_name = "N", default_value_t = 8,
        value_parser = RangedU64ValueParser::<usize>::new().range(2..=64))]
    pub(crate) contenders: usize,
    /// Ensemble members, 3 or 5
    #[arg(long, value_name = "N", default_value_t = NODES, value_parser = nodes)]
    pub(crate) nodes: usize,
    /// The fault schedule's seed: decimal, 0x-hex, or `clock` (drawn from the clock)
    #[arg(long, value_name = "N", default_value = "clock", value_parser = seed)]
    pub(crate) seed: u64,
    /// Hard stop of the run, in minutes (at most a day)
    #[arg(long = "max-minutes", value_name = "M", default_value = "30", value_parser = minutes)]
    pub(crate) max_run: Duration,
    /// Seconds between leader kills (0: never; at most a day)
    #[arg(long = "leader-kill-every", value_name = "SECS", default_value = "20",
        value_parser = seconds)]
    pub(crate) kill_every: Duration,
    /// One acquisition in N holds for 0.5-1.5 T, a target for heavy faults (0: every hold
    /// lasts 0-2 ms)
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub(crate) long_hold_every: u64,
    /// No proxy faults and no partitions (a baseline; combine with --leader-kill-every 0)
    #[arg(long)]
    pub(crate) no_faults: bool,
    /// No partitions between the servers (proxy faults and kills only)
    #[arg(long)]
    pub(crate) no_partitions: bool,
    /// Self-test of the checker: sections ignore lost() and is_held(), and long holds last
    /// 1.5-3 T, so overlaps must be reported (use with a small --long-hold-every)
    #[arg(long)]
    pub(crate) ignore_lost: bool,
}

/// The longest a run or the time between kills may be: a day.
const DAY_SECS: f64 = 86_400.0;

fn nodes(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .ok()
        .filter(|n| [3, 5].contains(n))
        .ok_or_else(|| format!("nodes must be 3 or 5: {v}"))
}

fn seed(v: &str) -> Result<u64, String> {
    if v == "clock" {
        return Ok(clock_seed());
    }
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse::<u64>().ok(),
    };
    parsed.ok_or_else(|| format!("not a seed: {v}"))
}

/// A seed drawn from the clock, for a run that names none (it prints the one it drew).
fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x5eed, |d| d.as_nanos() as u64);
    SplitMix64(nanos).next_u64()
}

fn minutes(v: &str) -> Result<Duration, String> {
    Ok(Duration::from_secs_f64((number(v)? * 60.0).min(DAY_SECS)))
}

fn seconds(v: &str) -> Result<Duration, String> {
    Ok(Duration::from_secs_f64(number(v)?.min(DAY_SECS)))
}

/// A finite number, not negative.
fn number(v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("not a number: {v}"))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn parse(args: &[&str]) -> Result<Settings, clap::Error> {
        let argv = std::iter::once("zkwire-soak").chain(args.iter().copied());
        Settings::try_parse_from(argv)
    }

    #[test]
    fn the_defaults_are_those_of_the_bench_subcommand() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.acquisitions, 100_000);
        assert_eq!(s.contenders, 8);
        assert_eq!(s.nodes, 3);
        assert_eq!(s.max_run, Duration::from_secs(30 * 60));
        assert_eq!(s.kill_every, Duration::from_secs(20));
        assert_eq!(s.long_hold_every, 2000);
        assert!(!s.no_faults && !s.no_partitions && !s.ignore_lost);
    }

    #[test]
    fn flags_parse_and_bad_values_are_refused() {
        let s = parse(&[
            "--acquisitions",
            "500",
            "--seed",
            "0x5eed2611",
            "--max-minutes",
            "2",
            "--leader-kill-every",
            "12.5",
            "--nodes",
            "5",
            "--no-partitions",
        ])
        .unwrap();
        assert_eq!(s.acquisitions, 500);
        assert_eq!(s.seed, 0x5eed_2611);
        assert_eq!(s.max_run, Duration::from_secs(120));
        assert_eq!(s.kill_every, Duration::from_millis(12_500));
        assert_eq!(s.nodes, 5);
        assert!(s.no_partitions);
        assert_eq!(parse(&["--seed", "7"]).unwrap().seed, 7);
        assert!(parse(&["--seed", "clock"]).is_ok());
        assert_eq!(
            parse(&["--max-minutes", "1e9"]).unwrap().max_run,
            Duration::from_secs(24 * 3600)
        );
        // Each refused with a message that says why.
        for (bad, why) in [
            (&["--acquisitions", "0"][..], "0 is not in 1.."),
            (&["--contenders", "1"], "1 is not in 2..=64"),
            (&["--contenders", "x"], "invalid digit"),
            (&["--nodes", "4"], "nodes must be 3 or 5"),
            (&["--seed", "x"], "not a seed: x"),
            (&["--max-minutes", "-1"], "unexpected argument '-1'"),
            (&["--leader-kill-every", "inf"], "not a number: inf"),
            (&["--bogus"], "unexpected argument '--bogus'"),
        ] {
            let message = parse(bad).map(|_| ()).unwrap_err().to_string();
            assert!(message.contains(why), "{bad:?}: {message}");
        }
    }
}
