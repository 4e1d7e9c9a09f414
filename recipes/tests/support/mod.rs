//! Helpers shared by the interop tests, `interop.rs` (Apache Curator) and `kazoo.rs` (kazoo):
//! the referee, the stdio of a contender process, and small zkwire helpers.
//!
//! Each test binary includes this module with `mod support;` and uses its own part of it.
#![allow(dead_code)]

pub(crate) mod process;
pub(crate) mod referee;

use std::time::Duration;

use zkwire::Client;

/// A client with a 10 s session, as the contender programs use.
pub(crate) async fn connect(cs: &str) -> Client {
    Client::builder()
        .with_session_timeout(Duration::from_secs(10))
        .connect(cs)
        .await
        .unwrap()
}

/// A short hold of 0–2 ms.
pub(crate) async fn hold(step: usize) {
    match step % 3 {
        0 => tokio::task::yield_now().await,
        ms => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
    }
}
