//! `locks PATH [--watch]`: who holds a lock (mutex, read/write lock, semaphore, leader latch)
//! and who waits, in Curator's order, read from the node layout alone.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use zkwire::{Client, Error};

use crate::cli::{show, LocksArgs};
use crate::connect::Global;
use crate::fail::Failure;
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

impl Layout {
    fn of(children: &[String]) -> Self {
        let any = |marker: &str| children.iter().any(|c| c.contains(marker));
        if any("__WRIT__") || any("__READ__") {
            Self::RwLock
        } else if any("-latch-") {
            Self::Latch
        } else if any("-lock-") {
            Self::Mutex
        } else if children.iter().any(|c| c == "leases" || c == "locks") {
            Self::Semaphore
        } else {
            Self::None
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
    /// The sequence number Curator sorts by (`None`: not a sequential name).
    sequence: Option<u64>,
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
    let children = match g.read(|| client.get_children(path)).await {
        Ok(children) => children,
        Err(Error::NoNode) => return Ok(None),
        Err(e) => return Err(Failure::zk(path, &e)),
    };
    let layout = Layout::of(&children);
    let contenders = match layout {
        Layout::None => Vec::new(),
        Layout::Semaphore => semaphore(g, client, path).await?,
        _ => {
            let mut nodes = read_nodes(g, client, path, &sorted(children)).await?;
            assign_roles(layout, &mut nodes);
            nodes
        }
    };
    Ok(Some((layout, contenders)))
}

/// The semaphore's leases, then the queue on its `locks` mutex (the first is acquiring).
///
/// A contender creates its lease node while it holds `locks`, and lets `locks` go once the
/// lease is granted: so a lease node of the session acquiring `locks` is still pending (it
/// waits for a lease to free up), and every other lease node is held.
async fn semaphore(g: &Global, client: &Client, path: &str) -> Result<Vec<Contender>, Failure> {
    let leases_dir = zkwire::path::join(path, "leases");
    let locks_dir = zkwire::path::join(path, "locks");
    let leases = sorted(children(g, client, &leases_dir).await?);
    let mut all = read_nodes(g, client, &leases_dir, &leases).await?;
    let queue = sorted(children(g, client, &locks_dir).await?);
    let mut waiting = read_nodes(g, client, &locks_dir, &queue).await?;
    for (i, c) in waiting.iter_mut().enumerate() {
        c.role = if i == 0 { "acquiring" } else { "waiting" };
    }
    let acquiring = waiting.first().map(|c| c.session);
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

/// Who holds: the first node of a mutex or latch; the first node of a read/write lock if it
/// is a writer's, else every reader before the first writer.
fn assign_roles(layout: Layout, nodes: &mut [Contender]) {
    let mut writer_seen = false;
    for (i, c) in nodes.iter_mut().enumerate() {
        let is_writer = c.node.contains("__WRIT__");
        let holds = match layout {
            Layout::RwLock if is_writer => i == 0,
            Layout::RwLock => !writer_seen,
            _ => i == 0,
        };
        writer_seen |= is_writer;
        c.role = match (holds, layout) {
            (true, Layout::Latch) => "leader",
            (true, _) => "holder",
            (false, _) => "waiting",
        };
    }
}

/// Children of `path` (a semaphore's `leases` or `locks`); none when it does not exist.
async fn children(g: &Global, client: &Client, path: &str) -> Result<Vec<String>, Failure> {
    match g.read(|| client.get_children(path)).await {
        Ok(children) => Ok(children),
        Err(Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(Failure::zk(path, &e)),
    }
}

/// Names sorted as Curator sorts contenders: by the sequence number ending the name, names
/// without one last.
fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort_by_key(|n| (sequence(n).unwrap_or(u64::MAX), n.clone()));
    names
}

/// The sequence number ending a name (the server's 10 digits).
fn sequence(name: &str) -> Option<u64> {
    let digits = name.len().checked_sub(10)?;
    name.get(digits..)?.parse().ok()
}

/// The nodes' data and Stat; nodes gone meanwhile are left out.
async fn read_nodes(
    g: &Global,
    client: &Client,
    dir: &str,
    names: &[String],
) -> Result<Vec<Contender>, Failure> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut nodes = Vec::with_capacity(names.len());
    for name in names {
        let node = zkwire::path::join(dir, name);
        let (data, stat) = match g.read(|| client.get_data(&node)).await {
            Ok(found) => found,
            Err(Error::NoNode) => continue,
            Err(e) => return Err(Failure::zk(&node, &e)),
        };
        nodes.push(Contender {
            role: "waiting",
            sequence: sequence(name),
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

    fn contender(node: &str) -> Contender {
        Contender {
            role: "",
            node: node.to_owned(),
            sequence: sequence(node),
            session: 0,
            age_ms: 0,
            data: Vec::new(),
        }
    }

    #[test]
    fn curator_order_and_roles() {
        let names = sorted(vec![
            "_c_b-__READ__0000000003".to_owned(),
            "_c_a-__READ__0000000001".to_owned(),
            "_c_c-__WRIT__0000000002".to_owned(),
        ]);
        assert_eq!(names[0], "_c_a-__READ__0000000001");
        assert_eq!(Layout::of(&names), Layout::RwLock);
        let mut nodes: Vec<Contender> = names.iter().map(|n| contender(n)).collect();
        assign_roles(Layout::RwLock, &mut nodes);
        let roles: Vec<&str> = nodes.iter().map(|c| c.role).collect();
        assert_eq!(roles, ["holder", "waiting", "waiting"]);
        assert_eq!(Layout::of(&["leases".to_owned()]), Layout::Semaphore);
        assert_eq!(sequence("x"), None);
    }
}
