//! The operator's side of `zkw`: unreadable nodes under `ls -R`, confirmation before large
//! deletions, `--timeout 0`, digest ACLs from plain passwords, `zkw locks`, per-host connect
//! failures, and the interactive shell driven through a pseudo-terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::io::Write;
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    assert_gives_up, assert_lock_free, chroot, command, finish, run, scratch, spawn_holder,
    spawn_shell_pty, spawn_zkw, zkw,
};
use zkwire::{Client, CreateOptions};

/// Runs `f` with a client on the chroot `cs`.
fn with_client(cs: &str, f: impl AsyncFnOnce(Client)) {
    let runtime = common::local_runtime();
    runtime.block_on(async {
        let client = zkwire_testing::support::builder()
            .connect(cs)
            .await
            .unwrap();
        f(client.clone()).await;
        client.close().await.unwrap();
    });
}

#[test]
fn ls_recursive_prints_what_it_can_and_names_unreadable_nodes() {
    let cs = chroot("cli-ls-unreadable");
    for node in ["/t", "/t/a", "/t/secret", "/t/secret/x", "/t/z"] {
        zkw(&cs, &["create", node]).ok();
    }
    // Only someone:pw may read /t/secret; the digest is computed from the plain password.
    zkw(
        &cs,
        &[
            "acl",
            "set",
            "/t/secret",
            "digest:someone:pw:cdrwa",
            "--plain-password",
        ],
    )
    .ok();
    let out = zkw(&cs, &["ls", "-R", "/t"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.stdout, "/t\n/t/a\n/t/secret\n/t/z\n");
    assert_eq!(
        out.stderr,
        "zkw: cannot list /t/secret: not authorized by the ACL (a create or delete is checked \
         against the parent's)\n\
         zkw: 1 node(s) could not be listed; the rest was printed\n"
    );
    let json = zkw(&cs, &["--json", "ls", "-R", "/t"]);
    assert_eq!(json.code, Some(1));
    assert_eq!(
        json.stdout,
        "{\"path\":\"/t\",\"paths\":[\"/t\",\"/t/a\",\"/t/secret\",\"/t/z\"],\"unreadable\":\
         [{\"path\":\"/t/secret\",\"error\":\"not authorized by the ACL (a create or delete \
         is checked against the parent's)\",\"kind\":\"no_auth\"}]}\n"
    );
    // With the credentials the whole tree is there: the hash was the right one.
    let authed = zkw(&cs, &["--auth", "digest:someone:pw", "ls", "-R", "/t"]);
    assert_eq!(authed.ok(), "/t\n/t/a\n/t/secret\n/t/secret/x\n/t/z\n");
}

#[test]
fn acl_digest_ids_that_are_not_hashed_are_warned_about() {
    let cs = chroot("cli-acl-digest");
    zkw(&cs, &["create", "/n"]).ok();
    let out = zkw(
        &cs,
        &[
            "acl",
            "set",
            "/n",
            "digest:bob:plain:cdrwa,world:anyone:cdrwa",
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.starts_with(
            "zkw: warning: the digest id of user \"bob\" does not look hashed (USER:BASE64-SHA1)"
        ),
        "{out:?}"
    );
    let hashed = "digest:bob:sy/kXH5TjDEmzhWaHnnW/fkHPh8=:r";
    let quiet = zkw(&cs, &["acl", "set", "/n", hashed]);
    assert_eq!((quiet.code, quiet.stderr.as_str()), (Some(0), ""));
    let refused = zkw(
        &cs,
        &["acl", "set", "/n", "digest:hunter2:r", "--plain-password"],
    );
    assert!(!refused.fails(2).contains("hunter2"), "{refused:?}");
}

#[test]
fn rm_recursive_asks_before_deleting_the_root_or_a_large_tree() {
    let cs = chroot("cli-rm-confirm");
    zkw(&cs, &["create", "/keep"]).ok();
    // `/` of the chroot: asked, standard input says nothing, nothing goes.
    let out = zkw(&cs, &["rm", "-r", "/"]);
    assert_eq!(out.code, Some(1));
    assert_eq!(
        out.stderr,
        "zkw: delete / and the 1 node(s) below it? [y/N] \n\
         zkw: /: not deleted (not confirmed; --yes skips the question)\n"
    );
    assert_eq!(zkw(&cs, &["ls", "/"]).ok(), "keep\n");
    // 101 nodes below /big: asked; "n" keeps them, "y" deletes them.
    with_client(&cs, async |client| {
        let persistent = CreateOptions::persistent();
        client.create("/big", b"", &persistent).await.unwrap();
        for i in 0..101 {
            client
                .create(&format!("/big/n{i}"), b"", &persistent)
                .await
                .unwrap();
        }
    });
    assert_eq!(answer(&cs, &["rm", "-r", "/big"], "n\n").code, Some(1));
    assert_eq!(zkw(&cs, &["ls", "/big"]).ok().lines().count(), 101);
    let yes = answer(&cs, &["rm", "-r", "/big", "--json"], "y\n");
    assert_eq!(yes.ok(), "{\"path\":\"/big\",\"deleted\":102}\n");
    assert!(yes
        .stderr
        .contains("delete /big and the 101 node(s) below it? [y/N]"));
    // A small tree goes without a question; --yes skips it for `/`.
    zkw(&cs, &["create", "/small"]).ok();
    zkw(&cs, &["rm", "-r", "/small"]).ok();
    zkw(&cs, &["rm", "-r", "/", "--yes"]).ok();
    assert_eq!(zkw(&cs, &["ls", "/"]).ok(), "");
}

/// Runs `zkw --server CS ARGS` with `input` on standard input.
fn answer(cs: &str, args: &[&str], input: &str) -> common::Out {
    let mut all = vec!["--server", cs];
    all.extend_from_slice(args);
    let mut child = command(&all).stdin(Stdio::piped()).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    finish(child, Duration::from_secs(30))
}

#[test]
fn timeout_zero_tries_once_and_locks_shows_holder_and_queue() {
    let cs = chroot("cli-try-once");
    // Free: taken at once, for every kind.
    for (verb, path) in [
        (&["lock"][..], "/free"),
        (&["rlock"], "/free"),
        (&["wlock"], "/free"),
        (&["sem", "--leases", "1"], "/free-sem"),
        (&["leader"], "/free-latch"),
    ] {
        let mut args = verb.to_vec();
        args.extend([path, "--timeout", "0", "--", "true"]);
        zkw(&cs, &args).ok();
    }
    // Taken: every kind fails at once with 73 and leaves no node of its own.
    for (verb, path, noun) in [
        (&["sem", "--leases", "1"][..], "/s", "lease"),
        (&["leader"], "/e", "leadership"),
        (&["wlock"], "/rw", "write lock"),
    ] {
        let dir = scratch(&format!("try-once-{noun}"));
        let mut held = verb.to_vec();
        held.push(path);
        let holder = spawn_holder(&cs, &held, &dir, 30);
        let message = format!("zkw: {noun} on {path} not free (--timeout 0 tried once)");
        assert_gives_up(&cs, &held, "0", &message);
        assert!(stop(holder).code.is_some());
        let left = zkw(&cs, &["ls", "-R", path]).ok().to_owned();
        assert!(
            !left.contains("lock-") && !left.contains("latch-") && !left.contains("lease-"),
            "nodes left: {left}"
        );
    }
    let dir = scratch("try-once");
    let holder = spawn_holder(&cs, &["lock", "/l"], &dir, 30);
    let message = "zkw: lock on /l not free (--timeout 0 tried once)";
    let busy = assert_gives_up(&cs, &["lock", "/l"], "0", message);
    assert_eq!(busy.stdout, "");
    // A second contender queues behind the holder (the try above used sequence 1).
    let waiter = spawn_zkw(&cs, &["lock", "/l", "--", "true"]);
    let shown = locks_listing(&cs, "/l", 3);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "/l: mutex");
    assert!(lines[1].starts_with("holder    seq 0 "), "{shown}");
    assert!(lines[2].starts_with("waiting   seq 2 "), "{shown}");
    assert!(lines[1].contains("-lock-0000000000"), "{shown}");
    let json = zkw(&cs, &["--json", "locks", "/l"]);
    let doc = json.ok();
    assert!(
        doc.starts_with("{\"path\":\"/l\",\"kind\":\"mutex\",\"contenders\":[{\"role\":\"holder\""),
        "{doc}"
    );
    assert!(doc.contains("\"sequence\":2,\"session\":\"0x"), "{doc}");
    assert!(doc.contains("\"data\":\"\",\"data_base64\":\"\""), "{doc}");
    assert!(stop(holder).code.is_some());
    finish(waiter, Duration::from_secs(30)).ok();
    assert_lock_free(&cs, "/l");
}

/// A parent of lock directories, one of them named `locks` (the README's `/app/locks/...`),
/// is not taken for a semaphore: nothing is shown as acquiring.
#[test]
fn locks_on_a_parent_of_lock_directories_shows_no_contender() {
    let cs = chroot("cli-locks-parent");
    let dir = scratch("parent");
    let holder = spawn_holder(&cs, &["lock", "/app/locks/report"], &dir, 30);
    assert_lock_free(&cs, "/app");
    assert!(stop(holder).code.is_some());
}

#[test]
fn locks_shows_a_leader_latch_with_participant_ids() {
    let cs = chroot("cli-locks-latch");
    let dir = scratch("latch");
    let leader = spawn_holder(&cs, &["leader", "/e", "--id", "alpha"], &dir, 30);
    let follower = spawn_zkw(&cs, &["leader", "/e", "--id", "beta", "--", "true"]);
    let shown = locks_listing(&cs, "/e", 3);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "/e: leader-latch");
    // Each contender's role, then its id (the latch node's data).
    let expected = [("leader ", "\"alpha\""), ("waiting ", "\"beta\"")];
    for (line, (role, id)) in lines[1..].iter().zip(expected) {
        assert!(line.starts_with(role) && line.ends_with(id), "{shown}");
    }
    let _ = stop(leader);
    finish(follower, Duration::from_secs(30)).ok();
}

