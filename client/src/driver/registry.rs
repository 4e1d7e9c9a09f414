//! The driver's registry of what callers wait for: each request from submission to its
//! answer, and each local watcher from submission until it ends.
//!
//! The session knows requests and watchers by id only; this is where their ids meet the
//! channels of the callers that wait on them.

use tokio::sync::{mpsc, oneshot};

use super::command::{LocalWatcher, ReplyTo};
use crate::error::Error;
use crate::session::{IdMap, RequestId, WatchedEvent, WatcherId};

/// Where a watcher's events go.
#[derive(Debug)]
pub(crate) enum WatcherSink {
    /// A one-shot watch: one event, then the watcher is gone.
    Oneshot(oneshot::Sender<WatchedEvent>),
    /// A persistent watch: a bounded stream; a receiver that falls behind by the whole
    /// capacity loses the watch (the stream ends) instead of growing memory without bound.
    Stream(mpsc::Sender<WatchedEvent>),
}

/// Where one watch event goes, as [`Registry::route_event`] found it.
#[derive(Debug)]
pub(crate) enum Route {
    /// A one-shot watcher's event: its sink is no longer registered.
    Oneshot(oneshot::Sender<WatchedEvent>),
    /// A stream's event. When `last`, the stream ends with it: its sink is no longer
    /// registered, and the session must forget the watcher too.
    Stream {
        tx: mpsc::Sender<WatchedEvent>,
        last: bool,
    },
    /// No sink: the watcher's receiver was dropped. The session must forget the watcher.
    Gone,
}

/// Every request a caller waits on, with its reply route, and every local watcher, with its
/// sink.
///
/// Invariants, which the driver keeps by calling these methods as the session's events come:
///
/// - **Every request is answered exactly once.** A request's route is registered once, when
///   it is submitted ([`register`](Self::register)), and taken once: by its answer
///   ([`take_reply`](Self::take_reply)), or when its caller has left
///   ([`take_abandoned`](Self::take_abandoned)) or dropped its watcher first
///   ([`drop_watcher`](Self::drop_watcher)); in the last two cases the driver cancels the
///   request in the session, which then never answers it. A route taken is never found
///   again, so no answer can be sent twice. When the driver ends, dropping the registry
///   drops whatever routes are left, which their callers see as the driver gone.
/// - **A watcher is linked to the request that registers it** from submission until that
///   request's answer: the session registers the watcher only if the reply says the watch
///   was set, and a watcher dropped before that abandons its request, so that the reply
///   does not register a watcher nobody listens to.
/// - **A sink stays registered until its watcher ends**: a one-shot's first event, a
///   stream's last one ([`route_event`](Self::route_event)), or its receiver dropped
///   ([`drop_watcher`](Self::drop_watcher)).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Where each unanswered request's answer goes, and the watcher its reply may register:
    /// one lookup per answer, watcher or not.
    replies: IdMap<RequestId, (ReplyTo, Option<WatcherId>)>,
    /// Where each live watcher's events go.
    watchers: IdMap<WatcherId, WatcherSink>,
    /// The request that will register each watcher, until it is answered (the way back from
    /// a watcher to `replies`).
    watch_requests: IdMap<WatcherId, RequestId>,
}

impl Registry {
    /// Registers the submitted request `id`: its answer goes to `reply`; `watcher`, if any,
    /// is the local watcher its reply may register, linked to it until it is answered.
    pub(crate) fn register(
        &mut self,
        id: RequestId,
        reply: ReplyTo,
        watcher: Option<LocalWatcher>,
    ) {
        let linked = watcher.map(|(watcher, sink)| {
            self.watchers.insert(watcher, sink);
            self.watch_requests.insert(watcher, id);
            watcher
        });
        self.replies.insert(id, (reply, linked));
    }

    /// The route of request `id`'s answer, taken: `None` if it has none (it was answered or
    /// given up already). Its watcher, if any, is no longer linked to it; its sink stays, as
    /// the session now holds the watcher (if the reply set the watch) or its caller drops it.
    pub(crate) fn take_reply(&mut self, id: RequestId) -> Option<ReplyTo> {
        let (reply, watcher) = self.replies.remove(&id)?;
        if let Some(watcher) = watcher {
            self.watch_requests.remove(&watcher);
        }
        Some(reply)
    }

    /// Forgets every request whose caller has left (its reply channel is closed) and returns
    /// their ids, for the driver to cancel in the session.
    pub(crate) fn take_abandoned(&mut self) -> Vec<RequestId> {
        let gone: Vec<RequestId> = self
            .replies
            .iter()
            .filter(|(_, (tx, _))| tx.is_closed())
            .map(|(id, _)| *id)
            .collect();
        for id in &gone {
            self.take_reply(*id);
        }
        gone
    }

    /// Where an event for `watcher` goes. `ends` says the session no longer holds the
    /// watcher, so that a stream's event is its last. The sink stays registered only for a
    /// stream that goes on.
    pub(crate) fn route_event(&mut self, watcher: WatcherId, ends: bool) -> Route {
        match self.watchers.remove(&watcher) {
            Some(WatcherSink::Oneshot(tx)) => Route::Oneshot(tx),
            Some(WatcherSink::Stream(tx)) => {
                if !ends {
                    self.watchers
                        .insert(watcher, WatcherSink::Stream(tx.clone()));
                }
                Route::Stream { tx, last: ends }
            }
            None => Route::Gone,
        }
    }

    /// Drops `watcher`'s sink. If the request that would register it is still unanswered,
    /// that request is forgotten too and its id returned, for the driver to cancel in the
    /// session.
    pub(crate) fn drop_watcher(&mut self, watcher: WatcherId) -> Option<RequestId> {
        self.watchers.remove(&watcher);
        let request = self.watch_requests.remove(&watcher)?;
        self.replies.remove(&request);
        Some(request)
    }

    /// Requests waiting for their answer.
    pub(crate) fn waiting(&self) -> usize {
        self.replies.len()
    }

    /// Local watchers with a sink.
    pub(crate) fn watchers(&self) -> usize {
        self.watchers.len()
    }
}

impl Drop for Registry {
    /// The driver is ending: a waiting caller sees its reply channel closed, which it takes
    /// as [`Error::Closed`]; a background request's function gets that answer here.
    fn drop(&mut self) {
        for (_, (reply, _)) in self.replies.drain() {
            if let ReplyTo::Detached(_) = reply {
                reply.send(Err(Error::Closed));
            }
        }
    }
}

#[cfg(test)]
mod tests;
