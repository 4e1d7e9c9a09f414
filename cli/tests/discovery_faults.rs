//! `register`, `barrier` and `services --watch` when things go wrong: a registered instance
//! comes back on a renewed session after its session expired (zkw says so), Ctrl-C stops
//! the command and unregisters, Ctrl-C while waiting at a barrier leaves no member behind,
//! and `services --watch` prints each change until Ctrl-C.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::time::{Duration, Instant};

use zkwire::Client;
use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::shared_server;
use zkwire_testing::support::connect_with_timeout;

use common::{
    chroot, finish, lines_of, runtime, scratch, signal, spawn_script, spawn_zkw, wait_file,
    wait_line, REGISTER_API,
};

/// How long any one test's `zkw` runs may take.
const LIMIT: Duration = Duration::from_secs(30);

/// A one-worker runtime and a client of the chroot `cs` (10 s session) in it: the test's own
/// view of the server, its session kept alive while the test waits on `zkw`.
fn connected(cs: &str) -> (tokio::runtime::Runtime, Client) {
    let rt = runtime();
    let client = rt.block_on(connect_with_timeout(cs, Duration::from_secs(10)));
    (rt, client)
}

/// The ephemeral owner of `path`, or `None` while it does not exist.
fn owner(rt: &tokio::runtime::Runtime, client: &Client, path: &str) -> Option<i64> {
    rt.block_on(client.exists(path))
        .unwrap()
        .map(|stat| stat.ephemeral_owner)
}

/// Polls until `path`'s owner satisfies `want`; panics after [`LIMIT`].
fn wait_owner(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    path: &str,
    want: impl Fn(Option<i64>) -> bool,
) -> Option<i64> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let now = owner(rt, client, path);
        if want(now) {
            return now;
        }
        assert!(Instant::now() < deadline, "{path}: owner {now:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The session of a `zkw register` expires while its command runs (a blackhole longer than
/// the session timeout): zkw renews it, registers the instance again and says so; Ctrl-C
/// then stops the command and unregisters.
#[test]
fn register_comes_back_after_an_expiry_and_unregisters_on_ctrl_c() {
    let cs = chroot("cli-register-expiry");
    let (rt, observer) = connected(&cs);
    let proxy = rt
        .block_on(FaultProxy::start(shared_server().addr()))
        .unwrap();
    let chroot_path = cs.split_once('/').map(|(_, c)| c).unwrap();
    let via = format!("{}/{chroot_path}", proxy.connect_string());
    let dir = scratch("register-expiry");
    let script = "trap 'echo int > \"$0/trapped\"; exit 7' INT; echo up > \"$0/running\"; \
                  while true; do sleep 0.05; done";
    let mut registered = spawn_script(
        &via,
        &[
            &["--session-timeout", "2s"],
            &REGISTER_API[..],
            &["--id", "api-1"],
        ]
        .concat(),
        script,
        &dir,
    );
    let stderr = lines_of(registered.stderr.take().unwrap());
    wait_file(&dir.join("running"), LIMIT);
    let node = "/services/api/api-1";
    let first = wait_owner(&rt, &observer, node, |o| o.is_some()).unwrap();

    // Longer than the session timeout: the server expires the session.
    proxy.blackhole(true);
    wait_owner(&rt, &observer, node, |o| o.is_none());
    proxy.blackhole(false);
    let second = wait_owner(&rt, &observer, node, |o| o.is_some_and(|o| o != first)).unwrap();
    println!("registered again on session {second:#x} (was {first:#x})");
    wait_line(&stderr, "registered again at /services/api/api-1", LIMIT);

    // Ctrl-C goes to the command, which exits; zkw unregisters.
    signal(registered.id(), "INT");
    assert_eq!(wait_file(&dir.join("trapped"), LIMIT), "int");
    let out = finish(registered, LIMIT);
    assert_eq!(out.code, Some(7), "the command's code: {out:?}");
    assert_eq!(owner(&rt, &observer, node), None, "unregistered");
    rt.block_on(observer.close()).unwrap();
}

/// Ctrl-C while waiting for the other members of a barrier: zkw exits 130 and its member
/// node is gone.
#[test]
fn ctrl_c_while_waiting_at_a_barrier_leaves_no_member() {
    let cs = chroot("cli-barrier-ctrl-c");
    let (rt, observer) = connected(&cs);
    let mut waiting = spawn_zkw(&cs, &["barrier", "/b", "--members", "2", "--", "true"]);
    let deadline = Instant::now() + LIMIT;
    let members = || {
        rt.block_on(observer.get_children("/b"))
            .unwrap_or_default()
            .len()
    };
    while members() == 0 {
        assert!(Instant::now() < deadline, "never entered");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = waiting.stdin.take();
    signal(waiting.id(), "INT");
    let out = finish(waiting, LIMIT);
    assert_eq!(out.code, Some(130), "{out:?}");
    assert!(
        out.stderr
            .contains("interrupted by SIGINT while waiting to enter the barrier /b"),
        "{out:?}"
    );
    assert_eq!(members(), 0, "no member node left");
    rt.block_on(observer.close()).unwrap();
}

/// `services api --watch --json` prints the instances again at each change until Ctrl-C.
#[test]
fn services_watch_prints_each_change_until_ctrl_c() {
    let cs = chroot("cli-services-watch");
    let (rt, client) = connected(&cs);
    let discovery = ServiceDiscovery::new(client.clone(), "/services");
    let mut watching = spawn_zkw(&cs, &["services", "api", "--watch", "--json"]);
    let stdout = lines_of(watching.stdout.take().unwrap());
    wait_line(&stdout, r#""instances":[]"#, LIMIT);
    let instance = ServiceInstance::builder("api")
        .id("w-1")
        .address("10.0.0.9")
        .port(9000)
        .build();
    let registration = rt.block_on(discovery.register(instance)).unwrap();
    let line = wait_line(&stdout, r#""id":"w-1""#, LIMIT);
    assert!(line.contains(r#""port":9000"#), "{line}");
    rt.block_on(registration.unregister()).unwrap();
    wait_line(&stdout, r#""instances":[]"#, LIMIT);
    signal(watching.id(), "INT");
    let out = finish(watching, LIMIT);
    assert!(matches!(out.code, Some(0 | 130)), "{out:?}");
    rt.block_on(client.close()).unwrap();
}
