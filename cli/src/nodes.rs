//! The everyday verbs: ls, get, stat, set, create, rm, sync, whoami, acl.
//!
//! Each checks its arguments before connecting, does its work on one session (the shell's, or
//! a session of its own that it closes) and prints the result. Reads are retried within the
//! session timeout (they are idempotent); writes are not.

use std::io::{BufRead, IsTerminal, Read, Write};

use serde_json::{json, Map, Value};
use zkwire::{Client, CreateMode, CreateOptions, Error, Stat};

use crate::cli::{AclCommand, AclSetArgs, CreateArgs, GetArgs, LsArgs, PathArg, RmArgs, SetArgs};
use crate::connect::Global;
use crate::fail::{Failure, FAILED};
use crate::format::{
    acl_entry, acl_json, data_json, data_line, parse_acl, stat_json, stat_lines, DigestIds,
};
use crate::out;

/// `rm -r` asks before deleting more nodes than this (or `/`), unless `--yes`.
pub(crate) const CONFIRM_OVER: i32 = 100;

/// `ls PATH [-R] [-s]`: children (sorted), or with `-R` every path of the subtree; nodes
/// that cannot be listed are reported and make the exit code 1.
pub(crate) async fn ls(g: &Global, a: &LsArgs) -> Result<(), Failure> {
    let path = checked(&a.path)?;
    let (recursive, with_stat) = (a.recursive, a.stat);
    let (listing, stat) = g
        .with_session(|client| async move {
            let listing = if recursive {
                subtree(g, &client, &path).await?
            } else {
                Listing::complete(children(g, &client, &path).await?)
            };
            let stat = if with_stat {
                Some(exists(g, &client, &path).await?)
            } else {
                None
            };
            Ok((listing, stat))
        })
        .await?;
    print_listing(g, a, &listing, stat.as_ref())?;
    listing.outcome()
}

/// What `ls` found: the paths, and the nodes it could not list with why.
#[derive(Debug, Default)]
struct Listing {
    paths: Vec<String>,
    unreadable: Vec<(String, Error)>,
}

impl Listing {
    fn complete(paths: Vec<String>) -> Self {
        Self {
            paths,
            unreadable: Vec::new(),
        }
    }

    /// Exit 1 when some node could not be listed (each was reported already).
    fn outcome(&self) -> Result<(), Failure> {
        match self.unreadable.len() {
            0 => Ok(()),
            n => Err(Failure::new(
                FAILED,
                format!("{n} node(s) could not be listed; the rest was printed"),
            )),
        }
    }
}

fn print_listing(
    g: &Global,
    a: &LsArgs,
    listing: &Listing,
    stat: Option<&Stat>,
) -> Result<(), Failure> {
    if g.json {
        let key = if a.recursive { "paths" } else { "children" };
        let mut doc = Map::new();
        doc.insert("path".into(), json!(a.path));
        doc.insert(key.into(), json!(listing.paths));
        if a.recursive {
            let unreadable: Vec<Value> = listing
                .unreadable
                .iter()
                .map(|(path, e)| {
                    // The cause as a kind, as errors give it: scripts need not read the text.
                    let kind = Failure::zk(path, e).kind;
                    json!({"path": path, "error": e.to_string(), "kind": kind})
                })
                .collect();
            doc.insert("unreadable".into(), Value::Array(unreadable));
        }
        if let Some(s) = stat {
            doc.insert("stat".into(), stat_json(s));
        }
        return out::json(&Value::Object(doc));
    }
    for (path, e) in &listing.unreadable {
        out::note(&format!("cannot list {path}: {e}"));
    }
    out::lines(&listing.paths)?;
    stat.map_or(Ok(()), |stat| out::line(&stat_lines(stat)))
}

/// The children of `path`, sorted.
async fn children(g: &Global, client: &Client, path: &str) -> Result<Vec<String>, Failure> {
    let mut children = g
        .read(|| client.get_children(path))
        .await
        .map_err(|e| Failure::zk(path, &e))?;
    children.sort();
    Ok(children)
}

