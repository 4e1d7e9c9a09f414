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
