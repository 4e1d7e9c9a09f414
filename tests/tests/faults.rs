//! Surviving faults against a real ZooKeeper: expiry, real session kills, server restarts,
//! local expiry, watch restoration, auth replay. Test names carry the project's fault-matrix
//! numbers (`m01`, ...); every test ends with the leak check.
//!
//! Tests run one at a time, each on a runtime built and dropped under a shared lock, so that
//! the file-descriptor accounting of the leak check sees only its own test.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use zkwire::{
    Acl, Client, CreateOptions, Error, EventType, KeeperState, OneshotWatcher, SessionState,
    StateStream,
};
use zkwire_testing::server::ZkServer;
use zkwire_testing::support::{
    assert_known_as, assert_no_leaks, connect_with_timeout, create_persistent, fresh_chroot,
    kill_client_session, next_state, open_fds,
};

/// Runs one test of this file at a time, on a runtime of its own that is built and dropped
/// while holding the lock. The tests count this process's file descriptors, so nothing else
/// may open or close any meanwhile: a lock taken inside a `#[tokio::test]` body comes too
/// late, as the next test's runtime (its epoll and event descriptors) is built before its
/// body could wait, and the last one's is dropped after its body let go.
fn serial(test: impl std::future::Future<Output = ()>) {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(test);
}

const T: Duration = Duration::from_secs(2);

/// The tests: each `#[test]` runs its body with [`serial`].
macro_rules! serial_tests {
    ($($test:ident => $body:ident,)*) => {$(
        #[test]
        fn $test() {
            serial($body());
        }
    )*};
}

serial_tests! {
    m01_handshake_expired_is_terminal => m01_handshake_expired_is_terminal_body,
    m02_real_session_kill_reports_expiry_once => m02_real_session_kill_reports_expiry_once_body,
    m11_local_expiry_when_no_server_answers => m11_local_expiry_when_no_server_answers_body,
    m12_watches_survive_a_server_restart => m12_watches_survive_a_server_restart_body,
    m26_bad_auth_is_terminal_good_auth_is_replayed
        => m26_bad_auth_is_terminal_good_auth_is_replayed_body,
}

/// Asserts no state change happens for `quiet`.
async fn no_state_change(states: &mut StateStream, quiet: Duration) {
    let next = tokio::time::timeout(quiet, states.next()).await;
    assert!(next.is_err(), "unexpected state change: {next:?}");
}

async fn fired(w: OneshotWatcher) -> zkwire::WatchedEvent {
    tokio::time::timeout(Duration::from_secs(5), w)
        .await
        .expect("the watch fires")
}

/// Restarts (kill -9, start on the same port and data dir) without blocking the runtime.
fn restart(server: &mut ZkServer) {
    tokio::task::block_in_place(|| server.restart()).expect("restart");
}

/// Session timeout of the clients that live through a restart of their server.
const RESTART_T: Duration = Duration::from_secs(10);

/// A client, alone on `server`, that is to live through a restart of it.
///
/// The restarted standalone server restores the session from its data directory and expires
/// it `RESTART_T` after loading it, unless the client is back by then. ZooKeeper 3.8 accepts
/// connections a moment before it has created its database; a connection it closes in that
/// moment ("ZooKeeperServer not running") hits the missing database, the close is abandoned
/// half-way (a NullPointerException in the server log), and the socket stays open with the
/// ConnectRequest never answered. With one host the client's default connect timeout is the
/// whole session timeout, so that one stuck attempt lasts until the server has expired the
/// session. Half the session timeout leaves room for the next attempt (this setting can go
/// once the default itself is at most half the session timeout).
async fn connect_for_restart(server: &ZkServer) -> Client {
    zkwire_testing::support::builder()
        .with_session_timeout(RESTART_T)
        .with_connect_timeout(RESTART_T / 2)
        .connect(&server.connect_string())
        .await
        .unwrap()
}

/// Waits for the next state change and asserts it is `want`; on failure the message carries
/// the server's log, which tells a stuck or refused handshake from a late one.
async fn expect_state(
    states: &mut StateStream,
    within: Duration,
    want: SessionState,
    server: &ZkServer,
) {
    let got = tokio::time::timeout(within, states.next()).await;
    assert!(
        matches!(got, Ok(Some(s)) if s == want),
        "wanted {want:?} within {within:?}, got {got:?}; server log:\n{}",
        server.log_tail(80)
    );
}