/// Every path under `root` (itself first), depth first, children sorted. Nodes deleted while
/// walking are skipped; nodes whose children cannot be read are listed and noted.
async fn subtree(g: &Global, client: &Client, root: &str) -> Result<Listing, Failure> {
    let mut listing = Listing::default();
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let mut children = match g.read(|| client.get_children(&path)).await {
            Ok(children) => children,
            Err(Error::NoNode) if path != root => continue,
            Err(e) if path == root || e.is_terminal() || e.is_retryable() => {
                return Err(Failure::zk(&path, &e))
            }
            Err(e) => {
                listing.paths.push(path.clone());
                listing.unreadable.push((path, e));
                continue;
            }
        };
        children.sort();
        stack.extend(children.iter().rev().map(|c| zkwire::path::join(&path, c)));
        listing.paths.push(path);
    }
    Ok(listing)
}

/// The node's Stat, or a "node does not exist" failure.
async fn exists(g: &Global, client: &Client, path: &str) -> Result<Stat, Failure> {
    match g.read(|| client.exists(path)).await {
        Ok(Some(stat)) => Ok(stat),
        Ok(None) => Err(Failure::zk(path, &Error::NoNode)),
        Err(e) => Err(Failure::zk(path, &e)),
    }
}

/// Runs the idempotent read `read` on a session, retried as [`Global::read`] retries; a
/// failure is told as about `what` (the path, mostly).
async fn session_read<T>(
    g: &Global,
    what: &str,
    read: impl AsyncFn(&Client) -> Result<T, Error>,
) -> Result<T, Failure> {
    g.with_session(|client| async move {
        g.read(|| read(&client))
            .await
            .map_err(|e| Failure::zk(what, &e))
    })
    .await
}

/// `get PATH [-s] [--raw]`: the node's data (and Stat).
pub(crate) async fn get(g: &Global, a: &GetArgs) -> Result<(), Failure> {
    let path = checked(&a.path)?;
    if a.raw && g.json {
        return Err(Failure::usage(
            "--raw and --json do not go together (--json gives binary data in base64)",
        ));
    }
    let read = async |client: &Client| client.get_data(&path).await;
    let (data, stat) = session_read(g, &path, read).await?;
    if g.json {
        let mut doc = Map::new();
        doc.insert("path".into(), json!(a.path));
        doc.extend(data_json(&data).map(|(k, v)| (k.to_owned(), v)));
        doc.insert("stat".into(), stat_json(&stat));
        return out::json(&Value::Object(doc));
    }
    if a.raw {
        return out::raw(&data);
    }
    if std::io::stdout().is_terminal() && !is_text(&data) {
        // Raw bytes would garble the terminal; a pipe or a file still gets them as they are.
        out::line(&data_line(&data))?;
        out::note("binary data shown escaped; --raw writes the bytes");
    } else {
        out::bytes_line(&data)?;
    }
    if a.stat {
        out::line(&stat_lines(&stat))?;
    }
    Ok(())
}

