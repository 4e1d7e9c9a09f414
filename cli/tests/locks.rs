//! `lock`, `rlock`, `wlock` and `sem` against a real server: exit codes, exclusion across
//! processes, a lost lock terminating the command, timeouts and signals.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::os::unix::fs::PermissionsExt;
use std::thread;
use std::time::{Duration, Instant};

use common::{
    assert_gives_up, chroot, command, command_under, finish, gated, lines_of, release, running,
    scratch, signal, spawn_holder, spawn_recording, spawn_script, spawn_zkw, wait_file_exists,
    wait_line, zkw, zkw_sh,
};

#[test]
fn exit_codes_and_environment_pass_through() {
    let cs = chroot("cli-lock-codes");
    let env = zkw_sh(
        &cs,
        &["lock", "/l"],
        "echo \"$ZKW_FENCING_TOKEN $ZKW_LOCK_NODE\"",
    );
    let printed = env.ok().trim().to_owned();
    let (token, node) = printed.split_once(' ').unwrap();
    assert!(token.parse::<i64>().unwrap() > 0, "{printed}");
    assert!(
        node.starts_with("/l/_c_") && node.contains("-lock-"),
        "{printed}"
    );
    // The node is gone once zkw exits.
    assert_eq!(zkw(&cs, &["ls", "/l"]).ok(), "");
    assert_eq!(
        zkw(&cs, &["lock", "/l", "--", "sh", "-c", "exit 7"]).code,
        Some(7)
    );
    assert_eq!(
        zkw(&cs, &["lock", "/l", "--", "sh", "-c", "kill -KILL $$"]).code,
        Some(128 + 9)
    );
    // Without `--`, the command starts at the first operand after PATH.
    assert_eq!(
        zkw(&cs, &["lock", "/l", "echo", "--timeout", "x"]).ok(),
        "--timeout x\n"
    );
    let missing = zkw(&cs, &["lock", "/l", "--", "/nonexistent/program"]);
    assert!(
        missing
            .fails(127)
            .contains("cannot run \"/nonexistent/program\""),
        "{missing:?}"
    );
    assert_eq!(
        zkw(&cs, &["lock", "/l", "--", "/etc/passwd"]).code,
        Some(126)
    );
    // A script with no `#!` line is run by the shell, as a shell would (it was refused, 126).
    let dir = scratch("no-shebang");
    let script = dir.join("script");
    std::fs::write(&script, "echo \"from $0: $1\"; exit 5\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.to_str().unwrap();
    let out = zkw(&cs, &["lock", "/l", "--", script, "arg"]);
    assert_eq!(out.code, Some(5), "{out:?}");
    assert_eq!(out.stdout, format!("from {script}: arg\n"));
    assert_eq!(zkw(&cs, &["ls", "/l"]).ok(), "");
}

/// `processes` processes run `zkw VERB…` `rounds` times each, every command failing if
/// another one is inside; returns the fencing tokens in the order the commands ran.
/// `verb(i)` is process `i`'s verb and its options, up to (not including) `--`.
fn take_turns(
    cs: &str,
    name: &str,
    processes: usize,
    rounds: usize,
    verb: fn(usize) -> Vec<String>,
) -> Vec<i64> {
    let dir = scratch(name);
    // mkdir is atomic and fails when the marker exists: two holders at once cannot both pass.
    let script = "mkdir \"$0/inside\" || exit 99; echo \"$ZKW_FENCING_TOKEN\" >> \"$0/tokens\"; \
                  sleep 0.05; rmdir \"$0/inside\"";
    let workers: Vec<_> = (0..processes)
        .map(|i| {
            let (cs, dir) = (cs.to_owned(), dir.to_path_buf());
            let mut args = verb(i);
            args.extend(["--", "sh", "-c", script, dir.to_str().unwrap()].map(String::from));
            thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                (0..rounds).map(|_| zkw(&cs, &args)).collect::<Vec<_>>()
            })
        })
        .collect();
    for worker in workers {
        for out in worker.join().unwrap() {
            assert_eq!(
                out.code,
                Some(0),
                "a command found another holder inside: {out:?}"
            );
        }
    }
    let tokens: Vec<i64> = std::fs::read_to_string(dir.join("tokens"))
        .unwrap()
        .lines()
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), processes * rounds);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens not increasing: {tokens:?}"
    );
    tokens
}

