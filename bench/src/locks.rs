//! `lock-cycle` (one session, uncontended acquire + release) and `lock-contention` (8
//! sessions on one mutex, mutual exclusion checked).
//!
//! zkwire: `zkwire_recipes::Mutex`. kezhuw: `Client::lock` with `LockPrefix::new_curator`
//! (the same Curator layout). Both are measured releasing in the foreground (awaited delete)
//! and, in `lock-cycle`, by dropping the guard (each library's background delete). Raw: the
//! bare recipe on one socket: create (EPHEMERAL_SEQUENTIAL) and getChildren written together;
//! in `lock-cycle` the release delete rides in the same write as the next cycle's create.
//! Relay (`--clients relay`): the bare recipe again, each request a call through a connection
//! task, released either way as zkwire is ([`crate::relay_lock`]).

use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use zkwire::proto::frames::request_frame;
use zkwire::proto::{
    Acl, Create2Response, CreateMode, CreateRequest, DeleteRequest, ErrorCode, ExistsRequest,
    GetChildrenRequest, GetChildrenResponse, OpCode, WatcherEvent, NOTIFICATION_XID,
};

use crate::measure::{Hist, Measured, Phase};
use crate::raw::{RawConn, RawReply};
use crate::relay::Relay;
use crate::relay_lock::{RelayContender, RelayCycle, RelayLock};
use crate::runner::{measure_window, run_workers, Worker};
use crate::{BenchError, Ctx, Who};

/// Sessions contending in `lock-contention`.
pub(crate) const CONTENDERS: usize = 8;
/// The `lock-contention` cell's param: [`CONTENDERS`], as the report's targets look it up.
pub(crate) const CONTENTION_PARAM: &str = "sessions=8";
const _: () = assert!(CONTENDERS == 8, "CONTENTION_PARAM names CONTENDERS");

/// The lock node name's marker of every client's lock, Curator's (`InterProcessMutex`).
const LOCK_MARKER: &str = "lock-";

// ===== lock-cycle =====

/// The cycle rows of one client: (param, measured).
pub(crate) async fn cycle(ctx: &Ctx, who: Who) -> Result<Vec<(String, Measured)>, BenchError> {
    let dir = ctx.path(&format!("cycle-{}", who.name()));
    let mut rows = Vec::new();
    match who {
        Who::Zkwire => {
            for drop_release in ctx.drop_releases() {
                let client = ctx.zkwire().await?;
                let mutex = zkwire_recipes::Mutex::new(client.clone(), dir.clone());
                let [m] = run_workers(
                    ctx,
                    vec![ZkwireCycle {
                        mutex,
                        drop_release,
                    }],
                )
                .await?;
                client.close().await?;
                rows.push((release_param(drop_release), m));
            }
        }
        Who::Kezhuw => {
            for drop_release in ctx.drop_releases() {
                let client = ctx.kezhuw().await?;
                let worker = KezhuwCycle {
                    client: client.clone(),
                    dir: dir.clone(),
                    drop_release,
                };
                let [m] = run_workers(ctx, vec![worker]).await?;
                // Let the last background delete go out before the session ends.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                drop(client);
                rows.push((release_param(drop_release), m));
            }
        }
        Who::Raw => {
            let conn = RawConn::connect(&ctx.addr).await?;
            let worker = RawCycle {
                lock: RawLock::new(conn, &dir),
                prev: None,
            };
            let [m] = run_workers(ctx, vec![worker]).await?;
            rows.push(("release=pipelined".to_owned(), m));
        }
        Who::Relay => {
            for drop_release in ctx.drop_releases() {
                let lock = RelayLock::new(Relay::connect(&ctx.addr).await?, &dir);
                let [m] = run_workers(ctx, vec![RelayCycle { lock, drop_release }]).await?;
                rows.push((release_param(drop_release), m));
            }
        }
    }
    Ok(rows)
}

/// How a library's guard is released in `lock-cycle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Release {
    /// `release().await`: the delete's reply is awaited.
    Await,
    /// The guard is dropped: the library deletes the node in the background.
    Drop,
}

fn release_param(drop_release: bool) -> String {
    if drop_release {
        "release=drop"
    } else {
        "release=await"
    }
    .to_owned()
}

struct ZkwireCycle {
    mutex: zkwire_recipes::Mutex,
    drop_release: bool,
}

impl Worker for ZkwireCycle {
    async fn step(&mut self) -> Result<usize, BenchError> {
        let guard = self.mutex.lock().await?;
        if self.drop_release {
            drop(guard);
        } else {
            guard.release().await?;
        }
        Ok(0)
    }
}

