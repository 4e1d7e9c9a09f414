//! Lock recipes on a client that renews its session after an expiry (a real server, the
//! session killed with `kill_session`): the guard of the old session reports `lost()`, and an
//! acquire in progress starts over and completes on the new session.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use zkwire::SessionState;
use zkwire_recipes::{LostReason, Mutex};
use zkwire_testing::support::{connect_with_timeout, fresh_chroot, kill_client_session};

const T: Duration = Duration::from_secs(4);
const STEP: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewing_client_loses_its_hold_and_acquires_again_on_the_new_session() {
    let cs = fresh_chroot("recipes_renewal").await;
    let renewing = zkwire_testing::support::builder()
        .with_session_timeout(T)
        .with_session_renewal(true)
        .connect(&cs)
        .await
        .unwrap();
    let other = connect_with_timeout(&cs, T).await;

    // `renewing` holds /held and waits for /contended, which `other` holds.
    let held = Mutex::new(renewing.clone(), "/held").lock().await.unwrap();
    let blocker = Mutex::new(other.clone(), "/contended")
        .lock()
        .await
        .unwrap();
    let waiting = {
        let mutex = Mutex::new(renewing.clone(), "/contended");
        tokio::spawn(async move { mutex.lock().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "behind the other holder");
    let old = renewing.session_id();

    kill_client_session(&renewing).await.unwrap();
    let reason = tokio::time::timeout(STEP, held.lost())
        .await
        .expect("lost() fired");
    println!("the old hold: {reason}");
    assert!(
        matches!(
            reason,
            LostReason::SessionEnded(SessionState::Expired) | LostReason::NodeDeleted
        ),
        "{reason:?}"
    );

    // The acquire starts over on the new session, still behind `other`, and gets the lock
    // once `other` lets go.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "still behind the other holder");
    blocker.release().await.unwrap();
    let guard = tokio::time::timeout(STEP, waiting)
        .await
        .expect("acquired in time")
        .unwrap()
        .expect("acquired on the new session");
    let new = renewing.session_id();
    assert_ne!(new, old);
    let (_, stat) = renewing.get_data(guard.path()).await.unwrap();
    assert_eq!(
        stat.ephemeral_owner, new,
        "the node belongs to the new session"
    );
    guard.release().await.unwrap();
    drop(held);
    renewing.close().await.unwrap();
    other.close().await.unwrap();
}

/// A renewing client whose session was expired from outside.
async fn renewing(cs: &str) -> zkwire::Client {
    zkwire_testing::support::builder()
        .with_session_timeout(T)
        .with_session_renewal(true)
        .connect(cs)
        .await
        .unwrap()
}

/// Kills the client's session and waits until it is connected on a new one.
async fn renew_from_outside(client: &zkwire::Client) {
    let old = client.session_id();
    kill_client_session(client).await.unwrap();
    tokio::time::timeout(STEP, async {
        while client.session_id() == old
            || client.session_id() == 0
            || client.state() != SessionState::Connected
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("renewed in time");
}

/// The guard of every recipe, never asked about before the renewal, is not held on the new
/// session: its node went with the old one, and the new session's lease is not its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_first_asked_after_a_renewal_is_not_held() {
    use zkwire_recipes::{LeaderLatch, RwLock, Semaphore, SemaphoreLimit};
    let cs = fresh_chroot("recipes_renewal_first_asked").await;
    let c = renewing(&cs).await;
    let mutex = Mutex::new(c.clone(), "/m").lock().await.unwrap();
    let write = RwLock::new(c.clone(), "/w").write().await.unwrap();
    let read = RwLock::new(c.clone(), "/r").read().await.unwrap();
    let lease = Semaphore::new(c.clone(), "/s", SemaphoreLimit::Fixed(2))
        .acquire_one()
        .await
        .unwrap();
    let latch = LeaderLatch::new(c.clone(), "/l", "a");
    latch.start();
    let leadership = latch.await_leadership().await.unwrap();
    renew_from_outside(&c).await;
    let expired = LostReason::SessionEnded(SessionState::Expired);
    let answers = [
        ("mutex", mutex.is_held(), mutex.trusted_until().is_some()),
        ("write", write.is_held(), write.trusted_until().is_some()),
        ("read", read.is_held(), read.trusted_until().is_some()),
        (
            "semaphore",
            lease.is_held(),
            lease.trusted_until().is_some(),
        ),
        (
            "leader",
            leadership.is_held(),
            leadership.trusted_until().is_some(),
        ),
    ];
    for (what, held, trusted) in answers {
        assert!(!held, "{what}: held on the new session");
        assert!(!trusted, "{what}: trusted on the new session");
    }
    let now = Duration::from_millis(100);
    for (what, lost) in [
        ("mutex", tokio::time::timeout(now, mutex.lost()).await),
        ("write", tokio::time::timeout(now, write.lost()).await),
        ("read", tokio::time::timeout(now, read.lost()).await),
        ("semaphore", tokio::time::timeout(now, lease.lost()).await),
        ("leader", tokio::time::timeout(now, leadership.lost()).await),
    ] {
        assert_eq!(lost, Ok(expired), "{what}");
    }
    latch.close().await.ok();
    c.close().await.unwrap();
}
