//! `locks PATH [--watch]`: who holds a lock (mutex, read/write lock, semaphore, leader latch)
//! and who waits, in Curator's order, read from the node layout alone.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use zkwire::{Children, Client, Error};
use zkwire_recipes::{rank, ContenderKind, Ranked, SEMAPHORE_LEASES, SEMAPHORE_LOCKS};

use crate::cli::{show, LocksArgs};
use crate::connect::Global;
use crate::fail::{Failure, FAILED};
use crate::follow::follow;
use crate::format::{data_json, data_line, session_id};
use crate::nodes::check_path;
use crate::out;

/// The layouts told apart by their node names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Nothing there (or nothing that looks like a lock).
    None,
    /// `_c_<uuid>-lock-<seq>`: Curator's `InterProcessMutex`.
    Mutex,
    /// `_c_<uuid>-__WRIT__<seq>` / `__READ__<seq>`: `InterProcessReadWriteLock`.
    RwLock,
    /// `leases/` and `locks/`: `InterProcessSemaphoreV2`.
    Semaphore,
    /// `_c_<uuid>-latch-<seq>`: `LeaderLatch`.
    Latch,
}

/// Whether a directory whose listing is `children` is a semaphore's: its `leases` and
/// nothing but that and `locks`. A directory that merely has a child named `locks` (a
/// parent of mutexes, `/app` of `/app/locks/report`) is not one.
fn is_semaphore(children: &Children) -> bool {
    let ours = |c: &str| c == SEMAPHORE_LEASES || c == SEMAPHORE_LOCKS;
    children.iter().any(|c| c == SEMAPHORE_LEASES) && children.iter().all(ours)
}

impl Layout {
    /// The layout of a lock directory whose listing is `children`, by the recipes' names.
    fn of(children: &Children) -> Self {
        match ContenderKind::of(children) {
            Some(ContenderKind::ReadWrite) => Self::RwLock,
            Some(ContenderKind::Latch) => Self::Latch,
            Some(ContenderKind::Mutex) => Self::Mutex,
            _ if is_semaphore(children) => Self::Semaphore,
            _ => Self::None,
        }
    }

    /// The kind of the contenders directly below a directory of this layout.
    fn contenders(self) -> Option<ContenderKind> {
        match self {
            Self::Mutex => Some(ContenderKind::Mutex),
            Self::RwLock => Some(ContenderKind::ReadWrite),
            Self::Latch => Some(ContenderKind::Latch),
            Self::None | Self::Semaphore => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Mutex => "mutex",
            Self::RwLock => "rwlock",
            Self::Semaphore => "semaphore",
            Self::Latch => "leader-latch",
        }
    }
}

/// One contender's node.
#[derive(Debug, Clone)]
struct Contender {
    /// `holder`, `waiting`, `leader`, `lease`, `acquiring`.
    role: &'static str,
    /// The node's path.
    node: String,
    /// The sequence number the lock is ranked by (`None`: a foreign child).
    sequence: Option<i32>,
    /// The node's ephemeralOwner: the holder's session.
    session: i64,
    /// Milliseconds since the node was created (by the server's clock).
    age_ms: i64,
    /// The node's data (a latch participant's id; a lock holder's, when it sets one).
    data: Vec<u8>,
}

/// Prints the holders and the queue; with `--watch`, again at every change until Ctrl-C.
pub(crate) async fn locks(g: &Global, a: &LocksArgs) -> Result<(), Failure> {
    check_path(&a.path, false)?;
    if !a.watch {
        let path = a.path.clone();
        let found = g
            .with_session(|client| async move { inspect(g, &client, &path).await })
            .await?;
        // A mistyped path must not read as "free": say that nothing is there (exit 1).
        let Some((layout, contenders)) = found else {
            return Err(Failure::zk(&a.path, &Error::NoNode)
                .with_message(format!("{}: node does not exist (no lock there)", a.path)));
        };
        return print(g, &a.path, layout, &contenders);
    }
    let client = g.connect().await?;
    let result = follow_lock(g, &client, &a.path).await;
    g.close(&client).await;
    result
}

/// `--watch`: prints, then prints again after every event under the path.
async fn follow_lock(g: &Global, client: &Client, path: &str) -> Result<(), Failure> {
    follow(g, client, path, false, || async {
        // Watched, a path may not exist yet: the lock appears once someone takes it.
        match inspect(g, client, path).await? {
            Some((layout, contenders)) => print(g, path, layout, &contenders),
            None if g.json => print(g, path, Layout::None, &[]),
            None => out::line(&format!(
                "{path}: no one holds or waits (the node does not exist yet)"
            )),
        }
    })
    .await
}

/// Reads the lock's nodes: the layout and the contenders in Curator's order; `None` when
/// PATH does not exist.
async fn inspect(
    g: &Global,
    client: &Client,
    path: &str,
) -> Result<Option<(Layout, Vec<Contender>)>, Failure> {
    let Some(children) = children(g, client, path).await? else {
        return Ok(None);
    };
    let layout = Layout::of(&children);
    let contenders = match layout.contenders() {
        Some(kind) => {
            let role = |c: &Ranked| match (c.holds, kind) {
                (true, ContenderKind::Latch) => "leader",
                (true, _) => "holder",
                (false, _) => "waiting",
            };
            read_nodes(g, client, path, &ranked(path, kind, &children)?, role).await?
        }
        None if layout == Layout::Semaphore => semaphore(g, client, path).await?,
        None => Vec::new(),
    };
    Ok(Some((layout, contenders)))
}

