//! Session renewal against a real server: a renewing client whose session is killed
//! (`kill_session`) goes on with a new session on the same handle.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkwire::jute::{Decode, FrameDecoder};
use zkwire::proto::ConnectResponse;
use zkwire::{
    AddWatchMode, Client, CreateOptions, Error, EventType, KeeperState, SessionState, WatchedEvent,
};
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{
    attach_frame, connect_renewing, connect_with_timeout, create_persistent, fresh_chroot,
    kill_client_session, kill_session, read_frame,
};

const T: Duration = Duration::from_secs(4);

async fn next_event(stream: &mut zkwire::PersistentWatcher) -> WatchedEvent {
    tokio::time::timeout(3 * T, stream.next())
        .await
        .expect("an event in time")
        .expect("the watch goes on")
}

/// The stream yields the old session's events, the renewal marker, then the new session's;
/// the state stream says Expired then Connected; the ephemeral node and the one-shot watch
/// of the old session are gone; a request made while the session was being replaced runs on
/// the new one; and nothing leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_is_replaced_on_the_same_client() {
    let cs = fresh_chroot("renewal").await;
    let client = connect_renewing(&cs, T).await;
    let other = Client::connect(&cs).await.unwrap();
    let mut events = client
        .add_watch("/", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    client
        .create("/eph", b"", &CreateOptions::ephemeral())
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut events).await.event_type,
        EventType::NodeCreated
    );
    let (_, one_shot) = client.exists_and_watch("/never").await.unwrap();
    let mut states = client.state_stream();
    let old = client.session_id();

    kill_client_session(&client).await.unwrap();
    // Made while the old session is being found dead: runs on the new one.
    let queued = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .create("/made-meanwhile", b"", &CreateOptions::persistent())
                .await
        })
    };

    let mut seen = Vec::new();
    while !seen.contains(&SessionState::Connected) {
        let state = tokio::time::timeout(3 * T, states.next())
            .await
            .unwrap()
            .unwrap();
        seen.push(state);
    }
    println!("states: {seen:?}");
    let expired_at = seen.iter().position(|s| *s == SessionState::Expired);
    assert!(expired_at.is_some(), "{seen:?}");
    assert!(!seen.contains(&SessionState::Closed), "{seen:?}");
    assert_ne!(client.session_id(), old, "a new session");
    assert_ne!(client.session_id(), 0);
    assert_eq!(client.stats().sessions, 2);

    let end = one_shot.await;
    assert_eq!(
        (end.event_type, end.state),
        (EventType::None, KeeperState::Expired)
    );
    // The old session's ephemeral is deleted (its NodeDeleted may arrive before the
    // connection closes), then the marker.
    let mut event = next_event(&mut events).await;
    if event.event_type == EventType::NodeDeleted {
        assert_eq!(event.path, "/eph");
        event = next_event(&mut events).await;
    }
    assert_eq!(
        (event.event_type, event.state),
        (EventType::None, KeeperState::Expired)
    );

    queued
        .await
        .unwrap()
        .expect("the request made meanwhile ran");
    create_persistent(&other, "/after", b"").await;
    let mut paths = Vec::new();
    while paths.len() < 2 {
        let event = next_event(&mut events).await;
        assert_eq!(event.event_type, EventType::NodeCreated, "{event:?}");
        paths.push(event.path);
    }
    paths.sort();
    assert_eq!(
        paths,
        ["/after", "/made-meanwhile"],
        "events of the new session"
    );
    assert_eq!(client.exists("/eph").await.unwrap(), None);

    drop(events);
    client.close().await.unwrap();
    let stats = client.stats();
    assert_eq!((stats.in_flight, stats.queued, stats.watches), (0, 0, 0));
    other.close().await.unwrap();
}

/// A renewing client still ends for good when it is closed, and a non-renewing one still
/// ends on expiry: renewal changes nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_renewal_a_killed_session_ends() {
    let cs = fresh_chroot("renewal_off").await;
    let client = connect_with_timeout(&cs, T).await;
    kill_client_session(&client).await.unwrap();
    let mut states = client.state_stream();
    loop {
        let state = tokio::time::timeout(3 * T, states.next())
            .await
            .unwrap()
            .unwrap();
        if state.is_terminal() {
            assert_eq!(state, SessionState::Expired);
            break;
        }
    }
    assert_eq!(client.exists("/").await, Err(Error::SessionExpired));
    assert_eq!(client.stats().sessions, 1);
}

/// Attaches a raw connection to session `id` (0: a new session). `None` when the server
/// refuses it as expired; else the connection, the session's id and its password.
async fn attach(addr: &str, id: i64, passwd: Bytes) -> Option<(TcpStream, i64, Bytes)> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&attach_frame(id, passwd)).await.unwrap();
    // The server may close at once: the session was closed as we attached.
    let reply = read_frame(&mut stream, &mut FrameDecoder::default())
        .await
        .ok()?;
    let response = ConnectResponse::decode_exact(&reply).unwrap();
    (!response.is_expired()).then_some((stream, response.session_id, response.passwd))
}

/// The session's owner: each time the server cuts its connection off (another connection
/// attached), it attaches again at once, as a client reconnecting does, up to `times` times,
/// counting them in `taken`. It may be left holding a connection to a session closed from
/// the other one: the caller aborts it.
async fn take_back(
    addr: String,
    mut conn: TcpStream,
    id: i64,
    passwd: Bytes,
    taken: Arc<AtomicU32>,
) {
    const TIMES: u32 = 3;
    loop {
        let mut sink = [0u8; 256];
        while matches!(conn.read(&mut sink).await, Ok(n) if n > 0) {}
        if taken.load(Ordering::SeqCst) == TIMES {
            return;
        }
        match attach(&addr, id, passwd.clone()).await {
            Some((next, _, _)) => {
                conn = next;
                taken.fetch_add(1, Ordering::SeqCst);
            }
            None => return,
        }
    }
}

/// `kill_session` ends the session even when its owner takes it back right after our attach
/// cut it off (the owner's attach closes ours, and our closeSession may never run): it
/// attaches again until its closeSession is answered or the session is found gone. The
/// discovery interop test once failed on a single attempt ("peer closed the connection").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_session_ends_a_session_whose_owner_takes_it_back() {
    let addr = shared_server().connect_string();
    for round in 0..5 {
        let (conn, id, passwd) = attach(&addr, 0, Bytes::from_static(&[0; 16]))
            .await
            .unwrap();
        let taken = Arc::new(AtomicU32::new(0));
        let owner = tokio::spawn(take_back(
            addr.clone(),
            conn,
            id,
            passwd.clone(),
            taken.clone(),
        ));
        tokio::time::timeout(T, kill_session(&addr, id, passwd.clone()))
            .await
            .expect("bounded")
            .expect("the session killed");
        owner.abort();
        let taken = taken.load(Ordering::SeqCst);
        assert!(
            attach(&addr, id, passwd).await.is_none(),
            "round {round}: the session outlived the kill ({taken} take-backs)"
        );
        println!("round {round}: the owner took its session back {taken} time(s)");
    }
}
