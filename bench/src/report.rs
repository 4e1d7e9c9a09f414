//! Output: one JSON object per line (`--json`), or markdown tables with the ratios and the
//! issue's targets.

use std::io::Write;

use crate::locks::CONTENTION_PARAM;
use crate::measure::{Measured, Round};
use crate::{Results, Who};

/// One result as a JSON line (`--json`), and as `zkwire-bench chart` reads it back.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct JsonRow {
    pub(crate) workload: String,
    pub(crate) client: String,
    pub(crate) param: String,
    pub(crate) ops_per_sec: Option<f64>,
    pub(crate) p50_us: Option<f64>,
    pub(crate) p99_us: Option<f64>,
    pub(crate) cpu_us_per_op: Option<f64>,
    pub(crate) allocs_per_op: Option<f64>,
    pub(crate) rss_kb: Option<f64>,
    pub(crate) requests_per_op: Option<f64>,
    pub(crate) fairness: Option<f64>,
    /// Each round's client CPU per operation, in run order (absent in files written
    /// before it was added).
    #[serde(default)]
    pub(crate) cpu_us_per_op_rounds: Vec<Option<f64>>,
}

impl JsonRow {
    fn new(row: &crate::Row) -> Self {
        let m = &row.m;
        // Four decimals are all a measurement carries; a non-finite value is null.
        let num = |v: Option<f64>| v.filter(|v| v.is_finite()).map(|v| (v * 1e4).round() / 1e4);
        Self {
            workload: row.workload.to_owned(),
            client: row.who.name().to_owned(),
            param: row.param.clone(),
            ops_per_sec: num(m.ops_per_sec()),
            p50_us: num(m.p50_us()),
            p99_us: num(m.p99_us()),
            cpu_us_per_op: num(m.cpu_us_per_op()),
            allocs_per_op: num(m.allocs_per_op()),
            rss_kb: num(m.rss_kib),
            requests_per_op: num(m.requests_per_op()),
            fairness: num(m.fairness),
            cpu_us_per_op_rounds: m.rounds.iter().map(|r| num(r.cpu_us_per_op())).collect(),
        }
    }
}

/// One JSON object per line, one line per (workload, client, param).
pub(crate) fn json_lines(results: &Results) -> String {
    results
        .rows
        .iter()
        .map(|row| {
            let line = serde_json::to_string(&JsonRow::new(row)).unwrap_or_default();
            line + "\n"
        })
        .collect()
}

/// Prints [`json_lines`] on standard output.
fn print_json(results: &Results) {
    print!("{}", json_lines(results));
}

fn cell(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".to_owned(),
    }
}

