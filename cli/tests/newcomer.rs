//! The first hour of a new user, against a real server: `create -p`, an error kind per cause
//! under `--json` (versions said in plain text too), one form of session id, `locks` on a
//! path that does not exist, `-v`/`-vv`/`RUST_LOG`, the shell's own `help`, connection
//! failures said once and with the time waited, and each verb's help without what it does
//! not use.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::{chroot, chroot_with, command, finish, run, scratch, spawn_holder, zkw, Out};
use serde_json::Value;

/// The JSON error document of a failed `--json` run, checked to be alone on stderr.
fn json_error(out: &Out, code: i32) -> Value {
    assert_eq!(out.code, Some(code), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    let doc: Value = serde_json::from_str(&out.stderr).unwrap();
    assert_eq!(doc["exit_code"], code, "{doc}");
    doc
}

#[test]
fn create_names_a_missing_parent_and_p_creates_it() {
    let cs = chroot("cli-parents");
    assert_eq!(
        zkw(&cs, &["create", "/jobs/report", "v1"]).fails(1),
        "zkw: /jobs/report: parent /jobs does not exist; use -p (--parents) to create it"
    );
    let doc = json_error(&zkw(&cs, &["--json", "create", "/jobs/report"]), 1);
    assert_eq!(doc["kind"], "no_node");
    assert_eq!(
        zkw(&cs, &["create", "-p", "/jobs/daily/report", "v1"]).ok(),
        "/jobs/daily/report\n"
    );
    assert_eq!(zkw(&cs, &["get", "/jobs/daily/report"]).ok(), "v1\n");
    // The parents are empty persistent nodes.
    for parent in ["/jobs", "/jobs/daily"] {
        let stat: Value = serde_json::from_str(zkw(&cs, &["stat", parent, "--json"]).ok()).unwrap();
        assert_eq!(stat["stat"]["data_length"], 0, "{parent}: {stat}");
        assert_eq!(
            stat["stat"]["ephemeral_owner"], "0x0000000000000000",
            "{parent}: {stat}"
        );
    }
    // With other modes: the parents persist, the node is as asked.
    assert_eq!(
        zkw(&cs, &["create", "--parents", "-s", "/queue/items/item-"]).ok(),
        "/queue/items/item-0000000000\n"
    );
    assert_eq!(
        zkw(&cs, &["create", "-p", "-e", "/tmp/one/eph"]).ok(),
        "/tmp/one/eph\n"
    );
    assert_eq!(
        zkw(&cs, &["ls", "/tmp/one"]).ok(),
        "",
        "the ephemeral went with zkw"
    );
    // An existing node is still an error, parents or not.
    let doc = json_error(
        &zkw(&cs, &["--json", "create", "-p", "/jobs/daily/report"]),
        1,
    );
    assert_eq!(doc["kind"], "node_exists");
}

#[test]
fn json_errors_have_a_kind_per_cause() {
    let cs = chroot("cli-kinds");
    zkw(&cs, &["create", "/k", "v"]).ok();
    zkw(&cs, &["create", "/k/leaf"]).ok();
    let kind = |args: &[&str], code: i32| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        json_error(&zkw(&cs, &all), code)["kind"].clone()
    };
    assert_eq!(kind(&["get", "/missing"], 1), "no_node");
    assert_eq!(kind(&["create", "/k"], 1), "node_exists");
    assert_eq!(kind(&["rm", "/k"], 1), "not_empty");
    // `auth` ids with no authenticated identity: the server refuses the ACL.
    assert_eq!(kind(&["acl", "set", "/k", "auth::cdrwa"], 1), "invalid_acl");
    assert_eq!(
        kind(&["acl", "set", "/k", "world:anyone:x"], 2),
        "invalid_acl"
    );
    assert_eq!(kind(&["get", "relative"], 2), "invalid_path");
    // A service name is one path segment, as the recipes require, before anything runs.
    for name in ["api/v1", "", ".."] {
        let register = [
            "register",
            name,
            "--address",
            "a",
            "--port",
            "1",
            "--",
            "true",
        ];
        assert_eq!(kind(&register, 2), "invalid_path", "{name:?}");
        assert_eq!(kind(&["services", name], 2), "invalid_path", "{name:?}");
    }
    assert_eq!(kind(&["ls"], 2), "usage");
    zkw(&cs, &["create", "/k/ro", "x"]).ok();
    zkw(&cs, &["acl", "set", "/k/ro", "world:anyone:r"]).ok();
    assert_eq!(kind(&["set", "/k/ro", "y"], 1), "no_auth");
    // Mistakes in the configuration are not an unreachable server (69): a retry cannot help.
    assert_eq!(kind(&["--auth", "alice:secret", "ls", "/"], 1), "no_auth");
    let missing_chroot = format!("{cs}/nowhere");
    let out = zkw(&missing_chroot, &["--json", "ls", "/"]);
    assert_eq!(json_error(&out, 1)["kind"], "no_node");
    assert!(out.stderr.contains("create -p"), "{out:?}");
    // A command that does not exist is not a missing node.
    let dir = scratch("kinds");
    let missing_cmd = dir.join("no-such-command");
    let missing_cmd = missing_cmd.to_str().unwrap();
    assert_eq!(
        kind(&["lock", "/l", "--", missing_cmd], 127),
        "command_not_found"
    );
}

