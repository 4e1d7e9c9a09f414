//! The tokio driver: one task per client owns the transport and the sans-IO [`Session`].
//!
//! This is the only tokio-aware code under the session. It reads into the session's receive
//! buffer (replies reach callers as zero-copy `Bytes`), writes everything the session has to
//! send in one write, sleeps until the session's next deadline, connects with the host
//! rotation and backoff of `hosts`, and routes the session's events to the callers' channels.

mod command;
mod connection;
mod diagnosis;
mod dial;
mod hosts;
mod registry;
mod shared;
mod step;
mod transport;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

pub(crate) use command::{Command, Detached, DetachedSubmission, ReplyTo, Submission};
pub(crate) use registry::WatcherSink;
pub(crate) use shared::Shared;
#[cfg(feature = "tls")]
pub(crate) use dial::tcp_connect;
pub use transport::{Connect, TcpConnector};

use self::diagnosis::Diagnosis;
use self::hosts::Hosts;
use self::registry::{Registry, Route};
use self::shared::RunningGuard;
use crate::connect_string::HostPort;
use crate::error::{ConnectError, Error};
use crate::proto::{EventType, KeeperState};
use self::command::LocalWatcher;
use crate::session::{
    DropReason, Event, Reply, Request, Session, SessionState, WatchedEvent, WatcherId,
};

/// The receive buffer's room for one read at first: a handshake reply, a few small replies.
const MIN_READ_ROOM: usize = 2 * 1024;
/// The most room one read gets: a burst of many replies at once.
const MAX_READ_ROOM: usize = 64 * 1024;
/// Less room than this is not worth a read: more is made first.
const MIN_USEFUL_READ: usize = 128;

/// How many waiting commands one driver step takes after the one it woke for (and as many
/// again after letting answered callers run, `let_woken_callers_run`): enough to batch what
/// callers submit together, few enough that reads and timers are not starved.
const COMMAND_BATCH: u32 = 64;

/// An answer or a watch event waiting to be handed out.
enum Outgoing {
    Answer(ReplyTo, Result<Reply, Error>),
    Oneshot(oneshot::Sender<WatchedEvent>, WatchedEvent),
    Stream(WatcherId, mpsc::Sender<WatchedEvent>, WatchedEvent),
}

type ConnectFuture<S> = Pin<Box<dyn Future<Output = io::Result<S>> + Send>>;
type ProbeFuture = Pin<Box<dyn Future<Output = (HostPort, Option<ConnectError>)> + Send>>;

/// The driver task's state.
pub(crate) struct Driver<C: Connect> {
    session: Session,
    connector: C,
    hosts: Hosts,
    commands: mpsc::Receiver<Command>,
    commands_closed: bool,
    shared: Arc<Shared>,
    /// Every request callers wait on and every local watcher, with where their answers and
    /// events go.
    registry: Registry,
    /// The connection, read and written by turns (see `step`).
    stream: Option<C::Stream>,
    out: Bytes,
    /// Bytes were written since the last completed flush.
    unflushed: bool,
    connecting: Option<ConnectFuture<C::Stream>>,
    handshaking: bool,
    /// Whether the current connection has received a byte.
    received: bool,
    current_host: Option<HostPort>,
    rw_probe: Option<Pin<Box<dyn Future<Output = HostPort> + Send>>>,
    diagnosis: Diagnosis,
    /// A probe of a host that closed a connection silently (`Connect::diagnose_silent_close`).
    silent_close_probe: Option<ProbeFuture>,
    /// The one timer of the driver, reset when the session's next deadline moves (a new
    /// timer per loop would cost a timer-wheel entry per request).
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The deadline `timer` is set to.
    timer_at: Option<Instant>,
    /// `timer` was polled since it was last set: it holds the task's waker (see `step`).
    timer_polled: bool,
    /// How much room a read gets (see [`reserve_read_room`](Self::reserve_read_room)).
    read_room: usize,
    /// Answers and events on their way out (empty between steps; kept for its allocation).
    outbox: Vec<Outgoing>,
    /// The lease deadline last published to `shared`.
    published_lease: Option<std::time::Instant>,
    /// Where the next step starts polling its sources (see `step`).
    turn: usize,
    /// Callers woken by their answers since a step last took commands (see
    /// [`note_commands_taken`](Self::note_commands_taken)).
    answered: u32,
    /// The step just ended should let the answered callers run before anything is written.
    let_callers_run: bool,
}