/// The semaphore's leases, then the queue on its `locks` mutex (the first is acquiring).
///
/// A contender creates its lease node while it holds `locks`, and lets `locks` go once the
/// lease is granted: so a lease node of the session acquiring `locks` is still pending (it
/// waits for a lease to free up), and every other lease node is held.
async fn semaphore(g: &Global, client: &Client, path: &str) -> Result<Vec<Contender>, Failure> {
    let leases_dir = zkwire::path::join(path, SEMAPHORE_LEASES);
    let locks_dir = zkwire::path::join(path, SEMAPHORE_LOCKS);
    let leases = children(g, client, &leases_dir).await?.unwrap_or_default();
    let leases = ranked(&leases_dir, ContenderKind::SemaphoreLease, &leases)?;
    let mut all = read_nodes(g, client, &leases_dir, &leases, |_| "lease").await?;
    let queue = children(g, client, &locks_dir).await?.unwrap_or_default();
    let queue = ranked(&locks_dir, ContenderKind::Mutex, &queue)?;
    let role = |c: &Ranked| if c.holds { "acquiring" } else { "waiting" };
    let mut waiting = read_nodes(g, client, &locks_dir, &queue, role).await?;
    let acquiring = waiting
        .iter()
        .find(|c| c.role == "acquiring")
        .map(|c| c.session);
    for lease in &mut all {
        lease.role = if Some(lease.session) == acquiring {
            "pending"
        } else {
            "lease"
        };
    }
    all.append(&mut waiting);
    Ok(all)
}

/// The listing of `path`; `None` when it does not exist.
async fn children(g: &Global, client: &Client, path: &str) -> Result<Option<Children>, Failure> {
    match g.read(|| client.get_children_compact(path)).await {
        Ok(children) => Ok(Some(children)),
        Err(Error::NoNode) => Ok(None),
        Err(e) => Err(Failure::zk(path, &e)),
    }
}

/// The contenders of the `kind` directory `dir` in lock order, as the recipes rank them.
fn ranked(dir: &str, kind: ContenderKind, children: &Children) -> Result<Vec<Ranked>, Failure> {
    rank(kind, children).map_err(|e| Failure::new(FAILED, format!("{dir}: {e}")))
}

/// The nodes' data and Stat; nodes gone meanwhile are left out.
async fn read_nodes(
    g: &Global,
    client: &Client,
    dir: &str,
    ranked: &[Ranked],
    role: impl Fn(&Ranked) -> &'static str,
) -> Result<Vec<Contender>, Failure> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut nodes = Vec::with_capacity(ranked.len());
    for c in ranked {
        let node = zkwire::path::join(dir, &c.name);
        let (data, stat) = match g.read(|| client.get_data(&node)).await {
            Ok(found) => found,
            Err(Error::NoNode) => continue,
            Err(e) => return Err(Failure::zk(&node, &e)),
        };
        nodes.push(Contender {
            role: role(c),
            sequence: c.sequence,
            session: stat.ephemeral_owner,
            age_ms: now.saturating_sub(stat.ctime).max(0),
            data: data.to_vec(),
            node,
        });
    }
    Ok(nodes)
}

fn print(g: &Global, path: &str, layout: Layout, contenders: &[Contender]) -> Result<(), Failure> {
    if g.json {
        let list: Vec<Value> = contenders.iter().map(contender_json).collect();
        return out::json(&json!({"path": path, "kind": layout.name(), "contenders": list}));
    }
    if contenders.is_empty() {
        return out::line(&format!("{path}: no one holds or waits"));
    }
    out::line(&format!("{path}: {}", layout.name()))?;
    let lines: Vec<String> = contenders.iter().map(contender_line).collect();
    out::lines(&lines)
}

/// `holder    seq 12  session 0x…  age 3s 200ms  /path/_c_…-lock-0000000012  "data"`.
fn contender_line(c: &Contender) -> String {
    let seq = c.sequence.map_or_else(|| "-".to_owned(), |s| s.to_string());
    let age = show(std::time::Duration::from_millis(
        u64::try_from(c.age_ms).unwrap_or(0),
    ));
    let data = data_line(&c.data);
    format!(
        "{:<9} seq {seq:<10} session {}  age {age:<10} {}  \"{data}\"",
        c.role,
        session_id(c.session),
        c.node
    )
}

fn contender_json(c: &Contender) -> Value {
    let mut doc = Map::new();
    doc.insert("role".into(), json!(c.role));
    doc.insert("node".into(), json!(c.node));
    doc.insert("sequence".into(), json!(c.sequence));
    doc.insert("session".into(), json!(session_id(c.session)));
    doc.insert("age_ms".into(), json!(c.age_ms));
    doc.extend(data_json(&c.data).map(|(k, v)| (k.to_owned(), v)));
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_told_by_the_recipes_names() {
        let layout = |names: &[&str]| Layout::of(&names.iter().collect());
        assert_eq!(
            layout(&["_c_a-__READ__0000000001", "_c_b-lock-0000000002"]),
            Layout::RwLock
        );
        assert_eq!(layout(&["_c_a-latch-0000000001"]), Layout::Latch);
        assert_eq!(
            layout(&["k__lock__0000000001", "_c_a-lock-0000000002"]),
            Layout::Mutex
        );
        assert_eq!(
            layout(&[SEMAPHORE_LEASES, SEMAPHORE_LOCKS]),
            Layout::Semaphore
        );
        assert_eq!(layout(&[SEMAPHORE_LEASES]), Layout::Semaphore);
        assert_eq!(layout(&["config"]), Layout::None);
        // A parent of lock directories, one of them named `locks`: not a semaphore.
        assert_eq!(layout(&[SEMAPHORE_LOCKS]), Layout::None);
        assert_eq!(layout(&[SEMAPHORE_LOCKS, "zookeeper"]), Layout::None);
        assert_eq!(
            layout(&[SEMAPHORE_LEASES, SEMAPHORE_LOCKS, "app"]),
            Layout::None
        );
    }
}
