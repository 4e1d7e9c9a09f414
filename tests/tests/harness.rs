//! Tests of the real-ZooKeeper harness (`zkwire_testing::server`).
//!
//! These tests need java and the ZooKeeper jars; when they are missing they
//! fail with a message saying what to install.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use zkwire_testing::server::{
    four_letter_word, server_mode, shared_server, Mode, ServerConfig, ZkEnsemble, ZkServer,
};

/// Env var telling [`zz_child_process_helper`] to act as a child process.
const CHILD_MODE_ENV: &str = "ZKWIRE_HARNESS_CHILD_MODE";
/// Env var naming the file where the child reports what it started.
const CHILD_OUT_ENV: &str = "ZKWIRE_HARNESS_CHILD_OUT";

fn start_server() -> ZkServer {
    ZkServer::start().unwrap_or_else(|e| panic!("{e}"))
}

fn port_accepts(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

/// Whether a process with this pid exists and is not a zombie (Linux /proc).
fn pid_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_none_or(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Polls `cond` every 50 ms until it holds or `timeout` elapses.
fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn four_letter_word_rejects_bad_commands() {
    let err = four_letter_word("127.0.0.1:1", "toolong").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn standalone_lifecycle() {
    let t0 = Instant::now();
    let mut server = start_server();
    eprintln!("standalone start: {:?}", t0.elapsed());
    let log = server.log_path().to_path_buf();
    let port = server.port();
    assert_eq!(server.connect_string(), format!("127.0.0.1:{port}"));
    assert!(server.is_running());
    assert!(
        server.pid().is_some(),
        "java pid unknown; log {}",
        log.display()
    );

    assert_eq!(
        four_letter_word(server.addr(), "ruok").unwrap().trim(),
        "imok"
    );
    let srvr = four_letter_word(server.connect_string(), "srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "srvr said: {srvr}");
    assert_eq!(server.mode(), Some(Mode::Standalone));
    let cfg = fs::read_to_string(server.dir().join("zoo.cfg")).unwrap();
    assert!(
        cfg.contains("tickTime=200") && cfg.contains("clientPortAddress=127.0.0.1"),
        "{cfg}"
    );

    let old_pid = server.pid().unwrap();
    let t1 = Instant::now();
    server.restart().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("standalone restart (kill + start): {:?}", t1.elapsed());
    assert_eq!(server.port(), port, "restart must keep the port");
    assert_ne!(server.pid(), Some(old_pid));
    assert!(!pid_alive(old_pid), "old JVM {old_pid} still alive");
    assert_eq!(server_mode(server.addr()).unwrap(), Some(Mode::Standalone));

    let pid = server.pid().unwrap();
    server.kill().unwrap_or_else(|e| panic!("{e}"));
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    assert!(!pid_alive(pid), "JVM {pid} survived kill()");
    assert!(
        !port_accepts(port),
        "port {port} still accepts after kill(); log {}",
        log.display()
    );
    assert!(four_letter_word(server.addr(), "ruok").is_err());
    // kill() of a dead server is a no-op.
    server.kill().unwrap();

    let dir = server.dir().to_path_buf();
    drop(server);
    if std::env::var_os("ZKWIRE_KEEP_LOGS").is_none() {
        assert!(!dir.exists(), "Drop must remove {}", dir.display());
    }
    eprintln!("standalone test total: {:?}", t0.elapsed());
}

#[test]
fn standalone_stop_is_graceful_and_restartable() {
    let config = ServerConfig::default()
        .tick_time_ms(100)
        .min_session_timeout_ms(200);
    let mut server = ZkServer::start_with(config).unwrap_or_else(|e| panic!("{e}"));
    assert!(fs::read_to_string(server.dir().join("zoo.cfg"))
        .unwrap()
        .contains("tickTime=100"));
    let port = server.port();
    let t = Instant::now();
    server.stop().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("standalone graceful stop: {:?}", t.elapsed());
    assert!(!server.is_running());
    assert!(!port_accepts(port));
    server.restart().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(server.mode(), Some(Mode::Standalone));
}

#[test]
fn shared_server_is_shared() {
    let a = shared_server();
    let b = shared_server();
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.mode(), Some(Mode::Standalone));
}

#[test]
fn ensemble_failover() {
    let t0 = Instant::now();
    let mut ens = ZkEnsemble::start(3).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("3-node ensemble start: {:?}", t0.elapsed());
    assert_eq!(ens.node_count(), 3);
    let ports: Vec<u16> = (0..3).map(|i| ens.node_port(i)).collect();
    let mut all = ports.clone();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 3, "client ports must differ: {ports:?}");
    assert_eq!(
        ens.connect_string(),
        ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(
        ens.node_connect_string(1),
        format!("127.0.0.1:{}", ports[1])
    );

    let modes: Vec<Option<Mode>> = (0..3).map(|i| ens.mode(i)).collect();
    let leaders = modes.iter().filter(|m| **m == Some(Mode::Leader)).count();
    let followers = modes.iter().filter(|m| **m == Some(Mode::Follower)).count();
    assert_eq!(
        (leaders, followers),
        (1, 2),
        "modes {modes:?}\n{}",
        ens.status()
    );
    let old_leader = ens
        .leader()
        .unwrap_or_else(|| panic!("no leader\n{}", ens.status()));

    let t1 = Instant::now();
    ens.kill(old_leader).unwrap_or_else(|e| panic!("{e}"));
    assert!(!ens.is_running(old_leader));
    let new_leader = ens
        .wait_for_quorum(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("leader kill -> new leader elected: {:?}", t1.elapsed());
    assert_ne!(new_leader, old_leader);
    assert_eq!(ens.leader(), Some(new_leader), "{}", ens.status());

    let t2 = Instant::now();
    ens.restart(old_leader).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("old leader restart -> rejoined: {:?}", t2.elapsed());
    assert_eq!(
        ens.mode(old_leader),
        Some(Mode::Follower),
        "{}",
        ens.status()
    );
    assert_eq!(ens.node_port(old_leader), ports[old_leader]);
    assert_eq!(
        ens.wait_for_quorum(Duration::from_secs(10)).unwrap(),
        new_leader
    );

    let dirs: Vec<PathBuf> = (0..3).map(|i| ens.node_dir(i).to_path_buf()).collect();
    let pids: Vec<u32> = (0..3).filter_map(|i| ens.node_pid(i)).collect();
    assert_eq!(pids.len(), 3);
    drop(ens);
    assert!(
        pids.iter().all(|&p| !pid_alive(p)),
        "JVMs survived Drop: {pids:?}"
    );
    assert!(ports.iter().all(|&p| !port_accepts(p)));
    if std::env::var_os("ZKWIRE_KEEP_LOGS").is_none() {
        assert!(
            dirs.iter().all(|d| !d.exists()),
            "Drop must remove {dirs:?}"
        );
    }
    eprintln!("ensemble test total: {:?}", t0.elapsed());
}

#[test]
fn ensemble_read_only_mode() {
    let config = ServerConfig::default().read_only_mode(true);
    let mut ens = ZkEnsemble::start_with(3, config).unwrap_or_else(|e| panic!("{e}"));
    ens.kill(1).unwrap_or_else(|e| panic!("{e}"));
    ens.kill(2).unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    let read_only = eventually(Duration::from_secs(20), || {
        ens.mode(0) == Some(Mode::ReadOnly)
    });
    assert!(read_only, "node 0 never went read-only\n{}", ens.status());
    eprintln!("quorum lost -> read-only: {:?}", t.elapsed());
    assert_eq!(ens.leader(), None);
}

/// Not a real test: when [`CHILD_MODE_ENV`] is set, this runs inside a
/// child process spawned by the tests below, starts servers, reports them
/// (`SERVER <port> <java pid> <dir>` lines, then `READY`), and then dies
/// without running any destructor.
#[test]
fn zz_child_process_helper() {
    let Some(mode) = std::env::var_os(CHILD_MODE_ENV) else {
        return;
    };
    let out = PathBuf::from(std::env::var_os(CHILD_OUT_ENV).unwrap());
    let mut report = String::new();
    let mut add = |port: u16, pid: Option<u32>, dir: &Path| {
        report.push_str(&format!(
            "SERVER {port} {} {}\n",
            pid.unwrap(),
            dir.display()
        ));
    };
    match mode.to_str() {
        // Server in a static, then process::exit: no Drop at all.
        Some("exit") => {
            let server = shared_server();
            add(server.port(), server.pid(), server.dir());
            fs::write(&out, report + "READY\n").unwrap();
            std::process::exit(0);
        }
        // A standalone server and a 3-node ensemble in locals; the parent
        // SIGKILLs this process.
        Some("sigkill") => {
            let server = ZkServer::start().unwrap_or_else(|e| panic!("{e}"));
            let ens = ZkEnsemble::start(3).unwrap_or_else(|e| panic!("{e}"));
            add(server.port(), server.pid(), server.dir());
            for i in 0..ens.node_count() {
                add(ens.node_port(i), ens.node_pid(i), ens.node_dir(i));
            }
            fs::write(&out, report + "READY\n").unwrap();
            thread::sleep(Duration::from_secs(60));
            drop((server, ens));
            std::process::exit(3);
        }
        // Report how starting fails (the parent breaks the environment).
        Some("start-error") => {
            let line = match ZkServer::start() {
                Ok(_) => "STARTED\n".to_owned(),
                Err(e) => format!("ERR {e}\n"),
            };
            fs::write(&out, line).unwrap();
            std::process::exit(0);
        }
        other => panic!("unknown child mode {other:?}"),
    }
}

/// Re-runs this test binary as a child acting out `mode` with extra
/// environment `envs`; waits (bounded) until it has written its report.
fn spawn_child(mode: &str, envs: &[(&str, &str)]) -> (Child, String) {
    // One report file per child: two tests run the same mode at once (each removes its file
    // before and after, which removed the other's report when the name was the mode's).
    static CHILDREN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CHILDREN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!(
        "zkwire-harness-child-{}-{n}-{mode}.out",
        std::process::id()
    ));
    let _ = fs::remove_file(&out);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "zz_child_process_helper",
            "--test-threads=1",
            "--quiet",
        ])
        .env(CHILD_MODE_ENV, mode)
        .env(CHILD_OUT_ENV, &out)
        .env_remove("ZKWIRE_KEEP_LOGS")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let done = eventually(Duration::from_secs(45), || {
        fs::read_to_string(&out).is_ok_and(|r| r.ends_with('\n'))
            || matches!(child.try_wait(), Ok(Some(_)))
    });
    let report = fs::read_to_string(&out).unwrap_or_default();
    let _ = fs::remove_file(&out);
    if !done || report.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("child ({mode}) reported nothing (done={done})");
    }
    (child, report)
}

