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

/// A waiting caller's reply channel.
pub(crate) type Answer = oneshot::Sender<Result<Reply, Error>>;

/// Where a request's answer goes: to a caller that awaits it, or, for a request sent in the
/// background ([`Client::delete_detached`](crate::Client::delete_detached)), to a function
/// the driver calls with it, so that nothing waits on a channel and no task is woken.
#[derive(Debug)]
pub(crate) enum ReplyTo {
    Waiting(Answer),
    Detached(Detached),
}

/// What the driver calls with a background request's answer: exactly once, as a caller
/// gets exactly one answer. Where a waiting caller would see its reply channel closed (the
/// driver ended, or the request could not be handed to it), this is called with
/// [`Error::Closed`] instead ([`Registry`](super::registry::Registry)'s drop, and the
/// client's background submission).
pub(crate) struct Detached(Box<Done>);

/// A background request's function.
type Done = dyn FnOnce(Result<Reply, Error>) + Send;

impl std::fmt::Debug for Detached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detached").finish_non_exhaustive()
    }
}

impl Detached {
    pub(crate) fn new(done: impl FnOnce(Result<Reply, Error>) + Send + 'static) -> Self {
        Self(Box::new(done))
    }
}

impl ReplyTo {
    /// Gives the answer to whoever waits for it: a caller that left ignores it.
    pub(crate) fn send(self, answer: Result<Reply, Error>) {
        match self {
            Self::Waiting(tx) => {
                let _ = tx.send(answer);
            }
            Self::Detached(Detached(done)) => {
                // The function is the user's, run in the driver task: a panic in it must not
                // end the driver, and with it every other request of the session.
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(answer)));
                if ran.is_err() {
                    tracing::error!("a background request's function panicked");
                }
            }
        }
    }

    /// Whether no one waits for the answer any more (a caller that left). A background
    /// request is always waited for: its answer is what retries it.
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Self::Waiting(tx) => tx.is_closed(),
            Self::Detached(_) => false,
        }
    }
}

/// The local watcher a request registers, and where its events go.
pub(crate) type LocalWatcher = (WatcherId, WatcherSink);

/// A command from a client handle to its driver.
#[derive(Debug)]
pub(crate) enum Command {
    /// Submit a request; its watcher, if any, is registered first.
    Submit(Submission),
    /// Submit a request sent in the background.
    SubmitDetached(DetachedSubmission),
    /// Close the session.
    Close { reply: Answer },
    /// A watcher's receiver was dropped.
    RemoveWatcher(WatcherId),
}

/// A request, where its answer goes, and the watcher it registers.
#[derive(Debug)]
pub(crate) struct Submission {
    op: OpCode,
    body: Bytes,
    deadline: Option<std::time::Instant>,
    reply: Answer,
    /// `None` for a request with no watch effect, no watcher and no session of its own
    /// (most of them).
    extras: Option<Box<Extras>>,
}

/// What few requests carry, boxed to keep a command small.
#[derive(Debug)]
struct Extras {
    effect: Effect,
    watcher: Option<LocalWatcher>,
    session: Option<i64>,
}

impl Submission {
    pub(crate) fn new(request: Request, reply: Answer, watcher: Option<LocalWatcher>) -> Self {
        let Request {
            op,
            body,
            effect,
            deadline,
            session,
        } = request;
        let extras = match (effect, watcher, session) {
            (Effect::None, None, None) => None,
            (effect, watcher, session) => Some(Box::new(Extras {
                effect,
                watcher,
                session,
            })),
        };
        Self {
            op,
            body,
            deadline,
            reply,
            extras,
        }
    }

    /// The request as submitted, where its answer goes, and its watcher.
    pub(crate) fn into_parts(self) -> (Request, ReplyTo, Option<LocalWatcher>) {
        let (effect, watcher, session) = match self.extras {
            Some(extras) => (extras.effect, extras.watcher, extras.session),
            None => (Effect::None, None, None),
        };
        let request = Request {
            op: self.op,
            body: self.body,
            effect,
            deadline: self.deadline,
            session,
        };
        (request, ReplyTo::Waiting(self.reply), watcher)
    }
}

/// A request sent in the background: no watch, no waiting caller. Its own kind of command
/// rather than a kind of reply route in [`Submission`], where the function's wide pointer
/// would make every command, and so every idle session's first block of slots, larger.
///
/// It has no deadline: its answer comes with its reply, or with the loss of the connection
/// or the end of the session, which answer every request in flight; and with one field less
/// than a [`Submission`], it fits beside one in a command of the same size.
#[derive(Debug)]
pub(crate) struct DetachedSubmission {
    op: OpCode,
    body: Bytes,
    done: Detached,
    /// The session it may run on (`Client::bound_to_session`); 0, which no session has, for
    /// any. Not an `Option`: the command stays the size of a [`Submission`] one.
    session: i64,
}

impl DetachedSubmission {
    /// A background request of `op` with `body`, and its function, to run on `session`
    /// alone when there is one.
    pub(crate) fn new(op: OpCode, body: Bytes, done: Detached, session: Option<i64>) -> Self {
        let session = session.unwrap_or(0);
        Self {
            op,
            body,
            done,
            session,
        }
    }

    /// The request as submitted and where its answer goes.
    pub(crate) fn into_parts(self) -> (Request, ReplyTo) {
        let request = Request {
            op: self.op,
            body: self.body,
            effect: Effect::None,
            deadline: None,
            session: (self.session != 0).then_some(self.session),
        };
        (request, ReplyTo::Detached(self.done))
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

    /// A background request made through a handle bound to a session runs on it alone, as
    /// every other request of that handle does.
    #[test]
    fn a_detached_request_keeps_its_handles_session() {
        let request = |session| {
            let done = Detached::new(drop);
            let submission = DetachedSubmission::new(OpCode::Delete, Bytes::new(), done, session);
            submission.into_parts().0.session
        };
        assert_eq!(request(Some(0x42)), Some(0x42));
        assert_eq!(request(None), None);
    }
}
