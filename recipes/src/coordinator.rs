//! The recipes' in-process state of one client: one [`Coordinator`] per client, kept in the
//! client itself ([`zkwire::Client::extension`]), so that nothing is shared through the
//! process and everything goes with the client.
//!
//! It holds, weakly, one state per kind and key: the local queue of each mutex (keyed by the
//! lock's server path, chroot resolved, so that every handle and spelling of one lock meets in
//! one queue) and the cleanup worker's queue. A state lives as long as someone uses it (an
//! acquire, a guard, a running worker) and is created again on next use.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use zkwire::Client;

/// States by kind, then by key (so that a lookup borrows the key), held weakly.
type States = HashMap<TypeId, HashMap<String, Weak<dyn Any + Send + Sync>>>;

/// The recipes' in-process state of one client.
#[derive(Default)]
pub(crate) struct Coordinator {
    states: Mutex<States>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
    }
}

impl Coordinator {
    /// The coordinator of `client` (the same for all its handles).
    pub(crate) fn of(client: &Client) -> Arc<Self> {
        client.extension::<Self>()
    }

    /// The state of kind `S` under `key`, created on first use. A lock acquire calls this:
    /// finding a live state allocates nothing.
    pub(crate) fn state<S: Any + Default + Send + Sync>(&self, key: &str) -> Arc<S> {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let of_kind = states.entry(TypeId::of::<S>()).or_default();
        if let Some(state) = of_kind.get(key).and_then(Weak::upgrade) {
            if let Ok(state) = state.downcast::<S>() {
                return state;
            }
        }
        // Creating one: drop the entries no one holds any more first, so the map stays as
        // small as the set of states in use.
        of_kind.retain(|_, state| state.strong_count() > 0);
        let state = Arc::new(S::default());
        let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(&state) as Weak<_>;
        of_kind.insert(key.to_owned(), weak);
        state
    }

    /// The number of live states (for tests).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        states
            .values()
            .flat_map(HashMap::values)
            .filter(|s| s.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Queue(Mutex<Vec<u32>>);

    #[test]
    fn one_state_per_kind_and_key_while_used() {
        let c = Coordinator::default();
        let a = c.state::<Queue>("/a");
        a.0.lock().unwrap().push(1);
        assert!(Arc::ptr_eq(&a, &c.state::<Queue>("/a")));
        assert!(!Arc::ptr_eq(&a, &c.state::<Queue>("/b")));
        let other_kind = c.state::<String>("/a");
        assert!(other_kind.is_empty());
        assert_eq!(c.live(), 2, "the /b queue went with its last user");
        drop(a);
        assert!(
            c.state::<Queue>("/a").0.lock().unwrap().is_empty(),
            "created again"
        );
    }
}
