//! Revocation against a real ZooKeeper: [`zkwire_recipes::revoke`] and the guards'
//! `revoked()` / `revocation_requested()`, and [`Mutex::holder`]; then against the real
//! Apache Curator 5.4.0 (Debian `libcurator-recipes-java`) in both directions: Curator's
//! `Revoker.attemptRevoke` asking a zkwire holder to release, and zkwire's `revoke` asking a
//! revocable Curator `InterProcessMutex` to release. The Curator side is
//! `recipes/interop/CuratorRevocation.java`, compiled here with `javac` and driven over its
//! stdin/stdout, one line per command or event.
//!
//! A revocation is a request, never a loss: `lost()` must not fire for a `__REVOKE__` write,
//! and `release()` must return `Ok(())`; any other data change still loses the hold
//! ([`LostReason::NodeChanged`]). Timings (revoke to release, release to the other side's
//! acquire) are printed: run with `--nocapture` to see them. Times across the two processes
//! are wall-clock microseconds of the same host.
//!
//! Missing java, javac or Curator jars fail the interop tests with what to install
//! (`apt-get install -y libcurator-recipes-java openjdk-17-jdk-headless`); they never skip.
//! Every test is bounded (55 s), and the tests of this binary run one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::close_all;
use support::process::ProcessIo;
use zkwire::{Client, CreateOptions};
use zkwire_recipes::{revoke, LockError, LostReason, Mutex, RwLock, Semaphore, SemaphoreLimit};
use zkwire_testing::java::JavaChild;
use zkwire_testing::support::{connect_with_timeout, fresh_chroot, sorted_children};

/// Two cores shared with the server and a JVM, and timings to quote: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const LOCK: &str = "/lock";
/// What Curator's `Revoker` and our `revoke` write into the holder's node.
const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";
/// How long `lost()` must stay silent after a revocation to count as "not fired".
const QUIET: Duration = Duration::from_millis(500);
/// The bound of every test.
const TEST_LIMIT: Duration = Duration::from_secs(55);

/// A client with a 10 s session, as the Curator program's.
async fn connect(cs: &str) -> Client {
    connect_with_timeout(cs, Duration::from_secs(10)).await
}

/// Runs a test body under [`SERIAL`] and [`TEST_LIMIT`].
async fn bounded<F: Future<Output = ()>>(body: F) {
    let _serial = SERIAL.lock().await;
    tokio::time::timeout(TEST_LIMIT, body)
        .await
        .unwrap_or_else(|_| panic!("test still running after {TEST_LIMIT:?}"));
}

/// Runs `body` under [`bounded`] with `N` clients (10 s sessions, each its own) on a fresh
/// chroot `name`, then closes them.
async fn on_clients<const N: usize, F, Fut>(name: &str, body: F)
where
    F: FnOnce([Client; N]) -> Fut,
    Fut: Future<Output = ()>,
{
    bounded(async {
        let cs = fresh_chroot(name).await;
        let mut clients = Vec::with_capacity(N);
        for _ in 0..N {
            clients.push(connect(&cs).await);
        }
        let clients: [Client; N] = clients.try_into().unwrap_or_else(|_| unreachable!());
        body(clients.clone()).await;
        close_all(clients).await;
    })
    .await;
}

/// [`LOCK`]'s holder, as `client` sees it.
async fn holder_seen_by(client: &Client) -> Option<String> {
    Mutex::new(client.clone(), LOCK).holder().await.unwrap()
}

/// `f`'s output, or a panic naming `what` after `limit`.
async fn within<F: Future>(limit: Duration, what: &str, f: F) -> F::Output {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing after {limit:?}"))
}

/// Whether `f` stays pending for `span` (polled in place, so it can be awaited later).
async fn stays_pending<F: Future + Unpin>(f: &mut F, span: Duration) -> bool {
    tokio::time::timeout(span, f).await.is_err()
}

