//! Requests sent in the background: handed to the connection before the call returns, their
//! answer given to a function the driver calls, so that no caller task waits on a channel and
//! none is woken (ARCHITECTURE.md, "Who owns what"; BENCHMARKS.md, "Issue 29, seventh pass":
//! a lock guard's release on drop is one).

use bytes::Bytes;
use tokio::sync::mpsc::error::TrySendError;

use super::{bodies, Client};
use crate::driver::{Command, Detached, DetachedSubmission};
use crate::error::Error;
use crate::path;
use crate::proto::{op, DeleteRequest, Operation};
use crate::session;

impl Client {
    /// Deletes a node (if its version is `version`; any version when `None`) in the
    /// background: the request is handed to the connection before this returns, so it is
    /// sent ahead of any request made after it, and `done` is called once with the path (as
    /// given: nothing is copied without a chroot) and the outcome.
    ///
    /// `done` runs in the client's driver task (it must not block: hand the outcome on, to a
    /// channel or a queue; a panic in it is caught and logged, and ends nothing but itself),
    /// or at once in the caller's for a request that was never sent (an
    /// invalid path, a closed client). The client's request timeout does not apply: the
    /// answer is the reply; [`Error::ConnectionLoss`] if the connection drops after the
    /// request was written (one not written yet waits for the next connection); the
    /// session's end ([`Error::SessionExpired`], ...) if it ends first; [`Error::Closed`] if
    /// the driver ends first. No task is woken for the answer: this is how a lock guard
    /// dropped without `release` removes its node.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// client.delete_detached("/jobs/job-1", None, |path, outcome| {
    ///     if let Err(e) = outcome {
    ///         eprintln!("cleanup of {path} failed: {e}");
    ///     }
    /// });
    /// # }
    /// ```
    ///
    /// When the client's queue of requests not yet taken by its driver is full (1,024), the
    /// request waits for room in a task of its own, which needs a Tokio runtime; outside
    /// one, `done` then gets [`Error::InvalidArgument`].
    pub fn delete_detached(
        &self,
        path: impl Into<String>,
        version: Option<i32>,
        done: impl FnOnce(String, Result<(), Error>) + Send + 'static,
    ) {
        // `server_path`'s mapping, but taking the path by value: without a chroot the request
        // carries it uncopied and gives it back for `done`.
        let path = path.into();
        if let Err(e) = path::validate_path(&path) {
            return done(path, Err(e.into()));
        }
        let version = version.unwrap_or(-1);
        let (body, path) = match &self.inner.chroot {
            Some(chroot) => {
                let server = DeleteRequest {
                    path: chroot.to_server(&path),
                    version,
                };
                (bodies::encode(&server), path)
            }
            None => {
                let request = DeleteRequest { path, version };
                (bodies::encode(&request), request.path)
            }
        };
        self.submit_detached::<op::Delete>(body, move |outcome| done(path, outcome));
    }

    /// Hands the request of `body` to the driver now; its decoded answer goes to `done`.
    fn submit_detached<O: Operation>(
        &self,
        body: Bytes,
        done: impl FnOnce(Result<O::Reply, Error>) + Send + 'static,
    ) {
        let done = Detached::new(move |answer| {
            done(answer.and_then(|reply| {
                session::decode_checked::<O::Reply>(&reply.body)
                    .map_err(|e| Error::Protocol(e.into()))
            }));
        });
        let submission = DetachedSubmission::new(O::OP, body, done, self.session);
        let command = Command::SubmitDetached(submission);
        match self.inner.commands.try_send(command) {
            Ok(()) => {}
            Err(TrySendError::Closed(command)) => answer_unsent(command, Error::Closed),
            Err(TrySendError::Full(command)) => self.send_when_room(command),
        }
    }

    /// Sends `command` once the queue has room, from a task of its own.
    fn send_when_room(&self, command: Command) {
        const NO_RUNTIME: &str =
            "the client's request queue is full and no Tokio runtime runs to wait for room";
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return answer_unsent(command, Error::InvalidArgument(NO_RUNTIME));
        };
        let commands = self.inner.commands.clone();
        runtime.spawn(async move {
            if let Err(unsent) = commands.send(command).await {
                answer_unsent(unsent.0, Error::Closed);
            }
        });
    }
}

/// Answers a command the driver never got.
fn answer_unsent(command: Command, error: Error) {
    if let Command::SubmitDetached(submission) = command {
        submission.into_parts().1.send(Err(error));
    }
}
