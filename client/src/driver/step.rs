//! One driver step: wait until one source is ready (a command, the socket's bytes or room, a
//! connect, the session's deadline, a probe) and handle it; then write what the step left.
//!
//! The sources are polled by hand rather than by `select!`: the stream is one object, read
//! and written by turns, instead of two halves behind a lock; no random start is drawn per
//! poll; and no future is built per source and step. Each poll starts one source further on
//! than the one before, so a source that is always ready (a flood of commands, a server that
//! never stops sending) cannot starve the others: a source that stays ready comes first
//! within seven polls and is handled then (`client/tests/transport.rs` tests it).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::AsyncWrite;
use tokio::time::Instant;

use super::{now, Connect, Driver};

/// What a step waits on, in the order of a round (each poll starts one further on).
#[derive(Debug, Clone, Copy)]
enum Source {
    Commands,
    Read,
    Write,
    Connect,
    Timer,
    ReadWriteProbe,
    SilentCloseProbe,
}

const ROUND: [Source; 7] = [
    Source::Commands,
    Source::Read,
    Source::Write,
    Source::Connect,
    Source::Timer,
    Source::ReadWriteProbe,
    Source::SilentCloseProbe,
];

impl<C: Connect> Driver<C> {
    /// Waits for the first ready source and handles it.
    pub(super) async fn step(&mut self) {
        let deadline = self.session.poll_timeout().map(Instant::from_std);
        if let Some(at) = deadline.filter(|&at| Some(at) != self.timer_at) {
            self.timer.as_mut().reset(at);
            self.timer_at = Some(at);
            self.timer_polled = false;
        }
        let timed = deadline.is_some();
        let spare = if self.stream.is_some() {
            self.reserve_read_room()
        } else {
            0
        };
        std::future::poll_fn(|cx| self.poll_round(cx, timed, spare)).await;
    }

    /// Polls the sources from this poll's start, then moves the start on; the first ready
    /// one is handled. Pending (every source polled) leaves each one's waker registered.
    fn poll_round(&mut self, cx: &mut Context<'_>, timed: bool, spare: usize) -> Poll<()> {
        let start = self.turn;
        self.turn = (start + 1) % ROUND.len();
        for i in 0..ROUND.len() {
            let handled = match ROUND[(start + i) % ROUND.len()] {
                Source::Commands => self.poll_commands(cx),
                Source::Read => self.poll_read(cx, spare),
                Source::Write => self.poll_write(cx),
                Source::Connect => self.poll_connect(cx),
                Source::Timer => self.poll_timer(cx, timed),
                Source::ReadWriteProbe => self.poll_rw_probe(cx),
                Source::SilentCloseProbe => self.poll_silent_close_probe(cx),
            };
            if handled.is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }

    fn poll_commands(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.commands_closed {
            return Poll::Pending;
        }
        let cmd = ready!(self.commands.poll_recv(cx));
        self.on_command(cmd);
        let took = self.drain_commands();
        self.note_commands_taken(took.saturating_add(1));
        Poll::Ready(())
    }

    /// Reads into the session's receive buffer, which has `spare` bytes of room
    /// ([`reserve_read_room`](Self::reserve_read_room)).
    fn poll_read(&mut self, cx: &mut Context<'_>, spare: usize) -> Poll<()> {
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Pending;
        };
        let buf = self.session.recv_buffer();
        let read = ready!(tokio_util::io::poll_read_buf(Pin::new(stream), cx, buf));
        self.grow_read_room(&read, spare);
        self.on_read(read);
        Poll::Ready(())
    }

    /// Writes and flushes what is left to send, or a flush still owed.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Pending;
        };
        if self.out.is_empty() && !self.unflushed {
            return Poll::Pending;
        }
        let written = ready!(poll_write_all(stream, &mut self.out, &mut self.unflushed, cx));
        self.on_write(written);
        Poll::Ready(())
    }

    fn poll_connect(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let stream = ready!(poll_if_any(&mut self.connecting, cx));
        self.on_connect_result(stream);
        Poll::Ready(())
    }

    fn poll_timer(&mut self, cx: &mut Context<'_>, timed: bool) -> Poll<()> {
        if !timed {
            return Poll::Pending;
        }
        // Polled once since it was set, the timer holds the task's waker and wakes it when
        // due (the same waker: one task's): until then, a glance at its state does instead
        // of a poll, which costs most of a request's timer work otherwise.
        if self.timer_polled && !self.timer.is_elapsed() {
            return Poll::Pending;
        }
        self.timer_polled = true;
        ready!(self.timer.as_mut().poll(cx));
        // Fired: the same deadline again must set the timer anew.
        self.timer_at = None;
        self.session.handle_timeout(now());
        Poll::Ready(())
    }

    fn poll_rw_probe(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let host = ready!(poll_if_any(&mut self.rw_probe, cx));
        self.on_rw_server_found(host);
        Poll::Ready(())
    }

    fn poll_silent_close_probe(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let (host, verdict) = ready!(poll_if_any(&mut self.silent_close_probe, cx));
        self.silent_close_probe = None;
        if let Some(verdict) = verdict {
            self.diagnosis.record(&host, verdict);
            self.publish_verdict();
        }
        Poll::Ready(())
    }

    /// Writes what the step left to send right away, if the socket takes it without waiting:
    /// a request then leaves in the step that took it from its caller, not one step later
    /// (a step polls every source, which costs a third of a request's path when done once
    /// more per request), unless the step first let answered callers run
    /// (`let_woken_callers_run`). What the socket does not take now is left to the step's
    /// write.
    pub(super) async fn write_now(&mut self) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        if self.out.is_empty() {
            return;
        }
        let (out, unflushed) = (&mut self.out, &mut self.unflushed);
        // Polled once; the waker it registers on a full socket is the task's, which the
        // step's write then uses.
        let written =
            std::future::poll_fn(|cx| Poll::Ready(poll_write_all(stream, out, unflushed, cx)))
                .await;
        if let Poll::Ready(written) = written {
            self.on_write(written);
        }
    }
}

/// Polls the background future in `slot`; without one, nothing is ever ready.
fn poll_if_any<T>(
    slot: &mut Option<Pin<Box<dyn Future<Output = T> + Send>>>,
    cx: &mut Context<'_>,
) -> Poll<T> {
    match slot {
        Some(future) => future.as_mut().poll(cx),
        None => Poll::Pending,
    }
}

/// Writes all of `out`, then flushes. `out` is advanced as each write completes and
/// `unflushed` remembers a flush still owed, so a pending poll (a full socket, a TLS flush)
/// resumes where it stopped, and nothing written is sent twice.
fn poll_write_all<W: AsyncWrite + Unpin>(
    writer: &mut W,
    out: &mut Bytes,
    unflushed: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    while !out.is_empty() {
        let n = ready!(Pin::new(&mut *writer).poll_write(cx, out))?;
        if n == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        out.advance(n);
        *unflushed = true;
    }
    ready!(Pin::new(writer).poll_flush(cx))?;
    *unflushed = false;
    Poll::Ready(Ok(()))
}
