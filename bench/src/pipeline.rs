//! `pipeline`: one session with K getData requests in flight on a 100-byte znode.
//!
//! zkwire and kezhuw, in two shapes ([`Shape`]): K tasks sharing one client, each awaiting
//! its getData in a loop (for K = 1, plain awaited getData); or one task keeping K getData
//! futures in flight, the raw recipe's shape. Raw: one task keeps K pre-encoded getData frames
//! in flight on one socket, writing as many new frames as replies it just read, in one write.
//!
//! The two shapes part what a client costs from what the runtime charges for K tasks: each
//! reply wakes its own task, and the work-stealing scheduler wakes its other worker threads
//! to run them (BENCHMARKS.md, "Issue 29, third pass").

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use zkwire::jute::Decode;
use zkwire::proto::frames::request_frame;
use zkwire::proto::{GetDataRequest, GetDataResponse, OpCode, Stat};

use crate::measure::{Hist, Measured, Phase};
use crate::raw::RawConn;
use crate::relay::{Relay, RelayClient};
use crate::runner::{measure_window, run_workers, Worker};
use crate::{BenchError, Ctx, Who, PAYLOAD};

/// getData on either client library.
trait GetData: Clone + Send + Sync + 'static {
    /// The length of the data `path` holds.
    fn data_len(&self, path: &str) -> impl Future<Output = Result<usize, BenchError>> + Send;
}

impl GetData for zkwire::Client {
    async fn data_len(&self, path: &str) -> Result<usize, BenchError> {
        Ok(self.get_data(path).await?.0.len())
    }
}

impl GetData for zookeeper_client::Client {
    async fn data_len(&self, path: &str) -> Result<usize, BenchError> {
        Ok(self.get_data(path).await?.0.len())
    }
}

impl GetData for RelayClient {
    async fn data_len(&self, path: &str) -> Result<usize, BenchError> {
        let request = GetDataRequest {
            path: path.to_owned(),
            watch: false,
        };
        let reply = self
            .call(request_frame(1, OpCode::GetData, &request))
            .await?;
        Ok(reply
            .ok()?
            .decode::<GetDataResponse>()?
            .data
            .map_or(0, |d| d.len()))
    }
}

/// The load of a cell: getData of `path` on `client`, awaited in a loop (one [`Worker`] per
/// task), or kept in flight K at a time by one task.
#[derive(Clone)]
struct Read<C> {
    client: C,
    path: Arc<str>,
}

impl<C: GetData> Worker for Read<C> {
    async fn step(&mut self) -> Result<usize, BenchError> {
        check_len(self.client.data_len(&self.path).await?)?;
        Ok(0)
    }
}

fn check_len(len: usize) -> Result<(), BenchError> {
    if len == PAYLOAD {
        Ok(())
    } else {
        Err(BenchError::msg(format!(
            "getData returned {len} bytes, not {PAYLOAD}"
        )))
    }
}

/// How a client library keeps its K requests in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Shape {
    /// K tasks, each awaiting one getData at a time.
    Tasks,
    /// One task polling K getData futures.
    OneTask,
}

impl Shape {
    /// The cell's param: `K=16`, or `K=16 one task`.
    pub(crate) fn param(self, k: usize) -> String {
        match self {
            Self::Tasks => format!("K={k}"),
            Self::OneTask => format!("K={k} one task"),
        }
    }
}

/// One cell: `who` with `k` requests in flight, shaped as `shape` says (raw: always one task;
/// the relay takes either shape, as a client library does).
pub(crate) async fn run(
    ctx: &Ctx,
    who: Who,
    k: usize,
    shape: Shape,
) -> Result<Measured, BenchError> {
    let path: Arc<str> = ctx.path("data").into();
    match who {
        Who::Zkwire => {
            let client = ctx.zkwire().await?;
            let m = run_client(ctx, &client, &path, k, shape).await?;
            client.close().await?;
            Ok(m)
        }
        Who::Kezhuw => run_client(ctx, &ctx.kezhuw().await?, &path, k, shape).await,
        Who::Raw => run_raw(ctx, &path, k).await,
        Who::Relay => {
            // Closed whatever the outcome, so that a failed cell leaves no task behind.
            let relay = Relay::connect(&ctx.addr).await?;
            let measured = run_client(ctx, &relay.client, &path, k, shape).await;
            relay.close().await;
            measured
        }
    }
}