impl<C: Connect> Driver<C> {
    pub(crate) fn new(
        session: Session,
        hosts: Vec<HostPort>,
        connector: C,
        commands: mpsc::Receiver<Command>,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            session,
            connector,
            diagnosis: Diagnosis::new(&hosts),
            hosts: Hosts::new(hosts),
            commands,
            commands_closed: false,
            shared,
            registry: Registry::default(),
            stream: None,
            out: Bytes::new(),
            unflushed: false,
            connecting: None,
            handshaking: false,
            received: false,
            current_host: None,
            rw_probe: None,
            silent_close_probe: None,
            timer: Box::pin(tokio::time::sleep_until(Instant::now())),
            timer_at: None,
            timer_polled: false,
            read_room: MIN_READ_ROOM,
            outbox: Vec::new(),
            published_lease: None,
            turn: 0,
            answered: 0,
            let_callers_run: false,
        }
    }

    /// Runs until the session has ended and every client handle is gone.
    ///
    /// Not an `async fn`: one taking `self` by value keeps the driver twice in its state (as
    /// the argument and as the body's own binding, rust-lang/rust#62958), about 1.3 KiB more
    /// per session. The block below uses the driver it captured in place.
    #[allow(clippy::manual_async_fn)] // the async fn it suggests is the layout avoided here
    pub(crate) fn run(mut self) -> impl Future<Output = ()> {
        async move {
            let _running = RunningGuard(self.shared.clone());
            loop {
                self.dispatch_events();
                if self.session.state().is_terminal() && self.commands_closed {
                    return;
                }
                self.start_connect_if_wanted();
                self.update_rw_probe();
                self.step().await;
                if std::mem::take(&mut self.let_callers_run) {
                    let_woken_callers_run().await;
                    self.drain_commands();
                }
                self.take_transmit();
                self.write_now().await;
            }
        }
    }

    fn publish_counts(&mut self) {
        let s = &self.shared;
        s.in_flight
            .store(self.session.in_flight(), Ordering::Relaxed);
        s.queued.store(self.session.queued(), Ordering::Relaxed);
        s.watches.store(
            self.registry.watchers().max(self.session.watch_count()),
            Ordering::Relaxed,
        );
        s.waiting.store(self.registry.waiting(), Ordering::Relaxed);
        // Most steps leave the lease where it was: it moves when a reply arrives.
        let lease = self.session.lease_deadline();
        if lease != self.published_lease {
            self.published_lease = lease;
            s.publish_lease(lease);
        }
    }

    fn on_command(&mut self, cmd: Option<Command>) {
        let now = now();
        match cmd {
            Some(Command::Submit(submission)) => {
                let (request, reply, watcher) = submission.into_parts();
                self.submit(now, request, reply, watcher);
            }
            Some(Command::SubmitDetached(submission)) => {
                let (request, reply) = submission.into_parts();
                self.submit(now, request, reply, None);
            }
            Some(Command::Close { reply }) => {
                let id = self.session.close(now);
                self.registry.register(id, ReplyTo::Waiting(reply), None);
            }
            Some(Command::RemoveWatcher(id)) => self.drop_watcher(id),
            None => {
                // Every handle is gone: end the session now rather than leave it (and its
                // ephemeral nodes) to expire on the server.
                self.commands_closed = true;
                if !self.session.state().is_terminal() {
                    self.session.close(now);
                }
            }
        }
    }

    /// Hands `request` to the session and registers where its answer goes (and its watcher).
    fn submit(
        &mut self,
        now: std::time::Instant,
        request: Request,
        reply: ReplyTo,
        watcher: Option<LocalWatcher>,
    ) {
        let id = self.session.submit(now, request);
        self.shared.submitted.fetch_add(1, Ordering::Relaxed);
        self.registry.register(id, reply, watcher);
    }

    /// Makes room in the receive buffer when little is left: [`Driver::read_room`] bytes,
    /// which start small (an idle session holds little) and double, up to
    /// [`MAX_READ_ROOM`], while reads keep filling all the room they had. Returns the room.
    ///
    /// Replies are handed out as slices of the buffer, so its memory can only be reused
    /// once every reply read into it is dropped; until then, making room means a new
    /// allocation. Here, right after a reply went out, its caller has not run yet: so while
    /// the room is at its smallest (replies come one or a few at a time), what is left is
    /// used first while it is worth a read, and by the next call the callers have usually
    /// let their replies go and the buffer is reclaimed in place. A grown room (replies in
    /// bursts, most of them still held) gets fresh room at once, as smaller reads would
    /// cost more system calls than the allocations they save.
    fn reserve_read_room(&mut self) -> usize {
        let buf = self.session.recv_buffer();
        let spare = buf.capacity() - buf.len();
        let use_what_is_left = self.read_room == MIN_READ_ROOM && spare >= MIN_USEFUL_READ;
        if spare < self.read_room / 4 && !buf.try_reclaim(self.read_room) && !use_what_is_left {
            buf.reserve(self.read_room);
        }
        buf.capacity() - buf.len()
    }

    /// After a read of `spare` bytes of room: if it filled them all, and they were a full
    /// room (not what was left of one), more was probably waiting.
    fn grow_read_room(&mut self, read: &io::Result<usize>, spare: usize) {
        let full_room = spare >= self.read_room / 4;
        if full_room && matches!(read, Ok(n) if *n >= spare) {
            self.read_room = (self.read_room * 2).min(MAX_READ_ROOM);
        }
    }

    /// After a step took `took` commands, the first since callers were answered: if it took
    /// fewer than all but one of those callers, they are probably several tasks, of which
    /// the first to run has sent its next request and the others have not run yet. The step
    /// then lets them run, and takes what they send, before it writes, so that all of it
    /// leaves in one write ([`let_woken_callers_run`]). One task answered twice (a lock's
    /// create and listing) that sends one request is not waited for, nor are two callers.
    fn note_commands_taken(&mut self, took: u32) {
        let answered = std::mem::take(&mut self.answered);
        self.let_callers_run = took.saturating_add(1) < answered;
    }

    /// Takes the commands already waiting, up to [`COMMAND_BATCH`], so that requests
    /// submitted together (a lock's create and listing, a release's delete and the next
    /// create) leave in one write, in the order they were submitted. Returns how many it
    /// took.
    fn drain_commands(&mut self) -> u32 {
        if self.commands_closed {
            return 0;
        }
        let mut took = 0;
        while took < COMMAND_BATCH {
            match self.commands.try_recv() {
                Ok(cmd) => self.on_command(Some(cmd)),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.on_command(None);
                    break;
                }
            }
            took += 1;
        }
        took
    }

    fn on_read(&mut self, read: io::Result<usize>) {
        let now = now();
        match read {
            Ok(n) if n > 0 => {
                self.received = true;
                if self.handshaking {
                    // The ConnectResponse may be in: requests whose callers left while we
                    // waited for it must not be written with the others.
                    self.prune_cancelled();
                }
                self.session.handle_received(now);
            }
            Ok(_) | Err(_) => {
                tracing::debug!(?read, "connection closed by the server or failed");
                if self.handshaking {
                    if let Some(host) = &self.current_host {
                        self.diagnosis.on_closed_in_handshake(host);
                        self.publish_verdict();
                    }
                }
                if self.handshaking && !self.received {
                    self.on_silent_close();
                }
                self.close_transport();
                self.session.handle_disconnected(now);
            }
        }
    }

    fn on_write(&mut self, written: io::Result<()>) {
        match written {
            Ok(()) => {
                // Everything is written and flushed. Drop our handle on the session's send
                // buffer, so that it can reuse the allocation for the next frames instead of
                // growing a new one.
                self.out = Bytes::new();
            }
            Err(_) => {
                tracing::debug!(?written, "write failed");
                self.close_transport();
                self.session.handle_disconnected(now());
            }
        }
    }

    /// Requests whose callers left before they were written are never sent.
    fn prune_cancelled(&mut self) {
        if self.session.queued() == 0 {
            return;
        }
        for id in self.registry.take_abandoned() {
            self.session.cancel(id);
        }
    }

    /// Ends `watcher`, here and in the session. Dropped before its request was answered, it
    /// abandons the request, so that the reply does not register a watcher nobody listens to.
    fn drop_watcher(&mut self, watcher: WatcherId) {
        self.session.remove_watcher(watcher);
        if let Some(request) = self.registry.drop_watcher(watcher) {
            self.session.cancel(request);
        }
    }

    fn take_transmit(&mut self) {
        if let Some(bytes) = self.session.poll_transmit() {
            if self.out.is_empty() {
                self.out = bytes;
            } else {
                // Only after a partial write: keep everything in one buffer, in order.
                let mut joined = Vec::with_capacity(self.out.len() + bytes.len());
                joined.extend_from_slice(&self.out);
                joined.extend_from_slice(&bytes);
                self.out = joined.into();
            }
        }
    }

    /// Routes the session's events.
    ///
    /// State changes and counters are published before any caller or watcher is woken, so
    /// that one woken by a reply or a watch event sees the state that came with it (a watcher
    /// ended by expiry sees `Expired`). Replies and watch events then go out in the order the
    /// session produced them, which is the wire order.
    fn dispatch_events(&mut self) {
        // Reused from call to call: no allocation per reply.
        let mut outbox = std::mem::take(&mut self.outbox);
        while let Some(event) = self.session.poll_event() {
            match event {
                Event::Reply { id, result } => {
                    if let Some(tx) = self.registry.take_reply(id) {
                        // A background request's answer wakes no task.
                        if matches!(tx, ReplyTo::Waiting(_)) {
                            self.answered = self.answered.saturating_add(1);
                        }
                        outbox.push(Outgoing::Answer(tx, result));
                    }
                }
                Event::Watch { watcher, event } => {
                    if let Some(outgoing) = self.take_sink(watcher, event) {
                        outbox.push(outgoing);
                    }
                }
                Event::State(state) => self.publish(state),
                Event::DropConnection(reason) => {
                    tracing::debug!(?reason, "dropping the connection");
                    if let (DropReason::ConnectTimeout, Some(host)) = (&reason, &self.current_host)
                    {
                        self.diagnosis.on_handshake_timeout(host);
                        self.publish_verdict();
                    }
                    self.close_transport();
                }
            }
        }
        self.publish_counts();
        deliver(&mut outbox, |watcher| self.drop_watcher(watcher));
        self.outbox = outbox;
    }

    /// Takes what a watch event is to be sent through, updating the registry first so that
    /// the counters published before sending are exact.
    fn take_sink(&mut self, watcher: WatcherId, event: WatchedEvent) -> Option<Outgoing> {
        // A stream's last event: its removal (`remove_watches`), or the session's end (not a
        // renewal, which keeps persistent watches). Whether the session still holds the
        // watcher cannot say which: it is asked after the whole batch of input was handled.
        let removed = matches!(
            event.event_type,
            EventType::DataWatchRemoved
                | EventType::ChildWatchRemoved
                | EventType::PersistentWatchRemoved
        );
        let ends = removed
            || (event.state != KeeperState::SyncConnected
                && !self.session.is_watching(watcher));
        match self.registry.route_event(watcher, ends) {
            Route::Oneshot(tx) => Some(Outgoing::Oneshot(tx, event)),
            Route::Stream { tx, last } => {
                if last {
                    self.session.remove_watcher(watcher);
                }
                Some(Outgoing::Stream(watcher, tx, event))
            }
            Route::Gone => {
                self.session.remove_watcher(watcher);
                None
            }
        }
    }

    fn publish(&mut self, state: SessionState) {
        if state.is_connected() {
            self.handshaking = false;
            self.hosts.on_connected();
            self.diagnosis.on_handshake();
            self.publish_verdict();
        }
        let id = self.session.session_id();
        let previous = self.shared.session_id.swap(id, Ordering::Relaxed);
        if id != 0 && id != previous {
            self.shared.sessions.fetch_add(1, Ordering::Relaxed);
        }
        let s = &self.shared;
        s.negotiated_ms
            .store(millis(self.session.session_timeout()), Ordering::Relaxed);
        s.lease_timeout_ms
            .store(millis(self.session.lease_timeout()), Ordering::Relaxed);
        if let Ok(mut passwd) = self.shared.passwd.lock() {
            passwd.clone_from(self.session.session_password());
        }
        if let Some(reason) = self.session.sasl_failure() {
            // Before the state: whoever sees AuthFailed can also read why.
            let why = ConnectError::Sasl {
                host: self
                    .current_host
                    .as_ref()
                    .map_or_else(String::new, ToString::to_string),
                reason: reason.to_owned(),
            };
            self.shared.connect_error.send_replace(Some(why));
        }
        tracing::info!(
            ?state,
            session = format_args!("{id:#018x}"),
            host = self.current_host.as_ref().map(tracing::field::display),
            "session state"
        );
        self.shared.note_state(state, now());
        // Stream first: a caller that waits for the state and then subscribes must not see
        // the same change again.
        let _ = self.shared.state_events.send(state);
        self.shared.state.send_replace(state);
    }
}

