//! A real 3-node ensemble: leader kill with writes in flight, quorum loss, and a session
//! stolen by a second handle. Names cite the scenario numbers of docs/faults.md.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{block_in_place, JoinSet};
use zkwire::{Client, CreateOptions, Error, SessionState};
use zkwire_testing::server::ZkEnsemble;
use zkwire_testing::support::{
    assert_no_leaks_to, connect_with_timeout, create_persistent, socket_lines, sockets_to,
};

const SESSION: Duration = Duration::from_secs(8);
/// m25's session timeout, and its writers' request timeout. Both m25 tests' premise is an
/// outage shorter than these: the client reports a session expired 4/3 of the session
/// timeout after it last heard a server (docs/lease.md), and a request that waited its
/// timeout for a connection fails with `Timeout`. Two servers restarting and electing took
/// 2.6–8.6 s here while another ensemble ran beside, and the client's reconnect backoff comes
/// on top. With [`SESSION`], one quorum-loss run in about a dozen lost its session, and one
/// leader-kill run in about fifteen (two tests at once) saw writes time out.
const OUTAGE_SESSION: Duration = Duration::from_secs(20);

fn start_ensemble() -> ZkEnsemble {
    block_in_place(|| ZkEnsemble::start(3)).expect("a 3-node ensemble")
}

/// What a writer saw: paths reported created, and how many creates failed with each error.
#[derive(Default)]
struct Writes {
    ok: Vec<String>,
    connection_loss: usize,
    other: Vec<Error>,
}

/// Writers creating `/w/<task>-<n>` one after another until stopped.
struct Writers {
    stop: Arc<AtomicBool>,
    set: JoinSet<Writes>,
}

impl Writers {
    /// Creates `/w` and starts `tasks` writers under it, each create bounded by `timeout`.
    async fn start(client: &Client, tasks: usize, timeout: Duration) -> Self {
        create_persistent(client, "/w", b"").await;
        let stop = Arc::new(AtomicBool::new(false));
        let mut set = JoinSet::new();
        for task in 0..tasks {
            set.spawn(write_until(client.clone(), task, timeout, stop.clone()));
        }
        Self { stop, set }
    }

    /// Stops the writers; what they saw, all together.
    async fn stop(mut self) -> Writes {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Writes::default();
        while let Some(w) = self.set.join_next().await {
            let w = w.unwrap();
            all.ok.extend(w.ok);
            all.connection_loss += w.connection_loss;
            all.other.extend(w.other);
        }
        all
    }
}

/// Writer `task`: creates `/w/<task>-<n>` one after another until `stop`, each within
/// `timeout`.
async fn write_until(
    client: Client,
    task: usize,
    timeout: Duration,
    stop: Arc<AtomicBool>,
) -> Writes {
    let mut w = Writes::default();
    let opts = CreateOptions::persistent();
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let path = format!("/w/{task}-{n}");
        match client
            .with_timeout(timeout)
            .create(&path, b"x", &opts)
            .await
        {
            Ok((p, _)) => w.ok.push(p),
            Err(Error::ConnectionLoss) => w.connection_loss += 1,
            Err(e) => w.other.push(e),
        }
    }
    w
}

impl Writes {
    /// "N acknowledged, M ConnectionLoss".
    fn summary(&self) -> String {
        format!(
            "{} acknowledged, {} ConnectionLoss",
            self.ok.len(),
            self.connection_loss
        )
    }

    fn assert_only_connection_loss(&self) {
        assert!(
            self.other.is_empty(),
            "only ConnectionLoss may fail a write: {:?}",
            self.other
        );
    }
}

/// Every write reported OK is there; nothing reported OK is missing.
async fn assert_acknowledged_writes_exist(client: &Client, writes: &Writes) {
    client.sync("/w").await.unwrap();
    let present: std::collections::HashSet<String> = client
        .get_children("/w")
        .await
        .unwrap()
        .into_iter()
        .map(|c| format!("/w/{c}"))
        .collect();
    let lost: Vec<&String> = writes.ok.iter().filter(|p| !present.contains(*p)).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    // A create that failed with ConnectionLoss may or may not have been applied; nothing else
    // can have been.
    assert!(present.len() <= writes.ok.len() + writes.connection_loss);
}

/// Leader kill with writes in flight: the client moves to a live server keeping its session;
/// every write reported OK is read back; none reported OK that did not happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m25_leader_kill_with_writes_in_flight() {
    let mut ensemble = start_ensemble();
    let ports: Vec<u16> = (0..3).map(|i| ensemble.node_port(i)).collect();
    let client = connect_with_timeout(&ensemble.connect_string(), OUTAGE_SESSION).await;
    let session = client.session_id();
    let running = Writers::start(&client, 4, OUTAGE_SESSION).await;

    tokio::time::sleep(Duration::from_millis(300)).await;
    let leader = ensemble.leader().expect("a leader");
    let killed = Instant::now();
    block_in_place(|| ensemble.kill(leader)).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes = running.stop().await;
    // Printed with a failure's output: how long the writers were held up, at most.
    println!(
        "m25 leader kill: the writers stopped {:?} after the kill",
        killed.elapsed()
    );

    writes.assert_only_connection_loss();
    assert_eq!(client.session_id(), session, "the session survived");
    assert_eq!(client.state(), SessionState::Connected);
    assert_acknowledged_writes_exist(&client, &writes).await;
    println!(
        "m25 leader kill: {} writes acknowledged, {} ConnectionLoss, {} connections",
        writes.ok.len(),
        writes.connection_loss,
        client.stats().connections
    );
    zkwire_testing::support::figure("m25.leader_kill.acknowledged", writes.ok.len());
    zkwire_testing::support::figure("m25.leader_kill.connection_loss", writes.connection_loss);
    assert!(writes.ok.len() > 10, "writes resumed after the leader died");
    // A server still electing closes new connections without a byte, and the client then
    // probes that host once, on a short second connection, for a TLS port reached without
    // TLS (docs/security.md): let such a probe end before counting.
    let settled = Instant::now() + Duration::from_secs(5);
    while sockets_to(&ports) > 1 && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open = socket_lines(&ports);
    assert_eq!(open.len(), 1, "one connection at a time: {open:?}");
    assert_no_leaks_to(client, &ports).await;
}