/// Four processes, three rounds each, every command failing if another one is inside.
#[test]
fn lock_excludes_across_four_processes() {
    let cs = chroot("cli-lock-exclusion");
    take_turns(&cs, "exclusion", 4, 3, |_| {
        vec!["lock".into(), "/mutex".into()]
    });
}

/// Starts `zkw VERB… -- sh` keeping its command running; returns the child, the command's
/// node (`ZKW_LOCK_NODE`) and its pid.
fn hold_running(
    cs: &str,
    verb: &[&str],
    dir: &std::path::Path,
) -> (std::process::Child, String, u32) {
    let script = "echo $$ > \"$0/pid\"; echo \"$ZKW_LOCK_NODE\" > \"$0/node\"; exec sleep 60";
    spawn_recording(cs, verb, script, dir)
}

/// Deletes `node`, the lock node of the running `holder`, and waits (at most 30 s) for the
/// holder's `zkw` to exit: what it did.
fn delete_lock_node(cs: &str, node: &str, holder: std::process::Child) -> common::Out {
    zkw(cs, &["rm", node]).ok();
    finish(holder, Duration::from_secs(30))
}

/// Deleting the lock node under a running command: SIGTERM, exit 75, one clear line.
#[test]
fn lost_lock_terminates_the_command() {
    let cs = chroot("cli-lock-lost");
    let dir = scratch("lost");
    let (holder, node, pid) = hold_running(&cs, &["lock", "/lost"], &dir);
    assert!(running(pid));
    let deleted = Instant::now();
    let out = delete_lock_node(&cs, &node, holder);
    assert_eq!(
        out.fails(75),
        "zkw: lock lost (lock node deleted); terminated the command"
    );
    assert!(
        deleted.elapsed() < Duration::from_secs(5),
        "took {:?}",
        deleted.elapsed()
    );
    assert!(!running(pid), "the command survived");
}

/// A command (and its child) ignoring SIGTERM is killed after --kill-after.
#[test]
fn lost_lock_kills_a_command_that_ignores_sigterm() {
    let cs = chroot("cli-lock-stubborn");
    let dir = scratch("stubborn");
    let script = "trap '' TERM; sleep 60 & echo $! > \"$0/pid\"; echo \"$ZKW_LOCK_NODE\" > \"$0/node\"; wait";
    let (holder, node, grandchild) = spawn_recording(
        &cs,
        &["lock", "/stubborn", "--kill-after", "1s"],
        script,
        &dir,
    );
    let deleted = Instant::now();
    let out = delete_lock_node(&cs, &node, holder);
    assert_eq!(
        out.fails(75),
        "zkw: lock lost (lock node deleted); killed the command (it outlived SIGTERM)"
    );
    let took = deleted.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(6),
        "took {took:?}"
    );
    // The whole process group went, not only the direct child.
    thread::sleep(Duration::from_millis(200));
    assert!(!running(grandchild), "the command's child survived");
}

#[test]
fn timeout_gives_up_with_73() {
    let cs = chroot("cli-lock-timeout");
    let dir = scratch("timeout");
    let holder = spawn_holder(&cs, &["lock", "/busy"], &dir, 3);
    let message = "zkw: lock on /busy not acquired within 500ms";
    assert_gives_up(&cs, &["lock", "/busy"], "500ms", message);
    finish(holder, Duration::from_secs(30)).ok();
    // Only the holder's node was ever left, and it is gone too.
    assert_eq!(zkw(&cs, &["ls", "/busy"]).ok(), "");
}

