//! The lease with a relay bound: an answer counts only once the leader has vouched for it
//! (docs/lease.md). The tests in the parent module cover the lease without one.

use super::*;
use crate::proto::{SetDataRequest, SyncRequest, SyncResponse};
use crate::session::timers::ping_interval;

const T_MS: i32 = 4_000;
/// Two ticks of 200 ms.
const RELAY: Duration = Duration::from_millis(400);

fn relay_config() -> SessionConfig {
    SessionConfig {
        relay_bound: Some(RELAY),
        ..config(Duration::from_millis(T_MS as u64))
    }
}

/// A session that resumes `SID`: its handshake is a revalidation, which the leader does not
/// confirm with a quorum.
fn resumed_config() -> SessionConfig {
    SessionConfig {
        resume: Some((SID, Bytes::from_static(&PASSWD))),
        ..relay_config()
    }
}

/// A harness whose first handshake, with `config`, the server accepted for `T_MS`.
fn accepted(config: SessionConfig) -> Harness {
    let mut h = Harness::with_config(config);
    h.open();
    h.accept(&welcome(T_MS));
    h
}

fn sync_body() -> Bytes {
    SyncResponse {
        path: "/".to_owned(),
    }
    .to_bytes()
}

fn set_data(path: &str) -> Request {
    let body = SetDataRequest {
        path: path.to_owned(),
        data: Some(Bytes::from_static(b"x")),
        version: -1,
    }
    .to_bytes();
    Request::new(OpCode::SetData, body)
}

/// Answers every sync the session wrote, `rtt` after it was written (the clock moves).
fn answer_syncs(h: &mut Harness, rtt: Duration) -> usize {
    let frames = h.sent_frames();
    for (header, body) in &frames {
        assert_eq!(
            header.op,
            OpCode::Sync,
            "only syncs: {:?}",
            headers(&frames)
        );
        let request = SyncRequest::decode_exact(body).expect("a SyncRequest");
        assert_eq!(request.path, "/");
        h.jump(rtt);
        h.reply(header.xid, 1, ErrorCode::Ok, &sync_body());
    }
    frames.len()
}

/// A new session is made by the leader and agreed by a quorum: its handshake is vouched for
/// at once, from the ConnectRequest's send instant.
#[test]
fn a_new_session_is_vouched_for_by_its_creation() {
    let mut h = Harness::with_config(relay_config());
    h.advance(ms(100));
    h.open();
    h.advance(ms(30));
    h.accept(&welcome(T_MS));
    assert_eq!(
        h.session.lease_deadline(),
        Some(h.at(ms(100) + ms(T_MS as u64)))
    );
}

/// A revalidated session's handshake and a read answered by the server we talk to count only
/// once a sync sent at least the relay bound after their answers comes back.
#[test]
fn answers_count_once_a_later_sync_vouches_for_them() {
    let mut h = accepted(resumed_config());
    assert_eq!(
        h.session.lease_deadline(),
        None,
        "a revalidation alone proves nothing"
    );
    // The first sync goes out at once; answered 10 ms later it is too early to vouch.
    h.wake();
    assert_eq!(answer_syncs(&mut h, ms(10)), 1);
    assert_eq!(h.session.lease_deadline(), None);
    // Paced: the next sync goes out a vouch interval (T/6, 667 ms) after the first.
    h.advance(ms(650));
    assert!(h.sent_frames().is_empty(), "not yet");
    h.advance(ms(10));
    assert_eq!(answer_syncs(&mut h, ms(10)), 1);
    h.assert_lease(
        ms(T_MS as u64),
        "the handshake, sent at 0, answered 667 ms before this sync",
    );
    // A read answered now waits for its own vouch.
    h.advance(ms(100));
    h.submit(get_data("/r", None));
    let [(header, _)] = h.sent_frames().try_into().expect("one getData");
    h.reply(header.xid, 2, ErrorCode::Ok, &data_body(b""));
    assert_eq!(h.session.lease_deadline(), Some(h.at(ms(T_MS as u64))));
}

