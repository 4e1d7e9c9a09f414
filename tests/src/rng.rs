//! A seeded generator for fault schedules, delays and jitter: SplitMix64 (Steele, Lea and
//! Flood 2014). Tiny and reproducible from its seed, which is all a test or a soak needs to
//! replay a run; not for anything that needs unpredictability.

use std::time::Duration;

/// SplitMix64, seeded with its state: `SplitMix64(seed)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n` is 0; the modulo bias is negligible here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A duration in `[min, max]` (bounds in either order), at nanosecond resolution;
    /// spans beyond 584 years are clamped.
    pub fn between(&mut self, min: Duration, max: Duration) -> Duration {
        let (min, max) = if min <= max { (min, max) } else { (max, min) };
        let span = u64::try_from(max.saturating_sub(min).as_nanos()).unwrap_or(u64::MAX);
        let offset = match span.checked_add(1) {
            Some(n) => self.next_u64() % n,
            None => self.next_u64(),
        };
        min.saturating_add(Duration::from_nanos(offset))
    }

    /// A duration of `[lo_ms, hi_ms]` milliseconds.
    pub fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        self.between(Duration::from_millis(lo_ms), Duration::from_millis(hi_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_bounds_and_follow_the_seed() {
        let (mut a, mut b) = (SplitMix64(7), SplitMix64(7));
        for _ in 0..1000 {
            let d = a.millis(5, 10);
            assert_eq!(d, b.millis(5, 10));
            assert!((Duration::from_millis(5)..=Duration::from_millis(10)).contains(&d));
            assert!(a.below(3) < 3);
            b.below(3);
        }
        assert_eq!(
            SplitMix64(1).between(Duration::ZERO, Duration::ZERO),
            Duration::ZERO
        );
    }
}
