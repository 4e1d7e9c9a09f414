//! The summary printed at the end of a run: what was done, which faults were injected, the
//! verdicts (each must be 0), and the evidence for every violation found.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use zkwire_testing::partition::View;
use zkwire_testing::proxy::ProxyCounts;

use crate::contender::ContenderEnd;
use crate::faults::{Fault, FaultRecord};
use crate::kills::KillRecord;
use crate::partition::PartitionRecord;
use crate::shared::{bump, lock, Count, Shared, Tallied, Tallies, Tally};
use crate::store::{overlaps, FencedStore, Overlap, Section};
use crate::{HEAL_LIMIT, SHOWN, T};

/// What the end of the run left to judge, besides the shared state.
pub(crate) struct Outcome {
    /// The contenders that wound down, in contender order.
    pub(crate) ends: Vec<ContenderEnd>,
    /// Contenders that did not wind down in time.
    pub(crate) stuck: usize,
    /// The ensemble once healed at the end, or why it was not whole.
    pub(crate) whole_at_end: Result<String, String>,
    /// The lock nodes left behind, or why they could not be listed.
    pub(crate) orphans: Result<Vec<String>, String>,
    /// From the start to the stop.
    pub(crate) wall: Duration,
    /// Stopped by `--max-minutes` rather than by the acquisitions' target.
    pub(crate) timed_out: bool,
    /// The counters of every proxy, summed.
    pub(crate) proxy_totals: ProxyCounts,
}

/// Prints the summary; returns whether every safety check passed.
pub(crate) fn print(sh: &Shared, outcome: &Outcome) -> bool {
    let store = std::mem::take(&mut *lock(&sh.store));
    let found = overlaps(&store.sections);
    let unexcused: Vec<&Overlap> = found.iter().filter(|o| !o.excused).collect();
    let tallies = sh.take_tallies();
    let acquisitions = sh.count(Count::Acquisitions);

    println!();
    println!("== zkwire soak summary (seed {:#x})", sh.settings.seed);
    print_work(sh, acquisitions, &store, &tallies);
    print_faults(sh, &tallies, &outcome.proxy_totals);
    print_kills(sh, &outcome.whole_at_end);
    print_sessions(sh, &tallies);
    print_verdicts(&found, unexcused.len(), &store, &outcome.orphans);
    print_run(outcome, acquisitions);
    print_evidence(sh, &store, &unexcused);

    let orphan_count = outcome.orphans.as_ref().map_or(1, Vec::len);
    let ok = unexcused.is_empty() && store.refused.is_empty() && orphan_count == 0;
    println!("  {:<36} {}", "result", if ok { "PASS" } else { "FAIL" });
    ok
}

/// The contenders' work: acquisitions, critical sections, writes, releases, errors.
fn print_work(sh: &Shared, acquisitions: u64, store: &FencedStore, tallies: &Tallies) {
    println!("  {:<36} {}", "contenders", sh.settings.contenders);
    println!("  {:<36} {}", "acquisitions", acquisitions);
    println!(
        "  {:<36} {} ({} lost before entering, see below)",
        "critical sections entered",
        sh.count(Count::Entered),
        tallies[Tallied::LostBefore].values().sum::<u64>()
    );
    let longs: Vec<&Section> = store.sections.iter().filter(|s| s.long).collect();
    println!(
        "  {:<36} {} ({} cut short by lost())",
        "long holds (0.5-1.5 T) entered",
        longs.len(),
        longs.iter().filter(|s| s.lost.is_some()).count()
    );
    println!("  {:<36} {}", "fenced store writes accepted", store.writes);
    println!(
        "  {:<36} {} ok, {} timed out (left to the background)",
        "releases",
        sh.count(Count::Released),
        sh.count(Count::ReleaseTimeouts)
    );
    println!("  {:<36} {}", "acquire timeouts", sh.count(Count::Timeouts));
    print_tally("acquire errors", &tallies[Tallied::AcquireErrors]);
    print_tally(
        "release errors (other than Lost)",
        &tallies[Tallied::ReleaseErrors],
    );
}

/// The proxy faults by kind, the partitions, and the proxies' own counters.
fn print_faults(sh: &Shared, tallies: &Tallies, proxy_totals: &ProxyCounts) {
    let faults: Vec<FaultRecord> = lock(&sh.faults).clone();
    let partitions: Vec<PartitionRecord> = lock(&sh.partitions).clone();
    let mut by_kind: BTreeMap<Fault, (u64, u64)> = BTreeMap::new();
    for f in &faults {
        let e = by_kind.entry(f.kind).or_default();
        e.0 += 1;
        e.1 += f.proxies.len() as u64;
    }
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(k, (n, p))| format!("{} {n} on {p} proxies", k.name()))
        .collect();
    println!(
        "  {:<36} {} ({})",
        "proxy faults injected",
        faults.len(),
        kinds.join(", ")
    );
    println!(
        "  {:<36} {}",
        "  heavy ones aimed at a long hold",
        faults.iter().filter(|f| f.aimed).count()
    );
    print_partitions(&partitions, &tallies[Tallied::PartitionsSkipped]);
    println!(
        "  {:<36} {} connections reset, {} client frames dropped, {} overflow cuts",
        "proxy counters",
        proxy_totals.reset_connections,
        proxy_totals.client_frames_dropped,
        proxy_totals.overflow_cuts
    );
}

