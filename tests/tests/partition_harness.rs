//! The partition harness itself (`zkwire_testing::partition`): a real 3-node ZooKeeper 3.8
//! ensemble whose servers only reach each other through relays, partitioned between the
//! servers and observed from the servers' own point of view (`srvr`, `mntr`).
//!
//! One ensemble is shared by the tests of this binary: each test locks it (so they run one
//! at a time), starts from a healed, whole ensemble and heals it again when done. The 5-node
//! test starts its own ensemble while holding the same lock. Every wait is bounded.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::sleep;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zkwire_testing::partition::{Flow, LinkFault, LinkKind, LinkRelay, PartitionedEnsemble, View};
use zkwire_testing::server::ServerConfig;

/// How long a healed ensemble may take to be whole again.
const HEAL_TIMEOUT: Duration = Duration::from_secs(30);
/// Slack on top of `syncLimit * tickTime` for a partition to show in the servers' view.
const DETECT_SLACK: Duration = Duration::from_secs(4);

/// tickTime 200 ms, syncLimit 5 (a silent link is noticed after 1 s), initLimit 10.
fn config() -> ServerConfig {
    zkwire_testing::partition::partition_config(200)
}

static SHARED: OnceLock<Mutex<PartitionedEnsemble>> = OnceLock::new();

/// The shared ensemble, locked, healed and whole; healed again on drop.
struct Fixture(MutexGuard<'static, PartitionedEnsemble>);

impl Deref for Fixture {
    type Target = PartitionedEnsemble;
    fn deref(&self) -> &PartitionedEnsemble {
        &self.0
    }
}

impl DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut PartitionedEnsemble {
        &mut self.0
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.0.heal();
    }
}

fn lock_shared() -> MutexGuard<'static, PartitionedEnsemble> {
    SHARED
        .get_or_init(|| {
            let started = Instant::now();
            let e = PartitionedEnsemble::start(3, config())
                .unwrap_or_else(|e| panic!("cannot start the partitioned ensemble: {e}"));
            eprintln!(
                "3-node partitioned ensemble whole after {:?}",
                started.elapsed()
            );
            Mutex::new(e)
        })
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

fn fixture() -> Fixture {
    let e = lock_shared();
    e.heal();
    if let Err(err) = e.wait_healed(HEAL_TIMEOUT) {
        panic!("the shared ensemble did not heal: {err}");
    }
    Fixture(e)
}

/// Some follower of `leader`.
fn a_follower(e: &PartitionedEnsemble, leader: usize) -> usize {
    (leader + 1) % e.node_count()
}

/// Heals every link and waits for the ensemble to be whole again; its leader.
fn heal(e: &PartitionedEnsemble) -> usize {
    e.heal();
    e.wait_healed(HEAL_TIMEOUT)
        .unwrap_or_else(|err| panic!("{err}"))
}

/// Waits (up to the sync timeout and some) until `leader` leads without follower `f`, which
/// has stopped following, and with every other follower synced; `what` names the wait.
fn wait_follower_out(e: &PartitionedEnsemble, leader: usize, f: usize, what: &str) {
    let n = e.node_count();
    e.wait_until(what, e.sync_timeout() + DETECT_SLACK, |v| {
        v.is_leading(leader) && v.synced_followers_of(leader) == Some(n - 2) && !v.is_following(f)
    })
    .unwrap_or_else(|err| panic!("{err}"));
}

/// Asserts that `check` holds for every view seen during `period`.
fn holds_for(e: &PartitionedEnsemble, period: Duration, what: &str, check: impl Fn(&View) -> bool) {
    let end = Instant::now() + period;
    while Instant::now() < end {
        let v = e.view();
        assert!(check(&v), "{what} stopped holding: {v}\n{}", e.status());
        sleep(Duration::from_millis(100));
    }
}

