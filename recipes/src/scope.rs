//! Reentrancy scopes: the explicit form of Curator's per-thread reentrancy.
//!
//! A guard's `scope(future)` runs the future with the guard's hold in a task-local list; an
//! acquire of the same lock (same client, same server path) inside it is granted at once as
//! a nested guard, sending nothing. The future runs inside the caller's own poll, so the
//! scope lasts exactly as long as that future and the guard stays borrowed meanwhile: moving
//! the guard to another task cannot leave its reentrancy behind (docs/recipes.md,
//! "Reentrancy"). Tasks spawned inside a scope do not inherit it, as Java threads do not
//! inherit a lock.

use std::any::Any;
use std::future::Future;
use std::sync::{Arc, Weak};

use crate::coordinator::Coordinator;

tokio::task_local! {
    // Not a registry: a value of the future running in a scope, set and cleared with it.
    static SCOPE: Vec<Scoped>;
}

/// One hold a scope carries.
#[derive(Clone)]
struct Scoped {
    /// The client the hold belongs to.
    coordinator: Weak<Coordinator>,
    /// The lock's server path.
    key: String,
    /// The granted hold, shared with its guards (held weakly: the guard owns it).
    hold: Weak<dyn Any + Send + Sync>,
}

/// Runs `future` with `hold` (of the lock `key` of `coordinator`'s client) added to the
/// holds of the enclosing scopes.
pub(crate) async fn enter<F, H>(
    coordinator: &Arc<Coordinator>,
    key: &str,
    hold: &Arc<H>,
    future: F,
) -> F::Output
where
    F: Future,
    H: Any + Send + Sync,
{
    let mut holds = SCOPE.try_with(Clone::clone).unwrap_or_default();
    let hold: Arc<dyn Any + Send + Sync> = Arc::clone(hold) as Arc<_>;
    holds.push(Scoped {
        coordinator: Arc::downgrade(coordinator),
        key: key.to_owned(),
        hold: Arc::downgrade(&hold),
    });
    drop(hold);
    SCOPE.scope(holds, future).await
}

/// The live holds of type `H` on the lock `key` of `coordinator`'s client that the running
/// scopes carry, innermost last.
pub(crate) fn held<H: Any + Send + Sync>(coordinator: &Arc<Coordinator>, key: &str) -> Vec<Arc<H>> {
    SCOPE
        .try_with(|holds| {
            holds
                .iter()
                .filter(|s| std::ptr::eq(s.coordinator.as_ptr(), Arc::as_ptr(coordinator)))
                .filter(|s| s.key == key)
                .filter_map(|s| s.hold.upgrade()?.downcast::<H>().ok())
                .collect()
        })
        .unwrap_or_default()
}
