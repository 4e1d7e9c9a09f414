//! Retrying idempotent operations: exponential backoff with jitter, bounded in attempts and in
//! time.

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::BuildHasher;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Error;

/// The pauses between attempts: doubling from a first delay up to a largest one, each drawn
/// at random from the upper half of its value (so that clients that failed together do not
/// retry together), optionally bounded in attempts and in total time.
///
/// Unbounded by default: [`pause`](Self::pause) then always sleeps and returns `true`.
///
/// ```
/// # async fn run() {
/// use std::time::Duration;
/// use zkwire::Backoff;
///
/// let mut backoff = Backoff::new()
///     .with_delays(Duration::from_millis(10), Duration::from_millis(40))
///     .with_max_attempts(3);
/// assert!(backoff.pause().await); // after the first attempt
/// assert!(backoff.pause().await); // after the second
/// assert!(!backoff.pause().await, "three attempts in all");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    max_attempts: Option<u32>,
    deadline: Option<Instant>,
    /// Attempts made so far (the pauses taken plus one).
    attempts: u32,
    jitter: RandomState,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    /// 50 ms doubling to 1 s, without bounds.
    ///
    /// ```
    /// use zkwire::Backoff;
    /// let mut backoff = Backoff::new();
    /// assert!(backoff.next_delay().is_some()); // no bound: there is always another pause
    /// ```
    pub fn new() -> Self {
        Self {
            first: Duration::from_millis(50),
            max: Duration::from_secs(1),
            max_attempts: None,
            deadline: None,
            attempts: 1,
            jitter: RandomState::new(),
        }
    }

    /// The first pause and the largest one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire::Backoff;
    ///
    /// let (shortest, longest) = (Duration::from_millis(100), Duration::from_secs(5));
    /// let mut backoff = Backoff::new().with_delays(shortest, longest);
    /// // Each pause is drawn from the upper half of its value.
    /// let first = backoff.next_delay().unwrap();
    /// assert!(first >= shortest / 2 && first <= shortest);
    /// ```
    pub fn with_delays(mut self, first: Duration, max: Duration) -> Self {
        self.first = first;
        self.max = max.max(first);
        self
    }

    /// At most `attempts` attempts in all (the first one included).
    ///
    /// ```
    /// use zkwire::Backoff;
    ///
    /// let mut backoff = Backoff::new().with_max_attempts(3);
    /// assert!(backoff.next_delay().is_some()); // before the second attempt
    /// assert!(backoff.next_delay().is_some()); // before the third
    /// assert!(backoff.next_delay().is_none()); // three attempts made
    /// ```
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(attempts.max(1));
        self
    }

    /// No attempt starts more than `limit` from now; the last pause is cut to fit.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use std::time::Duration;
    /// use zkwire::{retry, Backoff};
    ///
    /// // However many attempts fit in 10 s.
    /// let backoff = Backoff::new().with_time_limit(Duration::from_secs(10));
    /// retry(backoff, || client.sync("/")).await?;
    /// # Ok(()) }
    /// ```
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.deadline = Instant::now().checked_add(limit);
        self
    }

    /// The pause before the next attempt, or `None` once the attempts or the time are used
    /// up. Counts the attempt.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire::Backoff;
    ///
    /// let mut backoff = Backoff::new().with_max_attempts(4);
    /// while let Some(delay) = backoff.next_delay() {
    ///     assert!(delay <= Duration::from_secs(1));
    ///     // ...schedule the next attempt `delay` from now...
    /// }
    /// ```
    pub fn next_delay(&mut self) -> Option<Duration> {
        if self.max_attempts.is_some_and(|max| self.attempts >= max) {
            return None;
        }
        let doubling = 1u32 << (self.attempts - 1).min(20);
        let full = self.first.saturating_mul(doubling).min(self.max);
        let delay = self.jittered(full);
        let delay = match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return None;
                }
                delay.min(left)
            }
            None => delay,
        };
        self.attempts = self.attempts.saturating_add(1);
        Some(delay)
    }

    /// Sleeps the next pause and returns `true`, or returns `false` at once when the
    /// attempts or the time are used up.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{Backoff, Error};
    ///
    /// // Wait for /ready to appear, looking less and less often.
    /// let mut backoff = Backoff::new().with_max_attempts(10);
    /// while client.exists("/ready").await?.is_none() {
    ///     if !backoff.pause().await {
    ///         return Err(Error::NoNode);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn pause(&mut self) -> bool {
        match self.next_delay() {
            Some(delay) => {
                tokio::time::sleep(delay).await;
                true
            }
            None => false,
        }
    }

    /// A duration drawn uniformly from `[full / 2, full]`.
    fn jittered(&self, full: Duration) -> Duration {
        let half = full / 2;
        let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        if span == 0 {
            return full;
        }
        let draw = self.jitter.hash_one(self.attempts) % span;
        half + Duration::from_nanos(draw)
    }
}

/// Runs `op` until it succeeds, fails with an error that is not
/// [retryable](Error::is_retryable), or `backoff` runs out (then its last error is returned).
///
/// Only for idempotent operations: a retryable error such as `ConnectionLoss` leaves it
/// unknown whether the failed attempt applied.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use std::time::Duration;
/// use zkwire::{retry, Backoff};
///
/// let backoff = Backoff::new().with_time_limit(Duration::from_secs(10));
/// let (data, _stat) = retry(backoff, || client.get_data("/config")).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// The first error that is not retryable, or the last one once `backoff` is used up.
pub async fn retry<T, F, Fut>(mut backoff: Backoff, mut op: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    loop {
        match op().await {
            Err(e) if e.is_retryable() => {
                tracing::debug!(error = %e, "retrying");
                if !backoff.pause().await {
                    return Err(e);
                }
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_within_their_upper_half_and_stop_at_the_bound() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new()
            .with_delays(ms(100), ms(400))
            .with_max_attempts(5);
        let mut seen = Vec::new();
        while let Some(d) = b.next_delay() {
            seen.push(d);
        }
        assert_eq!(seen.len(), 4, "five attempts, four pauses");
        for (d, full) in seen.iter().zip([100, 200, 400, 400]) {
            assert!(*d >= ms(full) / 2 && *d <= ms(full), "{d:?} for {full} ms");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_time_limit_cuts_the_last_pause_and_ends_the_retries() {
        let mut b = Backoff::new()
            .with_delays(Duration::from_secs(1), Duration::from_secs(1))
            .with_time_limit(Duration::from_millis(1500));
        let start = Instant::now();
        while b.pause().await {}
        let took = start.elapsed();
        assert_eq!(took, Duration::from_millis(1500), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn retry_stops_at_a_lasting_error_and_retries_a_passing_one() {
        let mut calls = 0;
        let r: Result<(), Error> = retry(Backoff::new(), || {
            calls += 1;
            async { Err(Error::NoNode) }
        })
        .await;
        assert_eq!((r, calls), (Err(Error::NoNode), 1));

        let mut calls = 0;
        let r = retry(Backoff::new(), || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(Error::ConnectionLoss)
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(r, Ok(3));

        let bounded = Backoff::new().with_max_attempts(2);
        let r: Result<(), Error> = retry(bounded, || async { Err(Error::ConnectionLoss) }).await;
        assert_eq!(r, Err(Error::ConnectionLoss));
    }
}
