//! The bare lock recipe through a [`Relay`] (`lock-cycle` and `lock-contention` with
//! `--clients relay`): the raw recipe's steps, each request a call through the connection
//! task, released either way as zkwire's guard is.

use bytes::Bytes;
use tokio::sync::mpsc;
use zkwire::proto::{Create2Response, GetChildrenResponse};

use crate::locks::{
    delete_frame, exists_frame, lock_frames, predecessor, sequence, watch_set, Contender, Held,
};
use crate::relay::Relay;
use crate::runner::Worker;
use crate::BenchError;

/// The bare recipe through a [`Relay`]: create and getChildren are two calls, as a client
/// library makes them, and the connection task puts them in one write.
pub(crate) struct RelayLock {
    relay: Relay,
    dir: String,
    create: Bytes,
    list: Bytes,
    /// Paths of notifications that came while waiting for another.
    events: Vec<String>,
}

impl RelayLock {
    pub(crate) fn new(relay: Relay, dir: &str) -> Self {
        let (create, list) = lock_frames(dir);
        Self {
            relay,
            dir: dir.to_owned(),
            create,
            list,
            events: Vec::new(),
        }
    }

    /// Creates our node and waits until it is first. Returns (sequence, czxid, path).
    async fn acquire(&mut self) -> Result<(i64, i64, String), BenchError> {
        let client = &self.relay.client;
        let (created, listed) = tokio::join!(
            client.call(self.create.clone()),
            client.call(self.list.clone())
        );
        let created = created?.ok()?.decode::<Create2Response>()?;
        let mut children = listed?.ok()?.decode::<GetChildrenResponse>()?.children;
        let me = created.path.rsplit('/').next().unwrap_or_default();
        while let Some(before) = predecessor(&children, me)? {
            let before = format!("{}/{before}", self.dir);
            if watch_set(&client.call(exists_frame(&before)).await?)? {
                event(&mut self.events, &mut self.relay.events, &before).await?;
            }
            let listed = client.call(self.list.clone()).await?;
            children = listed.ok()?.decode::<GetChildrenResponse>()?.children;
        }
        Ok((sequence(me)?, created.stat.czxid, created.path.clone()))
    }

    /// Deletes our node: awaited, or (`background`) sent and not waited for, as a dropped
    /// guard's delete is.
    async fn release(&self, path: String, background: bool) -> Result<(), BenchError> {
        let client = &self.relay.client;
        if background {
            client.cast(delete_frame(path)).await
        } else {
            client.call(delete_frame(path)).await?.ok().map(drop)
        }
    }
}

/// Waits for a notification on `path` from `incoming`, keeping the others in `seen`.
async fn event(
    seen: &mut Vec<String>,
    incoming: &mut mpsc::UnboundedReceiver<String>,
    path: &str,
) -> Result<(), BenchError> {
    loop {
        if let Some(i) = seen.iter().position(|p| p == path) {
            seen.swap_remove(i);
            return Ok(());
        }
        let next = incoming.recv().await;
        seen.push(next.ok_or_else(|| BenchError::msg("relay: the session ended"))?);
    }
}

pub(crate) struct RelayCycle {
    pub(crate) lock: RelayLock,
    pub(crate) drop_release: bool,
}

impl Worker for RelayCycle {
    async fn step(&mut self) -> Result<usize, BenchError> {
        let (_, _, path) = self.lock.acquire().await?;
        self.lock.release(path, self.drop_release).await?;
        Ok(0)
    }

    async fn finish(self) -> Result<(), BenchError> {
        self.lock.relay.close().await;
        Ok(())
    }
}

pub(crate) struct RelayContender {
    pub(crate) lock: RelayLock,
}

impl Contender for RelayContender {
    async fn acquire(&mut self) -> Result<(i64, Option<i64>, Held), BenchError> {
        let (seq, czxid, path) = self.lock.acquire().await?;
        Ok((seq, Some(czxid), Held::Path(path)))
    }

    async fn release(&mut self, held: Held) -> Result<(), BenchError> {
        let Held::Path(path) = held else {
            return Err(BenchError::msg("not a path"));
        };
        self.lock.release(path, false).await
    }

    async fn close(self) {
        self.lock.relay.close().await;
    }
}
