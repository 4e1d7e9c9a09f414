//! What the chaos tests (`chaos.rs`, `semaphore.rs`) share: a reproducible generator, a
//! connect that rides through faults, and what a worker does with an acquire error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use zkwire::Client;
use zkwire_recipes::LockError;

/// A tiny deterministic generator (xorshift), so that runs are reproducible.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next number, below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A client with a `timeout` session, retried until a server answers within `timeout` (a
/// proxy may be blackholed).
pub(crate) async fn connect_retrying(cs: &str, timeout: Duration) -> Client {
    loop {
        let attempt = zkwire_testing::support::builder()
            .with_session_timeout(timeout)
            .connect(cs);
        if let Ok(Ok(client)) = tokio::time::timeout(timeout, attempt).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether an acquire failed because its session is over.
pub(crate) fn session_over(e: &LockError, client: &Client) -> bool {
    matches!(e, LockError::Client(err) if err.is_terminal()) || client.state().is_terminal()
}

/// What a chaos worker (`who`, in the test `tag`) does with an acquire error other than a
/// timeout: when its session is over, replaces `client` with a new one (a `timeout` session
/// on `cs`), counts it in `new_sessions` and returns true; otherwise records the error in
/// `unexpected`.
pub(crate) async fn after_acquire_error(
    (tag, who): (&str, &str),
    e: LockError,
    client: &mut Client,
    (cs, timeout): (&str, Duration),
    (new_sessions, unexpected): (&AtomicUsize, &StdMutex<Vec<String>>),
) -> bool {
    if session_over(&e, client) {
        println!("{tag}: {who}: {e}; new session");
        *client = connect_retrying(cs, timeout).await;
        new_sessions.fetch_add(1, Ordering::SeqCst);
        return true;
    }
    let what = format!("{who}: {e:?} while {:?}", client.state());
    println!("{tag}: unexpected error: {what}");
    unexpected.lock().unwrap().push(what);
    false
}
