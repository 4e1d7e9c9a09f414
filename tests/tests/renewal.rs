//! Session renewal against a real server: a renewing client whose session is killed
//! (`kill_session`) goes on with a new session on the same handle.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use zkwire::{
    AddWatchMode, Client, CreateOptions, Error, EventType, KeeperState, SessionState, WatchedEvent,
};
use zkwire_testing::support::{
    connect_renewing, connect_with_timeout, create_persistent, fresh_chroot, kill_client_session,
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