/// Revokes `$guard`'s node with `$admin`, waits (up to 5 s) for its `revoked()`, then checks
/// that its `lost()` stays pending for `$quiet`; evaluates to that pinned `lost()`. `$what`
/// names the guard in failures.
macro_rules! revoked_not_lost {
    ($admin:expr, $guard:expr, $what:expr, $quiet:expr) => {{
        let mut lost = Box::pin($guard.lost());
        assert!(revoke($admin, $guard.path()).await.unwrap());
        let revoked = format!("{} revoked()", $what);
        within(Duration::from_secs(5), &revoked, $guard.revoked()).await;
        assert!(stays_pending(&mut lost, $quiet).await, "{} lost()", $what);
        lost
    }};
}

/// [`revoked_not_lost`] for [`QUIET`], then: the guard still holds and saw the request, and
/// its release is `Ok`.
macro_rules! revoked_then_released {
    ($admin:expr, $guard:expr, $what:expr) => {{
        let guard = $guard;
        drop(revoked_not_lost!($admin, guard, $what, QUIET));
        assert!(guard.is_held() && guard.revocation_requested());
        guard.release().await.unwrap();
    }};
}

/// Polls (up to 10 s) until `dir` has `n` children; returns them sorted.
async fn wait_for_children(client: &Client, dir: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = sorted_children(client, dir).await;
        if children.len() == n {
            return children;
        }
        assert!(
            Instant::now() < deadline,
            "{dir} has {children:?}, expected {n} children"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Wall-clock microseconds since the epoch: comparable with the Java program's times.
fn epoch_us() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_micros()).unwrap()
}

/// `to - from` in milliseconds (microsecond times), signed.
fn ms_between(from: i64, to: i64) -> f64 {
    (to - from) as f64 / 1000.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ---------------------------------------------------------------------------------------------
// zkwire only
// ---------------------------------------------------------------------------------------------

/// (a) `revoke` on a zkwire holder's node: `revoked()` resolves promptly, the hold stays
/// valid (`is_held()`, `lost()` silent), `release()` is `Ok(())`, and the waiting contender
/// (another session) then acquires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_asks_a_zkwire_holder_and_is_not_a_loss() {
    on_clients(
        "recipes_revoke_holder",
        |[holder_client, waiter_client, admin]| async move {
            let guard = Mutex::new(holder_client.clone(), LOCK)
                .lock()
                .await
                .unwrap();
            let mut lost = Box::pin(guard.lost());
            let revoked = guard.revoked();
            assert!(!guard.revocation_requested());

            let waiter_mutex = Mutex::new(waiter_client.clone(), LOCK);
            let waiter = tokio::spawn(async move {
                let g = waiter_mutex.lock().await.unwrap();
                (Instant::now(), g)
            });
            wait_for_children(&admin, LOCK, 2).await;

            let asked = Instant::now();
            assert!(
                revoke(&admin, guard.path()).await.unwrap(),
                "the node exists"
            );
            let call = asked.elapsed();
            within(Duration::from_secs(5), "revoked()", revoked).await;
            let seen = asked.elapsed();
            assert!(guard.revocation_requested());
            assert!(guard.is_held(), "a revocation is not a loss");
            let (data, stat) = admin.get_data(guard.path()).await.unwrap();
            assert_eq!(&data[..], REVOKE_MESSAGE);
            assert_eq!(stat.version, 1);
            assert!(
                stays_pending(&mut lost, QUIET).await,
                "lost() fired on a revocation"
            );
            assert!(guard.is_held());
            assert!(guard.trusted_until().is_some());
            assert!(!waiter.is_finished(), "the waiter got in while we hold");
            // Taken after the request, revoked() resolves at once.
            within(
                Duration::from_millis(100),
                "late revoked()",
                guard.revoked(),
            )
            .await;

            let releasing = Instant::now();
            guard.release().await.unwrap();
            let release_call = releasing.elapsed();
            assert_eq!(
                within(Duration::from_secs(1), "lost() after release", lost).await,
                LostReason::Released,
                "the hold ended by release, not by a loss"
            );
            let (acquired, next) = within(Duration::from_secs(5), "the waiter acquires", waiter)
                .await
                .unwrap();
            assert!(next.is_held());
            assert!(
                !next.revocation_requested(),
                "the request was for the old node"
            );
            println!(
                "revoke (zkwire → zkwire): revoke() call {:.2} ms; revoke → revoked() {:.2} ms; \
             release() call {:.2} ms; release() call → waiter acquired {:.2} ms",
                ms(call),
                ms(seen),
                ms(release_call),
                ms(acquired.duration_since(releasing)),
            );
            next.release().await.unwrap();
        },
    )
    .await;
}