#[test]
fn version_mismatches_say_expected_and_actual() {
    let cs = chroot_with("cli-versions", &["create /v 0", "set /v 1", "set /v 2"]);
    assert_eq!(
        zkw(&cs, &["set", "/v", "3", "-v", "0"]).fails(1),
        "zkw: /v: version does not match: expected 0, the node has version 2"
    );
    let doc = json_error(&zkw(&cs, &["--json", "set", "/v", "3", "-v", "7"]), 1);
    assert_eq!(doc["kind"], "bad_version");
    assert_eq!(
        (doc["expected"].clone(), doc["actual"].clone()),
        (7.into(), 2.into())
    );
    let doc = json_error(&zkw(&cs, &["--json", "rm", "/v", "-v", "1"]), 1);
    assert_eq!(
        (
            doc["kind"].clone(),
            doc["expected"].clone(),
            doc["actual"].clone()
        ),
        ("bad_version".into(), 1.into(), 2.into())
    );
    assert_eq!(
        zkw(&cs, &["acl", "set", "/v", "world:anyone:cdrwa", "-v", "4"]).fails(1),
        "zkw: /v: ACL version does not match: expected 4, the node has ACL version 0"
    );
    // Right versions go through.
    zkw(&cs, &["set", "/v", "3", "-v", "2"]).ok();
    zkw(&cs, &["rm", "/v", "-v", "3"]).ok();
}

