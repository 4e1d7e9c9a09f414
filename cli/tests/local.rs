//! `zkw sandbox` (standalone and ensemble) and a small `zkw demo`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::process::Child;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use common::{command, finish, lines_of, run, signal, zkw};

/// Starts `zkw sandbox ARGS` (with `--port` on `ports` consecutive free ports when given),
/// uses the server it prints, stops it with Ctrl-C.
fn sandbox_round_trip(args: &[&str], ports: Option<u16>) {
    // The standard output is kept open (and read) until the end.
    let (sandbox, _stdout, export, port) = match ports {
        Some(nodes) => {
            let (sandbox, stdout, first, port) = sandbox_on_free_ports(args, nodes);
            (sandbox, stdout, first, Some(port))
        }
        None => {
            let mut all = vec!["sandbox"];
            all.extend_from_slice(args);
            let mut sandbox = command(&all).spawn().unwrap();
            let stdout = lines_of(sandbox.stdout.take().unwrap());
            let first = stdout
                .recv_timeout(Duration::from_secs(90))
                .expect("an export line");
            (sandbox, stdout, first, None)
        }
    };
    let connect = export
        .strip_prefix("export ZOOKEEPER=")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{export}"))
        .to_owned();
    assert!(
        export.contains(" ZKW_SERVER_TICK=200ms"),
        "the servers' tick is exported: {export}"
    );
    assert!(connect.starts_with("127.0.0.1:"), "{connect}");
    if let Some(port) = port {
        let expected: Vec<String> = (0..connect.split(',').count())
            .map(|i| format!("127.0.0.1:{}", port + i as u16))
            .collect();
        assert_eq!(
            connect,
            expected.join(","),
            "server i listens on --port + i"
        );
    }
    // The exported variable is what every other verb reads.
    let mut env = command(&["ls", "/"]);
    env.env("ZOOKEEPER", &connect);
    assert_eq!(
        finish(env.spawn().unwrap(), Duration::from_secs(30)).code,
        Some(0)
    );
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
    // Every host refuses: zkw says so at once, host by host.
    let said = gone.fails(69);
    assert!(
        said.starts_with(&format!("zkw: cannot connect to {connect}: ")),
        "{said}"
    );
    assert_eq!(
        said.matches("Connection refused").count(),
        connect.split(',').count(),
        "{said}"
    );
}

#[test]
fn sandbox_standalone() {
    sandbox_round_trip(&[], None);
}

#[test]
fn sandbox_ensemble() {
    sandbox_round_trip(&["--ensemble", "3"], None);
}

#[test]
fn sandbox_on_a_given_port() {
    sandbox_round_trip(&[], Some(1));
    // An ensemble's servers listen on the port and the ones after it.
    sandbox_round_trip(&["--ensemble", "3"], Some(3));
}

/// `zkw sandbox ARGS --port P` on `nodes` consecutive ports found free: the sandbox, its
/// standard output after the first line, that line, and P. A port found free can be taken
/// (by any connection of a test running alongside) before the sandbox listens on it; the
/// sandbox then fails ("cannot listen", or its server cannot bind), and other ports are
/// tried.
fn sandbox_on_free_ports(args: &[&str], nodes: u16) -> (Child, Receiver<String>, String, u16) {
    let mut failures = Vec::new();
    for _ in 0..5 {
        let port = free_ports(nodes);
        let port_arg = port.to_string();
        let mut all = vec!["sandbox"];
        all.extend_from_slice(args);
        all.extend(["--port", &port_arg]);
        let mut sandbox = command(&all).spawn().unwrap();
        let stdout = lines_of(sandbox.stdout.take().unwrap());
        match stdout.recv_timeout(Duration::from_secs(90)) {
            Ok(first) => return (sandbox, stdout, first, port),
            Err(_) => failures.push(finish(sandbox, Duration::from_secs(30))),
        }
    }
    panic!("the sandbox never started on ports found free: {failures:?}");
}

#[test]
fn sandbox_refuses_a_busy_port() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = run(&["sandbox", "--port", &port]);
    assert_eq!(
        out.fails(1),
        format!("zkw: cannot listen on 127.0.0.1:{port}: Address already in use (os error 98)")
    );
}