/// The partition the relay bound exists for: the server we talk to answers our reads (and
/// would answer pings) but cannot forward a sync to a leader it has lost. The lease stays
/// where the last vouched answer put it, and the unanswered sync drops the connection
/// within the read timeout, while the lease still has time left.
#[test]
fn a_server_cut_off_from_the_leader_cannot_renew_the_lease() {
    let mut h = accepted(relay_config());
    let lease = h.session.lease_deadline();
    assert_eq!(lease, Some(h.at(ms(T_MS as u64))));
    // The first sync (at once) is never answered.
    h.wake();
    let [(sync, _)] = h.sent_frames().try_into().expect("one sync");
    assert_eq!(sync.op, OpCode::Sync);
    let mut dropped = None;
    for _ in 0..40 {
        h.advance(ms(100));
        if !drops(&h.drain_events()).is_empty() {
            dropped = Some(h.now);
            break;
        }
    }
    assert_eq!(
        dropped,
        Some(h.at(ms(2_700))),
        "read timeout 2T/3 after the sync"
    );
    assert_eq!(h.session.lease_deadline(), lease, "nothing renewed it");
}

/// A successful write is answered only after the leader handled it: it vouches like a sync.
#[test]
fn a_write_vouches_like_a_sync() {
    let mut h = accepted(resumed_config());
    h.advance(ms(500));
    // The first sync is still unanswered, so this write is written behind it; both come
    // back at 510 ms: the sync (sent at 0) is too early, the write (sent at 500) is not.
    h.submit(set_data("/w"));
    let frames = h.sent_frames();
    assert_eq!(
        headers(&frames)[1],
        (2, OpCode::SetData),
        "{:?}",
        headers(&frames)
    );
    h.jump(ms(10));
    h.reply(frames[0].0.xid, 1, ErrorCode::Ok, &sync_body());
    assert_eq!(h.session.lease_deadline(), None);
    h.reply(2, 2, ErrorCode::Ok, &Stat::default().to_bytes());
    assert_eq!(h.session.lease_deadline(), Some(h.at(ms(T_MS as u64))));
}

/// An idle healthy session sends syncs, not pings, and its lease is never more than the
/// relay bound plus a ping interval (plus round trips) behind `now + T`.
#[test]
fn an_idle_session_keeps_its_lease_with_syncs_alone() {
    let mut h = accepted(resumed_config());
    let mut syncs = 0;
    for step in 0..600 {
        h.advance(ms(100));
        syncs += answer_syncs(&mut h, ms(5));
        if step < 10 {
            continue;
        }
        let lease = h.session.lease_deadline().expect("a lease");
        let age = ms(T_MS as u64).saturating_sub(lease.saturating_duration_since(h.now));
        assert!(age <= RELAY + ms(1333) + ms(120), "step {step}: {age:?}");
    }
    assert!(drops(&h.drain_events()).is_empty(), "never disconnected");
    // 60 s at one sync per 672 ms (the pace, plus the 5 ms answer).
    assert!((85..=95).contains(&syncs), "{syncs} syncs");
}

/// SASL steps are handled by the server outside the path that records a session as alive:
/// they never renew the lease (and a session a read-only server made gets none from them).
#[test]
fn sasl_steps_do_not_renew_the_lease() {
    let mut h = Harness::with_config(sasl_config());
    h.open();
    h.accept(&welcome(30_000));
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
    let [(first, _)] = h.sent_frames().try_into().expect("the first SASL step");
    h.jump(secs(5));
    h.reply(first.xid, 1, ErrorCode::Ok, &sasl_body(b"challenge"));
    let [(second, _)] = h.sent_frames().try_into().expect("the second SASL step");
    h.jump(secs(1));
    h.reply(second.xid, 1, ErrorCode::Ok, &sasl_body(b"proof"));
    assert_eq!(h.session.state(), SessionState::Connected);
    h.assert_lease(secs(30), "the step sent at 5 s renewed nothing");
}

