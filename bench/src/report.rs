//! Output: one JSON object per line (`--json`), or markdown tables with the ratios and the
//! issue's targets.

use std::io::Write;

use crate::measure::Measured;
use crate::{Results, Who};

fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let s = format!("{v:.4}");
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        }
        _ => "null".to_owned(),
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One line per (workload, client, param), with exactly the fields of issue 8.
pub(crate) fn print_json(results: &Results) {
    for row in &results.rows {
        let m = &row.m;
        println!(
            "{{\"workload\":{},\"client\":{},\"param\":{},\"ops_per_sec\":{},\"p50_us\":{},\"p99_us\":{},\"cpu_us_per_op\":{},\"allocs_per_op\":{},\"rss_kb\":{}}}",
            json_str(row.workload),
            json_str(row.who.name()),
            json_str(&row.param),
            num(m.ops_per_sec()),
            num(m.p50_us()),
            num(m.p99_us()),
            num(m.cpu_us_per_op()),
            num(m.allocs_per_op()),
            num(m.rss_kib),
        );
    }
}

fn cell(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".to_owned(),
    }
}

/// Every row, grouped by workload and param.
pub(crate) fn print_table(out: &mut dyn Write, results: &Results) -> std::io::Result<()> {
    writeln!(
        out,
        "| workload | param | client | ops/s | p50 µs | p99 µs | CPU µs/op | allocs/op | RSS KiB |"
    )?;
    writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---:|")?;
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
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.workload,
            row.param,
            row.who.name(),
            ops,
            cell(m.p50_us(), 1),
            cell(m.p99_us(), 1),
            cell(m.cpu_us_per_op(), if codec { 4 } else { 1 }),
            cell(m.allocs_per_op(), 2),
            cell(m.rss_kib, 1),
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The ratio of each round of `a` to the same round of `b` (ops/s, or p50 when `latency`),
/// as "min–max (median)".
fn round_ratios(a: &Measured, b: &Measured, latency: bool) -> String {
    let pick = |r: &(Option<f64>, Option<f64>)| if latency { r.1 } else { r.0 };
    let mut ratios: Vec<f64> = a
        .rounds
        .iter()
        .zip(b.rounds.iter())
        .filter_map(|(x, y)| ratio(pick(x), pick(y)))
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

struct Target {
    what: String,
    measured: String,
    ratio: Option<f64>,
    /// The ratio must be at least (`true`) or at most (`false`) `bound`.
    at_least: bool,
    bound: f64,
}

fn targets(results: &Results) -> Vec<Target> {
    let get = |w: &str, who: Who, p: &str| results.get(w, who, p);
    let ops = |w: &str, who: Who, p: &str| get(w, who, p).and_then(Measured::ops_per_sec);
    let mut out = Vec::new();
    let (z1, k1, r1) = (
        ops("pipeline", Who::Zkwire, "K=1"),
        ops("pipeline", Who::Kezhuw, "K=1"),
        ops("pipeline", Who::Raw, "K=1"),
    );
    out.push(Target {
        what: "awaited getData (K=1) ≥ 0.95× raw".into(),
        measured: format!("{} vs {} ops/s", cell(z1, 0), cell(r1, 0)),
        ratio: ratio(z1, r1),
        at_least: true,
        bound: 0.95,
    });
    out.push(Target {
        what: "awaited getData (K=1) ≥ 1.3× kezhuw".into(),
        measured: format!("{} vs {} ops/s", cell(z1, 0), cell(k1, 0)),
        ratio: ratio(z1, k1),
        at_least: true,
        bound: 1.3,
    });
    let p50 = |who| get("write-latency", who, "setData").and_then(Measured::p50_us);
    let (zs, rs) = (p50(Who::Zkwire), p50(Who::Raw));
    out.push(Target {
        what: "setData p50 ≤ 1.1× raw".into(),
        measured: format!("{} vs {} µs", cell(zs, 1), cell(rs, 1)),
        ratio: ratio(zs, rs),
        at_least: false,
        bound: 1.1,
    });
    for k in ["K=1", "K=16", "K=256"] {
        let cpu = |who| get("pipeline", who, k).and_then(Measured::cpu_us_per_op);
        let (zc, kc) = (cpu(Who::Zkwire), cpu(Who::Kezhuw));
        out.push(Target {
            what: format!("client CPU/op ≤ ½ kezhuw (getData {k})"),
            measured: format!("{} vs {} µs", cell(zc, 2), cell(kc, 2)),
            ratio: ratio(zc, kc),
            at_least: false,
            bound: 0.5,
        });
    }
    for k in ["K=1", "K=16", "K=256"] {
        let allocs = get("pipeline", Who::Zkwire, k).and_then(Measured::allocs_per_op);
        out.push(Target {
            what: format!("≤ 2 allocations per request (getData {k})"),
            measured: format!("{} allocs/op", cell(allocs, 2)),
            ratio: allocs,
            at_least: false,
            bound: 2.0,
        });
    }
    let zb = best(results, "lock-cycle", Who::Zkwire);
    let kb = best(results, "lock-cycle", Who::Kezhuw);
    let (zo, ko) = (
        zb.and_then(|b| b.1.ops_per_sec()),
        kb.and_then(|b| b.1.ops_per_sec()),
    );
    out.push(Target {
        what: "uncontended lock-cycle ≥ 2× kezhuw (best release style each)".into(),
        measured: format!(
            "{} ({}) vs {} ({}) cycles/s",
            cell(zo, 0),
            zb.map_or("–", |b| b.0),
            cell(ko, 0),
            kb.map_or("–", |b| b.0)
        ),
        ratio: ratio(zo, ko),
        at_least: true,
        bound: 2.0,
    });
    let contention = |who| {
        results
            .rows
            .iter()
            .find(|r| r.workload == "lock-contention" && r.who == who)
            .and_then(|r| r.m.ops_per_sec())
    };
    let (zc, kc) = (contention(Who::Zkwire), contention(Who::Kezhuw));
    out.push(Target {
        what: "8-session contention ≥ 1.5× kezhuw".into(),
        measured: format!("{} vs {} acquisitions/s", cell(zc, 0), cell(kc, 0)),
        ratio: ratio(zc, kc),
        at_least: true,
        bound: 1.5,
    });
    let rss = results
        .rows
        .iter()
        .find(|r| r.workload == "sessions" && r.who == Who::Zkwire)
        .and_then(|r| r.m.rss_kib);
    out.push(Target {
        what: "RSS per idle session ≤ 16 KiB".into(),
        measured: format!("{} KiB", cell(rss, 1)),
        ratio: rss,
        at_least: false,
        bound: 16.0,
    });
    out
}

/// The targets, each with the measured ratio and whether it is met.
pub(crate) fn print_targets(out: &mut dyn Write, results: &Results) -> std::io::Result<()> {
    writeln!(out, "| target | measured | ratio / value | met |")?;
    writeln!(out, "|---|---|---:|---|")?;
    for t in targets(results) {
        let met = match t.ratio {
            Some(r) if t.at_least => {
                if r >= t.bound {
                    "yes"
                } else {
                    "**no**"
                }
            }
            Some(r) => {
                if r <= t.bound {
                    "yes"
                } else {
                    "**no**"
                }
            }
            None => "not measured",
        };
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            t.what,
            t.measured,
            cell(t.ratio, 2),
            met
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "| workload | param | metric | zkwire / kezhuw | zkwire / raw | per-round zkwire / kezhuw | per-round zkwire / raw |"
    )?;
    writeln!(out, "|---|---|---|---:|---:|---|---|")?;
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for row in &results.rows {
        if row.workload == "codec"
            || row.workload == "lock-cycle"
            || seen.contains(&(row.workload, &row.param))
        {
            continue;
        }
        seen.push((row.workload, &row.param));
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
                round_ratios(a, b, row.workload == "write-latency")
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
        )?;
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
    writeln!(out)?;
    Ok(())
}