/// Isolates a follower with `fault`: the leader loses it and it stops serving within
/// `syncLimit * tickTime` plus slack, it stays out while isolated, and rejoins on heal.
fn isolated_follower_leaves_and_rejoins(fault: LinkFault) {
    let e = fixture();
    let n = e.node_count();
    let leader = e.wait_healed(HEAL_TIMEOUT).unwrap();
    let f = a_follower(&e, leader);

    let cut_at = Instant::now();
    e.isolate(f, fault);
    let what = format!("leader {leader} drops follower {f}, which stops serving");
    wait_follower_out(&e, leader, f, &what);
    eprintln!("{fault:?}: follower {f} out after {:?}", cut_at.elapsed());

    holds_for(
        &e,
        e.sync_timeout() * 2,
        "an isolated follower stays out",
        |v| {
            v.is_leading(leader)
                && !v.is_following(f)
                && v.synced_followers_of(leader) == Some(n - 2)
        },
    );

    let healed_at = Instant::now();
    let back = heal(&e);
    eprintln!(
        "{fault:?}: whole again {:?} after heal",
        healed_at.elapsed()
    );
    assert_eq!(
        back, leader,
        "the leader kept its quorum, so it still leads"
    );
}

#[test]
fn isolated_follower_blackhole() {
    isolated_follower_leaves_and_rejoins(LinkFault::Blackhole);
}

#[test]
fn isolated_follower_reset() {
    isolated_follower_leaves_and_rejoins(LinkFault::Reset);
}

/// Isolating the leader: the other two elect one of themselves, the old leader steps down;
/// on heal it rejoins as a follower of the new one.
#[test]
fn isolated_leader_is_replaced() {
    let e = fixture();
    let n = e.node_count();
    let old = e.wait_healed(HEAL_TIMEOUT).unwrap();
    let cut_at = Instant::now();
    e.isolate(old, LinkFault::Blackhole);

    let new = e
        .wait_for_leader_change(old, e.sync_timeout() + Duration::from_secs(15))
        .unwrap_or_else(|err| panic!("{err}"));
    assert_ne!(new, old);
    eprintln!(
        "leader {old} isolated: node {new} leads after {:?}",
        cut_at.elapsed()
    );
    e.wait_until_not_leading(old, e.sync_timeout() + DETECT_SLACK)
        .unwrap_or_else(|err| panic!("{err}"));
    eprintln!("old leader {old} stepped down after {:?}", cut_at.elapsed());
    e.wait_synced_followers(new, n - 2, DETECT_SLACK)
        .unwrap_or_else(|err| panic!("{err}"));

    holds_for(
        &e,
        e.sync_timeout() * 2,
        "the isolated old leader stays out",
        |v| v.is_leading(new) && !v.is_leading(old) && !v.is_following(old),
    );

    let back = heal(&e);
    assert_eq!(
        back, new,
        "the new leader has the newer epoch and keeps leading"
    );
    assert!(e.view().is_following(old));
}

/// Only the bytes from the leader to one follower are held: the follower hears nothing, so
/// it leaves, and cannot come back (it never hears the leader's vote) until healed.
#[test]
fn one_way_cut_leader_to_follower() {
    let e = fixture();
    let leader = e.wait_healed(HEAL_TIMEOUT).unwrap();
    let f = a_follower(&e, leader);
    let cut_at = Instant::now();
    e.cut_one_way(leader, f, LinkFault::Blackhole);
    wait_follower_out(
        &e,
        leader,
        f,
        &format!("follower {f} leaves leader {leader}"),
    );
    eprintln!("one-way cut: follower {f} out after {:?}", cut_at.elapsed());
    // Its own bytes still reach the leader, but that is not enough to rejoin.
    assert!(e.link_counts(LinkKind::Election, f, leader).forward_bytes > 0);
    holds_for(
        &e,
        e.sync_timeout() * 2,
        "the deaf follower stays out",
        |v| v.is_leading(leader) && !v.is_following(f),
    );
    let back = heal(&e);
    assert_eq!(back, leader);
}

