//! `members PATH` and `services [NAME]`: the members of a group in Curator's `GroupMember`
//! layout, and the services and instances in Curator's `ServiceDiscovery` layout, read from
//! the nodes; `--watch` prints again at every change until Ctrl-C.

use serde_json::{json, Map, Value};
use zkwire::{Client, Error};
use zkwire_recipes::{ServiceDiscovery, ServiceInstance};

use crate::cli::{MembersArgs, ServicesArgs};
use crate::connect::Global;
use crate::fail::Failure;
use crate::follow::follow;
use crate::format::{data_json, data_line, session_id, utc_time};
use crate::nodes::{check_name, check_path};
use crate::out;

/// One member of a group: its node's name, data and owner.
#[derive(Debug, Clone)]
struct Member {
    /// The member's id: its node's name.
    id: String,
    /// The member's data.
    data: Vec<u8>,
    /// The node's ephemeralOwner: the member's session.
    session: i64,
}

/// `members PATH`: prints the group's members; with `--watch`, again at every change.
pub(crate) async fn members(g: &Global, a: &MembersArgs) -> Result<(), Failure> {
    check_path(&a.path, false)?;
    let path = a.path.as_str();
    if !a.watch {
        let found = g
            .with_session(|client| async move { read_members(g, &client, path).await })
            .await?;
        // A mistyped path must not read as an empty group: say that nothing is there.
        let Some(members) = found else {
            return Err(Failure::zk(path, &Error::NoNode)
                .with_message(format!("{path}: node does not exist (no group there)")));
        };
        return print_members(g, path, &members);
    }
    let client = g.connect().await?;
    let session = &client;
    let result = follow(g, &client, path, true, move || async move {
        match read_members(g, session, path).await? {
            Some(members) => print_members(g, path, &members),
            None if g.json => print_members(g, path, &[]),
            None => out::line(&format!("{path}: no members (the node does not exist yet)")),
        }
    })
    .await;
    g.close(&client).await;
    result
}

/// The group's members sorted by id; `None` when PATH does not exist.
async fn read_members(
    g: &Global,
    client: &Client,
    path: &str,
) -> Result<Option<Vec<Member>>, Failure> {
    let mut ids = match g.read(|| client.get_children(path)).await {
        Ok(children) => children,
        Err(Error::NoNode) => return Ok(None),
        Err(e) => return Err(Failure::zk(path, &e)),
    };
    ids.sort();
    let mut members = Vec::with_capacity(ids.len());
    for id in ids {
        let node = zkwire::path::join(path, &id);
        match g.read(|| client.get_data(&node)).await {
            Ok((data, stat)) => members.push(Member {
                id,
                data: data.to_vec(),
                session: stat.ephemeral_owner,
            }),
            // Left meanwhile.
            Err(Error::NoNode) => {}
            Err(e) => return Err(Failure::zk(&node, &e)),
        }
    }
    Ok(Some(members))
}

fn print_members(g: &Global, path: &str, members: &[Member]) -> Result<(), Failure> {
    if g.json {
        let list: Vec<Value> = members.iter().map(member_json).collect();
        return out::json(&json!({"path": path, "members": list}));
    }
    if members.is_empty() {
        return out::line(&format!("{path}: no members"));
    }
    let width = members.iter().map(|m| m.id.len()).max().unwrap_or(0);
    let lines: Vec<String> = members
        .iter()
        .map(|m| {
            format!("{:<width$}  {}", m.id, data_line(&m.data))
                .trim_end()
                .to_owned()
        })
        .collect();
    out::lines(&lines)
}

fn member_json(m: &Member) -> Value {
    let mut doc = Map::new();
    doc.insert("id".into(), json!(m.id));
    doc.extend(data_json(&m.data).map(|(k, v)| (k.to_owned(), v)));
    doc.insert("session".into(), json!(session_id(m.session)));
    Value::Object(doc)
}

/// `services [NAME]`: the service names under `--base`, or NAME's instances; with
/// `--watch`, again at every change below `--base`.
pub(crate) async fn services(g: &Global, a: &ServicesArgs) -> Result<(), Failure> {
    check_path(&a.base, false)?;
    if let Some(name) = &a.name {
        check_name(name)?;
    }
    if !a.watch {
        return g
            .with_session(|client| async move { show_services(g, client, a).await })
            .await;
    }
    let client = g.connect().await?;
    let timed = client.with_timeout(g.session_timeout);
    let result = follow(g, &client, &a.base, true, || {
        show_services(g, timed.clone(), a)
    })
    .await;
    g.close(&client).await;
    result
}

async fn show_services(g: &Global, client: Client, a: &ServicesArgs) -> Result<(), Failure> {
    let discovery = ServiceDiscovery::new(client, a.base.clone());
    let base = discovery.base_path().to_owned();
    let Some(name) = &a.name else {
        let names = discovery
            .query_for_names()
            .await
            .map_err(|e| Failure::lock(&base, &e))?;
        if g.json {
            return out::json(&json!({"base": base, "services": names}));
        }
        if names.is_empty() {
            return out::line(&format!("{base}: no services"));
        }
        return out::lines(&names);
    };
    let dir = zkwire::path::join(&base, name);
    let instances = discovery
        .query_for_instances(name)
        .await
        .map_err(|e| Failure::lock(&dir, &e))?;
    if g.json {
        let list: Vec<Value> = instances.iter().map(instance_json).collect();
        return out::json(&json!({"base": base, "name": name, "instances": list}));
    }
    if instances.is_empty() {
        return out::line(&format!("{dir}: no instances"));
    }
    let lines: Vec<String> = instances.iter().map(instance_line).collect();
    out::lines(&lines)
}

/// `ID  ADDRESS:PORT  ssl PORT  TYPE  registered TIME  PAYLOAD` (`-` for what is missing).
fn instance_line(i: &ServiceInstance) -> String {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    // Whoever registered the instance wrote these strings: no control character reaches the
    // terminal.
    let shown = |s: &str| data_line(s.as_bytes());
    format!(
        "{}  {}:{}  ssl {}  {}  registered {}  {}",
        shown(&i.id),
        or_dash(i.address.as_deref().map(shown)),
        or_dash(i.port.map(|p| p.to_string())),
        or_dash(i.ssl_port.map(|p| p.to_string())),
        i.service_type.as_str(),
        utc_time(i.registration_time_utc),
        or_dash(i.payload.as_ref().map(|p| shown(&p.to_string()))),
    )
}

fn instance_json(i: &ServiceInstance) -> Value {
    json!({
        "id": i.id,
        "address": i.address,
        "port": i.port,
        "ssl_port": i.ssl_port,
        "service_type": i.service_type.as_str(),
        "registration_time_utc": i.registration_time_utc,
        "payload": i.payload,
        "uri_spec": i.uri_spec.as_ref().map(ToString::to_string),
    })
}