/// A second revocation after the first was seen is still a request, not a loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_twice_in_turn_is_not_a_loss() {
    on_clients("recipes_revoke_twice", |[client, admin]| async move {
        let guard = Mutex::new(client.clone(), LOCK).lock().await.unwrap();
        // Let the watchdog re-read the node and re-arm its watch before the second request.
        let mut lost = revoked_not_lost!(&admin, guard, "guard", Duration::from_millis(200));
        assert!(revoke(&admin, guard.path()).await.unwrap());
        assert!(
            stays_pending(&mut lost, QUIET).await,
            "lost() fired on a second revocation"
        );
        assert!(guard.is_held() && guard.revocation_requested());
        // The node already asked: the second revoke wrote nothing.
        assert_eq!(admin.get_data(guard.path()).await.unwrap().1.version, 1);
        guard.release().await.unwrap();
    })
    .await;
}

/// (b) Any data change but a revocation loses the hold: [`LostReason::NodeChanged`], also
/// after a revocation was seen. `revoked()` does not resolve for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_writes_to_the_node_are_a_loss() {
    on_clients("recipes_revoke_other_write", |[client, admin]| async move {
        let mutex = Mutex::new(client.clone(), LOCK);

        // A plain write, and one that only looks like a revocation.
        for data in [&b"not a revocation"[..], b"__REVOKE__\n"] {
            let guard = mutex.lock().await.unwrap();
            let lost = guard.lost();
            let mut revoked = Box::pin(guard.revoked());
            let written = Instant::now();
            admin.set_data(guard.path(), data, None).await.unwrap();
            let reason = within(Duration::from_secs(5), "lost()", lost).await;
            let took = written.elapsed();
            assert_eq!(reason, LostReason::NodeChanged, "after writing {data:?}");
            assert!(!guard.is_held());
            assert!(!guard.revocation_requested());
            assert!(
                stays_pending(&mut revoked, Duration::from_millis(200)).await,
                "revoked() resolved for {data:?}"
            );
            assert!(matches!(
                guard.release().await,
                Err(LockError::Lost(LostReason::NodeChanged))
            ));
            println!(
                "revoke: write of {:?} → lost(NodeChanged) in {:.2} ms",
                String::from_utf8_lossy(data),
                ms(took)
            );
        }

        // A revocation first, then another write: still a loss.
        let guard = mutex.lock().await.unwrap();
        let lost = revoked_not_lost!(&admin, guard, "guard", Duration::from_millis(200));
        admin.set_data(guard.path(), b"x", None).await.unwrap();
        assert_eq!(
            within(Duration::from_secs(5), "lost()", lost).await,
            LostReason::NodeChanged
        );
        assert!(!guard.is_held());
        assert!(matches!(
            guard.release().await,
            Err(LockError::Lost(LostReason::NodeChanged))
        ));
    })
    .await;
}