/// Every row, grouped by workload and param.
fn print_table(out: &mut dyn Write, results: &Results) -> std::io::Result<()> {
    writeln!(
        out,
        "| workload | param | client | ops/s | p50 µs | p99 µs | CPU µs/op | allocs/op | RSS KiB | req/op |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for row in &results.rows {
        let m = &row.m;
        let codec = row.workload == "codec";
        // For codec, latency columns say nothing; ns per record is 1e9 / ops/s.
        let ops = if codec {
            format!(
                "{} ({} ns)",
                cell(m.ops_per_sec(), 0),
                cell(m.ops_per_sec().map(|o| 1e9 / o), 1)
            )
        } else {
            cell(m.ops_per_sec(), 0)
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.workload,
            row.param,
            row.who.name(),
            ops,
            cell(m.p50_us(), 1),
            cell(m.p99_us(), 1),
            cell(m.cpu_us_per_op(), if codec { 4 } else { 1 }),
            cell(m.allocs_per_op(), 2),
            cell(m.rss_kib, 1),
            cell(m.requests_per_op(), 2),
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The ratio of each round of `a` to the same round of `b` by `metric`, as
/// "min–max (median)".
fn round_ratios(a: &Measured, b: &Measured, metric: fn(&Round) -> Option<f64>) -> String {
    let mut ratios: Vec<f64> = a
        .rounds
        .iter()
        .zip(b.rounds.iter())
        .filter_map(|(x, y)| ratio(metric(x), metric(y)))
        .collect();
    if ratios.is_empty() {
        return "–".to_owned();
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    format!(
        "{:.2}–{:.2} ({:.2})",
        ratios[0],
        ratios[ratios.len() - 1],
        median
    )
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The best of a client's rows of one workload by ops/s (lock-cycle has two release styles).
fn best<'a>(results: &'a Results, workload: &str, who: Who) -> Option<(&'a str, &'a Measured)> {
    results
        .rows
        .iter()
        .filter(|r| r.workload == workload && r.who == who)
        .max_by(|a, b| {
            a.m.ops_per_sec()
                .unwrap_or(0.0)
                .total_cmp(&b.m.ops_per_sec().unwrap_or(0.0))
        })
        .map(|r| (r.param.as_str(), &r.m))
}

/// What a target asks of its ratio (or value).
#[derive(Debug, Clone, Copy)]
enum Bound {
    AtLeast(f64),
    AtMost(f64),
}

/// What was measured for a target: the table's text, and the ratio (or value) judged.
struct Reading {
    text: String,
    value: Option<f64>,
}

/// zkwire's `a` against another client's `b`, judged on `a / b`; both printed with `digits`
/// decimals, in `unit`.
fn versus(a: Option<f64>, b: Option<f64>, digits: usize, unit: &str) -> Reading {
    Reading {
        text: format!("{} vs {} {unit}", cell(a, digits), cell(b, digits)),
        value: ratio(a, b),
    }
}

/// A value judged as it is, printed with `digits` decimals, in `unit`.
fn value(v: Option<f64>, digits: usize, unit: &str) -> Reading {
    Reading {
        text: format!("{} {unit}", cell(v, digits)),
        value: v,
    }
}

struct Target {
    what: String,
    reading: Reading,
    bound: Bound,
}

impl Target {
    fn new(what: impl Into<String>, reading: Reading, bound: Bound) -> Self {
        Self {
            what: what.into(),
            reading,
            bound,
        }
    }

    /// Whether the target is met, in the table's words: judged on the value as the table
    /// prints it (two decimals), so that 2.004 allocations meet "≤ 2".
    fn met(&self) -> &'static str {
        let Some(r) = self.reading.value.map(|r| (r * 100.0).round() / 100.0) else {
            return "not measured";
        };
        let met = match self.bound {
            Bound::AtLeast(bound) => r >= bound,
            Bound::AtMost(bound) => r <= bound,
        };
        if met {
            "yes"
        } else {
            "**no**"
        }
    }
}

/// The targets, in the table's order.
fn targets(results: &Results) -> Vec<Target> {
    let mut out = lock_targets(results);
    out.extend(io_targets(results));
    out.extend(cost_targets(results));
    out
}

/// The cells where zkwire's cost is compared with the raw recipe's: (what, workload,
/// zkwire's and the relay's param, the raw recipe's param, the CPU bound).
const COST_CELLS: [(&str, &str, &str, &str, f64); 6] = [
    (
        "lock cycle, drop release",
        "lock-cycle",
        "release=drop",
        "release=pipelined",
        1.3,
    ),
    (
        "8 sessions contending",
        "lock-contention",
        CONTENTION_PARAM,
        CONTENTION_PARAM,
        1.3,
    ),
    ("getData K=16", "pipeline", "K=16", "K=16", 1.5),
    ("getData K=256", "pipeline", "K=256", "K=256", 1.5),
    (
        "getData K=16 one task",
        "pipeline",
        "K=16 one task",
        "K=16 one task",
        1.5,
    ),
    (
        "getData K=256 one task",
        "pipeline",
        "K=256 one task",
        "K=256 one task",
        1.5,
    ),
];

/// What zkwire costs against the raw socket doing the same work: client CPU and
/// allocations per operation, and the rate, cell by cell (BENCHMARKS.md, issue 29).
fn cost_targets(results: &Results) -> Vec<Target> {
    let mut out = Vec::new();
    for (what, workload, zk, raw, cpu_bound) in COST_CELLS {
        let (z, r) = (
            results.get(workload, Who::Zkwire, zk),
            results.get(workload, Who::Raw, raw),
        );
        let pair = |f: fn(&Measured) -> Option<f64>| (z.and_then(f), r.and_then(f));
        let (zc, rc) = pair(Measured::cpu_us_per_op);
        let rounds = match (z, r) {
            (Some(z), Some(r)) => round_ratios(z, r, Round::cpu_us_per_op),
            _ => "–".to_owned(),
        };
        let cpu = Reading {
            text: format!(
                "{} vs {} µs/op; per round {rounds}",
                cell(zc, 1),
                cell(rc, 1)
            ),
            value: ratio(zc, rc),
        };
        let cpu_what = format!("{what}: client CPU ≤ {cpu_bound}× raw");
        out.push(Target::new(cpu_what, cpu, Bound::AtMost(cpu_bound)));
        let (zo, ro) = pair(Measured::ops_per_sec);
        let ops = versus(zo, ro, 0, "ops/s");
        out.push(Target::new(
            format!("{what}: ops/s ≥ 0.95× raw"),
            ops,
            Bound::AtLeast(0.95),
        ));
    }
    let allocs = results
        .get("lock-cycle", Who::Zkwire, "release=drop")
        .and_then(Measured::allocs_per_op);
    out.push(Target::new(
        "lock cycle, drop release: allocations ≤ 16",
        value(allocs, 1, "allocs/cycle"),
        Bound::AtMost(16.0),
    ));
    out
}

/// The targets of the lock workloads.
fn lock_targets(results: &Results) -> Vec<Target> {
    let get = |w: &str, who: Who, p: &str| results.get(w, who, p);
    let ops = |w: &str, who: Who, p: &str| get(w, who, p).and_then(Measured::ops_per_sec);
    // Locks: one round trip per uncontended cycle.
    let (zd, za) = (
        ops("lock-cycle", Who::Zkwire, "release=drop"),
        ops("lock-cycle", Who::Zkwire, "release=await"),
    );
    let (rp, kd, ka) = (
        ops("lock-cycle", Who::Raw, "release=pipelined"),
        ops("lock-cycle", Who::Kezhuw, "release=drop"),
        ops("lock-cycle", Who::Kezhuw, "release=await"),
    );
    let kezhuw_best = match (kd, ka) {
        (Some(d), Some(a)) => Some(d.max(a)),
        (d, a) => d.or(a),
    };
    let contention = |who| get("lock-contention", who, CONTENTION_PARAM);
    let (zc, kc) = (contention(Who::Zkwire), contention(Who::Kezhuw));
    let (zco, kco) = (
        zc.and_then(Measured::ops_per_sec),
        kc.and_then(Measured::ops_per_sec),
    );
    let fair = zc.and_then(|m| m.fairness);
    let fairness = Reading {
        text: format!(
            "{} (kezhuw {})",
            cell(fair, 3),
            cell(kc.and_then(|m| m.fairness), 3)
        ),
        value: fair,
    };
    let cycles = |a, b| versus(a, b, 0, "cycles/s");
    let mut out = vec![
        Target::new(
            "uncontended lock cycle, drop release ≥ 0.9× raw pipelined recipe",
            cycles(zd, rp),
            Bound::AtLeast(0.9),
        ),
        Target::new(
            "uncontended lock cycle, drop release vs kezhuw's best (≈ 1.8–2×)",
            cycles(zd, kezhuw_best),
            Bound::AtLeast(1.8),
        ),
        Target::new(
            "uncontended lock cycle, release awaited ≥ 1.4× kezhuw",
            cycles(za, ka),
            Bound::AtLeast(1.4),
        ),
        Target::new(
            "8 sessions contending ≥ 1.6× kezhuw",
            versus(zco, kco, 0, "acquisitions/s"),
            Bound::AtLeast(1.6),
        ),
        Target::new(
            "8 sessions contending: fairness (Jain) ≥ 0.95",
            fairness,
            Bound::AtLeast(0.95),
        ),
    ];
    for param in ["release=drop", "release=await"] {
        let req = get("lock-cycle", Who::Zkwire, param).and_then(Measured::requests_per_op);
        out.push(Target::new(
            format!("requests per uncontended cycle ({param}) = 3.0"),
            value(req, 2, "requests/cycle"),
            Bound::AtMost(3.05),
        ));
    }
    out
}

/// The targets of reads, writes, allocations and memory.
fn io_targets(results: &Results) -> Vec<Target> {
    let get = |w: &str, who: Who, p: &str| results.get(w, who, p);
    let mut out = Vec::new();
    // Awaited writes and reads at depth, against the raw socket.
    for kind in ["setData", "create"] {
        let p50 = |who| get("write-latency", who, kind).and_then(Measured::p50_us);
        let (z, r) = (p50(Who::Zkwire), p50(Who::Raw));
        let what = format!("awaited {kind} p50 ≤ 1.15× raw");
        out.push(Target::new(
            what,
            versus(z, r, 1, "µs"),
            Bound::AtMost(1.15),
        ));
    }
    // One request at a time; the rates at depth are among the cost targets.
    let ops = |who| get("pipeline", who, "K=1").and_then(Measured::ops_per_sec);
    let k1 = versus(ops(Who::Zkwire), ops(Who::Raw), 0, "ops/s");
    out.push(Target::new(
        "getData K=1 ops/s ≥ 0.9× raw",
        k1,
        Bound::AtLeast(0.9),
    ));
    let allocs = get("pipeline", Who::Zkwire, "K=1").and_then(Measured::allocs_per_op);
    let allocs = value(allocs, 2, "allocs/op");
    out.push(Target::new(
        "allocations per getData (K=1) ≤ 2",
        allocs,
        Bound::AtMost(2.0),
    ));
    let rss = results
        .rows
        .iter()
        .find(|r| r.workload == "sessions" && r.who == Who::Zkwire)
        .and_then(|r| r.m.rss_kib);
    let rss = value(rss, 1, "KiB");
    out.push(Target::new(
        "RSS per idle session ≤ 10 KiB",
        rss,
        Bound::AtMost(10.0),
    ));
    out
}

/// The tables of a run: on stdout, or on stderr when stdout holds the JSON lines (`json`),
/// which are printed first.
pub(crate) fn print(results: &Results, json: bool) -> std::io::Result<()> {
    if json {
        print_json(results);
        let mut err = std::io::stderr().lock();
        print_table(&mut err, results)?;
        print_targets(&mut err, results)
    } else {
        let mut out = std::io::stdout().lock();
        print_table(&mut out, results)?;
        print_targets(&mut out, results)
    }
}

/// The targets, each with the measured ratio and whether it is met; then the ratios
/// of zkwire to the others.
fn print_targets(out: &mut dyn Write, results: &Results) -> std::io::Result<()> {
    writeln!(
        out,
        "| target | measured | ratio / value | met |\n\
         |---|---|---:|---|"
    )?;
    for t in targets(results) {
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            t.what,
            t.reading.text,
            cell(t.reading.value, 2),
            t.met()
        )?;
    }
    writeln!(out)?;
    print_ratios(out, results)?;
    writeln!(out)?;
    print_floor(out, results)
}

/// With `--clients relay`: what the floor of a client with a driver task costs against the
/// raw recipe, and zkwire against that floor, in the cost cells (BENCHMARKS.md, issue 29's
/// sixth pass).
fn print_floor(out: &mut dyn Write, results: &Results) -> std::io::Result<()> {
    if !results.rows.iter().any(|r| r.who == Who::Relay) {
        return Ok(());
    }
    writeln!(
        out,
        "| cell | CPU relay / raw | CPU zkwire / relay | ops/s relay / raw | ops/s zkwire / relay |\n\
         |---|---:|---:|---:|---:|"
    )?;
    let (cpu, ops): (Metric, Metric) = (Measured::cpu_us_per_op, Measured::ops_per_sec);
    for (what, workload, param, raw_param, _) in COST_CELLS {
        let get = |who, param, f: Metric| results.get(workload, who, param).and_then(f);
        let of = |f| {
            let (z, y, r) = (
                get(Who::Zkwire, param, f),
                get(Who::Relay, param, f),
                get(Who::Raw, raw_param, f),
            );
            (cell(ratio(y, r), 2), cell(ratio(z, y), 2))
        };
        let ((cpu_floor, cpu_own), (ops_floor, ops_own)) = (of(cpu), of(ops));
        writeln!(
            out,
            "| {what} | {cpu_floor} | {cpu_own} | {ops_floor} | {ops_own} |"
        )?;
    }
    writeln!(out)
}

/// One number of a measurement.
type Metric = fn(&Measured) -> Option<f64>;

/// zkwire / kezhuw and zkwire / raw per (workload, param), pooled and per round; the best
/// lock-cycle release styles; the codec per record.
fn print_ratios(out: &mut dyn Write, results: &Results) -> std::io::Result<()> {
    writeln!(
        out,
        "| workload | param | metric | zkwire / kezhuw | zkwire / raw | per-round zkwire / kezhuw | per-round zkwire / raw |\n\
         |---|---|---|---:|---:|---|---|"
    )?;
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for row in &results.rows {
        if row.workload == "codec"
            || row.workload == "lock-cycle"
            || seen.contains(&(row.workload, &row.param))
        {
            continue;
        }
        seen.push((row.workload, &row.param));
        print_ratio_row(out, results, row)?;
    }
    let best_ops = |who| best(results, "lock-cycle", who).and_then(|b| b.1.ops_per_sec());
    let z = best_ops(Who::Zkwire);
    if z.is_some() {
        writeln!(
            out,
            "| lock-cycle | best release style of each | cycles/s | {} | {} | | |",
            cell(ratio(z, best_ops(Who::Kezhuw)), 2),
            cell(ratio(z, best_ops(Who::Raw)), 2)
        )?;
    }
    for row in results
        .rows
        .iter()
        .filter(|r| r.workload == "codec" && r.who == Who::Zkwire)
    {
        let raw = results
            .get("codec", Who::Raw, &row.param)
            .and_then(Measured::ops_per_sec);
        // ns per record: raw / zkwire in ops/s is zkwire / raw in time.
        writeln!(
            out,
            "| codec | {} | ns per record (lower is better) | – | {} | | |",
            row.param,
            cell(ratio(raw, row.m.ops_per_sec()), 2)
        )?;
    }
    Ok(())
}

/// The ratios of `row`'s (workload, param), in the metric that matters for the workload.
fn print_ratio_row(
    out: &mut dyn Write,
    results: &Results,
    row: &crate::Row,
) -> std::io::Result<()> {
    let (metric, value): (&str, fn(&Measured) -> Option<f64>) = match row.workload {
        "write-latency" => ("p50 µs (lower is better)", Measured::p50_us),
        "sessions" => ("RSS KiB per session (lower is better)", |m| m.rss_kib),
        "lock-contention" => ("acquisitions/s", Measured::ops_per_sec),
        _ => ("ops/s", Measured::ops_per_sec),
    };
    let get = |who| results.get(row.workload, who, &row.param);
    let z = get(Who::Zkwire);
    let pooled = |who| ratio(z.and_then(value), get(who).and_then(value));
    let paired = |who| match (z, get(who)) {
        (Some(a), Some(b)) if row.workload != "sessions" => {
            let metric: fn(&Round) -> Option<f64> = if row.workload == "write-latency" {
                |r| r.p50_us
            } else {
                |r| r.ops_per_sec
            };
            round_ratios(a, b, metric)
        }
        _ => "–".to_owned(),
    };
    writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} |",
        row.workload,
        row.param,
        metric,
        cell(pooled(Who::Kezhuw), 2),
        cell(pooled(Who::Raw), 2),
        paired(Who::Kezhuw),
        paired(Who::Raw)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Hist, Spent};

    /// `ops` operations in one second for `cpu_us` µs of CPU each.
    fn measured(ops: u64, cpu_us: u64) -> Measured {
        let spent = Spent {
            secs: 1.0,
            cpu_ns: Some(ops * cpu_us * 1000),
            ..Spent::default()
        };
        Measured::new(ops, spent, Hist::new())
    }

    fn floor_table(results: &Results) -> String {
        let mut out = Vec::new();
        print_floor(&mut out, results).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Three rounds of each client, merged as a run merges them: the per-round CPU ratios
    /// pair round i with round i, and dividing by other ops divides every round's CPU.
    #[test]
    fn cpu_is_compared_round_by_round() {
        let rounds = |cpus: [u64; 3]| {
            let mut all = measured(100, cpus[0]);
            for cpu in &cpus[1..] {
                all.merge(&measured(100, *cpu));
            }
            all
        };
        let (zkwire, raw) = (rounds([60, 130, 55]), rounds([50, 100, 50]));
        assert_eq!(
            round_ratios(&zkwire, &raw, Round::cpu_us_per_op),
            "1.10–1.30 (1.20)"
        );
        let halved = measured(100, 60).with_cost_ops(200);
        assert_eq!(halved.cpu_us_per_op(), Some(30.0));
        assert_eq!(halved.rounds[0].cpu_us_per_op(), Some(30.0));
        let target = targets(&{
            let mut results = Results::default();
            results.add("lock-cycle", Who::Zkwire, "release=drop", zkwire);
            results.add("lock-cycle", Who::Raw, "release=pipelined", raw);
            results
        })
        .into_iter()
        .find(|t| t.what.starts_with("lock cycle, drop release: client CPU"))
        .map(|t| t.reading.text);
        assert_eq!(
            target.as_deref(),
            Some("81.7 vs 66.7 µs/op; per round 1.10–1.30 (1.20)")
        );
    }

    #[test]
    fn the_floor_table_compares_the_relay_with_raw_and_zkwire_with_the_relay() {
        let mut results = Results::default();
        results.add(
            "lock-cycle",
            Who::Raw,
            "release=pipelined",
            measured(1000, 50),
        );
        assert_eq!(floor_table(&results), "", "no relay in the run: no table");
        results.add("lock-cycle", Who::Relay, "release=drop", measured(1000, 55));
        results.add("lock-cycle", Who::Zkwire, "release=drop", measured(800, 77));
        let table = floor_table(&results);
        assert!(
            table.contains("| lock cycle, drop release | 1.10 | 1.40 | 1.00 | 0.80 |"),
            "{table}"
        );
        assert!(
            table.contains("| getData K=16 | – | – | – | – |"),
            "{table}"
        );
    }
}
