//! docs/faults.md #19 mutex-chaos, light: 4 contenders, each through its own fault proxy, cycle
//! on one mutex while random faults hit the proxies for 20 s. A hold is "believed" from the
//! moment `lock()` returns until it ends or `lost()` fires; no two believed holds may overlap.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use support::chaos::{after_acquire_error, connect_retrying, Rng};
use zkwire::Client;
use zkwire_recipes::{LockError, LostReason, Mutex};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{connect_with_timeout, fresh_chroot};

const T: Duration = Duration::from_secs(2);
const CONTENDERS: usize = 4;
const CHAOS: Duration = Duration::from_secs(20);
/// The longest critical section a contender draws (one in 20 holds is 2 to 4 s long).
const LONG_HOLD: Duration = Duration::from_secs(4);

#[derive(Default)]
struct Board {
    stop: AtomicBool,
    /// Believed holds: (start, end, contender).
    holds: StdMutex<Vec<(Instant, Instant, usize)>>,
    /// Each contender's latest grant.
    last_grant: StdMutex<[Option<Instant>; CONTENDERS]>,
    lost: StdMutex<Vec<LostReason>>,
    timeouts: AtomicUsize,
    new_sessions: AtomicUsize,
    /// Acquire errors other than a timeout or the end of the session.
    unexpected: StdMutex<Vec<String>>,
    /// The contender in its believed hold, plus one (0: none), for aiming faults.
    holder: AtomicUsize,
}