/// A session id is `0x` and 16 lowercase hex digits.
fn is_session_id(text: &str) -> bool {
    text.len() == 18
        && text.starts_with("0x")
        && text[2..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[test]
fn session_ids_have_one_form_everywhere() {
    let cs = chroot("cli-session-ids");
    let dir = scratch("session-ids");
    let mut holder = spawn_holder(&cs, &["lock", "/l"], &dir, 60);
    let shown = zkw(&cs, &["locks", "/l"]);
    let line = shown.ok().lines().nth(1).unwrap().to_owned();
    let from_locks = line
        .split("session ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert!(is_session_id(from_locks), "{line}");
    let doc: Value = serde_json::from_str(zkw(&cs, &["locks", "/l", "--json"]).ok()).unwrap();
    assert_eq!(doc["contenders"][0]["session"], from_locks, "{doc}");
    let node = doc["contenders"][0]["node"].as_str().unwrap().to_owned();
    let stat = zkw(&cs, &["stat", &node]);
    assert!(
        stat.ok()
            .contains(&format!("ephemeralOwner = {from_locks}\n")),
        "{stat:?}"
    );
    // In `stat --json` too, a string (as a number it lost digits in JavaScript).
    let doc: Value = serde_json::from_str(zkw(&cs, &["stat", &node, "--json"]).ok()).unwrap();
    assert_eq!(doc["stat"]["ephemeral_owner"], from_locks, "{doc}");
    // Not ephemeral: the same width.
    assert!(zkw(&cs, &["stat", "/l"])
        .ok()
        .contains("ephemeralOwner = 0x0000000000000000\n"));
    common::signal(holder.id(), "TERM");
    let _ = holder.wait();
}

#[test]
fn locks_on_a_missing_path_says_so() {
    let cs = chroot("cli-locks-missing");
    common::assert_no_lock_there(&cs, "locks", "/no/such");
    let doc = json_error(&zkw(&cs, &["--json", "locks", "/no/such"]), 1);
    assert_eq!(doc["kind"], "no_node");
    // A node with no contenders is a free lock.
    zkw(&cs, &["create", "/free"]).ok();
    common::assert_lock_free(&cs, "/free");
}

#[test]
fn verbose_flags_and_rust_log_show_the_library_events() {
    let cs = chroot("cli-verbose");
    let quiet = zkw(&cs, &["ls", "/"]);
    assert_eq!((quiet.ok(), quiet.stderr.as_str()), ("", ""));
    // -vv: debug events, such as the driver's connection attempt, on stderr only.
    let debug = run(&["-vv", "--server", &cs, "ls", "/"]);
    assert_eq!(debug.ok(), "");
    let connecting = debug
        .stderr
        .lines()
        .find(|l| l.contains("zkwire") && l.contains("connecting"));
    assert!(connecting.is_some_and(|l| l.contains("DEBUG")), "{debug:?}");
    // -v: info and up, so not that one.
    let info = run(&["-v", "--server", &cs, "ls", "/"]);
    assert!(!info.stderr.contains("DEBUG"), "{info:?}");
    // RUST_LOG decides when set: on without -v, off despite -vv.
    let from_env = |filter: &str, verbose: &[&str]| {
        let mut args = verbose.to_vec();
        args.extend(["--server", &cs, "ls", "/"]);
        let mut cmd = command(&args);
        cmd.env("RUST_LOG", filter);
        finish(cmd.spawn().unwrap(), Duration::from_secs(30))
    };
    let on = from_env("zkwire=debug", &[]);
    assert!(on.stderr.contains("connecting"), "{on:?}");
    let off = from_env("off", &["-vv"]);
    assert_eq!((off.ok(), off.stderr.as_str()), ("", ""));
}

#[test]
fn connection_failures_are_said_once_with_the_time_waited() {
    // Nothing listens on a port just released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("127.0.0.1:{port}");
    assert_eq!(
        zkw(&refused, &["ls", "/"]).fails(69),
        format!("zkw: cannot connect to {refused}: Connection refused (set --server or ZOOKEEPER)")
    );
    // A server that accepts connections and never answers: zkw says how long it waited.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    // Accepted connections are kept open (never answered) until the test process ends.
    std::thread::spawn(move || silent.incoming().collect::<Vec<_>>());
    let out = zkw(&addr, &["--session-timeout", "1500ms", "ls", "/"]);
    let line = out.fails(69);
    assert!(
        line.contains("1s 500ms") && line.starts_with(&format!("zkw: cannot connect to {addr}: ")),
        "{out:?}"
    );
    assert!(!line.contains(&format!("{addr}: {addr}")), "{out:?}");
    // With -v, said up front too.
    let verbose = run(&[
        "-v",
        "--server",
        &addr,
        "--session-timeout",
        "1500ms",
        "ls",
        "/",
    ]);
    assert_eq!(verbose.code, Some(69));
    assert!(
        verbose.stderr.contains(&format!(
            "zkw: no answer yet from {addr}; waiting up to 1s 500ms (--session-timeout)"
        )),
        "{verbose:?}"
    );
}

#[test]
fn each_verb_help_groups_the_connection_options_apart() {
    let ls = run(&["ls", "--help"]);
    let text = ls.ok();
    let own = text.find("--recursive").unwrap();
    let connection = text.find("\nConnection:\n").expect("a Connection heading");
    assert!(
        own < connection && text.find("--server").unwrap() > connection,
        "{text}"
    );
    let create = run(&["create", "-h"]);
    assert!(create.ok().contains("-p, --parents"), "{create:?}");
    // sandbox connects to nothing: no connection options in its help.
    let sandbox = run(&["sandbox", "--help"]);
    let text = sandbox.ok();
    for absent in ["--sasl", "--server", "--tls-ca", "Connection:"] {
        assert!(!text.contains(absent), "{absent} in sandbox --help: {text}");
    }
    assert!(
        text.contains("--ensemble") && text.contains("--json"),
        "{text}"
    );
}

#[test]
fn the_shell_help_lists_the_shell_commands() {
    let cs = chroot("cli-shell-help");
    let data = scratch("shell-help");
    let mut p = common::spawn_shell_pty(&cs, &data, &[]);
    let (_, id) = p.exp_regex(r"\(session 0x[0-9a-f]{16}\)").unwrap();
    assert!(is_session_id(&id[9..27]), "{id}");
    p.exp_string("zkw /> ").unwrap();
    type_line(&mut p, "help");
    let help = p.exp_string("zkw /> ").unwrap();
    // What the list holds and leaves out is the unit test's (src/shell.rs,
    // `help_lists_the_shell_commands`); here: `help` typed in the shell prints that list, with
    // the shell's own commands, and not the command line's help.
    for listed in ["locks ", "cd [PATH]", "help [VERB]", "exit, quit"] {
        assert!(help.contains(listed), "{listed:?} missing: {help}");
    }
    for absent in ["--server", "Usage:"] {
        assert!(!help.contains(absent), "{absent:?} listed: {help}");
    }
    type_line(&mut p, "help create");
    let verb_help = p.exp_string("zkw /> ").unwrap();
    assert!(verb_help.contains("--parents"), "{verb_help}");
    type_line(&mut p, "sandbox");
    p.exp_string("not available in the shell").unwrap();
    p.exp_string("zkw /> ").unwrap();
    type_line(&mut p, "exit");
    p.exp_eof().unwrap();
    let _ = std::fs::remove_dir_all(data);
}

/// A script piped into the shell: the exit code is the last verb's, as `sh` gives, and the
/// piped lines stay out of the history (which is for what was typed).
#[test]
fn a_piped_shell_exits_with_the_last_verbs_code_and_keeps_no_history() {
    let cs = chroot("cli-shell-piped");
    let data = scratch("shell-piped");
    let run_script = |script: &str| piped_shell(&cs, &data, script).status.code();
    assert_eq!(run_script("get /nosuch\nexit\n"), Some(1));
    assert_eq!(run_script("get /nosuch\nls /\n"), Some(0));
    assert_eq!(run_script("cd /nowhere\n"), Some(1));
    assert_eq!(
        run_script("sandbox\n"),
        Some(2),
        "not in the shell: a usage error"
    );
    assert!(
        !data.join("zkw/history").exists(),
        "piped lines in the history"
    );
}

/// Types `line` and Enter into the shell.
fn type_line(p: &mut rexpect::session::PtySession, line: &str) {
    p.send(&format!("{line}\r")).unwrap();
    p.flush().unwrap();
}

/// What a shell line may look like: a directory with a trailing `/` (as `cd` habits and
/// completed names give), the options before the verb, `--json` errors as documents, and
/// a connection option refused (the session is made already) rather than ignored; `help cd`
/// is the shell's own help. (A trailing `/` was an invalid path, `--json ls` was not a verb,
/// errors were plain text under --json, and `--auth` on a line was silently ignored.)
#[test]
fn shell_lines_take_trailing_slashes_options_first_and_json_errors() {
    let cs = chroot("cli-shell-lines");
    zkw(&cs, &["create", "-p", "/jobs/a/b"]).ok();
    let data = scratch("shell-lines");
    let script = "cd jobs/\npwd\nls a/\n--json ls .\n--json get /nosuch\nhelp cd\n\
                  get a --auth digest:u:p\n";
    let out = piped_shell(&cs, &data, script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..3],
        ["/jobs", "b", r#"{"path":"/jobs","children":["a"]}"#],
        "{stdout}"
    );
    assert!(
        stdout.contains("cd [PATH]"),
        "help cd shows the shell's help: {stdout}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with('{') && l.contains(r#""kind":"no_node""#)),
        "a JSON error document: {stderr}"
    );
    assert!(
        stderr.contains("--auth: the shell's session is made already"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(2), "the refused --auth: {stderr}");
}

/// `zkw shell` on `cs` with `script` piped into it (history under `data`): what it printed
/// and how it ended.
fn piped_shell(cs: &str, data: &std::path::Path, script: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = common::shell_command(cs, data)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}
