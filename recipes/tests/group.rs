//! `GroupMember` against a real server: members see each other and each other's data, a
//! member whose session is killed leaves the others' view (and comes back if its client
//! renews its session), and zkwire and Apache Curator 5.4.0 members of one group see each
//! other (Curator's `GroupMember`, driven through a small Java program).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use zkwire::{Client, Error};
use zkwire_recipes::{GroupMember, LockError, NodeEvent};
use zkwire_testing::support::{
    connect_renewing, connect_with_timeout, fresh_chroot, kill_client_session,
};

use support::jvm::{CuratorServer, Jvm};
use support::{created_again, fresh_clients, owned_by_the_new_session, poll_until};

const T: Duration = Duration::from_secs(4);
/// The bound of every wait in these tests.
const STEP: Duration = Duration::from_secs(20);

/// `id=data` pairs as a membership map.
fn members(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(id, data)| ((*id).to_owned(), (*data).to_owned()))
        .collect()
}

/// The member's view, data as text.
fn view(member: &GroupMember) -> BTreeMap<String, String> {
    member
        .current_members()
        .into_iter()
        .map(|(id, data)| (id, String::from_utf8_lossy(&data).into_owned()))
        .collect()
}

/// Polls until `member` sees exactly `want`; panics after STEP with what it saw.
async fn wait_for_view(member: &GroupMember, want: &BTreeMap<String, String>) {
    let deadline = Instant::now() + STEP;
    loop {
        let seen = view(member);
        if &seen == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} sees {seen:?}, not {want:?}",
            member.id()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn join(client: &Client, id: &str, data: &str) -> GroupMember {
    let member = GroupMember::join(client.clone(), "/group", id, data.to_owned())
        .await
        .unwrap();
    assert!(member.wait_for_initial_create(STEP).await.unwrap());
    member
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_see_each_other_their_data_and_their_leaving() {
    let cs = fresh_chroot("group_three").await;
    let clients = [
        connect_with_timeout(&cs, T).await,
        connect_with_timeout(&cs, T).await,
        connect_with_timeout(&cs, T).await,
    ];
    let a = join(&clients[0], "a", "a1").await;
    let b = join(&clients[1], "b", "b1").await;
    let c = join(&clients[2], "c", "c1").await;
    let all = members(&[("a", "a1"), ("b", "b1"), ("c", "c1")]);
    for member in [&a, &b, &c] {
        wait_for_view(member, &all).await;
    }
    // Curator's layout: <group>/<id>, ephemeral, the data in it.
    let (data, stat) = clients[0].get_data("/group/b").await.unwrap();
    assert_eq!(
        (&data[..], stat.ephemeral_owner),
        (&b"b1"[..], clients[1].session_id())
    );

    b.set_this_data("b2").await.unwrap();
    let changed = members(&[("a", "a1"), ("b", "b2"), ("c", "c1")]);
    for member in [&a, &b, &c] {
        wait_for_view(member, &changed).await;
    }
    c.close().await.unwrap();
    let left = members(&[("a", "a1"), ("b", "b2")]);
    wait_for_view(&a, &left).await;
    wait_for_view(&b, &left).await;
    for bad in ["x/y", "", ".."] {
        assert!(matches!(
            GroupMember::join(clients[0].clone(), "/group", bad, "").await,
            Err(LockError::Client(Error::InvalidPath(_)))
        ));
    }
    a.close().await.unwrap();
    b.close().await.unwrap();
    for client in clients {
        client.close().await.unwrap();
    }
}

/// The change stream of `join_with_changes`: a member joining, changing its data and leaving
/// are a `Created`, a `Changed` and a `Deleted` of its node (each awaited before the next
/// step: the cache may fold changes that come faster than it reads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_stream_says_who_joins_changes_and_leaves() {
    let cs = fresh_chroot("group_changes").await;
    let (a, b) = (
        connect_with_timeout(&cs, T).await,
        connect_with_timeout(&cs, T).await,
    );
    let (watcher, mut changes) = GroupMember::join_with_changes(a.clone(), "/group", "a", "a1")
        .await
        .unwrap();
    let other = join(&b, "b", "b1").await;
    assert_eq!(next_about_b(&mut changes).await, "+b\"b1\"");
    other.set_this_data("b2").await.unwrap();
    assert_eq!(next_about_b(&mut changes).await, "~b\"b2\"");
    other.close().await.unwrap();
    assert_eq!(next_about_b(&mut changes).await, "-");
    watcher.close().await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// The next change of member `b`: `+data`, `~data` or `-`.
async fn next_about_b(changes: &mut zkwire_recipes::CacheEvents) -> String {
    use zkwire_recipes::CacheEvent;
    let next = async {
        while let Some(event) = changes.next().await {
            match event {
                CacheEvent::Created { path, node } if path == "/group/b" => {
                    return format!("+{:?}", node.data)
                }
                CacheEvent::Changed { path, new, .. } if path == "/group/b" => {
                    return format!("~{:?}", new.data)
                }
                CacheEvent::Deleted { path, .. } if path == "/group/b" => return "-".to_owned(),
                _ => {}
            }
        }
        "the stream ended".to_owned()
    };
    tokio::time::timeout(STEP, next)
        .await
        .expect("a change of b")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_leaves_the_view_and_a_renewing_one_comes_back() {
    let (cs, [watcher, plain]) = fresh_clients("group_killed", T).await;
    let renewing = connect_renewing(&cs, T).await;
    let observer = join(&watcher, "observer", "o").await;
    let doomed = join(&plain, "doomed", "d").await;
    let phoenix = join(&renewing, "phoenix", "p").await;
    let all = members(&[("doomed", "d"), ("observer", "o"), ("phoenix", "p")]);
    wait_for_view(&observer, &all).await;

    // Without renewal: gone for good, and the member's node says why it stopped.
    let mut events = doomed.node().events();
    let killed = Instant::now();
    kill_client_session(&plain).await.unwrap();
    wait_for_view(&observer, &members(&[("observer", "o"), ("phoenix", "p")])).await;
    println!(
        "the killed member left the view after {:?}",
        killed.elapsed()
    );
    let stopped = tokio::time::timeout(STEP, async {
        loop {
            match events.next().await {
                Some(NodeEvent::Stopped(e)) => return e,
                Some(_) => {}
                None => return None,
            }
        }
    })
    .await
    .expect("the node stopped");
    assert_eq!(stopped, Some(Error::SessionExpired));
    assert_eq!(
        doomed.close().await,
        Err(LockError::Client(Error::SessionExpired))
    );

    // With renewal: it leaves with its old session and comes back with the new one.
    let mut events = phoenix.node().events();
    let (old, created) = created_again(&renewing, &mut events, STEP).await;
    assert_eq!(created, "/group/phoenix");
    wait_for_view(&observer, &members(&[("observer", "o"), ("phoenix", "p")])).await;
    owned_by_the_new_session(&watcher, &created, &renewing, old).await;
    phoenix.close().await.unwrap();
    observer.close().await.unwrap();
    watcher.close().await.unwrap();
    renewing.close().await.unwrap();
}

/// A Curator `GroupMember` in a JVM: `CuratorGroup <connect> <group> <id> <data>`, then
/// commands on stdin: `MEMBERS` (answers `MEMBERS id=data ...`, sorted), `SET <data>`
/// (`OK`), `CLOSE` (`CLOSED`). Kept here, written out and compiled at run time.
const CURATOR_GROUP: CuratorServer = CuratorServer {
    class: "CuratorGroup",
    imports: r#"
import java.util.Map;
import java.util.TreeMap;
import org.apache.curator.framework.recipes.nodes.GroupMember;"#,
    setup: r#"
            GroupMember member = new GroupMember(
                client, args[1], args[2], args[3].getBytes(StandardCharsets.UTF_8));
            member.start();"#,
    commands: r#"
                if (line.equals("MEMBERS")) {
                    StringBuilder out = new StringBuilder("MEMBERS");
                    for (Map.Entry<String, byte[]> e
                            : new TreeMap<>(member.getCurrentMembers()).entrySet()) {
                        out.append(' ').append(e.getKey()).append('=')
                            .append(new String(e.getValue(), StandardCharsets.UTF_8));
                    }
                    System.out.println(out);
                } else if (line.startsWith("SET ")) {
                    member.setThisData(line.substring(4).getBytes(StandardCharsets.UTF_8));
                    System.out.println("OK");
                } else if (line.equals("CLOSE")) {
                    member.close();
                    System.out.println("CLOSED");
                }"#,
    teardown: "",
};

/// Polls until Curator's view (`curator`, running [`CURATOR_GROUP`]) is exactly `want`.
async fn wait_for_curator_view(curator: &mut Jvm, want: &BTreeMap<String, String>) {
    poll_until!(STEP, Duration::from_millis(20), {
        let line = curator.ask("MEMBERS", STEP).await;
        let seen: BTreeMap<String, String> = line
            .split(' ')
            .skip(1)
            .filter_map(|pair| pair.split_once('='))
            .map(|(id, data)| (id.to_owned(), data.to_owned()))
            .collect();
        if &seen == want {
            Ok(())
        } else {
            Err(format!("Curator sees {seen:?}, not {want:?}"))
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkwire_and_curator_members_see_each_other() {
    let program = tokio::task::block_in_place(|| CURATOR_GROUP.compile());
    let (cs, [a_client, b_client]) = fresh_clients("group_curator", T).await;
    let a = join(&a_client, "a", "a1").await;
    let mut curator = CURATOR_GROUP
        .start(&program, &[&cs, "/group", "java", "j1"])
        .await;
    let b = join(&b_client, "b", "b1").await;

    let all = members(&[("a", "a1"), ("b", "b1"), ("java", "j1")]);
    wait_for_view(&a, &all).await;
    wait_for_view(&b, &all).await;
    wait_for_curator_view(&mut curator, &all).await;
    let (data, stat) = a_client.get_data("/group/java").await.unwrap();
    assert_eq!(&data[..], b"j1");
    assert_ne!(
        stat.ephemeral_owner, 0,
        "Curator's member node is ephemeral too"
    );

    // Data changes, both ways.
    b.set_this_data("b2").await.unwrap();
    assert_eq!(curator.ask("SET j2", STEP).await, "OK");
    let changed = members(&[("a", "a1"), ("b", "b2"), ("java", "j2")]);
    wait_for_view(&a, &changed).await;
    wait_for_curator_view(&mut curator, &changed).await;

    // Leaving, both ways.
    a.close().await.unwrap();
    wait_for_curator_view(&mut curator, &members(&[("b", "b2"), ("java", "j2")])).await;
    assert_eq!(curator.ask("CLOSE", STEP).await, "CLOSED");
    wait_for_view(&b, &members(&[("b", "b2")])).await;
    assert!(a_client.exists("/group/java").await.unwrap().is_none());
    b.close().await.unwrap();
    let children = a_client.get_children("/group").await.unwrap_or_default();
    assert!(children.is_empty(), "{children:?}");
    a_client.close().await.unwrap();
    b_client.close().await.unwrap();
}
