//! `register`, `services`, `members` and `barrier` against a real server: an instance
//! registered for the run of a command, a group's members joined through the library, and
//! a double barrier of two `zkw` processes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::time::Duration;

use serde_json::Value;
use zkwire_recipes::GroupMember;

use common::{chroot, finish, gated, release, scratch, spawn_script, wait_file, zkw, REGISTER_API};

/// How long any one test's `zkw` runs may take.
const LIMIT: Duration = Duration::from_secs(30);

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `register` makes an instance that `services` lists with what was given while the command
/// runs (which sees its id), and the instance is gone once the command has exited.
#[test]
fn register_lists_the_instance_while_the_command_runs() {
    let cs = chroot("cli-discovery-register");
    let dir = scratch("register");
    let script = gated("echo \"$ZKW_SERVICE_ID\" > \"$0/id\"", 3);
    let registered = spawn_script(
        &cs,
        &[
            &REGISTER_API[..],
            &["--ssl-port", "8443", "--id", "api-1"],
            &["--payload", r#"{"zone":"eu-1"}"#],
        ]
        .concat(),
        &script,
        &dir,
    );
    assert_eq!(wait_file(&dir.join("id"), LIMIT), "api-1");

    let names = json(zkw(&cs, &["services", "--json"]).ok());
    assert_eq!(names["base"], "/services");
    assert_eq!(names["services"], serde_json::json!(["api"]));
    let listed = json(zkw(&cs, &["services", "api", "--json"]).ok());
    assert_eq!(listed["name"], "api");
    let instances = listed["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 1, "{listed}");
    let instance = &instances[0];
    assert_eq!(instance["id"], "api-1");
    assert_eq!(instance["address"], "10.0.0.7");
    assert_eq!(instance["port"], 8080);
    assert_eq!(instance["ssl_port"], 8443);
    assert_eq!(instance["service_type"], "DYNAMIC");
    assert_eq!(instance["payload"], serde_json::json!({"zone": "eu-1"}));
    assert!(instance["registration_time_utc"].as_i64().unwrap() > 0);
    let text = zkw(&cs, &["services", "api"]).ok().to_owned();
    assert!(
        text.starts_with("api-1  10.0.0.7:8080  ssl 8443  DYNAMIC  registered "),
        "{text}"
    );
    assert!(text.trim_end().ends_with(r#"{"zone":"eu-1"}"#), "{text}");

    release(&dir);
    let out = finish(registered, LIMIT);
    assert_eq!(out.code, Some(3), "{out:?}");
    let after = json(zkw(&cs, &["services", "api", "--json"]).ok());
    assert_eq!(after["instances"], serde_json::json!([]), "{after}");
    // A payload that is not JSON is refused before anything is registered.
    let bad = zkw(
        &cs,
        &[
            "register",
            "api",
            "--address",
            "a",
            "--port",
            "1",
            "--payload",
            "{",
            "--",
            "true",
        ],
    );
    assert_eq!(bad.code, Some(2), "{bad:?}");
}

/// `members` lists the members of a group joined through the library, with their data; a
/// missing path exits 1 (`no_node`).
#[test]
fn members_lists_a_library_group() {
    let cs = chroot("cli-discovery-members");
    let runtime = common::runtime();
    let (client, one, two) = runtime.block_on(async {
        let client = zkwire::Client::connect(&cs).await.unwrap();
        let one = GroupMember::join(client.clone(), "/group", "m1", "data-1")
            .await
            .unwrap();
        let two = GroupMember::join(client.clone(), "/group", "m2", "data-2")
            .await
            .unwrap();
        for member in [&one, &two] {
            assert!(member.wait_for_initial_create(LIMIT).await.unwrap());
        }
        (client, one, two)
    });
    let session = format!("{:#018x}", client.session_id());

    assert_eq!(
        zkw(&cs, &["members", "/group"]).ok(),
        "m1  data-1\nm2  data-2\n"
    );
    let doc = json(zkw(&cs, &["members", "/group", "--json"]).ok());
    assert_eq!(doc["path"], "/group");
    let members = doc["members"].as_array().unwrap();
    assert_eq!(members.len(), 2, "{doc}");
    assert_eq!(members[0]["id"], "m1");
    assert_eq!(members[0]["data"], "data-1");
    assert_eq!(members[0]["data_base64"], "ZGF0YS0x");
    assert_eq!(members[0]["session"], session.as_str());
    assert_eq!(members[1]["id"], "m2");
    assert_eq!(members[1]["data"], "data-2");

    let missing = zkw(&cs, &["members", "/no/such"]);
    assert_eq!(
        missing.fails(1),
        "zkw: /no/such: node does not exist (no group there)"
    );
    let missing = zkw(&cs, &["members", "/no/such", "--json"]);
    assert_eq!(missing.code, Some(1));
    assert_eq!(json(&missing.stderr)["kind"], "no_node");

    runtime.block_on(async {
        one.close().await.unwrap();
        two.close().await.unwrap();
        client.close().await.unwrap();
    });
    assert_eq!(
        zkw(&cs, &["members", "/group"]).ok(),
        "/group: no members\n"
    );
}

/// Two `zkw barrier --members 2` processes both enter and run their commands; one alone
/// times out with 73 and runs nothing.
#[test]
fn barrier_of_two_runs_both_commands() {
    let cs = chroot("cli-discovery-barrier");
    let dir = scratch("barrier");
    let member = |n: u32| {
        let script = format!("touch \"$0/ran-{n}\"; test -n \"$ZKW_BARRIER_NODE\"");
        spawn_script(
            &cs,
            &["barrier", "/round", "--members", "2", "--timeout", "20s"],
            &script,
            &dir,
        )
    };
    let first = member(1);
    let second = member(2);
    for (n, child) in [(1, first), (2, second)] {
        let out = finish(child, LIMIT);
        assert_eq!(out.code, Some(0), "member {n}: {out:?}");
        assert!(dir.join(format!("ran-{n}")).exists());
    }

    let alone = zkw(
        &cs,
        &[
            "barrier",
            "/alone",
            "--members",
            "2",
            "--timeout",
            "1s",
            "--",
            "sh",
            "-c",
            "touch \"$0/ran-alone\"",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(
        alone.fails(73),
        "zkw: barrier /alone: not all 2 members entered within 1s"
    );
    assert!(!dir.join("ran-alone").exists());
    // Its member node went with the timeout (the container itself may be gone too).
    let left = zkw(&cs, &["ls", "/alone"]);
    assert!(left.code == Some(1) || left.ok().is_empty(), "{left:?}");
}