/// The leader kills (those not restarted in detail), and the ensemble at the end if it was
/// not whole.
fn print_kills(sh: &Shared, whole_at_end: &Result<String, String>) {
    let kills: Vec<KillRecord> = lock(&sh.kills).clone();
    let done_kills = kills.iter().filter(|k| k.node.is_some()).count();
    let restarted = kills.iter().filter(|k| k.restarted_at.is_some()).count();
    println!(
        "  {:<36} {done_kills} ({restarted} restarted, {} attempts without a leader to kill)",
        "leader kills",
        kills.len() - done_kills
    );
    for k in kills.iter().filter(|k| k.restarted_at.is_none()) {
        println!(
            "    {} at {}: {}",
            k.node.map_or("-".to_owned(), |n| format!("node {n}")),
            sh.at(k.killed_at),
            k.outcome
        );
    }
    if let Err(e) = whole_at_end {
        println!("  {:<36} {e}", "ensemble at the end");
    }
}

/// Sessions expired or ended, and when `lost()` fired.
fn print_sessions(sh: &Shared, tallies: &Tallies) {
    println!(
        "  {:<36} {} (of {} sessions opened)",
        "sessions expired",
        sh.count(Count::Expired),
        sh.count(Count::Sessions)
    );
    print_tally("sessions ended otherwise", &tallies[Tallied::SessionsEnded]);
    print_tally("lost() before entering", &tallies[Tallied::LostBefore]);
    print_tally("lost() during a section", &tallies[Tallied::LostDuring]);
    print_tally(
        "lost() reported by release()",
        &tallies[Tallied::LostAtRelease],
    );
}

/// The safety verdicts: overlaps, stale writes, orphans.
fn print_verdicts(
    found: &[Overlap],
    unexcused: usize,
    store: &FencedStore,
    orphans: &Result<Vec<String>, String>,
) {
    println!(
        "  {:<36} {} ({} excused: the earlier holder's lost() fired first)",
        "overlapping critical sections",
        found.len(),
        found.len() - unexcused
    );
    println!(
        "  {:<36} {}   (must be 0)",
        "overlaps NOT preceded by lost()", unexcused
    );
    println!(
        "  {:<36} {}   (must be 0)",
        "stale writes refused by the store",
        store.refused.len()
    );
    match orphans {
        Ok(names) => println!(
            "  {:<36} {}   (must be 0){}",
            "orphan lock nodes at the end",
            names.len(),
            if names.is_empty() {
                String::new()
            } else {
                format!(": {names:?}")
            }
        ),
        Err(e) => println!("  {:<36} unknown: {e}", "orphan lock nodes at the end"),
    }
}

/// How the run ended: contenders that did not close cleanly, the wall time, the rate.
fn print_run(outcome: &Outcome, acquisitions: u64) {
    let close_failures: Vec<String> = outcome
        .ends
        .iter()
        .filter_map(|e| {
            e.closed
                .as_ref()
                .err()
                .map(|why| format!("contender {} session {:#x}: {why}", e.who, e.session))
        })
        .collect();
    if !close_failures.is_empty() || outcome.stuck > 0 {
        println!(
            "  {:<36} {} did not close cleanly {close_failures:?}; {} did not wind down",
            "contenders",
            close_failures.len(),
            outcome.stuck
        );
    }
    let wall = outcome.wall;
    println!(
        "  {:<36} {:.1} s{}",
        "wall time",
        wall.as_secs_f64(),
        if outcome.timed_out {
            " (hard stop: --max-minutes reached)"
        } else {
            ""
        }
    );
    println!(
        "  {:<36} {:.1}",
        "acquisitions/s",
        acquisitions as f64 / wall.as_secs_f64().max(1e-9)
    );
}

/// Every overlap not preceded by `lost()` and every stale write (the first [`SHOWN`]),
/// with the faults, partitions and kills around them.
fn print_evidence(sh: &Shared, store: &FencedStore, unexcused: &[&Overlap]) {
    for o in unexcused.iter().take(SHOWN) {
        let a = &store.sections[o.first];
        let b = &store.sections[o.second];
        println!(
            "!! overlap by {:.3} ms not preceded by lost():",
            (a.exit.min(b.exit) - b.enter).as_secs_f64() * 1e3
        );
        println!("    earlier: {}", describe_section(sh, a));
        println!("    later:   {}", describe_section(sh, b));
        print!(
            "{}",
            context(
                sh,
                &[a.holder.who, b.holder.who],
                a.enter.checked_sub(3 * T).unwrap_or(a.enter),
                b.exit
            )
        );
    }
    for r in store.refused.iter().take(SHOWN) {
        println!(
            "!! stale write refused: contender {} token {:#x} < newest {:#x} at {}",
            r.holder.who,
            r.holder.token,
            r.newest,
            sh.at(r.at)
        );
        print!(
            "{}",
            context(
                sh,
                &[r.holder.who],
                r.at.checked_sub(3 * T).unwrap_or(r.at),
                r.at
            )
        );
    }
}