/// Resuming a closed or bogus session gets Expired (terminal), never a silent new one.
async fn m01_handshake_expired_is_terminal_body() {
    let cs = fresh_chroot("m01").await;
    let fds = open_fds();
    let a = connect_with_timeout(&cs, T).await;
    let (id, passwd) = (a.session_id(), a.session_password());
    a.close().await.unwrap();
    let resumed = zkwire_testing::support::builder()
        .with_session(id, passwd)
        .connect(&cs)
        .await;
    assert_eq!(resumed.err(), Some(Error::SessionExpired));

    // A bogus session, with requests submitted before the handshake: all fail, and so does
    // everything after; no new session is made behind our back.
    let bogus = zkwire_testing::support::builder()
        .with_session(0x0bad_0000_0000_0001, bytes::Bytes::from_static(&[7; 16]))
        .spawn(&cs, zkwire::TcpConnector)
        .unwrap();
    let mut states = bogus.state_stream();
    let pending = bogus.get_data("/");
    assert_eq!(pending.await, Err(Error::SessionExpired));
    assert_eq!(next_state(&mut states, T).await, SessionState::Expired);
    assert_eq!(bogus.exists("/").await, Err(Error::SessionExpired));
    assert_eq!(bogus.session_id(), 0x0bad_0000_0000_0001);
    no_state_change(&mut states, Duration::from_millis(300)).await;
    assert_eq!(
        bogus.stats().connections,
        1,
        "no reconnect loop after expiry"
    );
    assert_no_leaks(bogus, fds).await;
}

/// A real kill (closeSession from a second connection) is seen as Disconnected then
/// Expired, exactly once each; the session's ephemerals are gone for an observer.
async fn m02_real_session_kill_reports_expiry_once_body() {
    let cs = fresh_chroot("m02").await;
    let fds = open_fds();
    let a = connect_with_timeout(&cs, T).await;
    let observer = connect_with_timeout(&cs, T).await;
    a.create("/eph", b"", &CreateOptions::ephemeral())
        .await
        .unwrap();
    let (_, watcher) = a.exists_and_watch("/never").await.unwrap();
    let mut states = a.state_stream();

    kill_client_session(&a).await.unwrap();
    observer.sync("/").await.unwrap();
    assert_eq!(
        observer.exists("/eph").await.unwrap(),
        None,
        "ephemeral gone at once"
    );

    assert_eq!(
        next_state(&mut states, 2 * T).await,
        SessionState::Disconnected
    );
    assert_eq!(next_state(&mut states, 2 * T).await, SessionState::Expired);
    no_state_change(&mut states, Duration::from_millis(300)).await;
    let end = fired(watcher).await;
    assert_eq!(
        (end.event_type, end.state),
        (EventType::None, KeeperState::Expired)
    );
    assert_eq!(a.get_data("/").await, Err(Error::SessionExpired));
    assert_no_leaks(a, fds + 1).await;
    observer.close().await.unwrap();
}

/// With every server down for longer than the session timeout the client declares
/// the session expired by itself, between T and 10·T; a brand-new session that never
/// connected does not "expire".
async fn m11_local_expiry_when_no_server_answers_body() {
    let mut server = ZkServer::start().unwrap();
    let a = connect_with_timeout(&server.connect_string(), T).await;
    let mut states = a.state_stream();
    let stopped_at = Instant::now();
    tokio::task::block_in_place(|| server.kill()).unwrap();

    assert_eq!(next_state(&mut states, T).await, SessionState::Disconnected);
    assert_eq!(next_state(&mut states, 10 * T).await, SessionState::Expired);
    let took = stopped_at.elapsed();
    assert!(took >= T && took <= 10 * T, "expired after {took:?}");
    println!("m11: local expiry {took:?} after the server stopped (T = {T:?})");
    let seconds = format!("{:.2}", took.as_secs_f64());
    zkwire_testing::support::figure("m11.local_expiry_s", seconds);
    assert_eq!(a.exists("/").await, Err(Error::SessionExpired));
    // Stopping the server closed the harness's pipe to it, so count from here: the expired
    // client holds no socket and makes no more attempts.
    let fds = open_fds();
    assert_eq!(a.stats().connections, 1, "no reconnect succeeded");
    assert_no_leaks(a, fds).await;

    let fresh = zkwire_testing::support::builder()
        .with_session_timeout(T)
        .spawn(&server.connect_string(), zkwire::TcpConnector)
        .unwrap();
    tokio::time::sleep(3 * T / 2).await;
    assert_eq!(
        fresh.state(),
        SessionState::Connecting,
        "a session never made cannot expire"
    );
    assert_eq!(
        fresh
            .with_timeout(Duration::from_millis(200))
            .exists("/")
            .await,
        Err(Error::Timeout)
    );
    drop(fresh);
}

