//! `lock-shared-client`: `CONTENDERS` tasks sharing one client contend for one mutex, with
//! zkwire's in-process queue on or off or handing the node off locally, and kezhuw's lock;
//! mutual exclusion checked as in `lock-contention`, and the requests the server received
//! per acquisition counted.

use std::sync::atomic::Ordering;

use crate::locks::CONTENDERS;
use crate::locks::{contend, measure_contention, KezhuwContender, Shared, ZkwireContender};
use crate::measure::Measured;
use crate::{BenchError, Ctx, Who};

/// The hand-off limit of the `lock-shared-client` variant that uses one.
const HANDOFFS: u32 = 8;

/// How the tasks of `lock-shared-client` contend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SharedClient {
    /// zkwire with its in-process queue (the default).
    ZkwireQueued,
    /// zkwire with `LockOptions::with_local_queue(false)`: a node per waiting task.
    ZkwireUnqueued,
    /// zkwire with the local queue and `with_local_handoff(HANDOFFS)`.
    ZkwireHandoff,
    /// kezhuw's `zookeeper-client` lock, one client shared by the tasks.
    Kezhuw,
}

impl SharedClient {
    pub(crate) const ALL: [Self; 4] = [
        Self::ZkwireQueued,
        Self::ZkwireUnqueued,
        Self::ZkwireHandoff,
        Self::Kezhuw,
    ];

    pub(crate) fn who(self) -> Who {
        match self {
            Self::ZkwireQueued | Self::ZkwireUnqueued | Self::ZkwireHandoff => Who::Zkwire,
            Self::Kezhuw => Who::Kezhuw,
        }
    }

    /// The lock directory's name under the run's root.
    pub(crate) fn dir_name(self) -> String {
        format!("shared-{self:?}").to_lowercase()
    }

    pub(crate) fn param(self) -> String {
        let queue = match self {
            Self::ZkwireQueued => "on".to_owned(),
            Self::ZkwireUnqueued => "off".to_owned(),
            Self::ZkwireHandoff => format!("on+handoff={HANDOFFS}"),
            Self::Kezhuw => "n/a".to_owned(),
        };
        format!("tasks={CONTENDERS},local-queue={queue}")
    }
}

/// `CONTENDERS` tasks sharing one client contend for one mutex. Returns the measurement, the
/// violations seen, and the requests the server received per acquisition (its `srvr`
/// counter across the whole run, warm-up included, so pings count too).
pub(crate) async fn contention(
    ctx: &Ctx,
    how: SharedClient,
) -> Result<(Measured, u64, f64), BenchError> {
    let dir = ctx.path(&how.dir_name());
    let shared = Shared::new(how == SharedClient::ZkwireHandoff);
    let received_before = crate::measure::server_received(&ctx.addr)?;
    let mut tasks = Vec::with_capacity(CONTENDERS);
    let measured = match how {
        SharedClient::ZkwireQueued | SharedClient::ZkwireUnqueued | SharedClient::ZkwireHandoff => {
            let client = ctx.zkwire().await?;
            let options = match how {
                SharedClient::ZkwireUnqueued => {
                    zkwire_recipes::LockOptions::new().with_local_queue(false)
                }
                SharedClient::ZkwireHandoff => {
                    zkwire_recipes::LockOptions::new().with_local_handoff(HANDOFFS)
                }
                _ => zkwire_recipes::LockOptions::new(),
            };
            for _ in 0..CONTENDERS {
                let mutex = zkwire_recipes::Mutex::with_options(
                    client.clone(),
                    dir.clone(),
                    options.clone(),
                );
                let contender = ZkwireContender {
                    client: client.clone(),
                    mutex,
                    shares_client: true,
                };
                tasks.push(tokio::spawn(contend(contender, shared.clone())));
            }
            let measured = measure_contention(ctx, &shared, tasks).await;
            let _ = client.close().await;
            measured
        }
        SharedClient::Kezhuw => {
            let client = ctx.kezhuw().await?;
            for _ in 0..CONTENDERS {
                let contender = KezhuwContender {
                    client: client.clone(),
                    dir: dir.clone(),
                };
                tasks.push(tokio::spawn(contend(contender, shared.clone())));
            }
            measure_contention(ctx, &shared, tasks).await
        }
    };
    let (m, violations) = measured?;
    // Every grant of the run, warm-up included, against every request of the run.
    let grants = shared.all_grants.load(Ordering::Relaxed);
    let received = crate::measure::server_received(&ctx.addr)?.saturating_sub(received_before);
    let per_acquisition = received as f64 / grants.max(1) as f64;
    Ok((m, violations, per_acquisition))
}