/// (c) Revoking a node that does not exist is `Ok(false)`: never created, in a missing
/// directory, or released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_missing_node_is_false() {
    on_clients("recipes_revoke_missing", |[client]| async move {
        let guard = Mutex::new(client.clone(), LOCK).lock().await.unwrap();
        let path = guard.path().to_owned();
        assert!(!revoke(
            &client,
            "/lock/_c_00000000-0000-0000-0000-000000000000-lock-0000000099"
        )
        .await
        .unwrap());
        assert!(!revoke(&client, "/nowhere/_c_x-lock-0000000000")
            .await
            .unwrap());
        guard.release().await.unwrap();
        assert!(!revoke(&client, &path).await.unwrap(), "released: {path}");
        assert!(
            client.exists(&path).await.unwrap().is_none(),
            "not recreated"
        );
    })
    .await;
}

/// (d) `Mutex::holder()`: `None` for a missing or empty directory; the holder's node (as
/// its `guard.path()`), whoever asks and however many wait; the next holder after a
/// hand-over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_names_the_holding_node() {
    on_clients(
        "recipes_revoke_holder_query",
        |[a, b, observer]| async move {
            let watch = Mutex::new(observer.clone(), LOCK);
            assert_eq!(watch.holder().await.unwrap(), None, "missing directory");
            observer
                .create("/empty", b"", &CreateOptions::persistent())
                .await
                .unwrap();
            let empty = Mutex::new(observer.clone(), "/empty");
            assert_eq!(empty.holder().await.unwrap(), None, "empty directory");

            let first = Mutex::new(a.clone(), LOCK).lock().await.unwrap();
            assert_eq!(watch.holder().await.unwrap().as_deref(), Some(first.path()));
            let second_mutex = Mutex::new(b.clone(), LOCK);
            let second = tokio::spawn(async move { second_mutex.lock().await.unwrap() });
            wait_for_children(&observer, LOCK, 2).await;
            assert_eq!(
                watch.holder().await.unwrap().as_deref(),
                Some(first.path()),
                "the holder, not the waiter"
            );
            assert_eq!(
                holder_seen_by(&b).await.as_deref(),
                Some(first.path()),
                "asked from the waiter's session"
            );
            first.release().await.unwrap();
            let second = within(Duration::from_secs(5), "the second acquires", second)
                .await
                .unwrap();
            assert_eq!(
                watch.holder().await.unwrap().as_deref(),
                Some(second.path())
            );
            second.release().await.unwrap();
            assert_eq!(watch.holder().await.unwrap(), None, "released");
        },
    )
    .await;
}

/// The other guards: a read and a write hold of the [`RwLock`] and a semaphore [`Lease`](
/// zkwire_recipes::Lease) hear a revocation without losing their hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlock_and_semaphore_guards_hear_revocations() {
    on_clients(
        "recipes_revoke_other_guards",
        |[client, admin]| async move {
            let rw = RwLock::new(client.clone(), "/rw");

            revoked_then_released!(&admin, rw.write().await.unwrap(), "write");
            revoked_then_released!(&admin, rw.read().await.unwrap(), "read");
            let sem = Semaphore::new(client.clone(), "/sem", SemaphoreLimit::Fixed(2));
            revoked_then_released!(&admin, sem.acquire_one().await.unwrap(), "lease");
        },
    )
    .await;
}

/// A revocation written while the contender still waits is heard when the lock is granted:
/// `revoked()` resolves at once, and the hold is not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_waiting_contender_is_heard_at_grant() {
    on_clients("recipes_revoke_waiting", |[a, b, admin]| async move {
        let first = Mutex::new(a.clone(), LOCK).lock().await.unwrap();
        let waiter_mutex = Mutex::new(b.clone(), LOCK);
        let waiter = tokio::spawn(async move { waiter_mutex.lock().await.unwrap() });
        let children = wait_for_children(&admin, LOCK, 2).await;
        let waiting = children
            .iter()
            .map(|c| format!("{LOCK}/{c}"))
            .find(|p| p != first.path())
            .unwrap();
        assert!(revoke(&admin, &waiting).await.unwrap());
        assert!(stays_pending(&mut Box::pin(first.lost()), Duration::from_millis(100)).await);
        assert!(
            !first.revocation_requested(),
            "the request was for the waiter"
        );
        first.release().await.unwrap();
        let granted = within(Duration::from_secs(5), "the waiter", waiter)
            .await
            .unwrap();
        assert_eq!(granted.path(), waiting);
        within(Duration::from_secs(5), "revoked()", granted.revoked()).await;
        let mut lost = Box::pin(granted.lost());
        assert!(
            stays_pending(&mut lost, QUIET).await,
            "lost() fired at grant"
        );
        assert!(granted.is_held() && granted.revocation_requested());
        granted.release().await.unwrap();
    })
    .await;
}