fn describe_section(sh: &Shared, s: &Section) -> String {
    format!(
        "{}{}: [{}, {}] lost {} trusted_until(at enter) {}",
        s.holder,
        if s.long { " (long hold)" } else { "" },
        sh.at(s.enter),
        sh.at(s.exit),
        s.lost.map_or_else(
            || "-".to_owned(),
            |(at, r)| format!("at {} ({r})", sh.at(at))
        ),
        s.trusted_until.map_or_else(|| "-".to_owned(), |u| sh.at(u)),
    )
}

/// The faults that touched `whos`, and the partitions and kills of the ensemble, in
/// `[from, to]`.
fn context(sh: &Shared, whos: &[usize], from: Instant, to: Instant) -> String {
    let nodes = sh.settings.nodes;
    let mut out = String::new();
    for f in lock(&sh.faults).iter() {
        if f.window.end() < from || f.window.at > to {
            continue;
        }
        if !f.proxies.iter().any(|p| whos.contains(&(p / nodes))) {
            continue;
        }
        let on: Vec<String> = f
            .proxies
            .iter()
            .map(|p| format!("c{}/s{}", p / nodes, p % nodes))
            .collect();
        let _ = writeln!(
            out,
            "      fault {} on {} from {} for {:.3}s {}",
            f.kind.name(),
            on.join(","),
            sh.at(f.window.at),
            f.window.lasting.as_secs_f64(),
            f.detail
        );
    }
    for p in lock(&sh.partitions).iter() {
        let end = p.healed_at.unwrap_or(p.window.end());
        if end < from || p.window.at > to {
            continue;
        }
        let _ = writeln!(
            out,
            "      partition {}{}: {} from {} to {}; mid-way view {}; {}",
            p.cut.kind.name(),
            if p.cut.aimed { " (aimed)" } else { "" },
            p.cut.describe(),
            sh.at(p.window.at),
            p.healed_at.map_or_else(|| "-".to_owned(), |h| sh.at(h)),
            p.during
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string),
            match &p.whole_after {
                Some(Ok(d)) => format!("whole {:.1}s after the heal", d.as_secs_f64()),
                Some(Err(e)) => e.clone(),
                None => "not healed".to_owned(),
            }
        );
    }
    for k in lock(&sh.kills).iter() {
        let end = k.restarted_at.unwrap_or(k.killed_at);
        if end < from || k.killed_at > to {
            continue;
        }
        let _ = writeln!(
            out,
            "      leader kill of node {:?} at {}: {}",
            k.node,
            sh.at(k.killed_at),
            k.outcome
        );
    }
    out
}

/// The partitions' lines of the summary: how many of each kind, how many aimed, what the
/// servers saw mid-way, how long the ensemble took to be whole again.
fn print_partitions(partitions: &[PartitionRecord], skipped: &Tally) {
    let mut kinds = Tally::new();
    for p in partitions {
        bump(&mut kinds, p.cut.kind.name());
    }
    print_tally("server partitions", &kinds);
    let aimed: Vec<&PartitionRecord> = partitions.iter().filter(|p| p.cut.aimed).collect();
    let mut aimed_kinds = Tally::new();
    for p in &aimed {
        bump(&mut aimed_kinds, p.cut.kind.name());
    }
    print_tally("  aimed at a long hold's server", &aimed_kinds);
    let looked: Vec<&View> = partitions
        .iter()
        .filter_map(|p| p.during.as_ref())
        .collect();
    println!(
        "  {:<36} {} of {} looked at mid-way (servers' own view: not whole)",
        "  seen by the servers",
        looked.iter().filter(|v| !v.is_whole()).count(),
        looked.len()
    );
    let mut whole: Vec<Duration> = partitions
        .iter()
        .filter_map(|p| p.whole_after.as_ref()?.as_ref().ok().copied())
        .collect();
    whole.sort();
    let failed: Vec<&String> = partitions
        .iter()
        .filter_map(|p| p.whole_after.as_ref()?.as_ref().err())
        .collect();
    println!(
        "  {:<36} median {:.1}s, max {:.1}s ({} not within {:?})",
        "  whole again after the heal",
        whole
            .get(whole.len() / 2)
            .map_or(0.0, Duration::as_secs_f64),
        whole.last().map_or(0.0, Duration::as_secs_f64),
        failed.len(),
        HEAL_LIMIT
    );
    for f in failed.iter().take(SHOWN) {
        println!("    {f}");
    }
    print_tally("  drawn but not injected", skipped);
}

fn print_tally(label: &str, t: &Tally) {
    let total: u64 = t.values().sum();
    let parts: Vec<String> = t.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "  {label:<36} {total}{}",
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    );
}
