//! Runs closed-loop workers for a bounded time and measures them.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crate::measure::{Hist, Measured, Phase, Spent, Window};
use crate::{BenchError, Ctx};

/// One closed-loop worker: each `step` is one awaited operation (or one cycle). A worker
/// may alternate between several kinds of step (create, then delete); `step` returns which
/// one it did, an index below `KINDS`.
pub(crate) trait Worker: Send + 'static {
    fn step(&mut self) -> impl Future<Output = Result<usize, BenchError>> + Send;

    /// Runs once after the last step (not measured): undo what a half-done cycle left,
    /// close a connection.
    fn finish(self) -> impl Future<Output = Result<(), BenchError>> + Send
    where
        Self: Sized,
    {
        async { Ok(()) }
    }
}

/// Spawns `workers` as tasks, lets them warm up for the run's warm-up, measures its
/// duration (`ctx.measure`), then stops them. Returns one [`Measured`] per step kind; they
/// share the window (CPU and allocations are divided by the ops of every kind).
pub(crate) async fn run_workers<W: Worker, const KINDS: usize>(
    ctx: &Ctx,
    workers: Vec<W>,
) -> Result<[Measured; KINDS], BenchError> {
    let phase = Arc::new(Phase::default());
    let mut handles = Vec::with_capacity(workers.len());
    for mut worker in workers {
        let phase = phase.clone();
        handles.push(tokio::spawn(async move {
            let mut hists: [Hist; KINDS] = std::array::from_fn(|_| Hist::new());
            loop {
                let start = Instant::now();
                let kind = worker.step().await?;
                match phase.get() {
                    Phase::WARMUP => {}
                    Phase::MEASURE => hists[kind.min(KINDS - 1)].record(start.elapsed()),
                    _ => break,
                }
            }
            worker.finish().await?;
            Ok::<_, BenchError>(hists)
        }));
    }
    let spent = measure_window(ctx, &phase).await;
    let mut total: [Hist; KINDS] = std::array::from_fn(|_| Hist::new());
    for handle in handles {
        let hists = handle.await??;
        for (t, h) in total.iter_mut().zip(hists.iter()) {
            t.merge(h);
        }
    }
    let all_ops: u64 = total.iter().map(Hist::count).sum();
    Ok(total.map(|hist| Measured::new(hist.count(), spent, hist).with_cost_ops(all_ops)))
}

/// The window of a run whose tasks follow `phase`: the warm-up, then the duration measured
/// (both `ctx.measure`; with the server's request count), then the tasks are told to stop.
pub(crate) async fn measure_window(ctx: &Ctx, phase: &Phase) -> Spent {
    tokio::time::sleep(ctx.measure.warmup).await;
    let window = Window::begin_on(&ctx.addr);
    phase.set(Phase::MEASURE);
    tokio::time::sleep(ctx.measure.duration).await;
    phase.set(Phase::STOP);
    window.end()
}
