//! Barriers against a real server: a `DistributedBarrier` holds its waiters until removed;
//! four `DistributedDoubleBarrier` members enter together and leave together; an enter
//! that times out or is dropped leaves no member node behind; and zkwire and Apache Curator
//! 5.4.0 members (Curator's `DistributedDoubleBarrier`, driven through a small Java program)
//! enter and leave one double barrier together.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use zkwire::Client;
use zkwire_recipes::{DistributedBarrier, DistributedDoubleBarrier};
use zkwire_testing::java;
use zkwire_testing::support::{connect_with_timeout, fresh_chroot};

use support::process::ProcessIo;

const T: Duration = Duration::from_secs(4);
/// The bound of every wait in these tests.
const STEP: Duration = Duration::from_secs(20);
/// How long a waiter that must stay blocked is watched for.
const HELD: Duration = Duration::from_millis(400);

async fn clients(cs: &str, n: usize) -> Vec<Client> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(connect_with_timeout(cs, T).await);
    }
    clients
}

/// Polls until `dir` has no children (or does not exist).
async fn wait_until_empty(client: &Client, dir: &str) {
    let deadline = Instant::now() + STEP;
    loop {
        let children = client.get_children(dir).await.unwrap_or_default();
        if children.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{dir} still has {children:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barrier_holds_its_waiters_until_removed() {
    tokio::time::timeout(3 * STEP, async {
        let cs = fresh_chroot("barrier_single").await;
        let cs = cs.as_str();
        let all = clients(cs, 3).await;
        let barrier = DistributedBarrier::new(all[0].clone(), "/b/gate");
        assert!(barrier.wait_on_barrier(STEP).await.unwrap(), "not set: go");
        barrier.set_barrier().await.unwrap();
        barrier.set_barrier().await.unwrap(); // set twice is fine
        assert!(!barrier.wait_on_barrier(HELD).await.unwrap(), "set: held");

        let waiters: Vec<_> = all[1..]
            .iter()
            .map(|c| {
                let waiter = DistributedBarrier::new(c.clone(), "/b/gate");
                tokio::spawn(async move { waiter.wait_on_barrier(STEP).await })
            })
            .collect();
        tokio::time::sleep(HELD).await;
        assert!(waiters.iter().all(|w| !w.is_finished()), "held while set");
        let removed = Instant::now();
        barrier.remove_barrier().await.unwrap();
        for waiter in waiters {
            assert!(waiter.await.unwrap().unwrap());
        }
        println!("waiters released {:?} after the remove", removed.elapsed());
        barrier.remove_barrier().await.unwrap(); // removed twice is fine
        for c in all {
            c.close().await.unwrap();
        }
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_members_enter_together_and_leave_together() {
    tokio::time::timeout(4 * STEP, async {
        let cs = fresh_chroot("barrier_double").await;
        let all = clients(&cs, 4).await;
        let mut members: Vec<DistributedDoubleBarrier> = all
            .iter()
            .map(|c| DistributedDoubleBarrier::new(c.clone(), "/b/round", 4))
            .collect();
        let last = members.pop().unwrap();

        // Three enter and wait for the fourth.
        let entering: Vec<_> = members
            .into_iter()
            .map(|mut m| {
                tokio::spawn(async move {
                    let entered = m.enter(STEP).await.unwrap();
                    (m, entered, Instant::now())
                })
            })
            .collect();
        tokio::time::sleep(HELD).await;
        assert!(
            entering.iter().all(|e| !e.is_finished()),
            "held until 4 entered"
        );
        let mut last = last;
        let fourth = Instant::now();
        assert!(last.enter(STEP).await.unwrap());
        let mut members = Vec::new();
        for e in entering {
            let (m, entered, at) = e.await.unwrap();
            assert!(entered);
            assert!(at >= fourth, "entered before the fourth member");
            members.push(m);
        }
        println!("all entered {:?} after the fourth", fourth.elapsed());
        let mut children = all[0].get_children("/b/round").await.unwrap();
        children.sort();
        assert_eq!(children.len(), 5, "four members and ready: {children:?}");
        assert!(children.contains(&"ready".to_owned()));

        // Three leave and wait for the fourth.
        let leaving: Vec<_> = members
            .into_iter()
            .map(|mut m| {
                tokio::spawn(async move {
                    let left = m.leave(STEP).await.unwrap();
                    (m, left, Instant::now())
                })
            })
            .collect();
        tokio::time::sleep(HELD).await;
        assert!(
            leaving.iter().all(|l| !l.is_finished()),
            "held until 4 left"
        );
        let fourth = Instant::now();
        assert!(last.leave(STEP).await.unwrap());
        for l in leaving {
            let (m, left, at) = l.await.unwrap();
            assert!(left);
            assert!(at >= fourth, "left before the fourth member");
            assert!(m.member_path().is_none());
        }
        wait_until_empty(&all[0], "/b/round").await;
        for c in all {
            c.close().await.unwrap();
        }
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enter_that_times_out_or_is_dropped_leaves_no_member() {
    tokio::time::timeout(3 * STEP, async {
        let cs = fresh_chroot("barrier_timeout").await;
        let client = connect_with_timeout(&cs, T).await;
        let mut lonely = DistributedDoubleBarrier::new(client.clone(), "/b/round", 2);
        assert!(!lonely.enter(HELD).await.unwrap());
        assert!(lonely.member_path().is_none());
        wait_until_empty(&client, "/b/round").await;
        assert!(lonely.leave(STEP).await.is_err(), "not entered");

        // Dropped while waiting: the node goes in the background.
        let dropped = tokio::time::timeout(HELD, lonely.enter(STEP)).await;
        assert!(dropped.is_err());
        wait_until_empty(&client, "/b/round").await;

        // Entered twice is refused; dropping an entered member deletes its node.
        let mut a = DistributedDoubleBarrier::new(client.clone(), "/b/round", 1);
        assert!(a.enter(STEP).await.unwrap());
        assert!(a.enter(STEP).await.is_err());
        let node = a.member_path().unwrap().to_owned();
        assert!(client.exists(&node).await.unwrap().is_some());
        drop(a);
        let deadline = Instant::now() + STEP;
        while client.exists(&node).await.unwrap().is_some() {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        client.close().await.unwrap();
    })
    .await
    .expect("bounded");
}

/// A Curator `DistributedDoubleBarrier` member in a JVM: `CuratorDoubleBarrier <connect>
/// <path> <qty>`, then commands on stdin: `ENTER` (answers `ENTERED <true|false>`), `LEAVE`
/// (`LEFT <true|false>`), each bounded by 20 s. Kept here, written out and compiled at run
/// time.
const CURATOR_DOUBLE_BARRIER: &str = r#"
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorDoubleBarrier {
    public static void main(String[] args) throws Exception {
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(
                args[0], 10_000, 10_000, new ExponentialBackoffRetry(50, 10))) {
            client.start();
            client.blockUntilConnected();
            DistributedDoubleBarrier barrier =
                new DistributedDoubleBarrier(client, args[1], Integer.parseInt(args[2]));
            BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
            System.out.println("READY");
            System.out.flush();
            String line;
            while ((line = in.readLine()) != null) {
                if (line.equals("ENTER")) {
                    System.out.println("ENTERED " + barrier.enter(20, TimeUnit.SECONDS));
                } else if (line.equals("LEAVE")) {
                    System.out.println("LEFT " + barrier.leave(20, TimeUnit.SECONDS));
                }
                System.out.flush();
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(2);
        }
    }
}
"#;

/// A running Curator member.
struct CuratorMember {
    _child: java::JavaChild,
    io: ProcessIo,
}

impl CuratorMember {
    async fn start(program: &java::JavaProgram, args: &[&str]) -> Self {
        let mut child = program
            .spawn("CuratorDoubleBarrier", args)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut io = ProcessIo::new(
            "Curator",
            child.take_stdin().unwrap(),
            child.take_stdout().unwrap(),
            child.take_stderr().unwrap(),
        );
        assert_eq!(io.next_line(Duration::from_secs(60)).await, "READY");
        Self { _child: child, io }
    }
}

fn curator_double_barrier_program() -> java::JavaProgram {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("zkwire-curator-barrier-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("CuratorDoubleBarrier.java");
    std::fs::write(&source, CURATOR_DOUBLE_BARRIER).unwrap();
    let classpath = java::curator_classpath().unwrap_or_else(|e| panic!("{e}"));
    let program = java::compile(&[&source], &classpath).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    program
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkwire_and_curator_members_enter_and_leave_together() {
    let program = tokio::task::block_in_place(curator_double_barrier_program);
    tokio::time::timeout(6 * STEP, async {
        let cs = fresh_chroot("barrier_curator").await;
        let all = clients(&cs, 2).await;
        let mut curators = Vec::new();
        for _ in 0..2 {
            curators.push(CuratorMember::start(&program, &[&cs, "/b/mixed", "4"]).await);
        }
        let mut a = DistributedDoubleBarrier::new(all[0].clone(), "/b/mixed", 4);
        let mut b = DistributedDoubleBarrier::new(all[1].clone(), "/b/mixed", 4);

        // Two Curator members and one of ours enter and wait for the fourth (ours).
        for curator in &mut curators {
            curator.io.send("ENTER");
        }
        let entering = tokio::spawn(async move {
            let entered = a.enter(STEP).await.unwrap();
            (a, entered)
        });
        tokio::time::sleep(HELD).await;
        assert!(!entering.is_finished(), "held until 4 entered");
        for curator in &mut curators {
            let early = tokio::time::timeout(HELD, curator.io.next_line(STEP)).await;
            assert!(early.is_err(), "Curator entered early: {early:?}");
        }
        assert!(b.enter(STEP).await.unwrap());
        let (mut a, entered) = entering.await.unwrap();
        assert!(entered);
        for curator in &mut curators {
            assert_eq!(curator.io.next_line(STEP).await, "ENTERED true");
        }

        // Three leave (two Curator's) and wait for the fourth (ours). Ours is held until
        // then; a Curator 5.4 member is not always: it stops waiting as soon as a single
        // member node is left, whoever's it is (docs/recipes.md §14), which happens here
        // when ours was the highest-named node it watched.
        for curator in &mut curators {
            curator.io.send("LEAVE");
        }
        let leaving = tokio::spawn(async move { a.leave(STEP).await.unwrap() });
        tokio::time::sleep(HELD).await;
        assert!(!leaving.is_finished(), "held until 4 left");
        let mut early = Vec::new();
        for curator in &mut curators {
            let line = tokio::time::timeout(HELD, curator.io.next_line(STEP)).await;
            early.push(line.ok());
        }
        println!("Curator members' answers before the fourth left: {early:?}");
        assert!(
            early.iter().flatten().all(|line| line == "LEFT true"),
            "{early:?}"
        );
        assert!(b.leave(STEP).await.unwrap());
        assert!(leaving.await.unwrap());
        for (curator, early) in curators.iter_mut().zip(&early) {
            if early.is_none() {
                assert_eq!(curator.io.next_line(STEP).await, "LEFT true");
            }
        }
        wait_until_empty(&all[0], "/b/mixed").await;
        for c in all {
            c.close().await.unwrap();
        }
    })
    .await
    .expect("bounded");
}
