//! The floor under any client built as zkwire is: the raw recipes, but each request goes from
//! the caller's task to one connection task over a bounded channel, and its reply comes back
//! on a oneshot of its own (BENCHMARKS.md, "Issue 29, sixth pass").
//!
//! The connection task does what zkwire's driver cannot do without: it drains the channel
//! into one write, reads, splits frames and hands each reply to the oneshot at the head of a
//! FIFO (notifications go to a channel of their own). It checks nothing, times nothing out,
//! keeps no session. Callers encode their request and decode its reply, as a client library's
//! call would. So the relay's cost above raw is the hand-off between tasks, and zkwire's cost
//! above the relay is zkwire's own work.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkwire::proto::{WatcherEvent, NOTIFICATION_XID};

use crate::raw::{RawConn, RawReply};
use crate::BenchError;

/// Requests queued for the connection task, as zkwire's driver queues them.
const QUEUE: usize = 1024;

/// One request on its way to the connection task: its frame, and where its reply goes
/// (`None`: nobody waits for it, like a guard's background delete).
struct Call {
    frame: Bytes,
    reply: Option<oneshot::Sender<RawReply>>,
}

/// A handle that sends requests to the connection task (cheap to clone).
#[derive(Clone)]
pub(crate) struct RelayClient {
    calls: mpsc::Sender<Call>,
}

/// One session: the handle, the paths of watch notifications, and the connection task.
pub(crate) struct Relay {
    pub(crate) client: RelayClient,
    pub(crate) events: mpsc::UnboundedReceiver<String>,
    task: JoinHandle<()>,
}

impl Relay {
    /// Connects a raw session (`timeout_ms` requested) and spawns its connection task.
    pub(crate) async fn connect(addr: &str) -> Result<Self, BenchError> {
        let conn = RawConn::connect(addr).await?;
        let (calls, queued) = mpsc::channel(QUEUE);
        let (notify, events) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(conn, queued, notify));
        Ok(Self {
            client: RelayClient { calls },
            events,
            task,
        })
    }

    /// Ends the session once every clone of the handle is dropped.
    pub(crate) async fn close(self) {
        drop(self.client);
        let _ = self.task.await;
    }
}

impl RelayClient {
    /// Sends `frame` and waits for its reply.
    pub(crate) async fn call(&self, frame: Bytes) -> Result<RawReply, BenchError> {
        let (tx, rx) = oneshot::channel();
        self.send(frame, Some(tx)).await?;
        rx.await
            .map_err(|_| BenchError::msg("relay: the connection task ended"))
    }

    /// Sends `frame`; its reply is read and dropped.
    pub(crate) async fn cast(&self, frame: Bytes) -> Result<(), BenchError> {
        self.send(frame, None).await
    }

    async fn send(
        &self,
        frame: Bytes,
        reply: Option<oneshot::Sender<RawReply>>,
    ) -> Result<(), BenchError> {
        self.calls
            .send(Call { frame, reply })
            .await
            .map_err(|_| BenchError::msg("relay: the connection task ended"))
    }
}

/// The connection task: until every handle is dropped or the connection fails.
async fn run(
    mut conn: RawConn,
    mut queued: mpsc::Receiver<Call>,
    notify: mpsc::UnboundedSender<String>,
) {
    let mut waiting = VecDeque::new();
    let mut out = BytesMut::new();
    loop {
        tokio::select! {
            biased;
            call = queued.recv() => {
                let Some(call) = call else { break };
                take(call, &mut out, &mut waiting);
                while let Ok(call) = queued.try_recv() {
                    take(call, &mut out, &mut waiting);
                }
                if conn.send(&out).await.is_err() {
                    break;
                }
                out.clear();
            }
            reply = conn.recv() => {
                let Ok(mut reply) = reply else { break };
                loop {
                    route(reply, &mut waiting, &notify);
                    match conn.try_recv() {
                        Ok(Some(next)) => reply = next,
                        _ => break,
                    }
                }
            }
        }
    }
    conn.close().await;
}

/// Queues `call`'s frame for the next write and its reply slot in send order.
fn take(call: Call, out: &mut BytesMut, waiting: &mut VecDeque<Option<oneshot::Sender<RawReply>>>) {
    out.extend_from_slice(&call.frame);
    waiting.push_back(call.reply);
}

/// Hands `reply` to the oldest request (the server answers in order), or a notification's
/// path to the events channel.
fn route(
    reply: RawReply,
    waiting: &mut VecDeque<Option<oneshot::Sender<RawReply>>>,
    notify: &mpsc::UnboundedSender<String>,
) {
    if reply.header.xid == NOTIFICATION_XID {
        if let Ok(event) = reply.decode::<WatcherEvent>() {
            let _ = notify.send(event.path);
        }
        return;
    }
    if let Some(Some(slot)) = waiting.pop_front() {
        let _ = slot.send(reply);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkwire::jute::Encode;
    use zkwire::proto::{ErrorCode, EventType, KeeperState, ReplyHeader};

    fn reply(xid: i32, body: &'static [u8]) -> RawReply {
        RawReply {
            header: ReplyHeader {
                xid,
                zxid: 7,
                err: ErrorCode::Ok,
            },
            body: Bytes::from_static(body),
        }
    }

    #[test]
    fn replies_go_to_callers_in_send_order_and_notifications_to_the_events() {
        let (notify, mut events) = mpsc::unbounded_channel();
        let (mut waiting, mut out) = (VecDeque::new(), BytesMut::new());
        let (first, mut first_rx) = oneshot::channel();
        let (third, mut third_rx) = oneshot::channel();
        for (frame, slot) in [(b"a", Some(first)), (b"b", None), (b"c", Some(third))] {
            let frame = Bytes::from_static(frame);
            take(Call { frame, reply: slot }, &mut out, &mut waiting);
        }
        assert_eq!(&out[..], b"abc", "one write, in send order");

        let mut event = BytesMut::new();
        WatcherEvent {
            event_type: EventType::NodeDeleted,
            state: KeeperState::SyncConnected,
            path: "/d/lock-0000000001".to_owned(),
        }
        .encode(&mut event);
        let notification = RawReply {
            body: event.freeze(),
            ..reply(NOTIFICATION_XID, b"")
        };
        route(notification, &mut waiting, &notify);
        assert_eq!(waiting.len(), 3, "a notification answers no request");
        assert_eq!(events.try_recv().unwrap(), "/d/lock-0000000001");

        route(reply(1, b"1"), &mut waiting, &notify);
        assert_eq!(&first_rx.try_recv().unwrap().body[..], b"1");
        route(reply(1, b"2"), &mut waiting, &notify);
        assert!(third_rx.try_recv().is_err(), "the cast's reply is dropped");
        route(reply(1, b"3"), &mut waiting, &notify);
        assert_eq!(&third_rx.try_recv().unwrap().body[..], b"3");
        assert!(waiting.is_empty());
    }
}