/// Parses `SERVER <port> <pid> <dir>` lines of a child's report.
fn parse_servers(mode: &str, report: &str) -> Vec<(u16, u32, PathBuf)> {
    assert!(
        report.ends_with("READY\n"),
        "child ({mode}) failed: {report:?}"
    );
    report
        .lines()
        .filter_map(|l| l.strip_prefix("SERVER "))
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let port = parts.next().unwrap().parse().unwrap();
            let pid = parts.next().unwrap().parse().unwrap();
            (port, pid, PathBuf::from(parts.next().unwrap()))
        })
        .collect()
}

fn assert_cleaned_up(mode: &str, servers: &[(u16, u32, PathBuf)]) {
    let t = Instant::now();
    let gone = eventually(Duration::from_secs(5), || {
        servers
            .iter()
            .all(|(port, pid, dir)| !pid_alive(*pid) && !port_accepts(*port) && !dir.exists())
    });
    let state: Vec<String> = servers
        .iter()
        .map(|(port, pid, dir)| {
            format!(
                "java pid {pid} alive={}, port {port} accepts={}, {} exists={}",
                pid_alive(*pid),
                port_accepts(*port),
                dir.display(),
                dir.exists()
            )
        })
        .collect();
    assert!(
        gone,
        "leftovers after the child ({mode}) died:\n{}",
        state.join("\n")
    );
    eprintln!(
        "{mode}: {} JVM(s) gone and dirs removed {:?} after the test process died",
        servers.len(),
        t.elapsed()
    );
}

