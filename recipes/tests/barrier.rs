//! Barriers against a real server: a `DistributedBarrier` holds its waiters until removed;
//! four `DistributedDoubleBarrier` members enter together and leave together; an enter
//! that times out or is dropped leaves no member node behind; zkwire and Apache Curator
//! 5.4.0 members (Curator's barriers, driven through a small Java program) enter and leave
//! one double barrier together for 20 rounds, and hold each other at one barrier.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::time::{Duration, Instant};

use zkwire::proto::OpCode;
use zkwire::{Client, CreateOptions};
use zkwire_recipes::{DistributedBarrier, DistributedDoubleBarrier};
use zkwire_testing::support::{connect_with_timeout, fresh_chroot};

use support::jvm::{CuratorServer, Jvm};
use support::{close_all, fresh_clients, poll_until};

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
    poll_until!(STEP, Duration::from_millis(10), {
        let children = client.get_children(dir).await.unwrap_or_default();
        let why = || format!("{dir} still has {children:?}");
        children.is_empty().then_some(()).ok_or_else(why)
    });
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
                // "For ever" as the caller would write it: no deadline to overflow.
                tokio::spawn(async move { waiter.wait_on_barrier(Duration::MAX).await })
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
        close_all(all).await;
    })
    .await
    .expect("bounded");
}

