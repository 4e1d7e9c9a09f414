//! `zkw sandbox` (standalone and ensemble) and a small `zkw demo`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::time::Duration;

use common::{command, finish, lines_of, run, signal, zkw};

/// Starts `zkw sandbox ARGS`, uses the server it prints, stops it with Ctrl-C.
fn sandbox_round_trip(args: &[&str]) {
    let mut all = vec!["sandbox"];
    all.extend_from_slice(args);
    let mut sandbox = command(&all).spawn().unwrap();
    let stdout = lines_of(sandbox.stdout.take().unwrap());
    let connect = stdout
        .recv_timeout(Duration::from_secs(90))
        .expect("a connect string");
    assert!(connect.starts_with("127.0.0.1:"), "{connect}");
    assert_eq!(
        zkw(&connect, &["create", "/made-in-sandbox", "yes"]).ok(),
        "/made-in-sandbox\n"
    );
    assert_eq!(zkw(&connect, &["get", "/made-in-sandbox"]).ok(), "yes\n");
    signal(sandbox.id(), "INT");
    let out = finish(sandbox, Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("stopping"), "{out:?}");
    let gone = zkw(&connect, &["--session-timeout", "500ms", "ls", "/"]);
    assert_eq!(gone.fails(69), format!("zkw: cannot connect to {connect}: no ZooKeeper server answered within 500ms (set --server or ZOOKEEPER)"));
}

#[test]
fn sandbox_standalone() {
    sandbox_round_trip(&[]);
}

#[test]
fn sandbox_ensemble() {
    sandbox_round_trip(&["--ensemble", "3"]);
}

#[test]
fn sandbox_rejects_bad_sizes() {
    assert_eq!(
        run(&["sandbox", "--ensemble", "0"]).fails(2),
        "zkw: --ensemble takes 1 to 9 servers"
    );
}

#[test]
fn small_demo_passes() {
    let out = run(&["demo", "--workers", "3", "--rounds", "8"]);
    let summary = out.ok();
    for expected in [
        "acquisitions            24 for 24 rounds  ok",
        "max concurrent holders  1  ok",
        "fencing tokens          strictly increasing  ok",
        "counter                 24 (acquisitions 24)  ok",
        "hand-off latency        p50 ",
        "PASS: every invariant held",
    ] {
        assert!(
            summary.contains(expected),
            "missing {expected:?} in:\n{summary}\n{}",
            out.stderr
        );
    }
    assert!(summary.contains("killed after"), "{summary}");
}