/// Bridges on 3 nodes. Cutting the two followers from each other changes nothing: they only
/// talk to the leader. Cutting the leader from one follower leaves the third node as the
/// bridge that sees both: the leader keeps its quorum with it, and the cut-off follower stays
/// out (it hears the bridge's vote for the leader but never the leader's own).
#[test]
fn bridge_on_three_nodes() {
    let e = fixture();
    assert_eq!(e.node_count(), 3);
    let leader = e.wait_healed(HEAL_TIMEOUT).unwrap();
    let (f1, f2) = ((leader + 1) % 3, (leader + 2) % 3);

    e.cut(f1, f2, LinkFault::Blackhole);
    holds_for(&e, e.sync_timeout() * 3, "the ensemble stays whole", |v| {
        v.is_whole() && v.leader() == Some(leader)
    });
    e.heal();

    let cut_at = Instant::now();
    e.cut(leader, f1, LinkFault::Blackhole);
    e.wait_until(
        &format!("leader {leader} keeps only bridge {f2}"),
        e.sync_timeout() + DETECT_SLACK,
        |v| v.is_leading(leader) && v.synced_followers_of(leader) == Some(1) && !v.is_following(f1),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    eprintln!("bridge: follower {f1} out after {:?}", cut_at.elapsed());
    holds_for(
        &e,
        e.sync_timeout() * 3,
        "the leader leads through the bridge",
        |v| v.leader() == Some(leader) && v.is_following(f2) && !v.is_following(f1),
    );
    e.heal();
    assert_eq!(e.wait_healed(HEAL_TIMEOUT).unwrap(), leader);
}

/// Delays: a delay well under `syncLimit * tickTime` is tolerated; one well over it evicts
/// the follower, which cannot sync again until the delay is lifted.
#[test]
fn delayed_follower() {
    let e = fixture();
    let leader = e.wait_healed(HEAL_TIMEOUT).unwrap();
    let f = a_follower(&e, leader);

    e.isolate(f, LinkFault::Delay(e.sync_timeout() / 5));
    holds_for(
        &e,
        e.sync_timeout() * 3,
        "a short delay is tolerated",
        |v| v.is_whole() && v.leader() == Some(leader),
    );

    e.isolate(f, LinkFault::Delay(e.sync_timeout() * 3));
    wait_follower_out(&e, leader, f, &format!("delayed follower {f} is dropped"));
    e.heal();
    assert_eq!(e.wait_healed(HEAL_TIMEOUT).unwrap(), leader);
}

/// Every server-to-server byte crosses a relay, the election dial-back included.
///
/// After start, each follower's quorum link to the leader and, for every pair, the election
/// link opened by the higher id (the one ZooKeeper keeps) have carried bytes both ways, and
/// no established connection to a server's real quorum or election port comes from anything
/// but a relay. Restarting the lowest follower makes it open election connections to every
/// higher id, which close them and dial it back at the address from its first message: each
/// of those messages has been rewritten, the dial-backs arrive at the relays (higher → it),
/// and still nothing bypasses them. With the rewrite switched off, the dial-back goes
/// straight to the real port — the bypass the rewrite exists for.
#[test]
fn all_traffic_crosses_the_relays() {
    let mut e = fixture();
    let n = e.node_count();
    let leader = e.wait_healed(HEAL_TIMEOUT).unwrap();
    for f in (0..n).filter(|&f| f != leader) {
        let c = e.link_counts(LinkKind::Quorum, f, leader);
        assert!(
            c.accepted >= 1 && c.forward_bytes > 0 && c.backward_bytes > 0,
            "quorum {f}->{leader}: {c:?}"
        );
    }
    for lo in 0..n {
        for hi in (lo + 1)..n {
            let c = e.link_counts(LinkKind::Election, hi, lo);
            assert!(
                c.accepted >= 1 && c.forward_bytes > 0 && c.backward_bytes > 0,
                "election {hi}->{lo}: {c:?}"
            );
        }
    }
    let sockets = e.peer_sockets().unwrap();
    assert!(sockets.bypassing.is_empty(), "{sockets:?}\n{}", e.status());
    // At least the n-1 quorum connections and one election connection per pair.
    assert!(
        sockets.via_relay > n - 1 + n * (n - 1) / 2 - 1,
        "{sockets:?}"
    );

    // The lowest node that is a follower and has a higher id above it.
    let low = (0..n - 1).find(|&i| i != leader).unwrap();
    let higher: Vec<usize> = ((low + 1)..n).collect();
    let before: Vec<_> = higher
        .iter()
        .map(|&h| {
            (
                e.link_counts(LinkKind::Election, low, h).rewrites,
                e.link_counts(LinkKind::Election, h, low).accepted,
            )
        })
        .collect();
    e.restart(low).unwrap_or_else(|err| panic!("{err}"));
    e.wait_healed(HEAL_TIMEOUT)
        .unwrap_or_else(|err| panic!("{err}"));
    for (&h, (rewrites, accepted)) in higher.iter().zip(before) {
        let out = e.link_counts(LinkKind::Election, low, h);
        let back = e.link_counts(LinkKind::Election, h, low);
        assert!(out.rewrites > rewrites, "election {low}->{h}: {out:?}");
        assert!(back.accepted > accepted, "election {h}->{low}: {back:?}");
    }
    let sockets = e.peer_sockets().unwrap();
    assert!(sockets.bypassing.is_empty(), "{sockets:?}\n{}", e.status());

    // Negative control: without the rewrite, the dial-back bypasses the relays.
    let restore: Vec<_> = higher
        .iter()
        .map(|&h| (h, e.relay(LinkKind::Election, h, low).addr()))
        .collect();
    for &h in &higher {
        e.relay(LinkKind::Election, low, h)
            .rewrite_election_address(None);
    }
    e.restart(low).unwrap_or_else(|err| panic!("{err}"));
    e.wait_healed(HEAL_TIMEOUT)
        .unwrap_or_else(|err| panic!("{err}"));
    let sockets = e.peer_sockets().unwrap();
    for (h, addr) in restore {
        e.relay(LinkKind::Election, low, h)
            .rewrite_election_address(Some(addr));
    }
    assert!(
        !sockets.bypassing.is_empty(),
        "without the rewrite the dial-back should go straight to node {low}: {sockets:?}"
    );
    // Back to a clean state: the restart drops the direct connections.
    e.restart(low).unwrap_or_else(|err| panic!("{err}"));
    e.wait_healed(HEAL_TIMEOUT)
        .unwrap_or_else(|err| panic!("{err}"));
    let sockets = e.peer_sockets().unwrap();
    assert!(sockets.bypassing.is_empty(), "{sockets:?}\n{}", e.status());
}

/// Five nodes split 2 | 3 with the leader in the minority: the majority elects a new
/// leader, the minority stops serving; on heal all five are whole again.
#[test]
fn five_nodes_minority_and_majority() {
    // Hold the shared lock so that no 3-node test runs meanwhile.
    let _shared = fixture();
    let started = Instant::now();
    let e = PartitionedEnsemble::start(5, config()).unwrap_or_else(|err| panic!("{err}"));
    eprintln!(
        "5-node partitioned ensemble whole after {:?}",
        started.elapsed()
    );
    let old = e.wait_healed(HEAL_TIMEOUT).unwrap();
    let buddy = (old + 1) % 5;
    let majority: Vec<usize> = (0..5).filter(|&i| i != old && i != buddy).collect();
    e.partition(&[&[old, buddy], &majority], LinkFault::Blackhole);
    let new = e
        .wait_for_leader_change(old, e.sync_timeout() + Duration::from_secs(15))
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(
        majority.contains(&new),
        "{new} is not in the majority {majority:?}"
    );
    e.wait_until(
        "the minority stops serving",
        e.sync_timeout() + DETECT_SLACK,
        |v| v.modes[old].is_none() && v.modes[buddy].is_none(),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    e.wait_synced_followers(new, 2, DETECT_SLACK)
        .unwrap_or_else(|err| panic!("{err}"));
    e.heal();
    assert_eq!(e.wait_healed(HEAL_TIMEOUT).unwrap(), new);
}

/// Reads exactly `n` bytes, failing after 5 s.
async fn read_n(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf))
        .await
        .expect("bytes in time")
        .expect("read");
    buf
}