/// Whether `data` reads as text on a terminal: UTF-8 without control characters other than
/// tab and newline.
fn is_text(data: &[u8]) -> bool {
    std::str::from_utf8(data)
        .is_ok_and(|s| !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t'))
}

/// `stat PATH`: the node's Stat.
pub(crate) async fn stat(g: &Global, a: &PathArg) -> Result<(), Failure> {
    let path = checked(&a.path)?;
    let stat = g
        .with_session(|client| async move { exists(g, &client, &path).await })
        .await?;
    print_stat(g, &a.path, &stat, true)
}

/// A Stat as the result of a verb: JSON always, the human form only when `human`.
fn print_stat(g: &Global, path: &str, stat: &Stat, human: bool) -> Result<(), Failure> {
    if g.json {
        return out::json(&json!({"path": path, "stat": stat_json(stat)}));
    }
    if human {
        return out::line(&stat_lines(stat));
    }
    Ok(())
}

/// `set PATH DATA [-v VERSION]` (`-` reads DATA from standard input).
pub(crate) async fn set(g: &Global, a: &SetArgs) -> Result<(), Failure> {
    let path = checked(&a.path)?;
    let data = data_argument(&a.data)?;
    let version = a.version;
    let set = async |client: &Client| client.set_data(&path, &data, version).await;
    let stat = versioned_write(g, &path, version, false, set).await?;
    print_stat(g, &a.path, &stat, false)
}

/// Runs `write`, checked against `version` (`acl`: the ACL version), on a session: a failed
/// check is told with the node's actual version.
async fn versioned_write(
    g: &Global,
    path: &str,
    version: Option<i32>,
    acl: bool,
    write: impl AsyncFnOnce(&Client) -> Result<Stat, Error>,
) -> Result<Stat, Failure> {
    g.with_session(|client| async move {
        match write(&client).await {
            Err(Error::BadVersion) => Err(version_failure(g, &client, path, version, acl).await),
            done => done.map_err(|e| Failure::zk(path, &e)),
        }
    })
    .await
}

/// A failed `-v VERSION` check (`acl`: on the ACL version), with the node's actual version
/// read after the fact: the failed write told only that they differ.
async fn version_failure(
    g: &Global,
    client: &Client,
    path: &str,
    given: Option<i32>,
    acl: bool,
) -> Failure {
    let Some(expected) = given else {
        return Failure::zk(path, &Error::BadVersion);
    };
    let stat = g.read(|| client.exists(path)).await.ok().flatten();
    let actual = stat.map(|s| if acl { s.aversion } else { s.version });
    Failure::bad_version(path, acl, expected, actual)
}

/// `create PATH [DATA] [-p] [-e] [-s] [-c] [--ttl D]`: prints the created path.
pub(crate) async fn create(g: &Global, a: &CreateArgs) -> Result<(), Failure> {
    let path = a.path.clone();
    check_path(&path, a.sequential)?;
    let data = a
        .data
        .as_deref()
        .map(data_argument)
        .transpose()?
        .unwrap_or_default();
    let options = create_options(a);
    let parents = a.parents;
    let (created, stat) = g
        .with_session(|client| async move {
            let made = if parents {
                // Missing ancestors become empty persistent nodes with the same ACL.
                client.create_all(&path, &data, &options).await
            } else {
                client.create(&path, &data, &options).await
            };
            made.map_err(|e| create_failure(&path, &e, parents))
        })
        .await?;
    if g.json {
        return out::json(&json!({"path": created, "stat": stat_json(&stat)}));
    }
    out::line(&created)
}

/// A failed create; without `-p`, a missing node can only be the parent: name it, and say
/// how to have it created.
fn create_failure(path: &str, error: &Error, parents: bool) -> Failure {
    let failure = Failure::zk(path, error);
    match (error, zkwire::path::parent(path)) {
        (Error::NoNode, Some(parent)) if !parents => failure.with_message(format!(
            "{path}: parent {parent} does not exist; use -p (--parents) to create it"
        )),
        _ => failure,
    }
}

/// The create mode and TTL the flags ask for (clap refused the conflicting ones).
fn create_options(a: &CreateArgs) -> CreateOptions {
    let mode = match (a.container, a.ephemeral, a.sequential, a.ttl.is_some()) {
        (true, ..) => CreateMode::Container,
        (false, true, false, _) => CreateMode::Ephemeral,
        (false, true, true, _) => CreateMode::EphemeralSequential,
        (false, false, false, true) => CreateMode::PersistentWithTtl,
        (false, false, true, true) => CreateMode::PersistentSequentialWithTtl,
        (false, false, false, false) => CreateMode::Persistent,
        (false, false, true, false) => CreateMode::PersistentSequential,
    };
    let options = CreateOptions::new(mode);
    match a.ttl {
        Some(ttl) => options.with_ttl(ttl),
        None => options,
    }
}

/// `rm PATH [-r] [-v VERSION] [--yes]`.
pub(crate) async fn rm(g: &Global, a: &RmArgs) -> Result<(), Failure> {
    let path = checked(&a.path)?;
    let (version, recursive, yes) = (a.version, a.recursive, a.yes);
    let deleted = g
        .with_session(|client| async move {
            if !recursive {
                return match client.delete(&path, version).await {
                    Ok(()) => Ok(1),
                    Err(Error::BadVersion) => {
                        Err(version_failure(g, &client, &path, version, false).await)
                    }
                    Err(e @ Error::NotEmpty) => Err(Failure::zk(&path, &e)
                        .with_hint("rm -r removes it with everything under it")),
                    Err(e) => Err(Failure::zk(&path, &e)),
                };
            }
            if !yes {
                confirm_subtree(g, &client, &path).await?;
            }
            delete_subtree(&client, &path).await
        })
        .await?;
    if g.json {
        return out::json(&json!({"path": a.path, "deleted": deleted}));
    }
    Ok(())
}

/// Deletes `path` and everything below it; for `/`, everything below it but the server's own
/// `/zookeeper`. Returns how many nodes went.
async fn delete_subtree(client: &Client, path: &str) -> Result<usize, Failure> {
    if path != "/" {
        // A mistyped path is an error, as for `rm` alone (delete_all counts it 0 nodes).
        return match client.delete_all(path).await {
            Ok(0) => Err(Failure::zk(path, &Error::NoNode)),
            Ok(deleted) => Ok(deleted),
            Err(e @ Error::NoAuth) => Err(Failure::zk(path, &e)),
            Err(e) => Err(Failure::zk(path, &e).with_hint(
                "nodes below it deleted before the failure stay deleted; zkw ls -R shows what is left",
            )),
        };
    }
    let children = client
        .get_children(path)
        .await
        .map_err(|e| Failure::zk(path, &e))?;
    let mut deleted = 0;
    for child in children.iter().filter(|c| *c != "zookeeper") {
        let below = zkwire::path::join(path, child);
        deleted += match client.delete_all(&below).await {
            Ok(n) => n,
            Err(Error::NoNode) => 0,
            Err(e) => return Err(Failure::zk(&below, &e)),
        };
    }
    Ok(deleted)
}

/// Asks on standard input before deleting `/` or more than [`CONFIRM_OVER`] nodes.
///
/// # Errors
/// A failure (exit 1) unless the answer starts with `y`.
async fn confirm_subtree(g: &Global, client: &Client, path: &str) -> Result<(), Failure> {
    let below = g
        .read(|| client.get_all_children_number(path))
        .await
        .map_err(|e| Failure::zk(path, &e))?;
    if path != "/" && below < CONFIRM_OVER {
        return Ok(());
    }
    let question = format!("zkw: delete {path} and the {below} node(s) below it? [y/N] ",);
    let answer = tokio::task::spawn_blocking(move || ask(&question))
        .await
        .unwrap_or_default();
    if answer.trim_start().starts_with(['y', 'Y']) {
        return Ok(());
    }
    Err(Failure::new(
        FAILED,
        format!("{path}: not deleted (not confirmed; --yes skips the question)"),
    ))
}

/// Writes `question` on standard error and reads one line of standard input ("" at its end).
fn ask(question: &str) -> String {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(question.as_bytes());
    let _ = stderr.flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if !std::io::stdin().is_terminal() {
        let _ = stderr.write_all(b"\n");
    }
    answer
}

/// `sync PATH`: waits until the server we are connected to has caught up with the leader.
pub(crate) async fn sync(g: &Global, a: &PathArg) -> Result<(), Failure> {
    let path = checked(&a.path)?;
    session_read(g, &path, async |client: &Client| client.sync(&path).await).await?;
    if g.json {
        return out::json(&json!({"path": a.path, "synced": true}));
    }
    Ok(())
}

/// `whoami`: the identities of the session.
pub(crate) async fn whoami(g: &Global) -> Result<(), Failure> {
    let ids = session_read(g, "whoami", async |client: &Client| client.who_am_i().await).await?;
    if g.json {
        let items: Vec<Value> = ids
            .iter()
            .map(|i| json!({"scheme": i.auth_scheme, "user": i.user}))
            .collect();
        return out::json(&Value::Array(items));
    }
    out::lines(
        &ids.iter()
            .map(|i| format!("{}:{}", i.auth_scheme, i.user))
            .collect::<Vec<_>>(),
    )
}

/// `acl get PATH` / `acl set PATH ACL [-v VERSION] [--plain-password]`.
pub(crate) async fn acl(g: &Global, command: &AclCommand) -> Result<(), Failure> {
    match command {
        AclCommand::Get(a) => acl_get(g, &a.path).await,
        AclCommand::Set(a) => acl_set(g, a).await,
    }
}

async fn acl_get(g: &Global, given: &str) -> Result<(), Failure> {
    let path = checked(given)?;
    let read = async |client: &Client| client.get_acl(&path).await;
    let (acl, stat) = session_read(g, &path, read).await?;
    if g.json {
        let entries: Vec<Value> = acl.iter().map(acl_json).collect();
        return out::json(&json!({"path": given, "acl": entries, "aversion": stat.aversion}));
    }
    out::lines(&acl.iter().map(acl_entry).collect::<Vec<_>>())
}

async fn acl_set(g: &Global, a: &AclSetArgs) -> Result<(), Failure> {
    let path = checked(&a.path)?;
    let digests = if a.plain_password {
        DigestIds::PlainPassword
    } else {
        DigestIds::Hashed
    };
    let (acl, warnings) = parse_acl(&a.acl, digests)?;
    warnings.iter().for_each(|w| out::note(w));
    let version = a.version;
    let set = async |client: &Client| client.set_acl(&path, &acl, version).await;
    let stat = versioned_write(g, &path, version, true, set).await?;
    print_stat(g, &a.path, &stat, false)
}

/// A node path operand, checked before anything is sent.
fn checked(path: &str) -> Result<String, Failure> {
    check_path(path, false)?;
    Ok(path.to_owned())
}

/// Checks a node path before anything is sent (`sequential`: a trailing `/` is allowed, the
/// server appends the number).
///
/// # Errors
/// A usage failure saying what is wrong with it.
pub(crate) fn check_path(path: &str, sequential: bool) -> Result<(), Failure> {
    let checked = if sequential {
        zkwire::path::validate_sequential_path(path)
    } else {
        zkwire::path::validate_path(path)
    };
    checked.map_err(invalid_path)
}

/// A name that a recipe joins under its directory (a service, an instance id): one path
/// segment, as the recipes require.
pub(crate) fn check_name(name: &str) -> Result<(), Failure> {
    zkwire::path::validate_name(name).map_err(invalid_path)
}

fn invalid_path(e: zkwire::path::InvalidPath) -> Failure {
    Failure::usage(e.to_string()).with_kind("invalid_path")
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

#[cfg(test)]
mod tests {
    use super::is_text;

    #[test]
    fn text_is_utf8_without_control_characters_but_tab_and_newline() {
        assert!(is_text(b"v1"));
        assert!(is_text("line one\n\tline two, caf\u{e9}".as_bytes()));
        assert!(is_text(b""));
        assert!(!is_text(b"\x89PNG\r\n\x1a\n"));
        assert!(!is_text(b"\x1b[2J clears the screen"));
        assert!(!is_text(&[0xff, 0xfe]));
    }
}
