//! Seeded draws: a share of `T`, one of a weighted table.

use std::time::Duration;

use zkwire_testing::rng::SplitMix64;

use crate::T;

/// `T` scaled by a factor uniform in `[lo, hi]` percent.
pub(crate) fn of_t(rng: &mut SplitMix64, lo: u32, hi: u32) -> Duration {
    T * (lo + rng.below(u64::from(hi - lo) + 1) as u32) / 100
}

/// One of a weighted table (`None` when every weight is 0).
pub(crate) fn weighted<K: Copy>(rng: &mut SplitMix64, table: &[(K, u64)]) -> Option<K> {
    let total: u64 = table.iter().map(|(_, w)| w).sum();
    if total == 0 {
        return None;
    }
    let mut x = rng.below(total);
    for &(kind, w) in table {
        if x < w {
            return Some(kind);
        }
        x -= w;
    }
    None
}