/// Whether `stream` receives nothing for `period`.
async fn silent_for(stream: &mut TcpStream, period: Duration) -> bool {
    let mut byte = [0; 1];
    tokio::time::timeout(period, stream.read(&mut byte))
        .await
        .is_err()
}

/// The relay on its own, against plain sockets: blackhole (deferred upstream connection, held
/// bytes delivered on heal), one-way blackhole, delay, reset, the election rewrite, counters.
#[tokio::test]
async fn link_relay_faults() {
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay = LinkRelay::start(upstream.local_addr().unwrap())
        .await
        .unwrap();
    let quiet = Duration::from_millis(300);

    // Forward blackhole: accepted, but the upstream sees nothing until the heal.
    relay.set_fault(Flow::Forward, Some(LinkFault::Blackhole));
    let mut client = TcpStream::connect(relay.addr()).await.unwrap();
    client.write_all(b"hello").await.unwrap();
    assert!(tokio::time::timeout(quiet, upstream.accept())
        .await
        .is_err());
    relay.heal();
    let (mut server, _) = upstream.accept().await.unwrap();
    assert_eq!(read_n(&mut server, 5).await, b"hello");

    // Backward blackhole: the forward direction still flows.
    relay.set_fault(Flow::Backward, Some(LinkFault::Blackhole));
    server.write_all(b"world").await.unwrap();
    client.write_all(b"more").await.unwrap();
    assert_eq!(read_n(&mut server, 4).await, b"more");
    assert!(silent_for(&mut client, quiet).await);
    relay.set_fault(Flow::Backward, None);
    assert_eq!(read_n(&mut client, 5).await, b"world");

    // Delay.
    let d = Duration::from_millis(400);
    relay.set_fault(Flow::Forward, Some(LinkFault::Delay(d)));
    let sent = Instant::now();
    client.write_all(b"late").await.unwrap();
    assert_eq!(read_n(&mut server, 4).await, b"late");
    assert!(sent.elapsed() >= d, "{:?}", sent.elapsed());
    relay.heal();

    let c = relay.counts();
    assert_eq!((c.accepted, c.active), (1, 1), "{c:?}");
    assert_eq!((c.forward_bytes, c.backward_bytes), (13, 5), "{c:?}");

    // Reset: the current connection, and new ones at once.
    relay.set_fault(Flow::Backward, Some(LinkFault::Reset));
    let mut byte = [0; 1];
    let r = client.read(&mut byte).await;
    assert!(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{r:?}"
    );
    let mut again = TcpStream::connect(relay.addr()).await.unwrap();
    let r = again.read(&mut byte).await;
    assert!(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{r:?}"
    );
    assert_eq!(relay.counts().resets, 2);
    relay.heal();
    drop(server);

    // The election rewrite: the first message's address changes, the rest passes as is.
    let advertised: std::net::SocketAddr = "127.0.0.1:4242".parse().unwrap();
    relay.rewrite_election_address(Some(advertised));
    let message = |addr: &str| {
        let mut m = Vec::new();
        m.extend_from_slice(&(-65536_i64).to_be_bytes());
        m.extend_from_slice(&2_i64.to_be_bytes());
        m.extend_from_slice(&(addr.len() as i32).to_be_bytes());
        m.extend_from_slice(addr.as_bytes());
        m
    };
    let mut client = TcpStream::connect(relay.addr()).await.unwrap();
    let mut sent = message("127.0.0.1:39999");
    sent.extend_from_slice(b"vote");
    client.write_all(&sent).await.unwrap();
    let (mut server, _) = upstream.accept().await.unwrap();
    let mut expected = message("127.0.0.1:4242");
    expected.extend_from_slice(b"vote");
    assert_eq!(read_n(&mut server, expected.len()).await, expected);
    assert_eq!(relay.counts().rewrites, 1);
}