/// Two revocations that land before the holder's watchdog re-reads its node (two
/// contenders revoking the holder at once, or Curator's `Revoker` and ours) are still
/// requests, not a loss: the watchdog judges the node by its data, as Curator does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_revocations_are_not_a_loss() {
    on_clients("recipes_revoke_concurrent", |[client, x, y]| async move {
        let mut failures = Vec::new();
        for round in 0..4 {
            let guard = Mutex::new(client.clone(), LOCK).lock().await.unwrap();
            let mut lost = Box::pin(guard.lost());
            // Let the watchdog arm its watch first.
            assert!(stays_pending(&mut lost, Duration::from_millis(50)).await);
            // Even rounds: one client, two pipelined writes; odd rounds: two clients.
            let other = if round % 2 == 0 { &x } else { &y };
            let (first, second) =
                tokio::join!(revoke(&x, guard.path()), revoke(other, guard.path()));
            assert_eq!((first, second), (Ok(true), Ok(true)));
            let outcome = tokio::time::timeout(QUIET, &mut lost).await.ok();
            let (requested, held) = (guard.revocation_requested(), guard.is_held());
            let released = guard.release().await;
            println!(
                "revoke: round {round}, two revocations at once: revocation_requested {requested}, \
                 is_held {held}, lost {outcome:?}, release {released:?}"
            );
            if outcome.is_some() || !requested || released.is_err() {
                failures.push(round);
            }
        }
        assert!(
            failures.is_empty(),
            "two revocations at once were reported as a loss in rounds {failures:?}"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Interop with Curator
// ---------------------------------------------------------------------------------------------

/// One line of the Curator program: `<NAME> <epoch µs> [details…]`.
#[derive(Debug, Clone)]
struct Event {
    name: String,
    t: i64,
    details: Vec<String>,
}

/// The Curator JVM (`CuratorRevocation`), killed when dropped.
struct Curator {
    _child: JavaChild,
    io: ProcessIo,
    /// Events read while looking for another one.
    pending: Vec<Event>,
}

impl Curator {
    async fn start(cs: &str) -> Self {
        let program =
            tokio::task::block_in_place(|| support::curator_program("CuratorRevocation.java"));
        let mut child = program
            .spawn("CuratorRevocation", &[cs, LOCK])
            .unwrap_or_else(|e| panic!("{e}"));
        let io = ProcessIo::new(
            "Curator",
            child.take_stdin().unwrap(),
            child.take_stdout().unwrap(),
            child.take_stderr().unwrap(),
        );
        let mut curator = Self {
            _child: child,
            io,
            pending: Vec::new(),
        };
        let started = Instant::now();
        curator.wait_for("READY", Duration::from_secs(30)).await;
        println!(
            "revoke: Curator JVM connected in {:.0} ms",
            ms(started.elapsed())
        );
        curator
    }

    fn send(&mut self, line: &str) {
        self.io.send(line);
    }

    /// The next event named `name` (others are kept for later); panics on an `ERROR`
    /// event, the program's end, or nothing within `limit`.
    async fn wait_for(&mut self, name: &str, limit: Duration) -> Event {
        if let Some(i) = self.pending.iter().position(|e| e.name == name) {
            return self.pending.remove(i);
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let line = self.io.next_line(left).await;
            let mut words = line.split(' ').map(str::to_owned);
            let event_name = words.next().unwrap_or_default();
            let t = words
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("bad line from Curator: {line:?}"));
            let event = Event {
                name: event_name,
                t,
                details: words.collect(),
            };
            assert!(
                event.name != "ERROR",
                "Curator failed: {line}\n{}",
                self.io.stderr()
            );
            if event.name == name {
                return event;
            }
            self.pending.push(event);
        }
    }
}

/// What the zkwire holder task saw.
#[derive(Debug)]
struct HolderReport {
    /// When `revoked()` resolved (epoch µs).
    revoked_at: i64,
    requested: bool,
    held_when_revoked: bool,
    released: Result<(), LockError>,
    /// When `release()` returned (epoch µs).
    released_at: i64,
    /// What `lost()` resolved with after the release.
    lost_after: Option<LostReason>,
}

/// Curator revokes zkwire: a zkwire task holds the mutex; Curator queues its own
/// `InterProcessMutex` on the path and calls `Revoker.attemptRevoke` on the zkwire node; the
/// zkwire holder hears `revoked()` and releases (`Ok`, no loss); Curator acquires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_revokes_a_zkwire_holder() {
    bounded(async {
        let cs = fresh_chroot("recipes_revoke_by_curator").await;
        let mut curator = Curator::start(&cs).await;
        let (client, observer) = (connect(&cs).await, connect(&cs).await);
        let guard = Mutex::new(client.clone(), LOCK).lock().await.unwrap();
        let zk_node = guard.path().to_owned();
        // The holder: works until asked to give the lock up, then releases at once.
        let holder = tokio::spawn(async move {
            let lost = guard.lost();
            within(Duration::from_secs(20), "zkwire revoked()", guard.revoked()).await;
            let revoked_at = epoch_us();
            let requested = guard.revocation_requested();
            let held_when_revoked = guard.is_held();
            let released = guard.release().await;
            let released_at = epoch_us();
            let lost_after = tokio::time::timeout(Duration::from_secs(1), lost)
                .await
                .ok();
            HolderReport {
                revoked_at,
                requested,
                held_when_revoked,
                released,
                released_at,
                lost_after,
            }
        });

        curator.send("ACQUIRE 0");
        curator.wait_for("ACQUIRING", Duration::from_secs(10)).await;
        let children = wait_for_children(&observer, LOCK, 2).await;
        assert_eq!(
            Mutex::new(observer.clone(), LOCK).holder().await.unwrap(),
            Some(zk_node.clone()),
            "zkwire holds, Curator waits ({children:?})"
        );

        curator.send(&format!("REVOKE {zk_node}"));
        let sent = curator
            .wait_for("REVOKE_SENT", Duration::from_secs(10))
            .await;
        let report = within(Duration::from_secs(25), "the zkwire holder", holder)
            .await
            .unwrap();
        let acquired = curator.wait_for("ACQUIRED", Duration::from_secs(10)).await;

        assert!(report.requested && report.held_when_revoked, "{report:?}");
        assert_eq!(
            report.released,
            Ok(()),
            "release after a revocation: {report:?}"
        );
        assert_eq!(
            report.lost_after,
            Some(LostReason::Released),
            "lost() reported only the release"
        );
        let curator_node = &acquired.details[0];
        assert_ne!(curator_node, &zk_node);
        assert_eq!(
            &acquired.details[1], curator_node,
            "Curator is first in line"
        );
        assert_eq!(
            holder_seen_by(&observer).await.as_ref(),
            Some(curator_node),
            "zkwire sees Curator's node as the holder"
        );
        assert!(
            acquired.t >= sent.t,
            "Curator acquired before it revoked: {sent:?} {acquired:?}"
        );

        curator.send("RELEASE");
        let released = curator.wait_for("RELEASED", Duration::from_secs(10)).await;
        assert_eq!(released.details, ["command"]);
        wait_for_children(&observer, LOCK, 0).await;
        println!(
            "revoke (Curator → zkwire): attemptRevoke call {:.2} ms; attemptRevoke → zkwire \
             revoked() {:.2} ms; → zkwire release() returned {:.2} ms; zkwire release() \
             returned → Curator acquired {:+.2} ms; revoke → Curator acquired {:.2} ms",
            ms_between(sent.t, sent.details[0].parse().unwrap()),
            ms_between(sent.t, report.revoked_at),
            ms_between(sent.t, report.released_at),
            ms_between(report.released_at, acquired.t),
            ms_between(sent.t, acquired.t),
        );
        close_all([client, observer]).await;
    })
    .await;
}

/// zkwire revokes Curator: Curator holds a revocable `InterProcessMutex` (its listener has
/// the holding thread release); zkwire finds the node with `Mutex::holder()`, queues a
/// contender and calls `revoke`; Curator releases and the zkwire contender acquires, with a
/// hold that is not reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkwire_revokes_a_curator_holder() {
    bounded(async {
        let cs = fresh_chroot("recipes_revoke_curator").await;
        let mut curator = Curator::start(&cs).await;
        let client = connect(&cs).await;
        let mutex = Mutex::new(client.clone(), LOCK);

        curator.send("ACQUIRE 1");
        let acquired = curator.wait_for("ACQUIRED", Duration::from_secs(10)).await;
        let curator_node = acquired.details[0].clone();
        assert_eq!(
            acquired.details[1], curator_node,
            "Curator is first in line"
        );
        assert_eq!(
            mutex.holder().await.unwrap().as_ref(),
            Some(&curator_node),
            "holder() names Curator's node"
        );

        let contender_mutex = mutex.clone();
        let contender = tokio::spawn(async move {
            let guard = contender_mutex.lock().await.unwrap();
            (epoch_us(), guard)
        });
        wait_for_children(&client, LOCK, 2).await;
        assert_eq!(mutex.holder().await.unwrap().as_ref(), Some(&curator_node));

        let asked = epoch_us();
        assert!(
            revoke(&client, &curator_node).await.unwrap(),
            "the node exists"
        );
        let returned = epoch_us();
        let requested = curator
            .wait_for("REVOKE_REQUESTED", Duration::from_secs(10))
            .await;
        let released = curator.wait_for("RELEASED", Duration::from_secs(10)).await;
        assert_eq!(
            released.details,
            ["revoked"],
            "Curator released for the revocation"
        );
        let (got_at, guard) = within(Duration::from_secs(10), "the zkwire contender", contender)
            .await
            .unwrap();

        let mut lost = Box::pin(guard.lost());
        assert!(guard.is_held());
        assert!(
            !guard.revocation_requested(),
            "the request was for Curator's node"
        );
        assert!(stays_pending(&mut lost, QUIET).await, "lost() fired");
        assert_eq!(mutex.holder().await.unwrap().as_deref(), Some(guard.path()));
        assert!(client.exists(&curator_node).await.unwrap().is_none());
        guard.release().await.unwrap();
        assert_eq!(
            within(Duration::from_secs(1), "lost() after release", lost).await,
            LostReason::Released
        );
        wait_for_children(&client, LOCK, 0).await;
        println!(
            "revoke (zkwire → Curator): revoke() call {:.2} ms; revoke → Curator listener {:.2} \
             ms; → Curator release() returned {:.2} ms; Curator release() returned → zkwire \
             acquired {:+.2} ms; revoke → zkwire acquired {:.2} ms",
            ms_between(asked, returned),
            ms_between(asked, requested.t),
            ms_between(asked, released.t),
            ms_between(released.t, got_at),
            ms_between(asked, got_at),
        );
        client.close().await.unwrap();
    })
    .await;
}