#[test]
fn no_leftover_after_process_exit_with_static_server() {
    let (mut child, report) = spawn_child("exit", &[]);
    let servers = parse_servers("exit", &report);
    assert_eq!(servers.len(), 1);
    let status = child.wait().unwrap();
    assert!(status.success(), "child exited with {status}");
    assert_cleaned_up("process::exit", &servers);
}

#[test]
fn no_leftover_after_sigkill() {
    let (mut child, report) = spawn_child("sigkill", &[]);
    let servers = parse_servers("sigkill", &report);
    assert_eq!(servers.len(), 4);
    for (port, pid, _) in &servers {
        assert!(
            pid_alive(*pid) && port_accepts(*port),
            "server {port} not up in the child"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_cleaned_up("SIGKILL", &servers);
}

#[test]
fn missing_java_is_reported() {
    let (mut child, report) = spawn_child("start-error", &[("JAVA", "/nonexistent/bin/java")]);
    child.wait().unwrap();
    assert!(
        report.starts_with("ERR java not found: install"),
        "{report}"
    );
}

#[test]
fn missing_zookeeper_is_reported() {
    let (mut child, report) = spawn_child(
        "start-error",
        &[("ZKWIRE_ZK_CLASSPATH", "/nonexistent/zookeeper.jar")],
    );
    child.wait().unwrap();
    assert!(
        report.starts_with(
            "ERR ZooKeeper not found: install it with `apt-get install -y zookeeper` (Debian) or set ZKWIRE_ZK_CLASSPATH"
        ),
        "{report}"
    );
    eprintln!("bad classpath reported as: {}", report.trim_end());
}

#[test]
fn startup_failure_reports_log_tail() {
    let config = ServerConfig::default().extra("tickTime", "not-a-number");
    let err = ZkServer::start_with(config).unwrap_err().to_string();
    assert!(
        err.contains("server log:") && err.contains("NumberFormatException"),
        "{err}"
    );
}
