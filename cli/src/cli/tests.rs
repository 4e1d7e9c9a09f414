use std::time::Duration;

use super::durations::{duration, duration_or_zero};
use super::*;
use clap::CommandFactory;

#[test]
fn declarations_are_consistent() {
    Cli::command().debug_assert();
}

/// The help's prose states numbers the code owns: each is checked against its owner.
#[test]
fn help_states_the_exit_codes_and_defaults_the_code_uses() {
    use crate::fail::{
        CANNOT_EXEC, FAILED, LOCK_LOST, LOCK_TIMEOUT, NOT_FOUND, REVOKED, UNAVAILABLE, USAGE,
    };
    for (code, meaning) in [
        (FAILED, "the operation failed"),
        (USAGE, "bad command line"),
        (UNAVAILABLE, "ZooKeeper unreachable"),
        (LOCK_TIMEOUT, "lock not acquired"),
        (LOCK_LOST, "lock lost"),
        (REVOKED, "lock revoked"),
    ] {
        assert!(
            AFTER_HELP.contains(&format!("{code} {meaning}")),
            "{code} {meaning}"
        );
    }
    assert!(AFTER_HELP.contains(&format!("{CANNOT_EXEC}/{NOT_FOUND} CMD cannot run")));
    let help = |verb: Option<&str>| {
        let mut command = command();
        let command = match verb {
            Some(verb) => command.find_subcommand_mut(verb).expect("a verb"),
            None => &mut command,
        };
        command.render_long_help().to_string()
    };
    let default = |d: Duration| format!("[default: {}", show(d));
    let top = help(None);
    let session_default = format!(
        "[default: {} ticks, at least {}]",
        crate::connect::DEFAULT_SESSION_TICKS,
        show(crate::connect::DEFAULT_SESSION_TIMEOUT)
    );
    assert!(top.contains(&session_default), "{top}");
    assert!(top.contains(&default(zkwire::DEFAULT_SERVER_TICK)), "{top}");
    let lock = help(Some("lock"));
    assert!(
        lock.contains(&default(crate::lock::DEFAULT_KILL_AFTER)),
        "{lock}"
    );
}

#[test]
fn help_names_every_error_kind() {
    for kind in crate::fail::KINDS {
        assert!(AFTER_HELP.contains(kind), "{kind} is not in zkw --help");
    }
}

/// `sandbox` connects to nothing: its help leaves the connection options out, which the
/// verbs that connect keep (grouped under their own heading).
#[test]
fn connection_options_only_where_they_count() {
    let help = |verb: &str| {
        let mut command = command();
        let sub = command
            .find_subcommand_mut(verb)
            .map(|c| c.render_long_help());
        sub.map(|h| h.to_string()).unwrap_or_default()
    };
    let sandbox = help("sandbox");
    assert!(
        !sandbox.contains("--sasl") && !sandbox.contains("--server"),
        "{sandbox}"
    );
    assert!(
        sandbox.contains("--json") && sandbox.contains("--tls"),
        "{sandbox}"
    );
    assert!(!help("demo").contains("--json"));
    let ls = help("ls");
    assert!(
        ls.contains("Connection:\n") && ls.contains("--sasl"),
        "{ls}"
    );
    assert!(ls.find("--recursive") < ls.find("Connection:"), "{ls}");
    assert!(parse(["zkw", "sandbox", "--sasl", "kerberos"]).is_ok());
}

#[test]
fn durations() {
    assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(duration("5"), Ok(Duration::from_secs(5)));
    assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(duration("-1s"), Err("must be positive".to_owned()));
    assert_eq!(duration("0"), Err("must be positive".to_owned()));
    assert_eq!(duration_or_zero("0"), Ok(Duration::ZERO));
    assert!(duration("5x").is_err() && duration("").is_err() && duration("1e400").is_err());
    assert_eq!(show(Duration::from_nanos(2_501_739_003)), "2s 502ms");
    assert_eq!(show(Duration::from_millis(90_400)), "1m 30s");
    assert_eq!(show(Duration::from_nanos(266_666_667)), "267ms");
}

#[test]
fn commands_take_everything_after_the_path() {
    let cli = Cli::try_parse_from(["zkw", "lock", "/l", "echo", "--timeout"]);
    let Ok(Cli {
        command: Some(Command::Lock(args)),
        ..
    }) = cli
    else {
        panic!("{cli:?}");
    };
    assert_eq!(args.hold.run.command, ["echo", "--timeout"]);
    assert_eq!(args.hold.timeout, None);
}