async fn contender(i: usize, cs: String, board: Arc<Board>) -> Client {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut client = connect_retrying(&cs, T).await;
    while !board.stop.load(Ordering::SeqCst) {
        match Mutex::new(client.clone(), "/l").lock_timeout(T).await {
            Ok(guard) => {
                let lost = guard.lost();
                let start = Instant::now();
                if guard.is_held() {
                    board.last_grant.lock().unwrap()[i] = Some(start);
                    board.holder.store(i + 1, Ordering::SeqCst);
                    // Mostly short holds; one in twenty long enough for faults to hit it.
                    let hold = match rng.below(20) {
                        0 => LONG_HOLD / 2 + Duration::from_millis(rng.below(2000)),
                        _ => Duration::from_millis(1 + rng.below(10)),
                    };
                    tokio::select! {
                        reason = lost => board.lost.lock().unwrap().push(reason),
                        () = tokio::time::sleep(hold) => {}
                    }
                    board.holds.lock().unwrap().push((start, Instant::now(), i));
                    let _ =
                        board
                            .holder
                            .compare_exchange(i + 1, 0, Ordering::SeqCst, Ordering::SeqCst);
                }
                // While disconnected the delete waits for a connection; past T it is left
                // to the background worker (or the end of the session).
                let _ = tokio::time::timeout(T, guard.release()).await;
            }
            Err(LockError::Timeout) => {
                board.timeouts.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => {
                let who = format!("contender {i}");
                let tallies = (&board.new_sessions, &board.unexpected);
                let over = (cs.as_str(), T);
                after_acquire_error(("m19", &who), e, &mut client, over, tallies).await;
            }
        }
    }
    client
}

/// docs/faults.md #19 (light): faults every 0.5–3 s for 20 s, on one proxy or all of them — a
/// cut (FIN/RST), a blackhole (bytes held, then delivered) of 0.2–0.9 T or, one time in three,
/// of 1–1.5 T (the session expires while the holder is cut off), or a delay of 5–100 ms per
/// frame for 0.5–2 s. A third of the faults aim at the proxy of the contender that holds the
/// lock at that moment (if any). Holds are judged by the lease rule, which does not depend on
/// delays: a late reply renews the lease only to its request's send instant. No two believed
/// holds overlap; after the faults stop every contender acquires again within 2 T; no lock node
/// is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m19_mutex_chaos_light() {
    let cs = fresh_chroot("recipes_m19").await;
    let chroot = cs.rsplit_once('/').map(|(_, c)| c.to_owned()).unwrap();
    let mut proxies = Vec::new();
    for _ in 0..CONTENDERS {
        proxies.push(FaultProxy::start(shared_server().addr()).await.unwrap());
    }
    let board = Arc::new(Board::default());
    let contenders: Vec<_> = proxies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            tokio::spawn(contender(
                i,
                format!("{}/{chroot}", p.connect_string()),
                board.clone(),
            ))
        })
        .collect();

    // ZKWIRE_CHAOS_SEED=<n> replays another schedule.
    let seed = std::env::var("ZKWIRE_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0123_4567_89ab_cdef_u64);
    let mut rng = Rng(seed | 1);
    let (mut cuts, mut blackholes, mut expiries, mut delays) = (0, 0, 0, 0);
    let chaos_end = Instant::now() + CHAOS;
    while Instant::now() < chaos_end {
        tokio::time::sleep(Duration::from_millis(500 + rng.below(2500))).await;
        let holder = board.holder.load(Ordering::SeqCst).checked_sub(1);
        let any = rng.below(CONTENDERS as u64) as usize;
        // One proxy or, one time in three, all of them.
        let targets: Vec<&FaultProxy> = if rng.below(3) == 0 {
            proxies.iter().collect()
        } else {
            vec![&proxies[any]]
        };
        match rng.below(4) {
            0 => {
                targets.iter().for_each(|p| p.cut_all());
                cuts += 1;
            }
            1 => {
                let d = T * (20 + rng.below(70) as u32) / 100;
                targets.iter().for_each(|p| p.blackhole(true));
                tokio::time::sleep(d).await;
                targets.iter().for_each(|p| p.blackhole(false));
                blackholes += 1;
            }
            2 => {
                // The holder (if any) cut off past T: its session expires while it holds,
                // and the others take over; its lost() must have fired by then.
                let victim = &proxies[holder.unwrap_or(any)];
                victim.blackhole(true);
                tokio::time::sleep(T * (110 + rng.below(40) as u32) / 100).await;
                victim.blackhole(false);
                expiries += 1;
            }
            _ => {
                let d = Duration::from_millis(5 + rng.below(96));
                targets.iter().for_each(|p| p.delay(d));
                tokio::time::sleep(Duration::from_millis(500 + rng.below(1500))).await;
                targets.iter().for_each(|p| p.delay(Duration::ZERO));
                delays += 1;
            }
        }
    }
    proxies.iter().for_each(FaultProxy::heal);
    let healed = Instant::now();
    loop {
        let grants = *board.last_grant.lock().unwrap();
        if grants.iter().all(|g| g.is_some_and(|at| at > healed)) {
            break;
        }
        assert!(
            // A holder cut off at the heal is expired within T, its successor may draw a long
            // hold, and the next contender's grant follows within T.
            healed.elapsed() < 2 * T + LONG_HOLD,
            "not every contender acquired within 2 T and a long hold after the faults: {grants:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recovered = healed.elapsed();
    board.stop.store(true, Ordering::SeqCst);
    let mut clients = Vec::new();
    for c in contenders {
        clients.push(c.await.unwrap());
    }

    let mut holds = std::mem::take(&mut *board.holds.lock().unwrap());
    holds.sort();
    let mut overlaps = Vec::new();
    let mut latest: Option<(Instant, usize)> = None;
    for &(start, end, who) in &holds {
        if let Some((until, holder)) = latest {
            if start < until {
                overlaps.push((holder, who, until - start));
            }
        }
        if latest.is_none_or(|(until, _)| end > until) {
            latest = Some((end, who));
        }
    }
    let lost = board.lost.lock().unwrap().clone();
    println!(
        "m19 (seed {seed}): {} believed holds in {CHAOS:?} of faults ({cuts} cuts, {blackholes} blackholes < T, \
         {expiries} blackholes > T, {delays} delays); \
         lost signals {} {lost:?}; timeouts {}; new sessions {}; all acquired {recovered:?} after the faults; \
         overlapping holds {}",
        holds.len(),
        lost.len(),
        board.timeouts.load(Ordering::SeqCst),
        board.new_sessions.load(Ordering::SeqCst),
        overlaps.len()
    );
    assert!(
        overlaps.is_empty(),
        "believed holds overlap (holder, intruder, overlap): {overlaps:?}"
    );
    let unexpected = board.unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "acquires failed: {unexpected:?}");
    assert!(
        cuts + blackholes + expiries + delays >= 6,
        "faults were injected"
    );
    assert!(holds.len() > 100, "the lock was used");
    let observer = connect_with_timeout(&cs, T).await;
    let deadline = Instant::now() + 2 * T;
    let mut left = observer.get_children("/l").await.unwrap_or_default();
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = observer.get_children("/l").await.unwrap_or_default();
    }
    assert!(left.is_empty(), "lock nodes left: {left:?}");
    for c in clients {
        let _ = c.close().await;
    }
    observer.close().await.unwrap();
}
