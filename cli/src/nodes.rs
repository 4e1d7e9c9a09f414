//! The everyday verbs: ls, get, stat, set, create, rm, sync, whoami, acl.
//!
//! Each checks its arguments before connecting, does its work on one session and closes it.

use std::io::Read;

use zkwire::{Client, CreateMode, CreateOptions, Error, Stat};

use crate::args::{check_path, Parsed};
use crate::connect::Global;
use crate::fail::{Failure, FAILED};
use crate::format::{acl_entry, acl_json, data_json, parse_acl, stat_json, stat_lines};
use crate::json::Json;
use crate::out;

/// `ls PATH [-R] [-s]`: children (sorted), or with `-R` every path of the subtree.
pub(crate) async fn ls(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let [path] = one_operand(p, "PATH")?;
    let (recursive, with_stat) = (p.has("recursive"), p.has("stat"));
    let (listed, stat) = g
        .with_session(|client| async move {
            let listed = if recursive {
                subtree(&client, &path).await?
            } else {
                children(&client, &path).await?
            };
            let stat = if with_stat {
                Some(exists(&client, &path).await?)
            } else {
                None
            };
            Ok((listed, stat))
        })
        .await?;
    let path = p.operands[0].as_str();
    if g.json {
        let key = if recursive { "paths" } else { "children" };
        let mut doc = vec![("path", Json::str(path)), (key, Json::strs(&listed))];
        doc.extend(stat.map(|s| ("stat", stat_json(&s))));
        return out::json(&Json::Obj(doc));
    }
    out::lines(&listed)?;
    stat.map_or(Ok(()), |stat| out::line(&stat_lines(&stat)))
}

/// The children of `path`, sorted.
async fn children(client: &Client, path: &str) -> Result<Vec<String>, Failure> {
    let mut children = client
        .get_children(path)
        .await
        .map_err(|e| Failure::zk(path, &e))?;
    children.sort();
    Ok(children)
}

/// Every path under `root` (itself first), depth first, children sorted. Nodes deleted while
/// walking are skipped.
async fn subtree(client: &Client, root: &str) -> Result<Vec<String>, Failure> {
    let mut paths = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let mut children = match client.get_children(&path).await {
            Ok(children) => children,
            Err(Error::NoNode) if path != root => continue,
            Err(e) => return Err(Failure::zk(&path, &e)),
        };
        children.sort();
        stack.extend(children.iter().rev().map(|c| child_path(&path, c)));
        paths.push(path);
    }
    Ok(paths)
}

/// `parent/child`, minding the root.
fn child_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// The node's Stat, or a "node does not exist" failure.
async fn exists(client: &Client, path: &str) -> Result<Stat, Failure> {
    match client.exists(path).await {
        Ok(Some(stat)) => Ok(stat),
        Ok(None) => Err(Failure::zk(path, &Error::NoNode)),
        Err(e) => Err(Failure::zk(path, &e)),
    }
}

/// `get PATH [-s]`: the node's data (and Stat).
pub(crate) async fn get(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let [path] = one_operand(p, "PATH")?;
    let (data, stat) = g
        .with_session(|client| async move {
            client
                .get_data(&path)
                .await
                .map_err(|e| Failure::zk(&path, &e))
        })
        .await?;
    if g.json {
        return out::json(&Json::Obj(vec![
            ("path", Json::str(&p.operands[0])),
            data_json(&data),
            ("stat", stat_json(&stat)),
        ]));
    }
    out::bytes_line(&data)?;
    if p.has("stat") {
        out::line(&stat_lines(&stat))?;
    }
    Ok(())
}

/// `stat PATH`: the node's Stat.
pub(crate) async fn stat(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let [path] = one_operand(p, "PATH")?;
    let stat = g
        .with_session(|client| async move { exists(&client, &path).await })
        .await?;
    print_stat(g, &p.operands[0], &stat, true)
}

/// A Stat as the result of a verb: JSON always, the human form only when `human`.
fn print_stat(g: &Global, path: &str, stat: &Stat, human: bool) -> Result<(), Failure> {
    if g.json {
        return out::json(&Json::obj([
            ("path", Json::str(path)),
            ("stat", stat_json(stat)),
        ]));
    }
    if human {
        return out::line(&stat_lines(stat));
    }
    Ok(())
}