/// A read-only server's answers are its own: no sync goes to it, and nothing renews the
/// lease there.
#[test]
fn no_syncs_go_to_a_read_only_server() {
    let mut h = Harness::with_config(SessionConfig {
        read_only: true,
        ..relay_config()
    });
    h.open();
    let mut read_only = welcome(T_MS);
    read_only.read_only = Some(true);
    h.accept(&read_only);
    assert_eq!(h.session.state(), SessionState::ConnectedReadOnly);
    h.advance(ms(1500));
    let frames = h.sent_frames();
    assert!(
        frames.iter().all(|(header, _)| header.op == OpCode::Ping),
        "{:?}",
        headers(&frames)
    );
    assert_eq!(h.session.lease_deadline(), None);
}

/// A reconnect may negotiate a smaller T. The server re-times the session at every touch to
/// now + that T, so the expiry can come sooner than an earlier touch promised: the lease
/// moves back to the reconnect's touch plus the smaller T (and `Client::lease_expiring` wakes
/// up for it), and later touches count with the smallest T the session has had.
#[test]
fn a_smaller_timeout_after_a_reconnect_moves_the_lease_back() {
    let mut h = Harness::new();
    h.connect(); // T = 30 s, handshake sent at 0
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
    h.advance(secs(5));
    h.disconnect();
    h.open();
    h.accept(&welcome(10_000));
    assert_eq!(h.session.session_timeout(), Some(secs(10)));
    h.assert_lease(
        secs(15),
        "5 s + 10 s: the server re-timed the session at the reconnect",
    );
    // 20 s on without firing timers (no ping to answer meanwhile).
    h.jump(secs(20));
    h.submit(get_data("/r", None));
    let [(header, _)] = h.sent_frames().try_into().expect("one getData");
    h.reply(header.xid, 2, ErrorCode::Ok, &data_body(b""));
    h.assert_lease(secs(35), "25 s + 10 s");
}

/// A reconnect that negotiates a larger T does not lengthen the lease: the session's
/// smallest T still counts, and `lease_timeout` (which `Client::lease_renewed_at` subtracts
/// from the deadline) says so while `session_timeout` reports the new T.
#[test]
fn a_larger_timeout_after_a_reconnect_leaves_the_lease_on_the_smaller() {
    let mut h = Harness::new();
    h.connect(); // T = 30 s, handshake sent at 0
    h.advance(secs(5));
    h.disconnect();
    h.open();
    h.accept(&welcome(10_000));
    h.advance(secs(1));
    h.disconnect();
    h.open();
    h.accept(&welcome(40_000));
    assert_eq!(h.session.session_timeout(), Some(secs(40)));
    assert_eq!(h.session.lease_timeout(), Some(secs(10)));
    h.assert_lease(secs(16), "the second reconnect's touch (6 s) + the smallest T");
}

/// Vouches are paced on the lease's timeout: after a reconnect that negotiated a larger T,
/// the syncs keep the pace of the smaller one, or the lease would lag past its own T (at
/// the larger T's pace a sync goes out every 1.33 s, and the 2 s lease runs out).
#[test]
fn vouches_keep_the_pace_of_the_smallest_timeout() {
    let mut h = accepted(resumed_config()); // T = 4 s
    for t_ms in [2_000, 8_000] {
        h.advance(ms(100));
        h.disconnect();
        h.open();
        h.accept(&welcome(t_ms));
    }
    assert_eq!(h.session.session_timeout(), Some(secs(8)));
    assert_eq!(h.session.lease_timeout(), Some(secs(2)));
    for step in 0..300 {
        h.advance(ms(50));
        answer_syncs(&mut h, ms(5));
        if step < 20 {
            continue; // the reconnect's touch waits for a sync sent P after it
        }
        let lease = h.session.lease_deadline().expect("a lease");
        let left = lease.saturating_duration_since(h.now);
        assert!(left >= ms(2_000) - RELAY - ping_interval(secs(2)) - ms(120), "step {step}: {left:?} left");
    }
    assert!(drops(&h.drain_events()).is_empty(), "never disconnected");
}
