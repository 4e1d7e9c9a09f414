//! `zkw revoke` and `zkw lock --revocable` against a real server: a revocation request stops
//! a revocable holder's command and hands the lock on; a holder without `--revocable` keeps
//! it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::time::{Duration, Instant};

use common::{
    assert_no_lock_there, chroot, finish, gated, release, running, scratch, spawn_recording,
    spawn_script, spawn_zkw, wait_file, zkw,
};

/// A holder's command that notes SIGTERM, starts its sleep, then records its pid and node and
/// waits. The sleep starts first: the group's SIGTERM, sent once the node is recorded, then
/// reaches it too, where one started later would outlive the command.
const HOLDER: &str = "trap 'echo term > \"$0/term\"; exit 3' TERM; sleep 60 & \
                      echo $$ > \"$0/pid\"; echo \"$ZKW_LOCK_NODE\" > \"$0/node\"; wait";

#[test]
fn revoke_stops_a_revocable_holder_and_hands_the_lock_on() {
    let cs = chroot("cli-revoke");
    let dir = scratch("revoke");
    let (holder, node, pid) = spawn_recording(&cs, &["lock", "--revocable", "/r"], HOLDER, &dir);
    // A waiter queues behind the holder.
    let waiter = spawn_zkw(&cs, &["lock", "/r", "--", "echo", "acquired"]);

    let asked = Instant::now();
    let out = zkw(&cs, &["revoke", "/r"]);
    assert_eq!(out.ok(), format!("asked the holder of {node} to release\n"));
    let held = finish(holder, Duration::from_secs(20));
    let stopped = asked.elapsed();
    assert_eq!(
        held.fails(76),
        "zkw: lock revoked by request; terminated the command"
    );
    assert_eq!(
        wait_file(&dir.join("term"), Duration::from_secs(5)),
        "term",
        "the command got SIGTERM"
    );
    assert!(!running(pid));
    let waited = finish(waiter, Duration::from_secs(20));
    assert_eq!(waited.ok(), "acquired\n");
    println!(
        "revoke → holder stopped in {stopped:?}, waiter done {:?} after the revoke",
        asked.elapsed()
    );
    assert_eq!(zkw(&cs, &["ls", "/r"]).ok(), "", "no node left");
}

#[test]
fn without_revocable_a_request_is_only_noted() {
    let cs = chroot("cli-revoke-ignored");
    let dir = scratch("revoke-ignored");
    let script = gated("echo \"$ZKW_LOCK_NODE\" > \"$0/node\"", 5);
    let holder = spawn_script(&cs, &["lock", "/r"], &script, &dir);
    let node = wait_file(&dir.join("node"), Duration::from_secs(30));
    // Naming the node explicitly (a child name) works as well as the holder lookup.
    let child = node.rsplit('/').next().unwrap();
    zkw(&cs, &["revoke", "/r", child]).ok();
    std::thread::sleep(Duration::from_millis(500));
    release(&dir);
    let out = finish(holder, Duration::from_secs(20));
    assert_eq!(out.code, Some(5), "the command ran to its end: {out:?}");
    assert!(
        out.stderr
            .contains("revocation of the lock on /r requested; ignored"),
        "{out:?}"
    );
    assert_eq!(zkw(&cs, &["ls", "/r"]).ok(), "");
}

#[test]
fn revoke_without_a_holder_fails() {
    let cs = chroot("cli-revoke-none");
    // A mistyped path is not taken for a free lock.
    assert_no_lock_there(&cs, "revoke", "/nothing");
    zkw(&cs, &["create", "/empty"]).ok();
    assert_eq!(
        zkw(&cs, &["revoke", "/empty"]).fails(1),
        "zkw: /empty: no one holds the lock"
    );
    assert_eq!(
        zkw(&cs, &["revoke", "/empty", "gone-lock-0000000001"]).fails(1),
        "zkw: /empty/gone-lock-0000000001: no such lock node"
    );
}
