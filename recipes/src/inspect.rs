//! Reading a lock directory from outside: which recipe's layout it holds, and its contenders
//! in the order the recipes (and Curator) rank them, each with whether it holds. What
//! `zkw locks` shows; the names, markers and order are the recipes' own, not a second copy.

use std::cmp::Ordering;

use zkwire::Children;

use crate::error::LockError;
use crate::sequence::{
    sort_children, Contender, ForeignChildPolicy, LATCH_MARKERS, MUTEX_MARKERS, RW_MARKERS,
};

/// A semaphore lease node's marker, as a marker list.
const LEASE_MARKERS: &[&str] = &[crate::semaphore::LEASE_MARKER];

/// The kinds of contender node the lock recipes write, told apart by their names.
///
/// ```
/// use zkwire::Children;
/// use zkwire_recipes::ContenderKind;
///
/// let children: Children = ["_c_1f0c-lock-0000000007"].into_iter().collect();
/// assert_eq!(ContenderKind::of(&children), Some(ContenderKind::Mutex));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContenderKind {
    /// `…-lock-<seq>`: a [`Mutex`](crate::Mutex) (Curator's `InterProcessMutex`), also the
    /// internal mutex of a semaphore ([`SEMAPHORE_LOCKS`]).
    Mutex,
    /// `…-__READ__<seq>` and `…-__WRIT__<seq>`: an [`RwLock`](crate::RwLock) (Curator's
    /// `InterProcessReadWriteLock`).
    ReadWrite,
    /// `…-latch-<seq>`: a [`LeaderLatch`](crate::LeaderLatch) (Curator's `LeaderLatch`).
    Latch,
    /// `…-lease-<seq>` in [`SEMAPHORE_LEASES`]: a [`Semaphore`](crate::Semaphore)'s leases
    /// (Curator's `InterProcessSemaphoreV2`).
    SemaphoreLease,
}

/// The directory of a semaphore's lease nodes, below the semaphore's path.
pub const SEMAPHORE_LEASES: &str = crate::semaphore::LEASES;
/// The directory of a semaphore's internal mutex, below the semaphore's path.
pub const SEMAPHORE_LOCKS: &str = crate::semaphore::LOCKS;

impl ContenderKind {
    /// The kind of lock directory `children` make up: a read/write lock if any name has its
    /// markers, else a latch, else a mutex; `None` when no name is a contender's.
    ///
    /// ```
    /// use zkwire::Children;
    /// use zkwire_recipes::ContenderKind;
    ///
    /// let rw: Children = ["_c_1-__WRIT__0000000002", "_c_2-__READ__0000000003"]
    ///     .into_iter()
    ///     .collect();
    /// assert_eq!(ContenderKind::of(&rw), Some(ContenderKind::ReadWrite));
    /// let config: Children = ["settings"].into_iter().collect();
    /// assert_eq!(ContenderKind::of(&config), None);
    /// ```
    pub fn of(children: &Children) -> Option<Self> {
        let any = |markers: &[&str]| {
            children
                .iter()
                .any(|name| markers.iter().any(|m| name.contains(m)))
        };
        [
            (Self::ReadWrite, RW_MARKERS),
            (Self::Latch, LATCH_MARKERS),
            (Self::Mutex, MUTEX_MARKERS),
            (Self::SemaphoreLease, LEASE_MARKERS),
        ]
        .into_iter()
        .find_map(|(kind, markers)| any(markers).then_some(kind))
    }

    /// The markers a contender's name is sorted by.
    fn markers(self) -> &'static [&'static str] {
        match self {
            Self::Mutex => MUTEX_MARKERS,
            Self::ReadWrite => RW_MARKERS,
            Self::Latch => LATCH_MARKERS,
            Self::SemaphoreLease => LEASE_MARKERS,
        }
    }
}

/// A contender of a lock directory, as [`rank`] finds it.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use zkwire_recipes::{rank, ContenderKind};
///
/// let children = client.get_children_compact("/locks/report").await?;
/// for contender in rank(ContenderKind::Mutex, &children)? {
///     let role = if contender.holds { "holds" } else { "waits" };
///     println!("{} {role} (sequence {:?})", contender.name, contender.sequence);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ranked {
    /// The node's name in the directory.
    pub name: String,
    /// The sequence number it is ranked by; `None` for a foreign child, ranked by its whole
    /// name as Curator ranks it.
    pub sequence: Option<i32>,
    /// Whether it holds: the lock (a latch: leads), a read lock, or, for a
    /// [`SemaphoreLease`](ContenderKind::SemaphoreLease), a lease node.
    pub holds: bool,
}