struct KezhuwCycle {
    client: zookeeper_client::Client,
    dir: String,
    drop_release: bool,
}

impl Worker for KezhuwCycle {
    async fn step(&mut self) -> Result<usize, BenchError> {
        if self.drop_release {
            let prefix = zookeeper_client::LockPrefix::new_curator(&self.dir, LOCK_MARKER)?;
            let options = zookeeper_client::LockOptions::new(zookeeper_client::Acls::anyone_all());
            let lock = self.client.lock(prefix, b"", options).await?;
            drop(lock);
        } else {
            let path = kezhuw_lock(&self.client, &self.dir).await?;
            self.client.delete(&path, None).await?;
        }
        Ok(0)
    }
}

/// Takes kezhuw's lock and returns its node, released by the caller with an awaited delete
/// (the `LockClient` is forgotten so that its drop does not send a second delete).
async fn kezhuw_lock(client: &zookeeper_client::Client, dir: &str) -> Result<String, BenchError> {
    let prefix = zookeeper_client::LockPrefix::new_curator(dir, LOCK_MARKER)?;
    let options = zookeeper_client::LockOptions::new(zookeeper_client::Acls::anyone_all());
    let lock = client.lock(prefix, b"", options).await?;
    let path = lock.lock_path().to_owned();
    std::mem::forget(lock);
    Ok(path)
}

/// The bare lock recipe on a raw socket.
struct RawLock {
    conn: RawConn,
    dir: String,
    /// create(dir/lock-, EPHEMERAL_SEQUENTIAL) followed by getChildren(dir), pre-encoded.
    create_and_list: Bytes,
    list: Bytes,
    /// Paths of watch notifications received while waiting for a reply.
    events: Vec<String>,
    /// Self-test: hold the lock without waiting for it (`--break-exclusion`).
    cheat: bool,
}

impl RawLock {
    fn new(conn: RawConn, dir: &str) -> Self {
        let (create, list) = lock_frames(dir);
        let mut both = BytesMut::from(&create[..]);
        both.extend_from_slice(&list);
        Self {
            conn,
            dir: dir.to_owned(),
            create_and_list: both.freeze(),
            list,
            events: Vec::new(),
            cheat: false,
        }
    }

    /// The next reply, stashing notifications.
    async fn reply(&mut self) -> Result<RawReply, BenchError> {
        loop {
            let r = self.conn.recv().await?;
            if r.header.xid != NOTIFICATION_XID {
                return Ok(r);
            }
            self.events.push(r.decode::<WatcherEvent>()?.path);
        }
    }

    /// Waits for a notification on `path`.
    async fn event(&mut self, path: &str) -> Result<(), BenchError> {
        loop {
            if let Some(i) = self.events.iter().position(|p| p == path) {
                self.events.swap_remove(i);
                return Ok(());
            }
            let r = self.conn.recv().await?;
            if r.header.xid != NOTIFICATION_XID {
                return Err(BenchError::msg(
                    "raw lock: a reply while only a notification was due",
                ));
            }
            self.events.push(r.decode::<WatcherEvent>()?.path);
        }
    }

    /// Reads the create and getChildren replies of `create_and_list` (already sent), then
    /// waits until our node is first. Returns (sequence, czxid, path).
    async fn acquire_sent(&mut self) -> Result<(i64, i64, String), BenchError> {
        let created = self.reply().await?.ok()?.decode::<Create2Response>()?;
        let mut children = self
            .reply()
            .await?
            .ok()?
            .decode::<GetChildrenResponse>()?
            .children;
        let me = created
            .path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let my_seq = sequence(&me)?;
        loop {
            let before = match predecessor(&children, &me)? {
                Some(before) if !self.cheat => before,
                _ => return Ok((my_seq, created.stat.czxid, created.path)),
            };
            let before = format!("{}/{before}", self.dir);
            self.conn.send(&exists_frame(&before)).await?;
            if watch_set(&self.reply().await?)? {
                self.event(&before).await?;
            }
            self.conn.send(&self.list.clone()).await?;
            children = self
                .reply()
                .await?
                .ok()?
                .decode::<GetChildrenResponse>()?
                .children;
        }
    }

    async fn release(&mut self, path: String) -> Result<(), BenchError> {
        self.conn.send(&delete_frame(path)).await?;
        self.reply().await?.ok()?;
        Ok(())
    }
}

