//! What a workload measures: wall time, process CPU time, allocations, latency histograms, RSS.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::GLOBAL;

/// CPU time of the whole process in nanoseconds: the sum of the first field of
/// `/proc/self/task/*/schedstat` (time on CPU, every thread: tokio workers, the peer's reactor
/// thread, blocking threads). `None` off Linux.
pub(crate) fn process_cpu_ns() -> Option<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(entry) = entry else { continue };
        let mut path = entry.path();
        path.push("schedstat");
        // A thread may exit between the listing and the read: skip it.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let ns = text
            .split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())?;
        total += ns;
    }
    Some(total)
}

/// The resident set size of this process in KiB (`VmRSS` of `/proc/self/status`).
pub(crate) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Calls into the allocator so far: allocations plus reallocations (both may take memory).
pub(crate) fn alloc_calls() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

/// Heap bytes in use now (allocated minus freed, reallocations included).
pub(crate) fn heap_bytes() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64 + s.bytes_reallocated as i64
}

/// A log-linear latency histogram in nanoseconds: exact below 128 ns, then 64 buckets per
/// power of two (at most 1.6% error). Recording never allocates.
#[derive(Clone)]
pub(crate) struct Hist {
    counts: Box<[u64]>,
    total: u64,
}

const SUB: u32 = 6; // 64 sub-buckets per power of two
const LINEAR: u64 = 1 << (SUB + 1); // exact below 128
const BUCKETS: usize = 64 * (1 << SUB) + LINEAR as usize;

impl Hist {
    pub(crate) fn new() -> Self {
        Self {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
        }
    }

    fn index(ns: u64) -> usize {
        if ns < LINEAR {
            return ns as usize;
        }
        let msb = 63 - ns.leading_zeros();
        let shift = msb - SUB;
        (shift as usize) * (1 << SUB) + (ns >> shift) as usize
    }

    fn value(i: usize) -> u64 {
        if (i as u64) < LINEAR {
            return i as u64;
        }
        let shift = (i >> SUB) - 1;
        let m = (i - (shift << SUB)) as u64;
        (m << shift) + ((1u64 << shift) >> 1)
    }

    pub(crate) fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = Self::index(ns).min(BUCKETS - 1);
        self.counts[i] += 1;
        self.total += 1;
    }

    pub(crate) fn merge(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
    }

    pub(crate) fn count(&self) -> u64 {
        self.total
    }

    /// The `q` quantile in microseconds, `None` when empty.
    pub(crate) fn quantile_us(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Self::value(i) as f64 / 1000.0);
            }
        }
        None
    }
}

/// Where a time-bounded workload is: warming up, measured, stopping.
#[derive(Debug, Default)]
pub(crate) struct Phase(AtomicU8);

impl Phase {
    pub(crate) const WARMUP: u8 = 0;
    pub(crate) const MEASURE: u8 = 1;
    pub(crate) const STOP: u8 = 2;

    pub(crate) fn get(&self) -> u8 {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn set(&self, phase: u8) {
        self.0.store(phase, Ordering::Release);
    }
}

/// A measurement window: wall time, process CPU and allocator calls between `begin` and `end`,
/// and with [`begin_on`](Window::begin_on) the requests the server received meanwhile.
pub(crate) struct Window {
    start: Instant,
    cpu: Option<u64>,
    allocs: u64,
    /// The server asked, and its `Received` count at the start.
    server: Option<(String, u64)>,
}

/// What a window saw.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Spent {
    pub(crate) secs: f64,
    pub(crate) cpu_ns: Option<u64>,
    pub(crate) allocs: u64,
    /// Requests the server received in the window (its `srvr` counter), when asked.
    pub(crate) requests: Option<u64>,
}

impl Window {
    pub(crate) fn begin() -> Self {
        let cpu = process_cpu_ns();
        let allocs = alloc_calls();
        Self {
            start: Instant::now(),
            cpu,
            allocs,
            server: None,
        }
    }