/// `set PATH DATA [-v VERSION]` (`-` reads DATA from standard input).
pub(crate) async fn set(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let [path, data] = two_operands(p, "PATH", "DATA")?;
    let version = p.number::<i32>("version")?;
    let data = data_argument(&data)?;
    let stat = g
        .with_session(|client| async move {
            client
                .set_data(&path, &data, version)
                .await
                .map_err(|e| Failure::zk(&path, &e))
        })
        .await?;
    print_stat(g, &p.operands[0], &stat, false)
}

/// `create PATH [DATA] [-e] [-s] [-c] [--ttl D]`: prints the created path.
pub(crate) async fn create(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let operands = p.operands_between(&["PATH"], &["DATA"])?;
    let path = operands[0].clone();
    check_path(&path, p.has("sequential"))?;
    let data = operands
        .get(1)
        .map(|d| data_argument(d))
        .transpose()?
        .unwrap_or_default();
    let options = create_options(p)?;
    let (created, stat) = g
        .with_session(|client| async move {
            client
                .create(&path, &data, &options)
                .await
                .map_err(|e| Failure::zk(&path, &e))
        })
        .await?;
    if g.json {
        return out::json(&Json::obj([
            ("path", Json::str(&created)),
            ("stat", stat_json(&stat)),
        ]));
    }
    out::line(&created)
}

/// The create mode and TTL the flags ask for.
fn create_options(p: &Parsed) -> Result<CreateOptions, Failure> {
    let (ephemeral, sequential, container) =
        (p.has("ephemeral"), p.has("sequential"), p.has("container"));
    let ttl = p.duration("ttl")?;
    if container && (ephemeral || sequential || ttl.is_some()) {
        return Err(Failure::usage(
            "-c (container) cannot be combined with -e, -s or --ttl",
        ));
    }
    if ephemeral && ttl.is_some() {
        return Err(Failure::usage(
            "--ttl is for persistent nodes; it cannot be combined with -e",
        ));
    }
    let mode = match (container, ephemeral, sequential, ttl.is_some()) {
        (true, ..) => CreateMode::Container,
        (false, true, false, _) => CreateMode::Ephemeral,
        (false, true, true, _) => CreateMode::EphemeralSequential,
        (false, false, false, true) => CreateMode::PersistentWithTtl,
        (false, false, true, true) => CreateMode::PersistentSequentialWithTtl,
        (false, false, false, false) => CreateMode::Persistent,
        (false, false, true, false) => CreateMode::PersistentSequential,
    };
    let options = CreateOptions::new(mode);
    Ok(match ttl {
        Some(ttl) => options.with_ttl(ttl),
        None => options,
    })
}

/// `rm PATH [-r] [-v VERSION]`.
pub(crate) async fn rm(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let [path] = one_operand(p, "PATH")?;
    let version = p.number::<i32>("version")?;
    let recursive = p.has("recursive");
    if version.is_some() && recursive {
        return Err(Failure::usage("-v cannot be combined with -r"));
    }
    let deleted = g
        .with_session(|client| async move {
            if recursive {
                delete_subtree(&client, &path).await
            } else {
                client
                    .delete(&path, version)
                    .await
                    .map(|()| 1)
                    .map_err(|e| Failure::zk(&path, &e))
            }
        })
        .await?;
    if g.json {
        let deleted = i64::try_from(deleted).unwrap_or(i64::MAX);
        return out::json(&Json::obj([
            ("path", Json::str(&p.operands[0])),
            ("deleted", deleted.into()),
        ]));
    }
    Ok(())
}

/// Deletes `root` and everything under it (children created meanwhile too); returns how many
/// nodes were deleted.
async fn delete_subtree(client: &Client, root: &str) -> Result<usize, Failure> {
    client
        .delete_all(root)
        .await
        .map_err(|e| Failure::zk(root, &e))
}