/// Has each of `members` enter (or leave, when `enter` is false) in a task of its own, checks
/// that they are held until `last` does it too, and that each then passed after it; returns
/// the members.
async fn held_until_the_last(
    members: Vec<DistributedDoubleBarrier>,
    last: &mut DistributedDoubleBarrier,
    enter: bool,
) -> Vec<DistributedDoubleBarrier> {
    async fn step(member: &mut DistributedDoubleBarrier, enter: bool) -> bool {
        if enter {
            member.enter(STEP).await.unwrap()
        } else {
            member.leave(STEP).await.unwrap()
        }
    }
    let what = if enter { "entered" } else { "left" };
    let tasks: Vec<_> = members
        .into_iter()
        .map(|mut m| {
            tokio::spawn(async move {
                let passed = step(&mut m, enter).await;
                (m, passed, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(HELD).await;
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "held until 4 {what}"
    );
    let fourth = Instant::now();
    assert!(step(last, enter).await);
    let mut members = Vec::new();
    for task in tasks {
        let (m, passed, at) = task.await.unwrap();
        assert!(passed);
        assert!(at >= fourth, "{what} before the fourth member");
        members.push(m);
    }
    println!("all {what} {:?} after the fourth", fourth.elapsed());
    members
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
        let mut last = last;
        let members = held_until_the_last(members, &mut last, true).await;
        let mut children = all[0].get_children("/b/round").await.unwrap();
        children.sort();
        assert_eq!(children.len(), 5, "four members and ready: {children:?}");
        assert!(children.contains(&"ready".to_owned()));

        // Three leave and wait for the fourth.
        for m in held_until_the_last(members, &mut last, false).await {
            assert!(m.member_path().is_none());
        }
        wait_until_empty(&all[0], "/b/round").await;
        close_all(all).await;
    })
    .await
    .expect("bounded");
}

/// A leave that times out has deleted our node and waits for the others: calling it again
/// goes on waiting (as the doc example loops), not "not entered".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leave_that_timed_out_can_be_called_again() {
    tokio::time::timeout(3 * STEP, async {
        let (_, [a, b]) = fresh_clients("barrier_leave_again", T).await;
        let mut first = DistributedDoubleBarrier::new(a.clone(), "/b/round", 2);
        let mut second = DistributedDoubleBarrier::new(b.clone(), "/b/round", 2);
        let (entered_first, entered_second) = tokio::join!(first.enter(STEP), second.enter(STEP));
        assert!(entered_first.unwrap() && entered_second.unwrap());
        assert!(!first.leave(HELD).await.unwrap(), "the second is still in");
        assert!(first.member_path().is_none(), "our node went first");
        let (left_first, left_second) = tokio::join!(first.leave(STEP), second.leave(STEP));
        assert!(left_first.unwrap(), "the second leave went on waiting");
        assert!(left_second.unwrap());
        assert!(
            first.leave(STEP).await.is_err(),
            "left: not entered any more"
        );
        wait_until_empty(&a, "/b/round").await;
        close_all([a, b]).await;
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enter_that_times_out_or_is_dropped_leaves_no_member() {
    tokio::time::timeout(3 * STEP, async {
        let (_, [client]) = fresh_clients("barrier_timeout", T).await;
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

/// An enter whose deadline comes while its own `ready` create is unanswered (the barrier
/// filled by its count) is in: `true`, and its node stays. (It once deleted its node and
/// said `false`, and the other members went through one short.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enter_whose_deadline_meets_its_own_ready_create_is_in() {
    let (cs, proxy, via) = support::proxied("barrier_ready_in_flight").await;
    let observer = connect_with_timeout(&cs, T).await;
    observer
        .create_all("/b/round", b"", &CreateOptions::persistent())
        .await
        .unwrap();
    let client = connect_with_timeout(&via, T).await;
    // The member node's create is the first `create2`, the `ready` node's the second: its
    // reply is lost, and no connection is taken again until the deadline has passed.
    proxy.cut_after_request(OpCode::Create2, 2);
    proxy.refuse(true);
    let mut member = DistributedDoubleBarrier::new(client.clone(), "/b/round", 1);
    let entering = tokio::spawn(async move {
        let entered = member.enter(Duration::from_millis(800)).await;
        (member, entered)
    });
    let deadline = Instant::now() + STEP;
    while proxy.triggered() == 0 {
        assert!(Instant::now() < deadline, "the ready create was not cut");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.refuse(false);
    let (member, entered) = tokio::time::timeout(STEP, entering)
        .await
        .expect("bounded")
        .unwrap();
    assert!(entered.unwrap(), "the barrier filled with us in it");
    let node = member.member_path().expect("entered").to_owned();
    assert!(observer.exists(&node).await.unwrap().is_some());
    assert!(observer.exists("/b/round/ready").await.unwrap().is_some());
    close_all([observer, client]).await;
}

/// Curator's barriers in a JVM: `CuratorBarriers <connect> <double-path> <qty> <path>`, then
/// commands on stdin, each bounded by 20 s: `ENTER` (answers `ENTERED <true|false>`) and
/// `LEAVE` (`LEFT <true|false>`) on a `DistributedDoubleBarrier` at `double-path`; `SET`
/// (`SET`), `REMOVE` (`REMOVED`) and `WAIT` (`WAITED <true|false>`) on a `DistributedBarrier`
/// at `path`. Kept here, written out and compiled at run time.
///
/// Each `ENTER` makes a new `DistributedDoubleBarrier`: one object must not be used for two
/// rounds (docs/recipes.md §14). Its member path is drawn once, in the constructor, so a reused
/// object creates the same node again next round, and a member that watched that path while
/// leaving the round before (a watch on a node already gone, left set) is woken by its
/// creation and gets through `enter` before the others are in.
const CURATOR_BARRIERS: CuratorServer = CuratorServer {
    class: "CuratorBarriers",
    imports: r#"
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;"#,
    setup: r#"
            DistributedDoubleBarrier twice = null;
            DistributedBarrier once = new DistributedBarrier(client, args[3]);"#,
    commands: r#"
                if (line.equals("ENTER")) {
                    twice = new DistributedDoubleBarrier(client, args[1], Integer.parseInt(args[2]));
                    System.out.println("ENTERED " + twice.enter(20, TimeUnit.SECONDS));
                } else if (line.equals("LEAVE")) {
                    System.out.println("LEFT " + twice.leave(20, TimeUnit.SECONDS));
                } else if (line.equals("SET")) {
                    once.setBarrier();
                    System.out.println("SET");
                } else if (line.equals("REMOVE")) {
                    once.removeBarrier();
                    System.out.println("REMOVED");
                } else if (line.equals("WAIT")) {
                    System.out.println("WAITED " + once.waitOnBarrier(20, TimeUnit.SECONDS));
                }"#,
    teardown: "",
};

/// How long members that must stay blocked are watched for, in each of the 20 mixed rounds.
const ROUND_HELD: Duration = Duration::from_millis(150);

/// A double barrier's members: ours (indices 0 and 1; `None` while a task has it) and
/// Curator's (2 and 3).
struct Mixed {
    ours: Vec<Option<DistributedDoubleBarrier>>,
    theirs: Vec<Jvm>,
}

impl Mixed {
    /// One phase of one round, `enter` or `leave`: every member but `last` starts it and none
    /// of ours may finish before `last` starts it; then `last` does and every member finishes
    /// with `true`. Returns how many Curator members finished before `last` started: none may
    /// on enter; on leave a Curator 5.4 member may (docs/recipes.md §14).
    async fn phase(&mut self, last: usize, leave: bool) -> usize {
        let (command, answer) = if leave {
            ("LEAVE", "LEFT true")
        } else {
            ("ENTER", "ENTERED true")
        };
        let mut tasks = Vec::new();
        for i in (0..2).filter(|&i| i != last) {
            let mut m = self.ours[i].take().unwrap();
            tasks.push((
                i,
                tokio::spawn(async move {
                    let done = if leave {
                        m.leave(STEP).await
                    } else {
                        m.enter(STEP).await
                    };
                    let done = done.unwrap();
                    (m, done)
                }),
            ));
        }
        for i in (2..4).filter(|&i| i != last) {
            self.theirs[i - 2].io.send(command);
        }
        tokio::time::sleep(ROUND_HELD).await;
        assert!(
            tasks.iter().all(|(_, t)| !t.is_finished()),
            "one of ours got through {command} before member {last}"
        );
        let mut early = vec![false; 2];
        for i in (2..4).filter(|&i| i != last) {
            let line = tokio::time::timeout(
                Duration::from_millis(1),
                self.theirs[i - 2].io.next_line(STEP),
            );
            if let Ok(line) = line.await {
                assert!(
                    leave,
                    "Curator got through {command} before member {last}: {line}"
                );
                assert_eq!(line, answer);
                early[i - 2] = true;
            }
        }
        if last < 2 {
            let m = self.ours[last].as_mut().unwrap();
            let done = if leave {
                m.leave(STEP).await
            } else {
                m.enter(STEP).await
            };
            assert!(done.unwrap(), "member {last}'s {command}");
        } else {
            self.theirs[last - 2].io.send(command);
        }
        for (i, task) in tasks {
            let (m, done) = task.await.unwrap();
            assert!(done, "member {i}'s {command}");
            self.ours[i] = Some(m);
        }
        for (jvm, early) in self.theirs.iter_mut().zip(&early) {
            if !early {
                assert_eq!(jvm.io.next_line(STEP).await, answer);
            }
        }
        early.iter().filter(|&&e| e).count()
    }
}

/// Two zkwire and two Curator members of one double barrier, 20 rounds, the last to arrive
/// taking turns: nobody gets in before all four are in, and none of ours gets out before
/// all four leave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkwire_and_curator_members_enter_and_leave_together_for_20_rounds() {
    let program = tokio::task::block_in_place(|| CURATOR_BARRIERS.compile());
    tokio::time::timeout(12 * STEP, async {
        let cs = fresh_chroot("barrier_curator").await;
        let all = clients(&cs, 2).await;
        let mut mixed = Mixed {
            ours: all
                .iter()
                .map(|c| Some(DistributedDoubleBarrier::new(c.clone(), "/b/mixed", 4)))
                .collect(),
            theirs: Vec::new(),
        };
        for _ in 0..2 {
            let args = [cs.as_str(), "/b/mixed", "4", "/b/gate"];
            mixed
                .theirs
                .push(CURATOR_BARRIERS.start(&program, &args).await);
        }
        let mut early_leaves = 0;
        for round in 0..20 {
            mixed.phase(round % 4, false).await;
            let inside = all[0].get_children("/b/mixed").await.unwrap();
            assert_eq!(
                inside.len(),
                5,
                "round {round}: 4 members and ready: {inside:?}"
            );
            early_leaves += mixed.phase((round + 1) % 4, true).await;
            wait_until_empty(&all[0], "/b/mixed").await;
        }
        println!("20 rounds; Curator members left before the last one {early_leaves} times");
        close_all(all).await;
    })
    .await
    .expect("bounded");
}

/// One `DistributedBarrier` path, zkwire and Curator on either side: each holds the other's
/// waiter until it removes the barrier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkwire_and_curator_hold_each_other_at_one_barrier() {
    let program = tokio::task::block_in_place(|| CURATOR_BARRIERS.compile());
    tokio::time::timeout(4 * STEP, async {
        let (cs, [client]) = fresh_clients("barrier_single_curator", T).await;
        let ours = DistributedBarrier::new(client.clone(), "/b/gate");
        let args = [cs.as_str(), "/b/mixed", "2", "/b/gate"];
        let mut curator = CURATOR_BARRIERS.start(&program, &args).await;
        assert_eq!(
            curator.ask("WAIT", STEP).await,
            "WAITED true",
            "not set: go"
        );

        // Ours sets, Curator's waits until ours removes.
        ours.set_barrier().await.unwrap();
        curator.io.send("WAIT");
        let early = tokio::time::timeout(HELD, curator.io.next_line(STEP)).await;
        assert!(early.is_err(), "Curator passed a set barrier: {early:?}");
        ours.remove_barrier().await.unwrap();
        assert_eq!(curator.io.next_line(STEP).await, "WAITED true");

        // Curator's sets, ours waits until Curator's removes.
        assert_eq!(curator.ask("SET", STEP).await, "SET");
        let waiter = DistributedBarrier::new(client.clone(), "/b/gate");
        let waiting = tokio::spawn(async move { waiter.wait_on_barrier(STEP).await });
        tokio::time::sleep(HELD).await;
        assert!(!waiting.is_finished(), "ours passed Curator's barrier");
        assert_eq!(curator.ask("REMOVE", STEP).await, "REMOVED");
        assert!(waiting.await.unwrap().unwrap());
        assert!(client.exists("/b/gate").await.unwrap().is_none());
        client.close().await.unwrap();
    })
    .await
    .expect("bounded");
}