/// `locks` on a read/write lock (two readers hold, a writer waits between them and a later
/// reader waits behind it) and on a semaphore (one lease held; a second contender holds the
/// `locks` mutex while its own lease node waits).
#[test]
fn locks_shows_a_read_write_lock_and_a_semaphore() {
    let cs = chroot("cli-locks-rw-sem");
    let (r1, r2) = (scratch("rw-r1"), scratch("rw-r2"));
    let readers = [
        spawn_holder(&cs, &["rlock", "/rw"], &r1, 30),
        spawn_holder(&cs, &["rlock", "/rw"], &r2, 30),
    ];
    let writer = spawn_zkw(&cs, &["wlock", "/rw", "--", "true"]);
    wait_for(|| (zkw(&cs, &["ls", "/rw"]).ok().lines().count() == 3).then_some(()));
    let late_reader = spawn_zkw(&cs, &["rlock", "/rw", "--", "true"]);
    let shown = locks_listing(&cs, "/rw", 5);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "/rw: rwlock", "{shown}");
    let roles: Vec<(&str, bool)> = lines[1..]
        .iter()
        .map(|l| (l.split_whitespace().next().unwrap(), l.contains("__WRIT__")))
        .collect();
    assert_eq!(
        roles,
        [
            ("holder", false),
            ("holder", false),
            ("waiting", true),
            ("waiting", false)
        ],
        "{shown}"
    );
    for reader in readers {
        let _ = stop(reader);
    }
    finish(writer, Duration::from_secs(30)).ok();
    finish(late_reader, Duration::from_secs(30)).ok();

    let s1 = scratch("sem-1");
    let holder = spawn_holder(&cs, &["sem", "/s", "--leases", "1"], &s1, 30);
    let second = spawn_zkw(&cs, &["sem", "/s", "--leases", "1", "--", "true"]);
    let shown = locks_listing(&cs, "/s", 4);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "/s: semaphore", "{shown}");
    // Each contender's role, then where its node is.
    let expected = [
        ("lease ", "/s/leases/"),
        ("pending ", "/s/leases/"),
        ("acquiring ", "/s/locks/"),
    ];
    for (line, (role, parent)) in lines[1..].iter().zip(expected) {
        assert!(line.starts_with(role) && line.contains(parent), "{shown}");
    }
    // The waiting lease and the `locks` node are the second contender's: one session.
    let session = |line: &str| {
        line.split("session ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(session(lines[2]), session(lines[3]), "{shown}");
    assert_ne!(session(lines[1]), session(lines[3]), "{shown}");
    let _ = stop(holder);
    finish(second, Duration::from_secs(30)).ok();
}

/// `locks` ranks as the recipes do: a downgrading writer's read node (the writer's sequence
/// number) holds with its writer, and a later reader waits for that writer; a wrapped
/// (negative) sequence number is an error, not a rank.
#[test]
fn locks_ranks_a_downgrade_and_refuses_a_wrapped_counter() {
    let cs = common::chroot_with(
        "cli-locks-ranks",
        &[
            "create -p /rw/_c_w-__WRIT__0000000004",
            "create /rw/_c_w-__READ__0000000004",
            "create /rw/_c_r-__READ__0000000005",
            "create -p /wrapped/_c_a-lock--000000001",
        ],
    );
    let out = zkw(&cs, &["locks", "/rw", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(out.ok()).unwrap();
    let roles: Vec<(&str, &str)> = doc["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let node = c["node"].as_str().unwrap();
            (
                node.rsplit('/').next().unwrap(),
                c["role"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("_c_w-__READ__0000000004", "holder"),
            ("_c_w-__WRIT__0000000004", "holder"),
            ("_c_r-__READ__0000000005", "waiting"),
        ]
    );
    let wrapped = zkw(&cs, &["locks", "/wrapped"]);
    assert!(wrapped.fails(1).contains("wrapped"), "{wrapped:?}");
}

#[test]
fn locks_watch_follows_changes() {
    let cs = chroot("cli-locks-watch");
    let mut watcher = spawn_zkw(&cs, &["locks", "/w", "--watch"]);
    let lines = common::lines_of(watcher.stdout.take().unwrap());
    let limit = Duration::from_secs(30);
    common::wait_line(&lines, "/w: no one holds or waits", limit);
    // Held for a second, so that the watcher sees the holder whatever the machine's load
    // (a hold shorter than the watcher's re-read may come and go unseen).
    zkw(&cs, &["lock", "/w", "--", "sleep", "1"]).ok();
    common::wait_line(&lines, "/w: mutex", limit);
    common::wait_line(&lines, "holder", limit);
    common::wait_line(&lines, "/w: no one holds or waits", limit);
    common::signal(watcher.id(), "INT");
    assert_eq!(finish(watcher, limit).code, Some(0));
}

#[test]
fn connect_failures_name_each_host_and_reads_go_to_the_next() {
    let out = run(&[
        "--server",
        "127.0.0.1:1,127.0.0.1:2",
        "--session-timeout",
        "2s",
        "ls",
        "/",
    ]);
    assert_eq!(
        out.fails(69),
        "zkw: cannot connect to 127.0.0.1:1,127.0.0.1:2: 127.0.0.1:1: Connection refused; \
         127.0.0.1:2: Connection refused (set --server or ZOOKEEPER)"
    );
    let cs = chroot("cli-next-host");
    zkw(&cs, &["create", "/here", "yes"]).ok();
    let (hosts, root) = cs.split_once('/').unwrap();
    let both = format!("127.0.0.1:1,{hosts}/{root}");
    assert_eq!(zkw(&both, &["get", "/here"]).ok(), "yes\n");
    let json = run(&["--json", "--server", "127.0.0.1:1", "ls", "/"]);
    assert_eq!(json.code, Some(69));
    assert!(
        json.stderr
            .starts_with("{\"error\":\"cannot connect to 127.0.0.1:1: Connection refused (set"),
        "{json:?}"
    );
    assert!(
        json.stderr
            .ends_with("\"exit_code\":69,\"kind\":\"unavailable\"}\n"),
        "{json:?}"
    );
}

#[test]
fn shell_through_a_pseudo_terminal() {
    let cs = chroot("cli-shell");
    zkw(&cs, &["create", "/alpha", "one"]).ok();
    zkw(&cs, &["create", "/alpha/beta", "two"]).ok();
    zkw(&cs, &["create", "/alpha/two words", "spaced"]).ok();
    let data = scratch("shell-data");
    let mut p = spawn_shell_pty(&cs, &data, &[]);
    // What is typed, then what must appear, in order (each prompt before the next keys:
    // typed-ahead keys are not kept while a verb runs).
    let steps: [(&str, &[&str]); 13] = [
        ("", &["zkw /> "]),
        ("ls\r", &["alpha", "zkw /> "]),
        // Completion of a path read from the server: "get /al" + Tab becomes "get /alpha".
        ("get /al\t", &["get /alpha"]),
        ("\r", &["one", "zkw /> "]),
        // Below the top level too (the directory part, "/alpha/", was listed as given).
        ("get /alpha/be\t", &["get /alpha/beta"]),
        ("\r", &["two", "zkw /> "]),
        // A name with a space goes on the line quoted, so that it stays one word.
        ("get /alpha/tw\t", &["get '/alpha/two words'"]),
        ("\r", &["spaced", "zkw /> "]),
        ("cd alpha\r", &["zkw /alpha> "]),
        ("pwd\r", &["/alpha\r\n", "zkw /alpha> "]),
        ("get beta\r", &["two", "zkw /alpha> "]),
        ("set beta three\r", &["zkw /alpha> "]),
        (
            "get nope\r",
            &["zkw: /alpha/nope: node does not exist", "zkw /alpha> "],
        ),
    ];
    for (keys, expected) in steps {
        p.send(keys).unwrap();
        p.flush().unwrap();
        for text in expected {
            p.exp_string(text)
                .unwrap_or_else(|e| panic!("after {keys:?}: {e}"));
        }
    }
    p.send("exit\r").unwrap();
    p.flush().unwrap();
    p.exp_eof().unwrap();
    // The shell's writes are real, and the lines typed are in the history file.
    assert_eq!(zkw(&cs, &["get", "/alpha/beta"]).ok(), "three\n");
    let history = std::fs::read_to_string(data.join("zkw/history")).unwrap();
    assert!(
        history.contains("cd alpha") && history.contains("set beta three"),
        "{history}"
    );
    let _ = std::fs::remove_dir_all(data);
}

/// A shell on a pseudo-terminal whose connection goes through a fault proxy, at its first
/// prompt, on a chroot where `/n` holds "here"; with what must outlive it (the runtime the
/// proxy runs on, the history directory).
struct ProxiedShell {
    p: rexpect::session::PtySession,
    proxy: zkwire_testing::proxy::FaultProxy,
    _data: common::Scratch,
    _runtime: tokio::runtime::Runtime,
}

/// A fault proxy to the shared server, running on `runtime`.
fn proxy_to_the_shared_server(
    runtime: &tokio::runtime::Runtime,
) -> zkwire_testing::proxy::FaultProxy {
    let server = zkwire_testing::server::shared_server().addr();
    let proxy = zkwire_testing::proxy::FaultProxy::start(server);
    runtime.block_on(proxy).unwrap()
}

fn proxied_shell(name: &str, options: &[&str]) -> ProxiedShell {
    let cs = chroot(name);
    zkw(&cs, &["create", "/n", "here"]).ok();
    let runtime = common::runtime();
    let proxy = proxy_to_the_shared_server(&runtime);
    let (_, root) = cs.split_once('/').unwrap();
    let via = format!("{}/{root}", proxy.connect_string());
    let data = scratch(name);
    let mut p = spawn_shell_pty(&via, &data, options);
    p.exp_string("zkw /> ").unwrap();
    ProxiedShell {
        p,
        proxy,
        _data: data,
        _runtime: runtime,
    }
}

impl ProxiedShell {
    /// `get /n` prints "here" and the prompt comes back; then `exit` ends the shell.
    fn reads_then_exits(mut self) {
        for (keys, expected) in [("get /n\r", "here"), ("", "zkw /> ")] {
            self.p.send(keys).unwrap();
            self.p.flush().unwrap();
            self.p.exp_string(expected).unwrap();
        }
        self.p.send("exit\r").unwrap();
        self.p.flush().unwrap();
        self.p.exp_eof().unwrap();
    }
}

/// Ctrl-C while a verb waits (here a read on a connection that went silent) stops that verb
/// and brings the prompt back; the shell goes on, on its session.
#[test]
fn ctrl_c_in_the_shell_stops_the_verb_not_the_shell() {
    let mut shell = proxied_shell("cli-shell-ctrl-c", &[]);
    shell.proxy.blackhole(true);
    shell.p.send("get /n\r").unwrap();
    shell.p.flush().unwrap();
    // Long enough for the line to be read and the verb to wait on the silent connection.
    thread::sleep(Duration::from_millis(500));
    shell.p.send_control('c').unwrap();
    shell
        .p
        .exp_string("zkw: interrupted while running get")
        .unwrap();
    shell.p.exp_string("zkw /> ").unwrap();
    shell.proxy.blackhole(false);
    shell.reads_then_exits();
}

/// A shell whose session expires (its server did not hear from it for longer than the
/// session timeout) says so, makes a new session once a server answers, and its next line
/// works, rather than every line failing with "session expired".
#[test]
fn the_shell_renews_an_expired_session() {
    let mut shell = proxied_shell("cli-shell-renew", &["--session-timeout", "2s"]);
    // Twice the session timeout without a byte through: the server expires the session.
    shell.proxy.blackhole(true);
    thread::sleep(Duration::from_secs(4));
    shell.proxy.blackhole(false);
    shell.p.exp_string("zkw: session Expired").unwrap();
    shell.p.exp_string("zkw: session Connected").unwrap();
    shell.reads_then_exits();
}

/// Stops a holder of [`spawn_holder`]: SIGTERM to its `zkw`, which passes it on to the
/// command; what `zkw` did (within 30 s).
fn stop(holder: Child) -> common::Out {
    common::signal(holder.id(), "TERM");
    finish(holder, Duration::from_secs(30))
}

/// `zkw locks PATH`'s listing once it has `lines` lines (a heading and a line per contender),
/// polled for up to 30 s.
fn locks_listing(cs: &str, path: &str, lines: usize) -> String {
    wait_for(|| {
        let out = zkw(cs, &["locks", path]);
        (out.ok().lines().count() == lines).then(|| out.stdout.clone())
    })
}

/// Polls `f` every 50 ms for up to 30 s until it returns something.
fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = f() {
            return found;
        }
        assert!(Instant::now() < deadline, "not seen within 30s");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A read whose connection breaks after the server received it (the reply never comes) is
/// sent again, on the next host, within the session timeout: reads are idempotent.
#[test]
fn a_read_cut_after_the_handshake_is_retried_on_the_next_host() {
    let cs = chroot("cli-read-retry");
    zkw(&cs, &["create", "/here", "yes"]).ok();
    let runtime = common::runtime();
    let proxy = proxy_to_the_shared_server(&runtime);
    proxy.cut_after_request(zkwire::proto::OpCode::GetData, 1);
    let (hosts, root) = cs.split_once('/').unwrap();
    // zkw shuffles its hosts: read until a run went through the proxy first (its first
    // getData is cut), at most 20 runs (a chance of 2^-20 that none does).
    let through = format!("{},{hosts}/{root}", proxy.connect_string());
    for _ in 0..20 {
        let out = zkw(&through, &["get", "/here"]);
        assert_eq!(out.ok(), "yes\n", "{out:?}");
        assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
        if proxy.triggered() == 1 {
            break;
        }
    }
    assert_eq!(
        proxy.triggered(),
        1,
        "a read was cut, and answered all the same"
    );
    // Writes are not retried: whether a cut create applied is unknown.
    proxy.cut_after_request(zkwire::proto::OpCode::Create2, 1);
    let only_proxy = format!("{}/{root}", proxy.connect_string());
    let write = zkw(&only_proxy, &["create", "/made"]);
    assert_eq!(proxy.triggered(), 2);
    assert_ne!(write.code, Some(0), "{write:?}");
    drop(proxy);
}