/// The frames of an attempt on the lock in `dir`: create(`dir`/lock-, EPHEMERAL_SEQUENTIAL)
/// and getChildren(`dir`).
pub(crate) fn lock_frames(dir: &str) -> (Bytes, Bytes) {
    let create = CreateRequest {
        path: format!("{dir}/{LOCK_MARKER}"),
        data: Some(Bytes::new()),
        acl: Acl::open_unsafe().into(),
        mode: CreateMode::EphemeralSequential,
    };
    let list = GetChildrenRequest {
        path: dir.to_owned(),
        watch: false,
    };
    (
        request_frame(1, OpCode::Create2, &create),
        request_frame(1, OpCode::GetChildren, &list),
    )
}

/// The name before `me` among a lock's `children` in sequence order; `None` when `me` is first.
pub(crate) fn predecessor<'a>(
    children: &'a [String],
    me: &str,
) -> Result<Option<&'a str>, BenchError> {
    let mut keyed = children
        .iter()
        .map(|c| Ok((sequence(c)?, c.as_str())))
        .collect::<Result<Vec<_>, BenchError>>()?;
    keyed.sort_unstable();
    let at = keyed
        .iter()
        .position(|(_, c)| *c == me)
        .ok_or_else(|| BenchError::msg("lock: our node is not among the children"))?;
    Ok(at.checked_sub(1).map(|before| keyed[before].1))
}

/// exists(`path`) with a watch: how a contender waits for the node before its own.
pub(crate) fn exists_frame(path: &str) -> Bytes {
    let request = ExistsRequest {
        path: path.to_owned(),
        watch: true,
    };
    request_frame(1, OpCode::Exists, &request)
}

/// Whether the exists reply set a watch on a node that is there (`false`: it is gone already).
pub(crate) fn watch_set(reply: &RawReply) -> Result<bool, BenchError> {
    match reply.header.err {
        ErrorCode::Ok => Ok(true),
        ErrorCode::NoNode => Ok(false),
        err => Err(BenchError::msg(format!("lock: exists failed: {err:?}"))),
    }
}

/// delete(`path`), any version.
pub(crate) fn delete_frame(path: String) -> Bytes {
    request_frame(1, OpCode::Delete, &DeleteRequest { path, version: -1 })
}

/// The sequence suffix of a lock node name (its last 10 characters).
pub(crate) fn sequence(name: &str) -> Result<i64, BenchError> {
    name.len()
        .checked_sub(10)
        .and_then(|at| name.get(at..))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| BenchError::msg(format!("not a sequential node: {name}")))
}

struct RawCycle {
    lock: RawLock,
    /// The node held by the previous cycle: its delete goes out with the next create.
    prev: Option<String>,
}

impl Worker for RawCycle {
    async fn step(&mut self) -> Result<usize, BenchError> {
        let prev = self.prev.take();
        if let Some(path) = &prev {
            let delete = delete_frame(path.clone());
            let mut out = BytesMut::with_capacity(delete.len() + self.lock.create_and_list.len());
            out.extend_from_slice(&delete);
            out.extend_from_slice(&self.lock.create_and_list);
            self.lock.conn.send(&out).await?;
            self.lock.reply().await?.ok()?;
        } else {
            let both = self.lock.create_and_list.clone();
            self.lock.conn.send(&both).await?;
        }
        let (_, _, path) = self.lock.acquire_sent().await?;
        self.prev = Some(path);
        Ok(0)
    }

    async fn finish(mut self) -> Result<(), BenchError> {
        if let Some(path) = self.prev.take() {
            self.lock.release(path).await?;
        }
        self.lock.conn.close().await;
        Ok(())
    }
}

// ===== lock-contention =====

/// What every contender checks and records.
pub(crate) struct Shared {
    phase: Phase,
    holders: AtomicUsize,
    violations: AtomicU64,
    /// The sequence of the last holder: holders must come in strictly increasing order.
    last_seq: AtomicI64,
    /// The fencing token (czxid) of the last holder, where the client gives one.
    last_token: AtomicI64,
    /// Whether one node may pass between contenders (a local hand-off).
    same_node_allowed: bool,
    /// Grants while measuring.
    grants: AtomicU64,
    /// Grants of the whole run.
    pub(crate) all_grants: AtomicU64,
    last_release: StdMutex<Option<Instant>>,
    handoffs: StdMutex<Hist>,
}

impl Shared {
    pub(crate) fn new(same_node_allowed: bool) -> Arc<Self> {
        Arc::new(Self {
            same_node_allowed,
            phase: Phase::default(),
            holders: AtomicUsize::new(0),
            violations: AtomicU64::new(0),
            last_seq: AtomicI64::new(-1),
            last_token: AtomicI64::new(i64::MIN),
            grants: AtomicU64::new(0),
            all_grants: AtomicU64::new(0),
            last_release: StdMutex::new(None),
            handoffs: StdMutex::new(Hist::new()),
        })
    }