/// Data, child and exist watches survive a server restart: no spurious event, and
/// each later change fires exactly once, in order.
async fn m12_watches_survive_a_server_restart_body() {
    let mut server = ZkServer::start().unwrap();
    let fds = open_fds();
    let a = connect_for_restart(&server).await;
    create_persistent(&a, "/d", b"").await;
    create_persistent(&a, "/c", b"").await;
    let (_, _, mut data) = a.get_data_and_watch("/d").await.unwrap();
    let (_, _, mut child) = a.get_children_and_watch("/c").await.unwrap();
    let (_, mut exist) = a.exists_and_watch("/missing").await.unwrap();
    let session = a.session_id();
    let mut states = a.state_stream();

    restart(&mut server);
    let back = Instant::now();
    let within = Duration::from_secs(10);
    expect_state(&mut states, within, SessionState::Disconnected, &server).await;
    expect_state(&mut states, within, SessionState::Connected, &server).await;
    println!(
        "m12: reconnected {:?} after the server was back",
        back.elapsed()
    );
    assert_eq!(a.session_id(), session, "same session");
    for w in [&mut data, &mut child, &mut exist] {
        let early = tokio::time::timeout(Duration::from_millis(200), w).await;
        assert!(
            early.is_err(),
            "spurious event after the restart: {early:?}"
        );
    }

    a.set_data("/d", b"1", None).await.unwrap();
    create_persistent(&a, "/c/k", b"").await;
    create_persistent(&a, "/missing", b"").await;
    assert_eq!(fired(data).await.event_type, EventType::NodeDataChanged);
    assert_eq!(
        fired(child).await.event_type,
        EventType::NodeChildrenChanged
    );
    assert_eq!(fired(exist).await.event_type, EventType::NodeCreated);
    assert_eq!(a.stats().watches, 0, "one-shot watches are gone once fired");
    assert_no_leaks(a, fds).await;
}

/// A bad auth scheme is terminal (AuthFailed); a good digest credential is replayed
/// after a reconnect, before anything else, so ACL-protected reads keep working.
async fn m26_bad_auth_is_terminal_good_auth_is_replayed_body() {
    let mut server = ZkServer::start().unwrap();
    let fds = open_fds();
    let bad = zkwire_testing::support::builder()
        .with_auth("nosuchscheme", b"x")
        .connect(&server.connect_string())
        .await;
    assert_eq!(bad.err(), Some(Error::AuthFailed));

    let a = connect_for_restart(&server).await;
    a.add_auth("digest", b"alice:secret").await.unwrap();
    let private = CreateOptions::persistent().with_acl(Acl::creator_all());
    a.create("/private", b"s", &private).await.unwrap();
    let mut states = a.state_stream();
    restart(&mut server);
    let within = Duration::from_secs(10);
    expect_state(&mut states, within, SessionState::Disconnected, &server).await;
    expect_state(&mut states, within, SessionState::Connected, &server).await;
    assert_eq!(
        &a.get_data("/private").await.unwrap().0[..],
        b"s",
        "auth replayed"
    );
    assert_known_as(&a, "digest", "alice").await;

    let mut states = a.state_stream();
    let failed = a.add_auth("nosuchscheme", b"x").await;
    assert_eq!(failed, Err(Error::AuthFailed));
    assert_eq!(next_state(&mut states, T).await, SessionState::AuthFailed);
    assert_eq!(a.exists("/").await, Err(Error::AuthFailed));
    assert_no_leaks(a, fds).await;
}
