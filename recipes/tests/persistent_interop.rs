//! `PersistentNode` beside Apache Curator 5.4.0's (driven through a small Java program): both
//! name a protected sequential node the same way (`_c_<uuid>-<name><10-digit sequence>`), both
//! put their node back after an outside delete without duplicating it, and neither takes the
//! other's node for its own.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::time::Duration;

use zkwire::{Client, CreateMode};
use zkwire_recipes::PersistentNode;

use support::jvm::CuratorServer;
use support::{fresh_clients, poll_until};

const T: Duration = Duration::from_secs(4);
/// The bound of every wait in these tests.
const STEP: Duration = Duration::from_secs(20);

/// Curator's `PersistentNode` in a JVM: `CuratorPersistent <connect> <path> <mode>
/// <protected> <data>`, started and waited for (`READY` once created), then commands on
/// stdin: `PATH` (answers `PATH <actual path>`), `CLOSE` (`CLOSED`).
const CURATOR_PERSISTENT: CuratorServer = CuratorServer {
    class: "CuratorPersistent",
    imports: r#"
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.zookeeper.CreateMode;"#,
    setup: r#"
            PersistentNode node = new PersistentNode(client, CreateMode.valueOf(args[2]),
                Boolean.parseBoolean(args[3]), args[1], args[4].getBytes(StandardCharsets.UTF_8));
            node.start();
            if (!node.waitForInitialCreate(20, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not created");
            }"#,
    commands: r#"
                if (line.equals("PATH")) {
                    System.out.println("PATH " + node.getActualPath());
                } else if (line.equals("CLOSE")) {
                    node.close();
                    System.out.println("CLOSED");
                }"#,
    teardown: "",
};

/// Whether `name` is a protected sequential name of `stem`: `_c_<uuid v4>-<stem><10 digits>`.
fn is_protected_name(name: &str, stem: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else {
        return false;
    };
    let (uuid, tail) = rest.split_at(rest.len().min(36));
    let groups: Vec<&str> = uuid.split('-').collect();
    let shape = groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12];
    let hex = groups.iter().all(|g| {
        g.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    });
    let Some(seq) = tail.strip_prefix('-').and_then(|t| t.strip_prefix(stem)) else {
        return false;
    };
    shape && hex && seq.len() == 10 && seq.chars().all(|c| c.is_ascii_digit())
}

/// The uuid part of a protected name.
fn guid(name: &str) -> &str {
    &name[3..39]
}

/// The last segment of a path.
fn name(path: &str) -> &str {
    path.rsplit('/').next().unwrap()
}

/// Polls until `/p` holds `n` children, all protected `member-` names, and returns them.
async fn wait_for_members(client: &Client, n: usize) -> Vec<String> {
    let kids = poll_until!(STEP, Duration::from_millis(10), {
        let mut kids = client.get_children("/p").await.unwrap_or_default();
        kids.sort();
        if kids.len() == n {
            Ok(kids)
        } else {
            Err(format!("/p holds {kids:?}, not {n} nodes"))
        }
    });
    for kid in &kids {
        assert!(is_protected_name(kid, "member-"), "{kid}");
    }
    kids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkwire_and_curator_protected_nodes_share_one_naming_and_keep_apart() {
    let program = tokio::task::block_in_place(|| CURATOR_PERSISTENT.compile());
    tokio::time::timeout(4 * STEP, async {
        let (cs, [client, observer]) = fresh_clients("persistent_curator", T).await;
        let ours = PersistentNode::new(
            client.clone(),
            "/p/member-",
            CreateMode::EphemeralSequential,
            "zk",
        );
        ours.start();
        assert!(ours.wait_for_initial_create(STEP).await.unwrap());
        let args = [
            cs.as_str(),
            "/p/member-",
            "EPHEMERAL_SEQUENTIAL",
            "true",
            "java",
        ];
        let mut theirs = CURATOR_PERSISTENT.start(&program, &args).await;

        // One naming: both names have the same shape.
        wait_for_members(&observer, 2).await;
        let our_path = ours.actual_path().unwrap();
        let their_line = theirs.ask("PATH", STEP).await;
        let their_path = their_line.strip_prefix("PATH ").unwrap().to_owned();
        assert!(is_protected_name(name(&our_path), "member-"), "{our_path}");
        assert!(
            is_protected_name(name(&their_path), "member-"),
            "{their_path}"
        );
        let (data, _) = observer.get_data(&their_path).await.unwrap();
        assert_eq!(&data[..], b"java");

        // Each puts its own node back after an outside delete, once; ours keeps its guid.
        observer.delete(&their_path, None).await.unwrap();
        let kids = wait_for_members(&observer, 2).await;
        assert!(
            kids.iter().any(|k| k == name(&our_path)),
            "ours untouched: {kids:?}"
        );
        observer.delete(&our_path, None).await.unwrap();
        let kids = wait_for_members(&observer, 2).await;
        // The observer can list our new node before our session has read the create's reply
        // (make test on a loaded machine once saw `None` here): wait for ours to know it.
        let back = poll_until!(STEP, Duration::from_millis(10), {
            match ours.actual_path() {
                Some(path) if path != our_path => Ok(path),
                other => Err(format!(
                    "ours at {other:?}, not yet at a new sequence number"
                )),
            }
        });
        assert_eq!(guid(name(&back)), guid(name(&our_path)), "the same guid");
        assert!(kids.iter().any(|k| k == name(&back)), "{kids:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        wait_for_members(&observer, 2).await;

        // Closing one leaves the other's node alone.
        assert_eq!(theirs.ask("CLOSE", STEP).await, "CLOSED");
        let kids = wait_for_members(&observer, 1).await;
        assert_eq!(kids, [name(&back)]);
        ours.close().await.unwrap();
        wait_for_members(&observer, 0).await;
        client.close().await.unwrap();
        observer.close().await.unwrap();
    })
    .await
    .expect("bounded");
}