/// Lets the callers that answers just woke run before the driver sends what it took.
///
/// An answered caller usually sends its next request at once. When several were answered,
/// the first of them to run wakes the driver, and tokio's multi-thread runtime runs the
/// driver next (a task woken by the running one goes first): the driver would take and
/// write that one request alone, then the next caller's, and so on, a write and a driver
/// step per request. A task that wakes itself while it runs is queued behind the tasks
/// already queued on its worker, the answered callers among them (their wakes then find
/// it queued and cost nothing), so it takes their requests together and sends them in one
/// write (BENCHMARKS.md, "Issue 29, twelfth pass"). The cost: once per such batch, what the
/// driver took waits for one turn of that worker's queue, unrelated tasks included. With no
/// task queued, the runtime polls the driver again at once. `tokio::task::yield_now` would
/// not do: it waits until the worker has nothing else to run and has polled for I/O, and
/// the first answered caller's wake would run the driver before the others anyway.
async fn let_woken_callers_run() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// Hands out a batch of answers and watch events, in order. A stream found full (the
/// consumer fell behind by the whole capacity) or gone ends, rather than grow memory without
/// bound: `drop_watcher` is called, and nothing later in the batch goes to it, even if its
/// consumer has made room meanwhile: an event after a lost one would hide the gap.
fn deliver(outbox: &mut Vec<Outgoing>, mut drop_watcher: impl FnMut(WatcherId)) {
    // Empty, hence no allocation, unless a stream overflows.
    let mut ended: Vec<WatcherId> = Vec::new();
    for outgoing in outbox.drain(..) {
        match outgoing {
            Outgoing::Answer(tx, result) => tx.send(result),
            Outgoing::Oneshot(tx, event) => {
                let _ = tx.send(event);
            }
            Outgoing::Stream(watcher, _, _) if ended.contains(&watcher) => {}
            Outgoing::Stream(watcher, tx, event) => {
                if tx.try_send(event).is_err() {
                    ended.push(watcher);
                    drop_watcher(watcher);
                }
            }
        }
    }
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// A timeout as the milliseconds [`Shared`] publishes it in, 0 for none.
fn millis(timeout: Option<Duration>) -> u64 {
    timeout.map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionConfig;

    /// The task's future holds the driver once, plus the state of one step (see
    /// [`Driver::run`]): it is most of what an idle session costs.
    #[tokio::test]
    async fn the_task_holds_the_driver_once() {
        let (_commands, rx) = mpsc::channel(1);
        let now = std::time::Instant::now();
        let session = Session::new(SessionConfig::default(), now);
        let shared = Arc::new(Shared::new(now));
        let driver = Driver::new(session, Vec::new(), TcpConnector, rx, shared);
        let driver_size = size_of_val(&driver);
        let task = driver.run();
        let task_size = size_of_val(&task);
        assert!(
            task_size < driver_size + 512,
            "task {task_size} bytes for a driver of {driver_size}"
        );
    }

    /// A stream that overflowed gets nothing more of the batch, even when its consumer makes
    /// room before the next event is sent (here: as the overflow is handled).
    #[test]
    fn nothing_follows_an_overflow_in_the_batch() {
        let event = |path: &str| WatchedEvent {
            event_type: EventType::NodeDataChanged,
            state: KeeperState::SyncConnected,
            path: path.to_owned(),
            zxid: 1,
        };
        let (tx, mut rx) = mpsc::channel(1);
        tx.try_send(event("/waiting")).unwrap();
        let watcher = WatcherId(7);
        let mut outbox = vec![
            Outgoing::Stream(watcher, tx.clone(), event("/lost")),
            Outgoing::Stream(watcher, tx, event("/after-the-gap")),
        ];
        let mut dropped = Vec::new();
        deliver(&mut outbox, |w| {
            dropped.push(w);
            // The consumer takes the waiting event just then.
            assert_eq!(rx.try_recv().unwrap().path, "/waiting");
        });
        assert_eq!(dropped, [watcher]);
        assert!(rx.try_recv().is_err(), "nothing after the lost event");
    }
}