/// The premises of the lease argument (docs/lease.md, steps 4 and 5), shown on real servers:
/// a follower cut off from the leader still answers a read of ours for as long as it has not
/// noticed (syncLimit × tickTime), so an answer proves nothing about what the leader knows;
/// a `sync` sent to it in that window is not answered, since only the leader can answer it.
#[test]
fn a_follower_cut_off_answers_reads_but_not_syncs() {
    let e = fixture();
    let leader = e.leader().expect("a leader");
    let follower = a_follower(&e, leader);
    let cs = e.node_connect_string(follower);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // T = 30 s: the client's own lease syncs go out 4.5 s apart; the first one (at once)
        // is answered before the cut, so none of ours is queued ahead of the requests below.
        let client = zkwire::Client::builder()
            .with_server_tick(Duration::from_millis(200))
            .with_session_timeout(Duration::from_secs(30))
            .connect(&cs)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        e.isolate(follower, LinkFault::Blackhole);
        let cut = Instant::now();
        let read = tokio::time::timeout(Duration::from_millis(400), client.exists("/")).await;
        assert!(
            matches!(read, Ok(Ok(Some(_)))),
            "the cut-off follower answered a read: {read:?}"
        );
        let answered = cut.elapsed();
        let sync = tokio::time::timeout(Duration::from_millis(500), client.sync("/")).await;
        assert!(
            sync.is_err(),
            "a sync came back from a cut-off follower: {sync:?}"
        );
        println!(
            "read answered {answered:?} after the cut; sync unanswered for 500 ms \
             (the follower notices after {:?})",
            e.sync_timeout()
        );
        drop(client);
    });
}