/// The first of `n` consecutive ports nothing listens on right now.
fn free_ports(n: u16) -> u16 {
    for _ in 0..100 {
        let first = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = first.local_addr().unwrap().port();
        drop(first);
        let free = (0..n).all(|i| {
            base.checked_add(i)
                .is_some_and(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        });
        if free {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

#[test]
fn sandbox_rejects_bad_sizes() {
    assert_eq!(
        run(&["sandbox", "--ensemble", "0"]).fails(2),
        "zkw: invalid value '0' for '--ensemble <N>': 0 is not in 1..=9 (see zkw --help)"
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

/// `zkw sandbox --tls --json --port N` prints what a client needs, with the TLS port being
/// N; `--tls-*` (or `ZKW_TLS_*`) use it, the client certificate gives an x509 identity, and
/// plaintext is refused with a reason.
#[test]
fn sandbox_tls_and_the_tls_options() {
    let (sandbox, _stdout, line, port) = sandbox_on_free_ports(&["--tls", "--json"], 1);
    let field = |name: &str| {
        let start = line.find(&format!("\"{name}\":\"")).expect(name) + name.len() + 4;
        line[start..].split('"').next().unwrap().to_owned()
    };
    let (connect, ca, cert, key) = (
        field("connect_string"),
        field("tls_ca"),
        field("tls_cert"),
        field("tls_key"),
    );
    assert_eq!(connect, format!("localhost:{port}"), "{line}");
    let tls = ["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key];
    let who = zkw(&connect, &[&tls[..], &["whoami"]].concat());
    assert!(
        who.ok().contains("x509:CN=zkwire-client,O=zkwire"),
        "{who:?}"
    );
    let anonymous = zkw(&connect, &["--tls-ca", &ca, "create", "/over-tls", "yes"]);
    assert_eq!(anonymous.ok(), "/over-tls\n");
    let by_env = command(&["--server", &connect, "get", "/over-tls"])
        .env("ZKW_TLS_CA", &ca)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&by_env.stdout), "yes\n");
    // A server that answered, on a port of the other kind: not "unreachable" (69), which
    // scripts retry.
    let plain = zkw(&connect, &["ls", "/"]);
    assert!(
        plain
            .fails(1)
            .contains("is this a TLS port (secureClientPort)?"),
        "{plain:?}"
    );
    assert_eq!(
        zkw(&connect, &["--tls-cert", &cert, "ls", "/"]).fails(2),
        "zkw: --tls-cert and --tls-key (or $ZKW_TLS_CERT, $ZKW_TLS_KEY) need --tls-ca (or \
         $ZKW_TLS_CA)"
    );
    signal(sandbox.id(), "INT");
    let out = finish(sandbox, Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// `--sasl digest:USER` takes the password from `ZKW_SASL_PASSWORD` (or a prompt, or the
/// value itself); a refused password is reported as such.
#[test]
fn sasl_digest_options() {
    use zkwire_testing::server::{ServerConfig, ZkServer};
    let config = ServerConfig::default().sasl_digest(&[("bob", "bobsecret")], true);
    let server = ZkServer::start_with(config).expect("a SASL server");
    let cs = server.connect_string();
    let with_password = |password: &str| {
        let out = command(&["--server", &cs, "--sasl", "digest:bob", "whoami"])
            .env("ZKW_SASL_PASSWORD", password)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, _) = with_password("bobsecret");
    assert_eq!(code, Some(0));
    assert!(stdout.contains("sasl:bob"), "{stdout}");
    // Not "unreachable" (69): retrying cannot help.
    let (code, _, stderr) = with_password("wrong");
    assert_eq!(code, Some(1));
    assert!(stderr.contains("refused the SASL credentials"), "{stderr}");
    let no_password = zkw(&cs, &["--sasl", "digest:bob", "whoami"]);
    assert!(
        no_password.fails(2).contains("ZKW_SASL_PASSWORD"),
        "{no_password:?}"
    );
    let inline = zkw(&cs, &["--sasl", "digest:bob:bobsecret", "whoami"]);
    assert!(inline.ok().contains("sasl:bob"));
}

/// `--sasl kerberos`: the identity is the principal of the keytab the environment names;
/// without credentials zkw says SASL failed (exit 1, kind `no_auth`: a retry cannot help).
/// Needs zkw's `kerberos`
/// feature, which `make test` turns on.
#[cfg(feature = "kerberos")]
#[test]
fn sasl_kerberos_option() {
    use zkwire_testing::kerberos::Kdc;
    use zkwire_testing::server::{ServerConfig, ZkServer};
    let kdc = Kdc::start().expect("a KDC (Debian: krb5-kdc, krb5-admin-server)");
    let keytab = kdc.add_principal("carol").expect("principal carol");
    let config = ServerConfig::default().sasl_kerberos(&kdc, true);
    let server = ZkServer::start_with(config).expect("a Kerberos server");
    let cs = format!("localhost:{}", server.addr().port());
    let run = |sasl: &str| {
        command(&["--server", &cs, "--sasl", sasl, "whoami"])
            .envs(kdc.client_env(&keytab, "carol"))
            .output()
            .unwrap()
    };
    let out = run("kerberos");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("sasl:carol@ZKWIRE.TEST"), "{stdout}");
    let out = run("kerberos:carol@ZKWIRE.TEST");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run("kerberos:nobody@ZKWIRE.TEST");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}