async fn run_client<C: GetData>(
    ctx: &Ctx,
    client: &C,
    path: &Arc<str>,
    k: usize,
    shape: Shape,
) -> Result<Measured, BenchError> {
    let read = Read {
        client: client.clone(),
        path: path.clone(),
    };
    match shape {
        Shape::Tasks => run_tasks(ctx, &read, k).await,
        Shape::OneTask => run_one_task(ctx, read, k).await,
    }
}

/// `k` tasks, each awaiting its own copy of `read` in a loop (one client shared by all).
async fn run_tasks<C: GetData>(
    ctx: &Ctx,
    read: &Read<C>,
    k: usize,
) -> Result<Measured, BenchError> {
    let workers = (0..k).map(|_| read.clone()).collect();
    let [m] = run_workers(ctx, workers).await?;
    Ok(m)
}

/// One task keeping `k` of `read`'s getData futures in flight: each reply is timed, and a
/// new request takes its place.
async fn run_one_task<C: GetData>(
    ctx: &Ctx,
    Read { client, path }: Read<C>,
    k: usize,
) -> Result<Measured, BenchError> {
    measured_task(ctx, move |phase| async move {
        let mut hist = Hist::new();
        let one_request = || {
            let client = &client;
            let path = &path;
            async move {
                let start = Instant::now();
                (start, client.data_len(path).await)
            }
        };
        let mut inflight: FuturesUnordered<_> = (0..k).map(|_| one_request()).collect();
        while let Some((start, r)) = inflight.next().await {
            check_len(r?)?;
            match phase.get() {
                Phase::WARMUP => {}
                Phase::MEASURE => hist.record(start.elapsed()),
                _ => break,
            }
            inflight.push(one_request());
        }
        // The requests still in flight finish (unmeasured) before the client closes.
        while let Some((_, r)) = inflight.next().await {
            r?;
        }
        Ok(hist)
    })
    .await
}

async fn run_raw(ctx: &Ctx, path: &str, k: usize) -> Result<Measured, BenchError> {
    let mut conn = RawConn::connect(&ctx.addr).await?;
    let one = request_frame(
        1,
        OpCode::GetData,
        &GetDataRequest {
            path: path.to_owned(),
            watch: false,
        },
    );
    let batch: Bytes = one.repeat(k).into();
    measured_task(ctx, move |phase| async move {
        let mut sent: VecDeque<Instant> = VecDeque::with_capacity(k);
        let mut hist = Hist::new();
        let now = Instant::now();
        sent.extend(std::iter::repeat_n(now, k));
        conn.send(&batch).await?;
        loop {
            let mut done = 0;
            let mut reply = Some(conn.recv().await?);
            while let Some(r) = reply {
                let r = r.ok()?;
                // The reply's length (ReplyHeader aside): 4 + 100 bytes of data + the Stat.
                if Some(r.body.len()) != Stat::FIXED_LEN.map(|stat| 4 + PAYLOAD + stat) {
                    return Err(BenchError::msg("raw getData: unexpected reply length"));
                }
                let at = sent.pop_front().unwrap_or(now);
                if phase.get() == Phase::MEASURE {
                    hist.record(at.elapsed());
                }
                done += 1;
                reply = conn.try_recv()?;
            }
            if phase.get() == Phase::STOP {
                break;
            }
            let now = Instant::now();
            sent.extend(std::iter::repeat_n(now, done));
            conn.send(&batch[..done * one.len()]).await?;
        }
        conn.close().await;
        Ok(hist)
    })
    .await
}

/// Runs `work` as one task through [`measure_window`]: `work` follows the phase it is given
/// and returns the latencies it measured.
async fn measured_task<F, W>(ctx: &Ctx, work: W) -> Result<Measured, BenchError>
where
    W: FnOnce(Arc<Phase>) -> F,
    F: Future<Output = Result<Hist, BenchError>> + Send + 'static,
{
    let phase = Arc::new(Phase::default());
    let task = tokio::spawn(work(phase.clone()));
    let spent = measure_window(ctx, &phase).await;
    let hist = task.await??;
    Ok(Measured::new(hist.count(), spent, hist))
}
