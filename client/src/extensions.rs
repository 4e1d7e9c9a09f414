//! State that layers built on a client keep per client: one value per type, created on first
//! use and dropped with the client.
//!
//! The recipes keep their in-process coordination here (local lock queues, pending cleanup),
//! so that it belongs to one client instead of to the process: two clients never share it,
//! and it goes when the client goes (docs/recipes.md, "One coordinator per client").

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// One value per type, shared by every handle of one client.
#[derive(Default)]
pub(crate) struct Extensions {
    values: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Extensions {
    /// The value of type `T`, created with `T::default()` on first use.
    pub(crate) fn get_or_default<T: Any + Default + Send + Sync>(&self) -> Arc<T> {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        let id = TypeId::of::<T>();
        if let Some(value) = values
            .get(&id)
            .and_then(|v| Arc::clone(v).downcast::<T>().ok())
        {
            return value;
        }
        let value = Arc::new(T::default());
        values.insert(id, value.clone());
        value
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self
            .values
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Extensions")
            .field("values", &count)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counter(std::sync::atomic::AtomicUsize);

    #[test]
    fn one_value_per_type() {
        let ext = Extensions::default();
        let a = ext.get_or_default::<Counter>();
        a.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let b = ext.get_or_default::<Counter>();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(b.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        let other = ext.get_or_default::<String>();
        assert!(other.is_empty());
    }
}