#[test]
fn ctrl_c_while_waiting_leaves_no_node() {
    let cs = chroot("cli-lock-ctrl-c");
    let dir = scratch("ctrl-c");
    let holder = spawn_holder(&cs, &["lock", "/wait"], &dir, 3);
    let mut waiter = spawn_zkw(&cs, &["lock", "/wait", "--", "echo", "never"]);
    let stderr = lines_of(waiter.stderr.take().unwrap());
    // Wait until its node is queued behind the holder's.
    let deadline = Instant::now() + Duration::from_secs(20);
    while zkw(&cs, &["ls", "/wait"]).ok().lines().count() < 2 {
        assert!(
            Instant::now() < deadline,
            "the second contender never queued"
        );
        thread::sleep(Duration::from_millis(50));
    }
    signal(waiter.id(), "INT");
    let out = finish(waiter, Duration::from_secs(15));
    assert_eq!(out.code, Some(130), "{out:?}");
    let line = wait_line(&stderr, "zkw:", Duration::from_secs(1));
    assert_eq!(
        line,
        "zkw: interrupted by SIGINT while waiting for the lock on /wait"
    );
    assert_eq!(
        zkw(&cs, &["ls", "/wait"]).ok().lines().count(),
        1,
        "the interrupted contender left its node"
    );
    finish(holder, Duration::from_secs(30)).ok();
}