/// The contenders of a `kind` directory whose listing is `children`, in lock order, each with
/// whether it holds:
/// - a mutex or latch: the first one;
/// - a read/write lock: a writer when nothing ranks before it (a downgrading writer's read
///   node ranks with it), a reader when no writer ranks before it;
/// - a semaphore's leases: every one (whether a lease is granted yet is told by the internal
///   mutex: its first contender still waits for a lease).
///
/// kazoo's contenders (`__lock__`, `__rlock__`) are ranked with Curator's; any other child is
/// ranked by its whole name, as Curator ranks it.
///
/// ```
/// use zkwire::Children;
/// use zkwire_recipes::{rank, ContenderKind};
///
/// let children: Children = [
///     "_c_b-__READ__0000000003",
///     "_c_a-__READ__0000000001",
///     "_c_c-__WRIT__0000000002",
/// ]
/// .into_iter()
/// .collect();
/// let ranked = rank(ContenderKind::ReadWrite, &children)?;
/// let holders: Vec<&str> = ranked.iter().filter(|c| c.holds).map(|c| c.name.as_str()).collect();
/// assert_eq!(holders, ["_c_a-__READ__0000000001"]);
/// # Ok::<(), zkwire_recipes::LockError>(())
/// ```
///
/// # Errors
/// [`LockError::SequenceWrapped`] when a sequence number is negative: the directory's counter
/// wrapped, and no order is right.
pub fn rank(kind: ContenderKind, children: &Children) -> Result<Vec<Ranked>, LockError> {
    let markers = kind.markers();
    let sorted = match sort_children(children, markers, ForeignChildPolicy::OrderKazoo) {
        Err(LockError::ForeignChild { .. }) => {
            sort_children(children, markers, ForeignChildPolicy::CountLikeCurator)?
        }
        sorted => sorted?,
    };
    Ok(sorted
        .iter()
        .enumerate()
        .map(|(i, c)| Ranked {
            name: c.name.to_owned(),
            sequence: c.seq,
            holds: holds(kind, &sorted, i),
        })
        .collect())
}

/// Whether `sorted[i]` holds, by [`rank`]'s rule.
fn holds(kind: ContenderKind, sorted: &[Contender<'_>], i: usize) -> bool {
    let me = &sorted[i];
    // Whether a contender that ranks strictly before ours, and is a writer if
    // `writers_only`, makes ours wait.
    let blocked = |writers_only: bool| {
        sorted
            .iter()
            .any(|c| (!writers_only || c.is_writer()) && c.cmp_key(me) == Ordering::Less)
    };
    match kind {
        ContenderKind::SemaphoreLease => true,
        ContenderKind::ReadWrite => !blocked(!me.is_writer()),
        ContenderKind::Mutex | ContenderKind::Latch => i == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(kind: ContenderKind, names: &[&str]) -> Vec<(String, bool)> {
        let children: Children = names.iter().collect();
        rank(kind, &children)
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.holds))
            .collect()
    }

    fn holders(kind: ContenderKind, names: &[&str]) -> Vec<String> {
        let all = ranked(kind, names);
        all.into_iter()
            .filter(|(_, h)| *h)
            .map(|(n, _)| n)
            .collect()
    }

    #[test]
    fn a_downgrading_writer_and_its_read_node_both_hold() {
        // The read node ties with its writer; a later reader still waits for the writer.
        let names = [
            "_c_w-__WRIT__0000000004",
            "_c_w-__READ__0000000004",
            "_c_r-__READ__0000000005",
        ];
        assert_eq!(
            holders(ContenderKind::ReadWrite, &names),
            ["_c_w-__WRIT__0000000004", "_c_w-__READ__0000000004"].map(String::from)
        );
        // Once the writer lets its write lock go, every reader holds, and a later writer
        // waits.
        let names = [
            "_c_w-__READ__0000000004",
            "_c_r-__READ__0000000005",
            "_c_x-__WRIT__0000000006",
        ];
        assert_eq!(holders(ContenderKind::ReadWrite, &names).len(), 2);
    }

    #[test]
    fn kazoo_and_foreign_children_are_ranked_as_the_recipes_rank_them() {
        // kazoo's contender ranks by its sequence number, between ours.
        let names = [
            "_c_b-lock-0000000003",
            "k__lock__0000000002",
            "_c_a-lock-0000000001",
        ];
        let order: Vec<String> = ranked(ContenderKind::Mutex, &names)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            order,
            [
                "_c_a-lock-0000000001",
                "k__lock__0000000002",
                "_c_b-lock-0000000003"
            ]
        );
        // Another foreign child ranks by its whole name, as Curator ranks it: here, first.
        let names = ["_c_a-lock-0000000001", "0-stray"];
        assert_eq!(holders(ContenderKind::Mutex, &names), ["0-stray"]);
    }

    #[test]
    fn a_wrapped_counter_is_an_error_and_kinds_are_told_by_names() {
        let children: Children = ["_c_a-lock--000000001"].into_iter().collect();
        assert!(matches!(
            rank(ContenderKind::Mutex, &children),
            Err(LockError::SequenceWrapped { .. })
        ));
        let kind = |names: &[&str]| ContenderKind::of(&names.iter().collect());
        assert_eq!(kind(&["_c_a-latch-0000000001"]), Some(ContenderKind::Latch));
        assert_eq!(
            kind(&["_c_a-lock-0000000001", "_c_b-__READ__0000000002"]),
            Some(ContenderKind::ReadWrite)
        );
        assert_eq!(
            kind(&["_c_a-lease-0000000001"]),
            Some(ContenderKind::SemaphoreLease)
        );
        assert_eq!(kind(&["config"]), None);
        assert_eq!(
            holders(
                ContenderKind::SemaphoreLease,
                &["_c_a-lease-0000000001", "_c_b-lease-0000000002"]
            )
            .len(),
            2
        );
    }
}