/// `sync PATH`: waits until the server we are connected to has caught up with the leader.
pub(crate) async fn sync(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let [path] = one_operand(p, "PATH")?;
    g.with_session(
        |client| async move { client.sync(&path).await.map_err(|e| Failure::zk(&path, &e)) },
    )
    .await?;
    if g.json {
        return out::json(&Json::obj([
            ("path", Json::str(&p.operands[0])),
            ("synced", true.into()),
        ]));
    }
    Ok(())
}

/// `whoami`: the identities of the session.
pub(crate) async fn whoami(g: &Global, p: &Parsed) -> Result<(), Failure> {
    p.expect_operands(&[])?;
    let ids = g
        .with_session(|client| async move {
            client
                .who_am_i()
                .await
                .map_err(|e| Failure::zk("whoami", &e))
        })
        .await?;
    if g.json {
        let items = ids
            .iter()
            .map(|i| {
                Json::obj([
                    ("scheme", Json::str(&i.auth_scheme)),
                    ("user", Json::str(&i.user)),
                ])
            })
            .collect();
        return out::json(&Json::Arr(items));
    }
    out::lines(
        &ids.iter()
            .map(|i| format!("{}:{}", i.auth_scheme, i.user))
            .collect::<Vec<_>>(),
    )
}

/// `acl get PATH` / `acl set PATH ACL [-v VERSION]`.
pub(crate) async fn acl(g: &Global, p: &Parsed) -> Result<(), Failure> {
    match p.operands.first().map(String::as_str) {
        Some("get") => acl_get(g, p).await,
        Some("set") => acl_set(g, p).await,
        Some(other) => Err(Failure::usage(format!(
            "acl takes get or set, not {other:?}"
        ))),
        None => Err(Failure::usage("missing operand get|set")),
    }
}

async fn acl_get(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let [_, path] = two_operands(p, "get", "PATH")?;
    let (acl, stat) = g
        .with_session(|client| async move {
            client
                .get_acl(&path)
                .await
                .map_err(|e| Failure::zk(&path, &e))
        })
        .await?;
    if g.json {
        let entries = Json::Arr(acl.iter().map(acl_json).collect());
        let path = Json::str(&p.operands[1]);
        return out::json(&Json::obj([
            ("path", path),
            ("acl", entries),
            ("aversion", stat.aversion.into()),
        ]));
    }
    out::lines(&acl.iter().map(acl_entry).collect::<Vec<_>>())
}

async fn acl_set(g: &Global, p: &Parsed) -> Result<(), Failure> {
    let operands = p.expect_operands(&["set", "PATH", "ACL"])?;
    let (path, acl) = (operands[1].clone(), parse_acl(&operands[2])?);
    check_path(&path, false)?;
    let version = p.number::<i32>("version")?;
    let stat = g
        .with_session(|client| async move {
            client
                .set_acl(&path, &acl, version)
                .await
                .map_err(|e| Failure::zk(&path, &e))
        })
        .await?;
    print_stat(g, &operands[1], &stat, false)
}

/// The one operand a verb takes: a node path, checked.
fn one_operand(p: &Parsed, name: &str) -> Result<[String; 1], Failure> {
    let mut operands = p.expect_operands(&[name])?.into_iter();
    let path = operands.next().unwrap_or_default();
    check_path(&path, false)?;
    Ok([path])
}

/// The two operands a verb takes; the one named PATH is checked.
fn two_operands(p: &Parsed, first: &str, second: &str) -> Result<[String; 2], Failure> {
    let mut operands = p.expect_operands(&[first, second])?.into_iter();
    let pair = [
        operands.next().unwrap_or_default(),
        operands.next().unwrap_or_default(),
    ];
    for (name, value) in [first, second].iter().zip(&pair) {
        if *name == "PATH" {
            check_path(value, false)?;
        }
    }
    Ok(pair)
}

/// A DATA operand: the bytes of the argument, or standard input for `-`.
fn data_argument(arg: &str) -> Result<Vec<u8>, Failure> {
    if arg != "-" {
        return Ok(arg.as_bytes().to_vec());
    }
    let mut data = Vec::new();
    std::io::stdin()
        .read_to_end(&mut data)
        .map_err(|e| Failure::new(FAILED, format!("cannot read standard input: {e}")))?;
    Ok(data)
}
