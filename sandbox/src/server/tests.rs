//! Unit tests of the server harness's pieces: mode parsing, ports, log tails, and a node
//! whose port is taken.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use super::files::{keep_logs, tail_of, unique_dir};
use super::node::Node;
use super::ports::pick_ports;
use super::runtime::resolve_runtime;
use super::standalone::STANDALONE_MAIN;
use super::{Mode, ServerConfig};

#[test]
fn mode_parsing() {
    assert_eq!(Mode::parse(" leader"), Mode::Leader);
    assert_eq!(Mode::parse("follower\r"), Mode::Follower);
    assert_eq!(Mode::parse("read-only"), Mode::ReadOnly);
    assert_eq!(Mode::parse("weird"), Mode::Other("weird".to_owned()));
    assert!(Mode::Leader.is_quorum_member() && !Mode::Standalone.is_quorum_member());
}

#[test]
fn picked_ports_are_distinct_and_never_reused() {
    let a = pick_ports(30).unwrap();
    let b = pick_ports(30).unwrap();
    let mut all: Vec<u16> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 60);
}

#[test]
fn tail_of_returns_last_lines() {
    let dir = unique_dir("unit").unwrap();
    let file = dir.join("log");
    let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
    fs::write(&file, text).unwrap();
    assert_eq!(tail_of(&file, 2), "line 98\nline 99");
    assert!(tail_of(&dir.join("missing"), 2).starts_with("<cannot open"));
    fs::remove_dir_all(dir).unwrap();
}

/// A node whose client port is taken exits promptly, and the log shows
/// the bind failure the start retry looks for.
#[test]
fn occupied_port_is_detected() {
    let runtime = resolve_runtime().unwrap_or_else(|e| panic!("{e}"));
    let blocker = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = blocker.local_addr().unwrap().port();
    let node = Node::prepare(
        "unit",
        "unit-test server".to_owned(),
        STANDALONE_MAIN,
        (port, None),
        None,
        "",
        &ServerConfig::default(),
        &runtime,
    )
    .unwrap();
    node.spawn("starting").unwrap();
    let err = node
        .wait_ready(
            |m| *m == Mode::Standalone,
            Instant::now() + Duration::from_secs(20),
        )
        .unwrap_err();
    assert!(err.to_string().contains("exited while starting"), "{err}");
    assert!(node.log_mentions_bind_failure(), "{err}");
    let dir = node.dir.clone();
    drop(node);
    assert!(keep_logs() || !dir.exists());
}