    /// As [`begin`](Self::begin), also counting the requests the server at `addr` receives
    /// (from every client: the workloads run one client at a time). The server is asked
    /// before the window opens and after it closes, so the asking is not measured.
    pub(crate) fn begin_on(addr: &str) -> Self {
        let received = server_received(addr).ok();
        Self {
            server: received.map(|n| (addr.to_owned(), n)),
            ..Self::begin()
        }
    }

    pub(crate) fn end(self) -> Spent {
        let secs = self.start.elapsed().as_secs_f64();
        let allocs = alloc_calls() - self.allocs;
        let cpu_ns = match (self.cpu, process_cpu_ns()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let requests = self.server.and_then(|(addr, before)| {
            server_received(&addr)
                .ok()
                .map(|after| after.saturating_sub(before))
        });
        Spent {
            secs,
            cpu_ns,
            allocs,
            requests,
        }
    }
}

/// The server's count of packets received (`srvr`'s `Received:` line).
pub(crate) fn server_received(addr: &str) -> Result<u64, crate::BenchError> {
    let response = zkwire_testing::server::four_letter_word(addr, "srvr")
        .map_err(|e| crate::BenchError::msg(format!("srvr: {e}")))?;
    response
        .lines()
        .find_map(|line| line.strip_prefix("Received:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| crate::BenchError::msg("srvr: no Received line"))
}

/// One (workload, client, param) cell, summed over its rounds.
#[derive(Clone)]
pub(crate) struct Measured {
    pub(crate) ops: u64,
    pub(crate) spent: Spent,
    /// Ops the CPU and allocations are divided by (differs from `ops` when one window
    /// serves several rows, as create and delete).
    cost_ops: u64,
    pub(crate) hist: Hist,
    /// Set by workloads that measure throughput differently from `ops / secs`.
    pub(crate) ops_per_sec: Option<f64>,
    pub(crate) rss_kib: Option<f64>,
    /// p50 and p99 measured elsewhere (a child process), instead of `hist`'s.
    pub(crate) quantiles_us: Option<(Option<f64>, Option<f64>)>,
    /// Each round, in run order: rounds of different clients with the same index ran next to
    /// each other, so their ratio is paired against load drift.
    pub(crate) rounds: Vec<Round>,
    /// How evenly contenders were granted (Jain's index: 1 is perfectly even), the worst
    /// round's.
    pub(crate) fairness: Option<f64>,
}

impl Measured {
    pub(crate) fn new(ops: u64, spent: Spent, hist: Hist) -> Self {
        let rate = (spent.secs > 0.0).then(|| ops as f64 / spent.secs);
        let rounds = vec![Round {
            ops_per_sec: rate,
            p50_us: hist.quantile_us(0.5),
            cpu_ns: spent.cpu_ns,
            cost_ops: ops,
        }];
        Self {
            ops,
            spent,
            cost_ops: ops,
            hist,
            ops_per_sec: None,
            rss_kib: None,
            quantiles_us: None,
            rounds,
            fairness: None,
        }
    }

    /// The same measurement with its CPU and allocations divided by `ops` (one window that
    /// serves several rows, as create and delete).
    pub(crate) fn with_cost_ops(mut self, ops: u64) -> Self {
        self.cost_ops = ops;
        for round in &mut self.rounds {
            round.cost_ops = ops;
        }
        self
    }

    pub(crate) fn merge(&mut self, other: &Self) {
        self.ops += other.ops;
        self.cost_ops += other.cost_ops;
        self.spent.secs += other.spent.secs;
        self.spent.allocs += other.spent.allocs;
        self.spent.cpu_ns = match (self.spent.cpu_ns, other.spent.cpu_ns) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.spent.requests = match (self.spent.requests, other.spent.requests) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.fairness = match (self.fairness, other.fairness) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.hist.merge(&other.hist);
        self.rss_kib = self.rss_kib.or(other.rss_kib);
        self.quantiles_us = self.quantiles_us.or(other.quantiles_us);
        self.rounds.extend_from_slice(&other.rounds);
        self.ops_per_sec = match (self.ops_per_sec, other.ops_per_sec) {
            (Some(a), Some(b)) => Some((a + b) / 2.0),
            (a, b) => a.or(b),
        };
    }

    pub(crate) fn ops_per_sec(&self) -> Option<f64> {
        self.ops_per_sec
            .or_else(|| (self.spent.secs > 0.0).then(|| self.ops as f64 / self.spent.secs))
    }

    pub(crate) fn p50_us(&self) -> Option<f64> {
        self.quantiles_us
            .map_or_else(|| self.hist.quantile_us(0.5), |q| q.0)
    }

    pub(crate) fn p99_us(&self) -> Option<f64> {
        self.quantiles_us
            .map_or_else(|| self.hist.quantile_us(0.99), |q| q.1)
    }

    pub(crate) fn cpu_us_per_op(&self) -> Option<f64> {
        us_per_op(self.spent.cpu_ns, self.cost_ops)
    }

    /// Requests the server received per operation (per cycle, per acquisition).
    pub(crate) fn requests_per_op(&self) -> Option<f64> {
        let requests = self.spent.requests?;
        (self.cost_ops > 0).then(|| requests as f64 / self.cost_ops as f64)
    }

    pub(crate) fn allocs_per_op(&self) -> Option<f64> {
        (self.cost_ops > 0).then(|| self.spent.allocs as f64 / self.cost_ops as f64)
    }
}

/// One round of a cell: what rounds of different clients are compared by, pair by pair.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    pub(crate) ops_per_sec: Option<f64>,
    pub(crate) p50_us: Option<f64>,
    cpu_ns: Option<u64>,
    cost_ops: u64,
}

impl Round {
    /// The client's CPU per operation in this round. The CPU of one run swings by more than
    /// a fifth from round to round (the server's JVM shares the two cores), so a ratio of
    /// rounds that ran next to each other says more than one of the pooled figures
    /// (BENCHMARKS.md, issue 29's eighth pass).
    pub(crate) fn cpu_us_per_op(&self) -> Option<f64> {
        us_per_op(self.cpu_ns, self.cost_ops)
    }
}

/// Microseconds per operation of `ns` nanoseconds spent over `ops` operations.
fn us_per_op(ns: Option<u64>, ops: u64) -> Option<f64> {
    let ns = ns?;
    (ops > 0).then(|| ns as f64 / 1000.0 / ops as f64)
}

/// Jain's fairness index of per-contender counts: `(Σx)² / (n·Σx²)`, 1 when all are equal,
/// `1/n` when one contender got everything; `None` without counts.
pub(crate) fn jain(counts: &[u64]) -> Option<f64> {
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let squares: f64 = counts.iter().map(|&c| (c as f64).powi(2)).sum();
    (squares > 0.0).then(|| sum * sum / (counts.len() as f64 * squares))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain(&[5, 5, 5, 5]), Some(1.0));
        assert_eq!(jain(&[8, 0, 0, 0]), Some(0.25));
        assert_eq!(jain(&[]), None);
    }

    #[test]
    fn histogram_quantiles_are_close() {
        let mut h = Hist::new();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.quantile_us(0.5).unwrap_or_default();
        let p99 = h.quantile_us(0.99).unwrap_or_default();
        assert!((p50 - 500.0).abs() < 10.0, "{p50}");
        assert!((p99 - 990.0).abs() < 20.0, "{p99}");
        for ns in [0u64, 1, 127, 128, 129, 1000, 123_456_789] {
            let v = Hist::value(Hist::index(ns)) as f64;
            assert!(
                (v - ns as f64).abs() <= ns as f64 * 0.02 + 1.0,
                "{ns} -> {v}"
            );
        }
    }
}