    fn violation(&self, what: &str) {
        let seen = self.violations.fetch_add(1, Ordering::SeqCst);
        if seen < 10 {
            eprintln!("!! MUTUAL EXCLUSION VIOLATION: {what}");
        }
    }

    /// Records a grant; whether it counts (made while measuring).
    fn enter(&self, seq: i64, token: Option<i64>) -> bool {
        let granted = Instant::now();
        let others = self.holders.fetch_add(1, Ordering::SeqCst);
        if others != 0 {
            self.violation(&format!(
                "granted (seq {seq}) while {others} other holder(s) held the lock"
            ));
        }
        // A node handed over in process keeps its sequence and token: equal is then allowed,
        // going backwards never.
        let stale = |prev: i64, now: i64| prev > now || (prev == now && !self.same_node_allowed);
        let prev = self.last_seq.fetch_max(seq, Ordering::SeqCst);
        if stale(prev, seq) {
            self.violation(&format!("holder seq {seq} after holder seq {prev}"));
        }
        if let Some(token) = token {
            let prev = self.last_token.fetch_max(token, Ordering::SeqCst);
            if stale(prev, token) {
                self.violation(&format!("fencing token {token} after {prev}"));
            }
        }
        let released = self
            .last_release
            .lock()
            .map(|mut r| r.take())
            .unwrap_or(None);
        self.all_grants.fetch_add(1, Ordering::Relaxed);
        let measuring = self.phase.get() == Phase::MEASURE;
        if measuring {
            self.grants.fetch_add(1, Ordering::Relaxed);
            if let (Some(at), Ok(mut h)) = (released, self.handoffs.lock()) {
                h.record(granted.saturating_duration_since(at));
            }
        }
        measuring
    }

    fn leave(&self) {
        if self.holders.load(Ordering::SeqCst) != 1 {
            self.violation("another holder appeared during the critical section");
        }
        if let Ok(mut r) = self.last_release.lock() {
            *r = Some(Instant::now());
        }
        self.holders.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One contender's session.
pub(crate) trait Contender: Send + 'static {
    /// Acquires; returns the node's sequence, its fencing token if known, and the node path.
    fn acquire(
        &mut self,
    ) -> impl Future<Output = Result<(i64, Option<i64>, Held), BenchError>> + Send;
    fn release(&mut self, held: Held) -> impl Future<Output = Result<(), BenchError>> + Send;
    fn close(self) -> impl Future<Output = ()> + Send;
}

pub(crate) enum Held {
    Zkwire(zkwire_recipes::MutexGuard),
    Path(String),
}

pub(crate) struct ZkwireContender {
    pub(crate) client: zkwire::Client,
    pub(crate) mutex: zkwire_recipes::Mutex,
    /// Other contenders use the same client: it is closed once, by the workload.
    pub(crate) shares_client: bool,
}

impl Contender for ZkwireContender {
    async fn acquire(&mut self) -> Result<(i64, Option<i64>, Held), BenchError> {
        let guard = self.mutex.lock().await?;
        let seq = sequence(guard.path())?;
        let token = guard.fencing_token();
        Ok((seq, Some(token), Held::Zkwire(guard)))
    }

    async fn release(&mut self, held: Held) -> Result<(), BenchError> {
        match held {
            Held::Zkwire(guard) => guard.release().await?,
            Held::Path(_) => return Err(BenchError::msg("not a zkwire guard")),
        }
        Ok(())
    }

    async fn close(self) {
        if !self.shares_client {
            let _ = self.client.close().await;
        }
    }
}

pub(crate) struct KezhuwContender {
    pub(crate) client: zookeeper_client::Client,
    pub(crate) dir: String,
}

impl Contender for KezhuwContender {
    async fn acquire(&mut self) -> Result<(i64, Option<i64>, Held), BenchError> {
        let path = kezhuw_lock(&self.client, &self.dir).await?;
        Ok((sequence(&path)?, None, Held::Path(path)))
    }

    async fn release(&mut self, held: Held) -> Result<(), BenchError> {
        let Held::Path(path) = held else {
            return Err(BenchError::msg("not a path"));
        };
        self.client.delete(&path, None).await?;
        Ok(())
    }

