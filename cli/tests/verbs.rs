//! The everyday verbs against a real server, each test under its own chroot; errors are one
//! line and a non-zero code.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::time::Duration;

use common::{
    chroot, chroot_with, command, finish, lines_of, run, signal, spawn_zkw, wait_line, zkw,
};

#[test]
fn create_get_set_stat_ls_rm() {
    let cs = chroot("cli-nodes");
    assert_eq!(zkw(&cs, &["create", "/a", "hello"]).ok(), "/a\n");
    assert_eq!(zkw(&cs, &["get", "/a"]).ok(), "hello\n");
    assert_eq!(zkw(&cs, &["set", "/a", "world", "-v", "0"]).ok(), "");
    assert_eq!(zkw(&cs, &["get", "/a"]).ok(), "world\n");
    let stale = zkw(&cs, &["set", "/a", "again", "-v", "0"]);
    assert_eq!(
        stale.fails(1),
        "zkw: /a: version does not match: expected 0, the node has version 1"
    );
    let stat = zkw(&cs, &["stat", "/a"]);
    assert!(
        stat.ok().contains("dataVersion = 1\n") && stat.stdout.contains("dataLength = 5\n"),
        "{stat:?}"
    );

    zkw(&cs, &["create", "/a/b"]).ok();
    zkw(&cs, &["create", "/a/b/c", "deep"]).ok();
    zkw(&cs, &["create", "/a/x"]).ok();
    assert_eq!(zkw(&cs, &["ls", "/a"]).ok(), "b\nx\n");
    assert_eq!(
        zkw(&cs, &["ls", "-R", "/a"]).ok(),
        "/a\n/a/b\n/a/b/c\n/a/x\n"
    );
    let with_stat = zkw(&cs, &["ls", "-s", "/a"]);
    assert!(
        with_stat.ok().starts_with("b\nx\ncZxid = 0x")
            && with_stat.stdout.contains("numChildren = 2"),
        "{with_stat:?}"
    );

    assert_eq!(
        zkw(&cs, &["rm", "/a"]).fails(1),
        "zkw: /a: node has children; rm -r removes it with everything under it"
    );
    zkw(&cs, &["rm", "/a/x", "-v", "0"]).ok();
    assert_eq!(
        zkw(&cs, &["rm", "-r", "/a", "--json"]).ok(),
        "{\"path\":\"/a\",\"deleted\":3}\n"
    );
    assert_eq!(
        zkw(&cs, &["get", "/a"]).fails(1),
        "zkw: /a: node does not exist"
    );
    // A missing node is an error with --yes too, as without it (it was 0 nodes deleted).
    for yes in [&[][..], &["--yes"][..]] {
        let args = [&["rm", "-r", "/a"][..], yes].concat();
        assert_eq!(zkw(&cs, &args).fails(1), "zkw: /a: node does not exist");
    }
    assert_eq!(zkw(&cs, &["ls", "/"]).ok(), "");
}

#[test]
fn create_modes() {
    let cs = chroot("cli-modes");
    zkw(&cs, &["create", "/d"]).ok();
    assert_eq!(
        zkw(&cs, &["create", "-s", "/d/seq-"]).ok(),
        "/d/seq-0000000000\n"
    );
    assert_eq!(
        zkw(&cs, &["create", "/d/seq-", "-s"]).ok(),
        "/d/seq-0000000001\n"
    );
    // Ephemeral: gone when zkw's session closes, that is when it exits.
    assert_eq!(zkw(&cs, &["create", "-e", "/d/eph"]).ok(), "/d/eph\n");
    assert!(zkw(&cs, &["create", "-es", "/d/eph-"])
        .ok()
        .starts_with("/d/eph-00000000"));
    zkw(&cs, &["create", "-c", "/d/box"]).ok();
    zkw(&cs, &["create", "--ttl", "1h", "/d/ttl"]).ok();
    assert_eq!(
        zkw(&cs, &["ls", "/d"]).ok(),
        "box\nseq-0000000000\nseq-0000000001\nttl\n"
    );
    // The server hides the container and TTL markers from clients (ephemeralOwner reads 0);
    // that it accepted createContainer and createTTL is what can be seen.
    assert!(zkw(&cs, &["stat", "/d/box", "--json"])
        .ok()
        .contains("\"ephemeral_owner\":\"0x0000000000000000\""));
    assert_eq!(
        zkw(&cs, &["create", "/d/x", "-c", "-e"]).fails(2),
        "zkw: the argument '--container' cannot be used with '--ephemeral' (see zkw create \
         --help)"
    );
    assert_eq!(
        zkw(&cs, &["create", "/d/x", "-e", "--ttl", "5s"]).fails(2),
        "zkw: the argument '--ephemeral' cannot be used with '--ttl <D>' (see zkw create \
         --help)"
    );
    assert_eq!(zkw(&cs, &["create", "/d/x", "--ttl", "5q"]).code, Some(2));
    assert_eq!(
        zkw(&cs, &["create", "/nope/x"]).fails(1),
        "zkw: /nope/x: parent /nope does not exist; use -p (--parents) to create it"
    );
}

