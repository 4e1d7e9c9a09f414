//! Unit tests of the proxy's pieces.

use std::time::Duration;

use crate::rng::SplitMix64;
#[test]
fn jitter_draws_stay_in_bounds_and_follow_the_seed() {
    let (min, max) = (Duration::from_millis(500), Duration::from_millis(1500));
    let draws = |seed| {
        let mut rng = SplitMix64(seed);
        (0..1000).map(|_| rng.between(min, max)).collect::<Vec<_>>()
    };
    let a = draws(7);
    assert!(a.iter().all(|d| (min..=max).contains(d)));
    assert_eq!(a, draws(7), "same seed, same delays");
    assert_ne!(a, draws(8));
    // Spread over the whole range: both ends' tenths get draws.
    let tenth = (max - min) / 10;
    assert!(a.iter().any(|d| *d < min + tenth));
    assert!(a.iter().any(|d| *d > max - tenth));
    // Degenerate ranges.
    let mut rng = SplitMix64(1);
    assert_eq!(rng.between(min, min), min);
    assert!(rng.between(Duration::ZERO, Duration::MAX) <= Duration::MAX);
}
