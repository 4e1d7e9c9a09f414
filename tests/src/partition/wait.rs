//! The servers' own [`View`] of the ensemble, and waiting until it says what a test needs.

use std::fmt;
use std::time::Duration;

use super::ensemble::PartitionedEnsemble;
use crate::server::Mode;

/// Interval between two looks at the servers while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The servers' own view of the ensemble at one moment (see [`PartitionedEnsemble::view`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The mode each node reports with `srvr`, by index; `None` when it is not serving (in
    /// leader election: "This ZooKeeper instance is not currently serving requests") or
    /// cannot be reached.
    pub modes: Vec<Option<Mode>>,
    /// For each node reporting `Mode: leader`, `zk_synced_followers` from its `mntr`
    /// (followers connected and synced); `None` for the others.
    pub synced_followers: Vec<Option<usize>>,
}

impl View {
    /// Nodes reporting `Mode: leader`.
    pub fn leaders(&self) -> Vec<usize> {
        (0..self.modes.len())
            .filter(|&i| self.modes[i] == Some(Mode::Leader))
            .collect()
    }

    /// The leader, when exactly one node reports `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        match self.leaders().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Whether node `i` reports `Mode: follower`.
    pub fn is_following(&self, i: usize) -> bool {
        self.modes.get(i) == Some(&Some(Mode::Follower))
    }

    /// Whether node `i` reports `Mode: leader`.
    pub fn is_leading(&self, i: usize) -> bool {
        self.modes.get(i) == Some(&Some(Mode::Leader))
    }

    /// `zk_synced_followers` of node `i` if it leads.
    pub fn synced_followers_of(&self, i: usize) -> Option<usize> {
        self.synced_followers.get(i).copied().flatten()
    }

    /// Whether the ensemble is whole: one leader, every other node a follower, and the
    /// leader counts all of them as synced.
    pub fn is_whole(&self) -> bool {
        let n = self.modes.len();
        self.leader().is_some_and(|l| {
            (0..n).all(|i| i == l || self.is_following(i))
                && self.synced_followers_of(l) == Some(n - 1)
        })
    }
}

impl fmt::Display for View {
    /// `0:leader(2 synced) 1:follower 2:-`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, mode) in self.modes.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            match mode {
                Some(m) => write!(f, "{i}:{m}")?,
                None => write!(f, "{i}:-")?,
            }
            if let Some(s) = self.synced_followers_of(i) {
                write!(f, "({s} synced)")?;
            }
        }
        Ok(())
    }
}

/// A wait of [`PartitionedEnsemble`] that timed out.
#[derive(Debug, Clone)]
pub struct WaitError {
    /// What was waited for.
    pub what: String,
    /// How long it was waited for.
    pub waited: Duration,
    /// The last view seen.
    pub last: View,
    /// Every node's status and every relay's faults and counters at the time.
    pub status: String,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out after {:?} waiting until {}; last view: {}\n{}",
            self.waited, self.what, self.last, self.status
        )
    }
}

impl std::error::Error for WaitError {}

impl PartitionedEnsemble {
    /// Polls [`view`](Self::view) every 100 ms until `done` accepts one, and returns it.
    ///
    /// # Errors
    /// [`WaitError`] (naming `what`, with the last view and the status) after `timeout`.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&View) -> bool,
    ) -> Result<View, WaitError> {
        let start = std::time::Instant::now();
        loop {
            let view = self.view();
            if done(&view) {
                return Ok(view);
            }
            if start.elapsed() >= timeout {
                return Err(WaitError {
                    what: what.to_owned(),
                    waited: start.elapsed(),
                    last: view,
                    status: self.status(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Waits until the ensemble is whole ([`View::is_whole`]) and returns the leader.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_healed(&self, timeout: Duration) -> Result<usize, WaitError> {
        let view = self.wait_until("the ensemble is whole", timeout, View::is_whole)?;
        // `is_whole` implies one leader.
        view.leader().ok_or_else(|| WaitError {
            what: "the ensemble is whole".to_owned(),
            waited: timeout,
            last: view.clone(),
            status: self.status(),
        })
    }

    /// Waits until node `i` no longer reports `Mode: follower` (in leader election it
    /// answers that it is not serving requests).
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_until_not_following(&self, i: usize, timeout: Duration) -> Result<View, WaitError> {
        self.check_node(i);
        self.wait_until(&format!("node {i} stops following"), timeout, |v| {
            !v.is_following(i)
        })
    }

    /// Waits until node `i` no longer reports `Mode: leader`.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_until_not_leading(&self, i: usize, timeout: Duration) -> Result<View, WaitError> {
        self.check_node(i);
        self.wait_until(&format!("node {i} stops leading"), timeout, |v| {
            !v.is_leading(i)
        })
    }

    /// Waits until a node other than `old` leads with at least a majority (itself included)
    /// synced, and returns it.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_for_leader_change(
        &self,
        old: usize,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        self.check_node(old);
        let majority = self.node_count() / 2 + 1;
        let new_leader = |v: &View| {
            v.leaders()
                .into_iter()
                .find(|&l| l != old && v.synced_followers_of(l).is_some_and(|s| s + 1 >= majority))
        };
        let view = self.wait_until(
            &format!("a node other than {old} leads a majority"),
            timeout,
            |v| new_leader(v).is_some(),
        )?;
        new_leader(&view).ok_or_else(|| WaitError {
            what: format!("a node other than {old} leads a majority"),
            waited: timeout,
            last: view.clone(),
            status: self.status(),
        })
    }

    /// Waits until node `leader` leads with exactly `count` synced followers.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_synced_followers(
        &self,
        leader: usize,
        count: usize,
        timeout: Duration,
    ) -> Result<View, WaitError> {
        self.check_node(leader);
        self.wait_until(
            &format!("node {leader} leads {count} synced followers"),
            timeout,
            |v| v.is_leading(leader) && v.synced_followers_of(leader) == Some(count),
        )
    }
}