#[test]
fn json_output_escapes_strings() {
    let cs = chroot("cli-json");
    let data = "quote\" back\\slash\nnew\ttab\u{1}é";
    zkw(&cs, &["create", "/j", data]).ok();
    let got = zkw(&cs, &["--json", "get", "/j"]);
    let expected = r#"{"path":"/j","data":"quote\" back\\slash\nnew\ttab\u0001é","data_base64":"cXVvdGUiIGJhY2tcc2xhc2gKbmV3CXRhYgHDqQ==","stat":{"czxid":"#;
    assert!(got.ok().starts_with(expected), "{got:?}");
    assert_eq!(got.stdout.lines().count(), 1);
    let ls = zkw(&cs, &["ls", "/", "--json"]);
    assert_eq!(ls.ok(), "{\"path\":\"/\",\"children\":[\"j\"]}\n");
    let created = zkw(&cs, &["create", "/k", "--json"]);
    assert!(
        created.ok().starts_with("{\"path\":\"/k\",\"stat\":{"),
        "{created:?}"
    );
}

#[test]
fn set_reads_standard_input() {
    let cs = chroot("cli-stdin");
    zkw(&cs, &["create", "/in"]).ok();
    let mut child = command(&["--server", &cs, "set", "/in", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"piped\xffbytes").unwrap();
    finish(child, Duration::from_secs(30)).ok();
    // Not UTF-8: `data` is null, `data_base64` holds the bytes (the keys never change).
    let json = zkw(&cs, &["get", "/in", "--json"]);
    let fields: Vec<&str> = json.ok().split(',').collect();
    assert_eq!(
        fields[1..3],
        ["\"data\":null", "\"data_base64\":\"cGlwZWT/Ynl0ZXM=\""]
    );
    // --raw writes the bytes exactly: no newline added.
    let raw = command(&["--server", &cs, "get", "/in", "--raw"])
        .output()
        .unwrap();
    assert_eq!(raw.stdout, b"piped\xffbytes");
    let plain = command(&["--server", &cs, "get", "/in"]).output().unwrap();
    assert_eq!(plain.stdout, b"piped\xffbytes\n");
}

#[test]
fn acl_get_and_set() {
    let cs = chroot("cli-acl");
    zkw(&cs, &["create", "/p", "x"]).ok();
    assert_eq!(zkw(&cs, &["acl", "get", "/p"]).ok(), "world:anyone:cdrwa\n");
    zkw(&cs, &["acl", "set", "/p", "world:anyone:r", "-v", "0"]).ok();
    assert_eq!(
        zkw(&cs, &["acl", "get", "/p", "--json"]).ok(),
        "{\"path\":\"/p\",\"acl\":[{\"scheme\":\"world\",\"id\":\"anyone\",\"perms\":\"r\"}],\"aversion\":1}\n"
    );
    assert_eq!(
        zkw(&cs, &["set", "/p", "y"]).fails(1),
        "zkw: /p: not authorized by the ACL (a create or delete is checked against the \
         parent's); --auth or --sasl authenticates the session"
    );
    assert_eq!(zkw(&cs, &["get", "/p"]).ok(), "x\n");
    let raw_json = zkw(&cs, &["--json", "get", "/p", "--raw"]);
    assert_eq!(raw_json.code, Some(2));
    assert!(raw_json
        .stderr
        .contains("--raw and --json do not go together"));
    let bad = zkw(&cs, &["acl", "set", "/p", "world:anyone:xyz"]);
    assert!(bad.fails(2).contains("bad ACL entry"), "{bad:?}");
    assert_eq!(
        zkw(&cs, &["acl", "frob", "/p"]).fails(2),
        "zkw: unrecognized subcommand 'frob' (see zkw acl --help)"
    );
}

#[test]
fn sync_and_whoami() {
    let cs = chroot("cli-session");
    assert_eq!(zkw(&cs, &["sync", "/"]).ok(), "");
    assert_eq!(
        zkw(&cs, &["sync", "/", "--json"]).ok(),
        "{\"path\":\"/\",\"synced\":true}\n"
    );
    assert_eq!(zkw(&cs, &["whoami"]).ok(), "ip:127.0.0.1\n");
    let digest = zkw(&cs, &["--auth", "digest:alice:secret", "whoami", "--json"]);
    assert!(
        digest
            .ok()
            .contains("{\"scheme\":\"digest\",\"user\":\"alice\"}"),
        "{digest:?}"
    );
}

#[test]
fn watch_streams_events_until_ctrl_c() {
    let cs = chroot("cli-watch");
    zkw(&cs, &["create", "/w"]).ok();
    let mut watcher = spawn_zkw(&cs, &["watch", "/w", "--recursive"]);
    let events = lines_of(watcher.stdout.take().unwrap());
    let notes = lines_of(watcher.stderr.take().unwrap());
    wait_line(&notes, "watching /w", Duration::from_secs(30));
    zkw(&cs, &["create", "/w/a"]).ok();
    zkw(&cs, &["set", "/w/a", "1"]).ok();
    zkw(&cs, &["rm", "/w/a"]).ok();
    let limit = Duration::from_secs(10);
    assert_eq!(wait_line(&events, "/w", limit), "NodeCreated /w/a");
    assert_eq!(wait_line(&events, "/w", limit), "NodeDataChanged /w/a");
    assert_eq!(wait_line(&events, "/w", limit), "NodeDeleted /w/a");
    signal(watcher.id(), "INT");
    let out = finish(watcher, Duration::from_secs(15));
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn watch_json_on_one_node() {
    let cs = chroot("cli-watch-json");
    let mut watcher = spawn_zkw(&cs, &["--json", "watch", "/solo"]);
    let events = lines_of(watcher.stdout.take().unwrap());
    let notes = lines_of(watcher.stderr.take().unwrap());
    wait_line(&notes, "watching /solo", Duration::from_secs(30));
    zkw(&cs, &["create", "/solo", "x"]).ok();
    let line = wait_line(&events, "solo", Duration::from_secs(10));
    assert!(
        line.starts_with("{\"event\":\"NodeCreated\",\"path\":\"/solo\",\"zxid\":"),
        "{line}"
    );
    signal(watcher.id(), "INT");
    finish(watcher, Duration::from_secs(15)).ok();
}

/// `cache`: the initial tree (a node this session may not read shown as `unreadable`),
/// `initialized`, then created / changed / deleted lines; with `--json`, one object per
/// line with the data and its version.
#[test]
fn cache_prints_the_tree_then_its_changes() {
    let tree = [
        "create /c root",
        "create /c/a line1\nline2",
        "create /c/locked x",
    ];
    let cs = chroot_with("cli-cache", &tree);
    let acl = "digest:alice:secret:cdrwa";
    zkw(&cs, &["acl", "set", "/c/locked", acl, "--plain-password"]).ok();
    let mut cache = spawn_zkw(&cs, &["cache", "/c"]);
    let lines = lines_of(cache.stdout.take().unwrap());
    let limit = Duration::from_secs(30);
    assert_eq!(wait_line(&lines, "/c", limit), "created /c root");
    assert_eq!(
        wait_line(&lines, "/c/a", limit),
        "created /c/a line1\\nline2"
    );
    // Not readable by this session: said, not skipped.
    assert_eq!(wait_line(&lines, "", limit), "unreadable /c/locked");
    assert_eq!(wait_line(&lines, "", limit), "initialized");
    zkw(&cs, &["create", "/c/a/deep", "d"]).ok();
    zkw(&cs, &["set", "/c/a", "v2"]).ok();
    zkw(&cs, &["rm", "-r", "/c/a"]).ok();
    assert_eq!(wait_line(&lines, "", limit), "created /c/a/deep d");
    assert_eq!(wait_line(&lines, "", limit), "changed /c/a v2");
    assert_eq!(wait_line(&lines, "", limit), "deleted /c/a/deep");
    assert_eq!(wait_line(&lines, "", limit), "deleted /c/a");
    signal(cache.id(), "INT");
    finish(cache, Duration::from_secs(15)).ok();

    let mut json = spawn_zkw(&cs, &["--json", "cache", "/c", "--depth", "0"]);
    let lines = lines_of(json.stdout.take().unwrap());
    let first = wait_line(&lines, "", limit);
    assert!(
        first.starts_with(
            "{\"event\":\"created\",\"path\":\"/c\",\"data\":\"root\",\"data_base64\":\"cm9vdA==\",\"version\":0,\"mzxid\":"
        ),
        "{first}"
    );
    assert_eq!(wait_line(&lines, "", limit), "{\"event\":\"initialized\"}");
    // Depth 0 holds /c alone: a child is not reported, a change of /c is.
    zkw(&cs, &["create", "/c/b", "x"]).ok();
    zkw(&cs, &["set", "/c", "r2"]).ok();
    let changed = wait_line(&lines, "", limit);
    assert!(
        changed.starts_with(
            "{\"event\":\"changed\",\"path\":\"/c\",\"data\":\"r2\",\"data_base64\":\"cjI=\",\
                 \"version\":1,"
        ),
        "{changed}"
    );
    signal(json.id(), "INT");
    finish(json, Duration::from_secs(15)).ok();
    assert!(zkw(&cs, &["cache", "relative"]).fails(2).contains("path"));
}

#[test]
fn unreachable_server_is_one_line_and_code_69() {
    let out = run(&[
        "--server",
        "127.0.0.1:1",
        "--session-timeout",
        "1s",
        "ls",
        "/",
    ]);
    let line = out.fails(69);
    assert_eq!(
        line,
        "zkw: cannot connect to 127.0.0.1:1: Connection refused (set --server or ZOOKEEPER)"
    );
    // Refused everywhere: zkw gives up at once rather than after the session timeout.
    assert!(out.elapsed < Duration::from_secs(5), "{out:?}");
    // The environment variable is the fallback for --server.
    let mut env = command(&["--session-timeout", "500ms", "get", "/x"]);
    env.env("ZOOKEEPER", "127.0.0.1:1");
    let out = finish(env.spawn().unwrap(), Duration::from_secs(10));
    assert!(out.fails(69).contains("127.0.0.1:1"), "{out:?}");
}

#[test]
fn bad_paths_and_command_lines_are_usage_errors() {
    // Checked before connecting: no server needed, no waiting.
    let unreachable = "127.0.0.1:1";
    let out = zkw(unreachable, &["get", "no-slash"]);
    assert_eq!(
        out.fails(2),
        "zkw: invalid path \"no-slash\": path must start with '/'"
    );
    assert!(out.elapsed < Duration::from_secs(2));
    assert!(zkw(unreachable, &["ls", "/a//b"])
        .fails(2)
        .starts_with("zkw: invalid path \"/a//b\""));
    assert_eq!(
        zkw(unreachable, &["--session-timeout", "300ms", "rm", "/"]).code,
        Some(69)
    );
    assert_eq!(
        run(&["frobnicate"]).fails(2),
        "zkw: unrecognized subcommand 'frobnicate' (see zkw --help)"
    );
    // A typo gets a suggestion.
    assert_eq!(
        run(&["lss", "/"]).fails(2),
        "zkw: unrecognized subcommand 'lss'; tip: a similar subcommand exists: 'ls' (see zkw \
         --help)"
    );
    assert_eq!(
        run(&["ls"]).fails(2),
        "zkw: the following required arguments were not provided: <PATH> (see zkw ls --help)"
    );
    assert_eq!(
        run(&["ls", "/", "/b"]).fails(2),
        "zkw: unexpected argument '/b' found (see zkw ls --help)"
    );
    assert!(run(&["ls", "-z", "/"])
        .fails(2)
        .starts_with("zkw: unexpected argument '-z' found"));
    assert_eq!(
        run(&["set", "/a", "x", "-v"]).fails(2),
        "zkw: a value is required for '--version <VERSION>' but none was supplied (see zkw \
         --help)"
    );
    assert_eq!(
        run(&["set", "/a", "x", "-v", "two"]).fails(2),
        "zkw: invalid value 'two' for '--version <VERSION>': invalid digit found in string (see \
         zkw --help)"
    );
    assert_eq!(run(&["--session-timeout", "soon", "ls", "/"]).code, Some(2));
    // Durations are positive; a negative one says so (not "unknown unit").
    assert_eq!(
        run(&["--session-timeout", "-1s", "ls", "/"]).fails(2),
        "zkw: invalid value '-1s' for '--session-timeout <D>': must be positive (see zkw --help)"
    );
    assert_eq!(
        run(&["--server", "127.0.0.1:99999", "ls", "/"]).code,
        Some(2)
    );
    assert_eq!(
        run(&["lock", "/l"]).fails(2),
        "zkw: the following required arguments were not provided: <CMD>... (see zkw lock \
         --help)"
    );
    assert_eq!(
        run(&["sem", "/s", "--", "true"]).fails(2),
        "zkw: the following required arguments were not provided: --leases <N> (see zkw sem \
         --help)"
    );
    // --json: errors are one JSON document on stderr, bad command lines included.
    let json = run(&["--json", "--server", unreachable, "get", "relative"]);
    assert_eq!(json.code, Some(2));
    assert_eq!(
        json.stderr,
        "{\"error\":\"invalid path \\\"relative\\\": path must start with '/'\",\"exit_code\":2,\
         \"kind\":\"invalid_path\"}\n"
    );
    let json = run(&["--json", "ls"]);
    assert!(
        json.stderr
            .starts_with("{\"error\":\"the following required"),
        "{json:?}"
    );
}

#[test]
fn help_texts() {
    let help = run(&["--help"]);
    for verb in [
        "ls",
        "get",
        "stat",
        "set",
        "create",
        "rm",
        "watch",
        "cache",
        "acl",
        "sync",
        "whoami",
        "lock",
        "rlock",
        "wlock",
        "sem",
        "leader",
        "revoke",
        "locks",
        "shell",
        "sandbox",
        "demo",
        "completions",
    ] {
        let listed = format!("\n  {verb} ");
        assert!(help.ok().contains(&listed), "{verb} missing from --help");
    }
    assert!(!help.stdout.contains("__demo-worker"));
    assert!(help.stdout.contains("75 lock lost"));
    let lock_help = run(&["lock", "--help"]);
    assert!(
        lock_help.ok().contains("ZKW_FENCING_TOKEN") && lock_help.stdout.contains("--kill-after")
    );
    assert!(run(&["create", "-h"]).ok().contains("Usage: zkw create"));
    assert!(run(&["--version"]).ok().starts_with("zkw 0."));
    let bare = run(&[]);
    assert_eq!(bare.code, Some(2));
    assert!(bare.stderr.contains("Usage: zkw"));
}

/// The README shows `zkw --help` exactly as the binary prints it.
#[test]
fn readme_shows_the_help() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = "<!-- zkw --help -->\n```text\n";
    let from = readme
        .find(start)
        .expect("the README has a zkw --help block")
        + start.len();
    let block = &readme[from..];
    let block = &block[..block.find("```").unwrap()];
    assert_eq!(
        block,
        run(&["--help"]).ok(),
        "README's zkw --help block differs"
    );
}

/// `zkw completions SHELL` prints a script naming the verbs.
#[test]
fn completion_scripts() {
    for (shell, marker) in [
        ("bash", "_zkw()"),
        ("zsh", "#compdef zkw"),
        ("fish", "complete -c zkw"),
    ] {
        let script = run(&["completions", shell]);
        assert!(script.ok().contains(marker), "{shell}: {script:?}");
        assert!(script.stdout.contains("locks"), "{shell}");
    }
    assert_eq!(run(&["completions", "tcsh"]).code, Some(2));
}
