//! Watches: the reads that leave a one-shot watch, persistent watches, and removing and
//! checking watches on the server.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::reads::{absent_as_none, data_and_stat};
use super::{Client, OneshotWatcher, PersistentWatcher};
use crate::driver::WatcherSink;
use crate::error::Error;
use crate::proto::{
    op, AddWatchMode, AddWatchRequest, CheckWatchesRequest, ExistsRequest, GetChildren2Request,
    GetDataRequest, Operation, RemoveWatchesRequest, Stat, WatcherType,
};
use crate::session::{Effect, WatchKind, WatcherId};

impl Client {
    /// As [`exists`](Self::exists), leaving a watch that fires when the node is created,
    /// deleted or its data changes.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (stat, watcher) = client.exists_and_watch("/ready").await?;
    /// if stat.is_none() {
    ///     let event = watcher.await; // NodeCreated, or the session's end
    ///     println!("{:?}", event.event_type);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn exists_and_watch(
        &self,
        path: &str,
    ) -> Result<(Option<Stat>, OneshotWatcher), Error> {
        let request = |path| ExistsRequest { path, watch: true };
        let (reply, watcher) = self
            .read_and_watch::<op::Exists>(path, WatchKind::Data, request)
            .await?;
        Ok((absent_as_none(reply)?, watcher))
    }

    /// As [`get_data`](Self::get_data), leaving a watch that fires when the data changes or
    /// the node is deleted. See [`OneshotWatcher`] for a loop that keeps a copy current.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (data, _stat, changed) = client.get_data_and_watch("/config").await?;
    /// println!("config: {} bytes", data.len());
    /// let event = changed.await; // NodeDataChanged, NodeDeleted, or the session's end
    /// println!("{:?}", event.event_type);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`] (and then no watch is left).
    pub async fn get_data_and_watch(
        &self,
        path: &str,
    ) -> Result<(Bytes, Stat, OneshotWatcher), Error> {
        let request = |path| GetDataRequest { path, watch: true };
        let (reply, watcher) = self
            .read_and_watch::<op::GetData>(path, WatchKind::Data, request)
            .await?;
        let (data, stat) = data_and_stat(reply?);
        Ok((data, stat, watcher))
    }

    /// As [`get_children_and_stat`](Self::get_children_and_stat), leaving a watch that fires
    /// when the children change or the node is deleted.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// loop {
    ///     let (children, _stat, changed) = client.get_children_and_watch("/workers").await?;
    ///     println!("{} workers", children.len());
    ///     if changed.await.event_type == zkwire::EventType::None {
    ///         break; // the session ended
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`] (and then no watch is left).
    pub async fn get_children_and_watch(
        &self,
        path: &str,
    ) -> Result<(Vec<String>, Stat, OneshotWatcher), Error> {
        let request = |path| GetChildren2Request { path, watch: true };
        let (reply, watcher) = self
            .read_and_watch::<op::GetChildren2>(path, WatchKind::Child, request)
            .await?;
        let reply = reply?;
        Ok((reply.children, reply.stat, watcher))
    }

    /// Adds a persistent watch on `path` (which need not exist), or a persistent recursive
    /// one covering its whole subtree (servers 3.6+). The watch survives reconnects: see
    /// [`PersistentWatcher`].
    ///
    /// On servers before 3.9 a one-shot watch on the same path replaces the persistent one
    /// on the server (ZOOKEEPER-4466); avoid mixing them on one path there.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::AddWatchMode;
    ///
    /// let mut changes = client.add_watch("/config", AddWatchMode::Persistent).await?;
    /// while let Some(event) = changes.next().await {
    ///     println!("{:?} at {}", event.event_type, event.path);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn add_watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> Result<PersistentWatcher, Error> {
        let server_path = self.server_path(path)?;
        let kind = match mode {
            AddWatchMode::PersistentRecursive => WatchKind::PersistentRecursive,
            _ => WatchKind::Persistent,
        };
        let id = self.next_watcher();
        let (tx, rx) = mpsc::channel(self.inner.watch_capacity);
        let effect = Effect::Watch {
            path: server_path.clone(),
            kind,
            watcher: id,
        };
        let request = AddWatchRequest {
            path: server_path,
            mode,
        };
        let sink = (id, WatcherSink::Stream(tx));
        let watcher = PersistentWatcher::new(rx, id, self.inner.clone());
        self.call_op_with::<op::AddWatch>(&request, effect, Some(sink))
            .await?;
        Ok(watcher)
    }

    /// Removes the session's watches of `watcher_type` on `path`, on the server and locally;
    /// removed watchers get a `…WatchRemoved` event.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::WatcherType;
    /// let (_data, _stat, watcher) = client.get_data_and_watch("/config").await?;
    /// client.check_watches("/config", WatcherType::Data).await?;
    /// client.remove_watches("/config", WatcherType::Data).await?;
    /// let event = watcher.await;
    /// assert_eq!(event.event_type, zkwire::EventType::DataWatchRemoved);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoWatcher`]; [`Error::MarshallingError`] for persistent types on servers
    /// before 3.9 (use [`WatcherType::Any`] there).
    pub async fn remove_watches(&self, path: &str, watcher_type: WatcherType) -> Result<(), Error> {
        let server_path = self.server_path(path)?;
        let effect = Effect::RemoveWatches {
            path: server_path.clone(),
            watcher_type,
        };
        let request = RemoveWatchesRequest {
            path: server_path,
            watcher_type,
        };
        self.call_op_with::<op::RemoveWatches>(&request, effect, None)
            .await
    }

    /// Checks that the server holds watches of `watcher_type` on `path`.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{Error, WatcherType};
    ///
    /// match client.check_watches("/config", WatcherType::Data).await {
    ///     Ok(()) => println!("the server still watches /config for us"),
    ///     Err(Error::NoWatcher) => println!("no data watch on /config"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoWatcher`].
    pub async fn check_watches(&self, path: &str, watcher_type: WatcherType) -> Result<(), Error> {
        let request = CheckWatchesRequest {
            path: self.server_path(path)?,
            watcher_type,
        };
        self.call_op::<op::CheckWatches>(&request).await
    }

    pub(super) fn next_watcher(&self) -> WatcherId {
        WatcherId(
            self.inner
                .shared
                .next_watcher
                .fetch_add(1, Ordering::Relaxed),
        )
    }

    /// Sends `O`'s request, made by `request` from the server path of `path`, leaving a
    /// one-shot watch of `kind`: the reply (an error in it is the caller's to judge: for
    /// `exists` `NoNode` is an answer) and the watcher.
    async fn read_and_watch<O: Operation>(
        &self,
        path: &str,
        kind: WatchKind,
        request: impl FnOnce(String) -> O::Request,
    ) -> Result<(Result<O::Reply, Error>, OneshotWatcher), Error> {
        let server_path = self.server_path(path)?;
        let request = request(server_path.clone());
        let id = self.next_watcher();
        let (tx, rx) = oneshot::channel();
        let effect = Effect::Watch {
            path: server_path,
            kind,
            watcher: id,
        };
        let watcher = OneshotWatcher::new(rx, id, self.inner.clone());
        let sink = (id, WatcherSink::Oneshot(tx));
        let reply = self.call_op_with::<O>(&request, effect, Some(sink)).await;
        Ok((reply, watcher))
    }
}
