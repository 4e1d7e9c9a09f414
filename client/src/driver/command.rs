//! What a client handle sends its driver.
//!
//! A command channel allocates its first block of slots (32 of them) when it is made, each
//! as large as the largest command, so every session pays for that block while idle: what
//! only some requests carry (a watch's registry effect and its local watcher) is boxed, and
//! a plain request's command stays small.

use bytes::Bytes;
use tokio::sync::oneshot;

use super::WatcherSink;
use crate::error::Error;
use crate::proto::OpCode;
use crate::session::{Effect, Reply, Request, WatcherId};

/// Where a request's answer goes.
pub(crate) type ReplyTo = oneshot::Sender<Result<Reply, Error>>;

/// The local watcher a request registers, and where its events go.
pub(crate) type LocalWatcher = (WatcherId, WatcherSink);

/// A command from a client handle to its driver.
#[derive(Debug)]
pub(crate) enum Command {
    /// Submit a request; its watcher, if any, is registered first.
    Submit(Submission),
    /// Close the session.
    Close { reply: ReplyTo },
    /// A watcher's receiver was dropped.
    RemoveWatcher(WatcherId),
}

/// A request, where its answer goes, and the watcher it registers.
#[derive(Debug)]
pub(crate) struct Submission {
    op: OpCode,
    body: Bytes,
    deadline: Option<std::time::Instant>,
    reply: ReplyTo,
    /// `None` for a request with no watch effect and no watcher (most of them).
    watching: Option<Box<Watching>>,
}

#[derive(Debug)]
struct Watching {
    effect: Effect,
    watcher: Option<LocalWatcher>,
}

impl Submission {
    pub(crate) fn new(request: Request, reply: ReplyTo, watcher: Option<LocalWatcher>) -> Self {
        let Request {
            op,
            body,
            effect,
            deadline,
        } = request;
        let watching = match (effect, watcher) {
            (Effect::None, None) => None,
            (effect, watcher) => Some(Box::new(Watching { effect, watcher })),
        };
        Self {
            op,
            body,
            deadline,
            reply,
            watching,
        }
    }

    /// The request as submitted, where its answer goes, and its watcher.
    pub(crate) fn into_parts(self) -> (Request, ReplyTo, Option<LocalWatcher>) {
        let (effect, watcher) = match self.watching {
            Some(watching) => (watching.effect, watching.watcher),
            None => (Effect::None, None),
        };
        let request = Request {
            op: self.op,
            body: self.body,
            effect,
            deadline: self.deadline,
        };
        (request, self.reply, watcher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason the boxing exists: a command is at most 9 words (a block of 32 is then
    /// 2.3 KiB, where a request laid out flat made it 4 KiB).
    #[test]
    fn a_command_is_small() {
        assert!(size_of::<Command>() <= 72, "{}", size_of::<Command>());
    }
}
