//! Curator's down-instance policy: instances a [`ServiceProvider`](super::ServiceProvider)'s
//! callers said failed are left out of its picks for a while (docs/recipes.md §13).

use std::collections::HashMap;
use std::sync::{Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};

use super::instance::ServiceInstance;

/// When a [`ServiceProvider`](super::ServiceProvider) stops picking an instance that its
/// callers reported with [`note_error`](super::ServiceProvider::note_error) (Curator's
/// `DownInstancePolicy`): once `error_threshold` errors have been noted since the first one,
/// the instance is left out until `timeout` has passed since that first error; then its
/// count starts again from zero. The default is Curator's: 30 s and 2 errors.
///
/// ```
/// use std::time::Duration;
/// use zkwire_recipes::DownInstancePolicy;
///
/// let policy = DownInstancePolicy::new(Duration::from_secs(10), 3);
/// assert_eq!(policy.timeout(), Duration::from_secs(10));
/// assert_eq!(policy.error_threshold(), 3);
/// assert_eq!(DownInstancePolicy::default().error_threshold(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownInstancePolicy {
    timeout: Duration,
    error_threshold: u32,
}

impl Default for DownInstancePolicy {
    fn default() -> Self {
        Self::new(Duration::from_secs(30), 2)
    }
}

impl DownInstancePolicy {
    /// A policy that leaves an instance out after `error_threshold` errors (at least 1),
    /// until `timeout` after the first of them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire_recipes::DownInstancePolicy;
    ///
    /// // One error is enough to skip an instance for five seconds.
    /// let strict = DownInstancePolicy::new(Duration::from_secs(5), 1);
    /// # let _ = strict;
    /// ```
    pub fn new(timeout: Duration, error_threshold: u32) -> Self {
        Self {
            timeout,
            error_threshold: error_threshold.max(1),
        }
    }

    /// How long after its first error an instance may be left out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire_recipes::DownInstancePolicy;
    ///
    /// assert_eq!(DownInstancePolicy::default().timeout(), Duration::from_secs(30));
    /// ```
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How many errors leave an instance out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire_recipes::DownInstancePolicy;
    ///
    /// assert_eq!(DownInstancePolicy::new(Duration::ZERO, 0).error_threshold(), 1);
    /// ```
    pub fn error_threshold(&self) -> u32 {
        self.error_threshold
    }
}

/// The errors noted against a provider's instances, by instance id: when the first was
/// noted and how many since.
#[derive(Debug, Default)]
pub(super) struct DownInstances {
    policy: DownInstancePolicy,
    noted: StdMutex<HashMap<String, (Instant, u32)>>,
}

impl DownInstances {
    pub(super) fn new(policy: DownInstancePolicy) -> Self {
        Self {
            policy,
            noted: StdMutex::default(),
        }
    }

    /// Counts an error of instance `id` at `now`.
    pub(super) fn note(&self, id: &str, now: Instant) {
        let mut noted = self.lock(now);
        let count = &mut noted.entry(id.to_owned()).or_insert((now, 0)).1;
        *count = count.saturating_add(1);
    }

    /// Whether instance `id` may be picked at `now`.
    #[cfg(test)]
    fn is_up(&self, id: &str, now: Instant) -> bool {
        let noted = self.lock(now);
        self.up(&noted, id)
    }

    /// Keeps the instances that may be picked at `now` (one lock for the whole list).
    pub(super) fn retain_up(&self, instances: &mut Vec<ServiceInstance>, now: Instant) {
        let noted = self.lock(now);
        instances.retain(|i| self.up(&noted, &i.id));
    }

    fn up(&self, noted: &HashMap<String, (Instant, u32)>, id: &str) -> bool {
        noted
            .get(id)
            .is_none_or(|&(_, errors)| errors < self.policy.error_threshold)
    }

    /// The map, without the entries whose first error is `timeout` old or older.
    fn lock(&self, now: Instant) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, u32)>> {
        let mut noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        let timeout = self.policy.timeout;
        noted.retain(|_, (first, _)| now.saturating_duration_since(*first) < timeout);
        noted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_down_from_the_threshold_until_the_timeout_after_its_first_error() {
        let down = DownInstances::new(DownInstancePolicy::new(Duration::from_secs(10), 2));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(down.is_up("a", t0));
        down.note("a", at(1));
        assert!(down.is_up("a", at(1)), "one error is under the threshold");
        down.note("a", at(5));
        assert!(!down.is_up("a", at(5)), "two errors: down");
        assert!(down.is_up("b", at(5)), "only the instance noted");
        assert!(!down.is_up("a", at(10)));
        assert!(
            down.is_up("a", at(11)),
            "10 s after the first error: up again"
        );
        down.note("a", at(12));
        assert!(down.is_up("a", at(12)), "the count started again");
    }

    /// A count at its largest stays there (and the instance down): an overflow would have
    /// panicked in a debug build and, wrapped, put the instance back up.
    #[test]
    fn the_error_count_saturates() {
        let down = DownInstances::new(DownInstancePolicy::new(Duration::MAX, u32::MAX));
        let now = Instant::now();
        down.noted
            .lock()
            .unwrap()
            .insert("a".to_owned(), (now, u32::MAX - 1));
        down.note("a", now);
        down.note("a", now);
        assert!(!down.is_up("a", now));
    }
}