/// `zkw` killed with SIGKILL takes the command with it (the kernel kills it), rather than
/// leaving it to run on without the lock once the session expires. Here the command is in
/// its own process group and in `--foreground`; it was the process `zkw` started.
#[test]
fn a_command_dies_with_zkw_killed_by_sigkill() {
    let cs = chroot("cli-lock-sigkill");
    for (n, foreground) in [(0, false), (1, true)] {
        let dir = scratch(&format!("sigkill-{n}"));
        let mut args = vec!["lock", "/k"];
        args.extend(foreground.then_some("--foreground"));
        // `exec`: the pid written is the one `zkw` started.
        let script = "echo \"$ZKW_LOCK_NODE\" > \"$0/node\"; echo $$ > \"$0/pid\"; exec sleep 30";
        let (mut holder, _, pid) = spawn_recording(&cs, &args, script, &dir);
        assert!(running(pid));
        holder.kill().unwrap();
        holder.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while running(pid) {
            assert!(
                Instant::now() < deadline,
                "the command ran on after zkw died"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn sigterm_and_sigquit_are_passed_to_the_command() {
    let cs = chroot("cli-lock-forward");
    for name in ["TERM", "QUIT"] {
        let dir = scratch(&format!("forward-{name}"));
        // The sleep starts before the marker: a signal sent once the marker exists reaches
        // it through the process group (started after the signal, it would outlive the
        // command, and zkw waits for the whole group); a background job ignores SIGQUIT, so
        // the trap ends it. SIGQUIT left to its default killed zkw alone, and the command
        // ran on.
        let script = format!(
            "trap 'echo got-{name}; kill $!; exit 3' {name}; sleep 30 & touch \"$0/ready\"; wait"
        );
        let mut holder = spawn_script(&cs, &["lock", "/fwd"], &script, &dir);
        let stdout = lines_of(holder.stdout.take().unwrap());
        wait_file_exists(&dir.join("ready"));
        signal(holder.id(), name);
        assert_eq!(
            wait_line(&stdout, "got", Duration::from_secs(10)),
            format!("got-{name}")
        );
        let out = finish(holder, Duration::from_secs(15));
        assert_eq!(out.code, Some(3), "{out:?}");
        assert_eq!(zkw(&cs, &["ls", "/fwd"]).ok(), "");
    }
}

/// Started with SIGHUP ignored (`nohup`), zkw leaves it so: the command inherits the ignored
/// SIGHUP, and a hangup stops neither. (zkw once handled it: the command started with SIGHUP
/// at its default, and died of the hangup zkw passed on.)
#[test]
fn under_nohup_a_hangup_stops_nothing() {
    let cs = chroot("cli-lock-nohup");
    let dir = scratch("nohup");
    let script = gated(
        "grep SigIgn /proc/$$/status > \"$0/ignored\"; touch \"$0/ready\"",
        4,
    );
    let args = ["--server", &cs, "lock", "/nohup", "--", "sh", "-c", &script];
    let mut all = args.to_vec();
    all.push(dir.to_str().unwrap());
    let holder = command_under("nohup", &all).spawn().unwrap();
    wait_file_exists(&dir.join("ready"));
    let ignored = std::fs::read_to_string(dir.join("ignored")).unwrap();
    let mask = u64::from_str_radix(ignored.trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_eq!(mask & 1, 1, "SIGHUP ignored in the command: {ignored}");
    signal(holder.id(), "HUP");
    thread::sleep(Duration::from_millis(300));
    release(&dir);
    let out = finish(holder, Duration::from_secs(15));
    assert_eq!(out.code, Some(4), "the command's own exit: {out:?}");
}

#[test]
fn readers_share_and_writers_wait() {
    let cs = chroot("cli-rwlock");
    let dir = scratch("rwlock");
    let reader = spawn_script(
        &cs,
        &["rlock", "/rw"],
        "touch \"$0/reading\"; sleep 2",
        &dir,
    );
    wait_file_exists(&dir.join("reading"));
    let second = zkw(
        &cs,
        &[
            "rlock",
            "/rw",
            "--timeout",
            "1s",
            "--",
            "echo",
            "second reader",
        ],
    );
    assert_eq!(second.ok(), "second reader\n");
    let writer = zkw(
        &cs,
        &["wlock", "/rw", "--timeout", "300ms", "--", "echo", "writer"],
    );
    assert_eq!(
        writer.fails(73),
        "zkw: write lock on /rw not acquired within 300ms"
    );
    let waited = zkw(
        &cs,
        &[
            "wlock",
            "/rw",
            "--timeout",
            "20s",
            "--",
            "sh",
            "-c",
            "echo $ZKW_FENCING_TOKEN",
        ],
    );
    assert!(waited.ok().trim().parse::<i64>().is_ok(), "{waited:?}");
    finish(reader, Duration::from_secs(30)).ok();
}

#[test]
fn semaphore_admits_n_holders() {
    let cs = chroot("cli-sem");
    let dir = scratch("sem");
    // Each holder counts the holders inside (itself included) and records the count.
    let script = "touch \"$0/in.$$\"; ls \"$0\" | grep -c '^in\\.' >> \"$0/seen\"; sleep 1.5; rm \"$0/in.$$\"";
    let holders: Vec<_> = (0..3)
        .map(|_| spawn_script(&cs, &["sem", "/sem", "--leases", "2"], script, &dir))
        .collect();
    for holder in holders {
        finish(holder, Duration::from_secs(30)).ok();
    }
    let seen: Vec<u32> = std::fs::read_to_string(dir.join("seen"))
        .unwrap()
        .lines()
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter().all(|&n| n <= 2),
        "more than 2 holders at once: {seen:?}"
    );
    assert_eq!(
        seen.iter().max(),
        Some(&2),
        "the two leases were never used at once: {seen:?}"
    );
    let busy = spawn_zkw(&cs, &["sem", "/sem", "--leases", "1", "--", "sleep", "2"]);
    thread::sleep(Duration::from_millis(700));
    let refused = zkw(
        &cs,
        &[
            "sem",
            "/sem",
            "--leases",
            "1",
            "--timeout",
            "300ms",
            "--",
            "true",
        ],
    );
    assert_eq!(
        refused.fails(73),
        "zkw: lease on /sem not acquired within 300ms"
    );
    finish(busy, Duration::from_secs(30)).ok();
}

/// Signals reach the command through kill(2) itself: zkw starts no `sh` to send them.
#[test]
fn signals_are_sent_without_a_shell() {
    use std::os::unix::fs::PermissionsExt;
    let cs = chroot("cli-lock-no-shell");
    let dir = scratch("no-shell");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("sh-ran");
    // An `sh` first on PATH that records each start, then does the real work.
    let fake_sh = bin.join("sh");
    std::fs::write(
        &fake_sh,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec /bin/sh \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake_sh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let holder = command(&[
        "--server",
        &cs,
        "lock",
        "/noshell",
        "--kill-after",
        "1s",
        "--",
        "sleep",
        "60",
    ])
    .env("PATH", &path)
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let node = loop {
        let listed = zkw(&cs, &["ls", "/noshell"]);
        if let Some(name) = listed
            .stdout
            .lines()
            .next()
            .filter(|_| listed.code == Some(0))
        {
            break format!("/noshell/{name}");
        }
        assert!(Instant::now() < deadline, "the lock was never taken");
        thread::sleep(Duration::from_millis(50));
    };
    // Let `sleep` start, so that it is the one signalled.
    thread::sleep(Duration::from_millis(300));
    let out = delete_lock_node(&cs, &node, holder);
    assert_eq!(
        out.fails(75),
        "zkw: lock lost (lock node deleted); terminated the command"
    );
    assert!(
        !log.exists(),
        "zkw started sh: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// A --kill-after that does not fit the session timeout is refused before anything is
/// queued, with both values and the fix.
#[test]
fn kill_after_longer_than_the_session_allows_is_refused() {
    let cs = chroot("cli-lock-kill-after");
    // `lock /k` on a 4 s session.
    let lock = ["--session-timeout", "4s", "lock", "/k"];
    let out = zkw(
        &cs,
        &[&lock[..], &["--kill-after", "3s", "--", "echo", "never"]].concat(),
    );
    assert_eq!(
        out.fails(2),
        "zkw: --kill-after 3s does not fit the session timeout 4s: --kill-after, how far the \
         lease may lag on a healthy session (1s 733ms, with servers ticking every 200ms), a \
         margin of 267ms and 500ms for a late renewal must fit in it; use --session-timeout \
         6s 100ms or more, or --kill-after 1s 500ms or less"
    );
    assert_eq!(out.stdout, "");
    assert_eq!(zkw(&cs, &["ls", "/k"]).code, Some(1), "a node was queued");
    // Without --kill-after, the default shrinks to fit.
    assert_eq!(
        zkw(&cs, &[&lock[..], &["--", "echo", "ran"]].concat()).ok(),
        "ran\n"
    );
}

/// A healthy session's lease lags further behind on servers that tick slowly: told that they
/// tick every 2 s (ZooKeeper's default), zkw renews its lease against a relay bound of 4 s,
/// and a command outliving the old limit (SIGTERM once the lease fell 5 s behind, at about
/// 5 s into every hold) runs to its end.
#[test]
fn a_healthy_hold_on_slowly_ticking_servers_keeps_its_command() {
    let cs = chroot("cli-lock-slow-tick");
    let out = zkw_sh(
        &cs,
        &["--server-tick", "2s", "lock", "/slow"],
        "sleep 8; echo ran",
    );
    assert_eq!(out.ok(), "ran\n");
}

/// `leader`: CMD runs while this participant leads, with the latch node (whose data is the
/// id) in its environment; the participant leaves when CMD exits; CMD's code is zkw's.
#[test]
fn leader_runs_the_command_while_leading_and_leaves() {
    let cs = chroot("cli-leader");
    // The command reads its own latch node back through zkw: the node's data is the id.
    let script =
        "echo \"$ZKW_FENCING_TOKEN $ZKW_LOCK_NODE\"; \"$0\" --server \"$1\" get \"$ZKW_LOCK_NODE\"";
    let out = zkw(
        &cs,
        &[
            "leader",
            "/e",
            "--id",
            "alpha",
            "--",
            "sh",
            "-c",
            script,
            common::ZKW,
            &cs,
        ],
    );
    let printed = out.ok().to_owned();
    let mut lines = printed.lines();
    let (token, node) = lines.next().unwrap().split_once(' ').unwrap();
    assert!(token.parse::<i64>().unwrap() > 0, "{printed}");
    assert!(
        node.starts_with("/e/_c_") && node.contains("-latch-"),
        "{printed}"
    );
    assert_eq!(lines.next(), Some("alpha"), "{printed}");
    assert_eq!(zkw(&cs, &["ls", "/e"]).ok(), "", "the participant left");
    assert_eq!(
        zkw(&cs, &["leader", "/e", "--", "sh", "-c", "exit 9"]).code,
        Some(9)
    );
    assert!(zkw(&cs, &["leader", "/e"])
        .fails(2)
        .contains("the following required arguments were not provided: <CMD>..."));
}

/// Three `zkw leader` processes, three terms each: never two leaders' commands at once, and
/// each term's token is newer than the last.
#[test]
fn leaders_take_turns_across_three_processes() {
    let cs = chroot("cli-leader-turns");
    take_turns(&cs, "leader-turns", 3, 3, |i| {
        ["leader", "/turns", "--id", &format!("w{i}")]
            .map(String::from)
            .to_vec()
    });
}

/// While one process leads, another gives up after `--timeout` (73) and leaves no node; a
/// deleted latch node ends the leadership: the command is terminated, exit 75.
#[test]
fn leader_timeout_and_lost_leadership() {
    let cs = chroot("cli-leader-lost");
    let dir = scratch("leader-lost");
    let (leader, node, pid) = hold_running(&cs, &["leader", "/lost"], &dir);
    let out = zkw(
        &cs,
        &[
            "leader",
            "/lost",
            "--timeout",
            "300ms",
            "--",
            "echo",
            "never",
        ],
    );
    assert_eq!(
        out.fails(73),
        "zkw: leadership on /lost not acquired within 300ms"
    );
    assert_eq!(zkw(&cs, &["ls", "/lost"]).ok().lines().count(), 1);
    let out = delete_lock_node(&cs, &node, leader);
    assert_eq!(
        out.fails(75),
        "zkw: leadership lost (lock node deleted); terminated the command"
    );
    assert!(!running(pid), "the command survived");
}

/// The lock covers what the command leaves running in its process group: a background job
/// of `sh -c 'job & exit 0'` ends before the lock is released (another `zkw lock` is refused
/// meanwhile), and zkw exits with the command's own code once it has.
#[test]
fn the_lock_is_released_only_after_the_whole_process_group_ended() {
    let cs = chroot("cli-lock-group");
    let started = Instant::now();
    let holder = spawn_zkw(
        &cs,
        &["lock", "/group", "--", "sh", "-c", "sleep 2 & exit 0"],
    );
    thread::sleep(Duration::from_millis(1000));
    let busy = zkw(
        &cs,
        &["lock", "/group", "--timeout", "0", "--", "echo", "in"],
    );
    assert_eq!(
        busy.code,
        Some(73),
        "the background job still holds it: {busy:?}"
    );
    let out = finish(holder, Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "zkw waited for the background sleep: {:?}",
        started.elapsed()
    );
    let after = zkw(
        &cs,
        &["lock", "/group", "--timeout", "0", "--", "echo", "in"],
    );
    assert_eq!(after.ok(), "in\n");
}

/// A server that accepts connections and never answers. The verbs that handle their signals
/// themselves (they must not leave a node behind) stay interruptible while they connect:
/// SIGINT stops each at once with 130, where it used to be ignored until the connect gave up.
#[test]
fn a_signal_stops_the_verbs_that_handle_signals_while_they_connect() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = silent.local_addr().unwrap().to_string();
    thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().take(64) {
            held.push(stream);
        }
    });
    let dir = scratch("silent");
    let marker = dir.join("ran");
    let marker = marker.to_str().unwrap();
    let lines = [
        format!("lock /l -- touch {marker}"),
        format!("barrier /b --members 2 -- touch {marker}"),
        format!("register api --address a --port 1 -- touch {marker}"),
        "watch /w".to_owned(),
        "cache /c".to_owned(),
    ];
    for line in &lines {
        let args: Vec<&str> = line.split(' ').collect();
        let child = spawn_zkw(&server, &args);
        thread::sleep(Duration::from_millis(700));
        signal(child.id(), "INT");
        let out = finish(child, Duration::from_secs(5));
        assert_eq!(out.code, Some(130), "{args:?}: {out:?}");
        assert!(out.stderr.contains("interrupted"), "{args:?}: {out:?}");
        assert!(out.elapsed < Duration::from_secs(3), "{args:?}: {out:?}");
    }
    assert!(!dir.join("ran").exists(), "no command ran");
}