/// Quorum loss shorter than the session timeout: writes fail with ConnectionLoss (never a
/// false OK) while 2 of 3 servers are down, and the session survives once they are back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m25_quorum_loss_then_recovery_keeps_the_session() {
    let mut ensemble = start_ensemble();
    let client = connect_with_timeout(&ensemble.connect_string(), OUTAGE_SESSION).await;
    let session = client.session_id();
    let running = Writers::start(&client, 2, OUTAGE_SESSION).await;

    tokio::time::sleep(Duration::from_millis(200)).await;
    let lost = Instant::now();
    block_in_place(|| {
        ensemble.kill(0)?;
        ensemble.kill(1)
    })
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    block_in_place(|| {
        ensemble.restart(0)?;
        ensemble.restart(1)
    })
    .unwrap();
    block_in_place(|| ensemble.wait_for_quorum(Duration::from_secs(20))).unwrap();
    // Printed with a failure's output: how long the premise's outage really lasted.
    println!(
        "m25 quorum loss: the quorum was back after {:?}",
        lost.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = running.stop().await;

    writes.assert_only_connection_loss();
    assert_eq!(
        client.session_id(),
        session,
        "the session survived the quorum loss"
    );
    assert_acknowledged_writes_exist(&client, &writes).await;
    println!("m25 quorum loss: {}", writes.summary());
    zkwire_testing::support::figure("m25.quorum_loss.acknowledged", writes.ok.len());
    zkwire_testing::support::figure("m25.quorum_loss.connection_loss", writes.connection_loss);
    client.close().await.unwrap();
}

/// docs/faults.md #3: a second handle attaches to the same session through another server while
/// the first has writes in flight: the first handle's requests fail with ConnectionLoss (or
/// succeed), nothing is applied twice, and closing the session through the second handle ends
/// the first one too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m03_session_stomp() {
    let ensemble = start_ensemble();
    let first = connect_with_timeout(&ensemble.node_connect_string(0), SESSION).await;
    let running = Writers::start(&first, 3, SESSION).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let second = zkwire_testing::support::builder()
        .with_session(first.session_id(), first.session_password())
        .with_session_timeout(SESSION)
        .connect(&ensemble.node_connect_string(1))
        .await
        .unwrap();
    assert_eq!(second.session_id(), first.session_id());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let writes = running.stop().await;
    let mut states = first.state_stream();
    second.close().await.unwrap();

    assert!(
        writes.other.iter().all(|e| *e == Error::SessionExpired),
        "{:?}",
        writes.other
    );
    let observer = Client::connect(&ensemble.connect_string()).await.unwrap();
    assert_acknowledged_writes_exist(&observer, &writes).await;
    // The session is over for the first handle as well.
    let end = tokio::time::timeout(3 * SESSION, async {
        while let Some(state) = states.next().await {
            if state.is_terminal() {
                return state;
            }
        }
        SessionState::Closed
    })
    .await
    .expect("the first handle learns the session ended");
    assert_eq!(end, SessionState::Expired);
    println!("m03 stomp: {}", writes.summary());
    observer.close().await.unwrap();
}

/// Read-only mode: with its quorum gone, a server running with `readonlymode.enabled`
/// serves a client that allows it (ConnectedReadOnly: reads work, writes fail NotReadOnly);
/// once the quorum is back the client finds a read/write server by itself (`isro` probes)
/// and moves to it with a real session (the read-only one was local to that server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_server_then_back_to_read_write() {
    use zkwire_testing::server::ServerConfig;
    let config = ServerConfig::default().read_only_mode(true);
    let mut ensemble = block_in_place(|| ZkEnsemble::start_with(3, config)).unwrap();
    let setup = Client::connect(&ensemble.connect_string()).await.unwrap();
    create_persistent(&setup, "/ro", b"data").await;
    setup.close().await.unwrap();
    block_in_place(|| {
        ensemble.kill(1)?;
        ensemble.kill(2)
    })
    .unwrap();

    let client = zkwire_testing::support::builder()
        .with_read_only(true)
        .with_session_timeout(SESSION)
        .connect(&ensemble.connect_string())
        .await
        .unwrap();
    let mut states = client.state_stream();
    if client.state() != SessionState::ConnectedReadOnly {
        // Node 0 may still be switching to read-only mode.
        let state = tokio::time::timeout(Duration::from_secs(15), states.next())
            .await
            .unwrap();
        assert_eq!(state, Some(SessionState::ConnectedReadOnly));
    }
    let local_session = client.session_id();
    assert_eq!(&client.get_data("/ro").await.unwrap().0[..], b"data");
    assert_eq!(
        client.set_data("/ro", b"x", None).await,
        Err(Error::NotReadOnly)
    );

    block_in_place(|| {
        ensemble.restart(1)?;
        ensemble.restart(2)?;
        ensemble.wait_for_quorum(Duration::from_secs(30)).map(drop)
    })
    .unwrap();
    let back = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(state) = states.next().await {
            if state == SessionState::Connected {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(back, Ok(true), "found the read/write server");
    assert_ne!(
        client.session_id(),
        local_session,
        "a real session replaced the local one"
    );
    client.set_data("/ro", b"rw again", None).await.unwrap();
    client.close().await.unwrap();
}