    async fn close(self) {
        drop(self.client);
    }
}

struct RawContender {
    lock: RawLock,
}

impl Contender for RawContender {
    async fn acquire(&mut self) -> Result<(i64, Option<i64>, Held), BenchError> {
        let both = self.lock.create_and_list.clone();
        self.lock.conn.send(&both).await?;
        let (seq, czxid, path) = self.lock.acquire_sent().await?;
        Ok((seq, Some(czxid), Held::Path(path)))
    }

    async fn release(&mut self, held: Held) -> Result<(), BenchError> {
        let Held::Path(path) = held else {
            return Err(BenchError::msg("not a path"));
        };
        self.lock.release(path).await
    }

    async fn close(self) {
        self.lock.conn.close().await;
    }
}

/// `n` sessions of `who` contending for one mutex. Returns the measurement (ops are
/// acquisitions, the histogram is handoff latency: from the holder starting its release to
/// the next holder's grant) and the number of exclusion violations seen.
pub(crate) async fn contention(
    ctx: &Ctx,
    who: Who,
    n: usize,
) -> Result<(Measured, u64), BenchError> {
    let dir = ctx.path(&format!("contend-{}", who.name()));
    let shared = Shared::new(false);
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        match who {
            Who::Zkwire => {
                let client = ctx.zkwire().await?;
                let mutex = zkwire_recipes::Mutex::new(client.clone(), dir.clone());
                tasks.push(tokio::spawn(contend(
                    ZkwireContender {
                        client,
                        mutex,
                        shares_client: false,
                    },
                    shared.clone(),
                )));
            }
            Who::Kezhuw => {
                let client = ctx.kezhuw().await?;
                tasks.push(tokio::spawn(contend(
                    KezhuwContender {
                        client,
                        dir: dir.clone(),
                    },
                    shared.clone(),
                )));
            }
            Who::Raw => {
                let conn = RawConn::connect(&ctx.addr).await?;
                let mut lock = RawLock::new(conn, &dir);
                lock.cheat = ctx.measure.break_exclusion;
                tasks.push(tokio::spawn(contend(RawContender { lock }, shared.clone())));
            }
            Who::Relay => {
                let lock = RelayLock::new(Relay::connect(&ctx.addr).await?, &dir);
                tasks.push(tokio::spawn(contend(
                    RelayContender { lock },
                    shared.clone(),
                )));
            }
        }
    }
    measure_contention(ctx, &shared, tasks).await
}

/// Lets `tasks` warm up, measures them for the run's duration, stops them and returns the
/// measurement and the violations seen.
pub(crate) async fn measure_contention(
    ctx: &Ctx,
    shared: &Shared,
    tasks: Vec<tokio::task::JoinHandle<Result<u64, BenchError>>>,
) -> Result<(Measured, u64), BenchError> {
    let spent = measure_window(ctx, &shared.phase).await;
    let mut counts = Vec::with_capacity(tasks.len());
    for task in tasks {
        counts.push(task.await??);
    }
    let grants = shared.grants.load(Ordering::Relaxed);
    let hist = shared
        .handoffs
        .lock()
        .map(|h| h.clone())
        .unwrap_or_else(|_| Hist::new());
    let violations = shared.violations.load(Ordering::SeqCst);
    let mut m = Measured::new(grants, spent, hist);
    m.fairness = crate::measure::jain(&counts);
    Ok((m, violations))
}

/// Acquires and releases until the run stops; returns this contender's grants while
/// measuring (for the fairness index).
pub(crate) async fn contend<C: Contender>(
    mut c: C,
    shared: Arc<Shared>,
) -> Result<u64, BenchError> {
    let mut measured = 0;
    while shared.phase.get() != Phase::STOP {
        let (seq, token, held) = c.acquire().await?;
        measured += u64::from(shared.enter(seq, token));
        // Give every other task a chance to run (and to be wrongly granted) while we hold.
        tokio::task::yield_now().await;
        shared.leave();
        c.release(held).await?;
    }
    c.close().await;
    Ok(measured)
}

#[cfg(test)]
mod tests {
    use super::predecessor;

    #[test]
    fn the_predecessor_is_the_next_lower_sequence() {
        let children = ["lock-0000000012", "lock-0000000003", "lock-0000000007"].map(String::from);
        let before = |me| predecessor(&children, me).unwrap();
        assert_eq!(before("lock-0000000012"), Some("lock-0000000007"));
        assert_eq!(before("lock-0000000007"), Some("lock-0000000003"));
        assert_eq!(before("lock-0000000003"), None);
        assert!(
            predecessor(&children, "lock-0000000099").is_err(),
            "not a child"
        );
        assert!(
            predecessor(&["lock-x".to_owned()], "lock-x").is_err(),
            "no sequence"
        );
    }
}
