//! Connect diagnostics against real listeners: a refused port, a name that does not resolve
//! and a missing chroot each fail with an error naming the cause; failing fast returns at
//! once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use zkwire::error::{ConnectError, FailureCause};
use zkwire::{Client, Error};
use zkwire_testing::server::shared_server;

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn causes(err: &Error) -> Vec<(String, FailureCause)> {
    match err {
        Error::Connect(ConnectError::Unreachable { failures }) => {
            failures.iter().map(|f| (f.host.clone(), f.cause)).collect()
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refused_port_is_named_after_the_session_timeout_or_at_once_failing_fast() {
    let host = format!("127.0.0.1:{}", closed_port());
    let patient = zkwire_testing::support::builder()
        .with_session_timeout(Duration::from_secs(2))
        .connect(&host)
        .await
        .map(drop)
        .expect_err("nothing listens");
    println!("{patient}");
    assert_eq!(causes(&patient), [(host.clone(), FailureCause::Refused)]);
    assert!(patient.to_string().contains("refused"), "{patient}");

    let started = Instant::now();
    let fast = zkwire_testing::support::builder()
        .with_session_timeout(Duration::from_secs(30))
        .with_fail_fast(true)
        .connect(&host)
        .await
        .map(drop)
        .expect_err("nothing listens");
    let took = started.elapsed();
    println!("fail-fast: {fast} after {took:?}");
    assert_eq!(causes(&fast), [(host, FailureCause::Refused)]);
    // Generous: one attempt per host is all it takes (well under a second unloaded).
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_named() {
    let live = shared_server().connect_string();
    let dead = "no-such-host.invalid:2181";
    // With a live host beside it, failing fast does not give up: the live one connects.
    let client = zkwire_testing::support::builder()
        .with_fail_fast(true)
        .connect(&format!("{dead},{live}"))
        .await
        .unwrap();
    client.close().await.unwrap();

    let err = zkwire_testing::support::builder()
        .with_session_timeout(Duration::from_secs(10))
        .with_fail_fast(true)
        .connect(dead)
        .await
        .map(drop)
        .expect_err("does not resolve");
    println!("{err}");
    assert_eq!(
        causes(&err),
        [(dead.to_owned(), FailureCause::Unresolvable)]
    );
}

#[tokio::test]
async fn a_missing_chroot_is_its_own_error() {
    let cs = format!(
        "{}/no-such-chroot-{}",
        shared_server().connect_string(),
        std::process::id()
    );
    let err = Client::connect(&cs).await.map(drop).expect_err("no chroot");
    println!("{err}");
    assert!(
        matches!(&err, Error::Connect(ConnectError::NoChroot { chroot }) if chroot.starts_with("/no-such-chroot-")),
        "{err:?}"
    );
}
