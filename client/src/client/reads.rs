//! Reads of nodes: existence, data, ACLs, children, ephemerals, and `sync`.

use bytes::Bytes;

use super::Client;
use crate::error::Error;
use crate::proto::{
    op, Acl, Children, ExistsRequest, ExistsResponse, GetAclRequest, GetAllChildrenNumberRequest,
    GetChildren2Request, GetChildrenRequest, GetDataRequest, GetDataResponse, GetEphemeralsRequest,
    Stat, SyncRequest,
};

impl Client {
    /// The node's Stat, or `None` if it does not exist.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// if client.exists("/config").await?.is_none() {
    ///     println!("not configured yet");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        let request = ExistsRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        absent_as_none(self.call_op::<op::Exists>(&request).await)
    }

    /// The node's data and Stat (null data reads as empty).
    ///
    /// The data is not copied: it is a slice of the block the reply was read into (up to
    /// 64 KiB, shared with the replies read with it), which stays allocated while any of
    /// them is kept. To keep many small values for long (a cache of your own), keep copies
    /// (`Bytes::copy_from_slice(&data)`), as the recipes' `TreeCache` does.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (data, stat) = client.get_data("/config").await?;
    /// println!("{} bytes at version {}", data.len(), stat.version);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_data(&self, path: &str) -> Result<(Bytes, Stat), Error> {
        let request = GetDataRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        let response = self.call_op::<op::GetData>(&request).await?;
        Ok(data_and_stat(response))
    }

    /// The node's ACL and Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (acl, _stat) = client.get_acl("/config").await?;
    /// for entry in acl {
    ///     println!("{}:{} {:?}", entry.id.scheme, entry.id.id, entry.perms);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), Error> {
        let request = GetAclRequest {
            path: self.server_path(path)?,
        };
        let response = self.call_op::<op::GetAcl>(&request).await?;
        Ok((response.acl, response.stat))
    }

    /// The node's children (names, in no defined order). For a large directory or a hot
    /// path, [`get_children_compact`](Self::get_children_compact) gives the same names in two
    /// allocations rather than one a name.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let mut jobs = client.get_children("/jobs").await?;
    /// jobs.sort();
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        let request = GetChildrenRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        Ok(self.call_op::<op::GetChildren>(&request).await?.children)
    }

    /// The node's children, as [`get_children`](Self::get_children) gives them, in one
    /// compact [`Children`]: two allocations for the listing rather than one a name.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let jobs = client.get_children_compact("/jobs").await?;
    /// for job in &jobs {
    ///     println!("{job}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_children_compact(&self, path: &str) -> Result<Children, Error> {
        let request = GetChildrenRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        self.call_op_as::<op::GetChildren, Children>(&request).await
    }

    /// The node's children and its Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (children, stat) = client.get_children_and_stat("/jobs").await?;
    /// assert_eq!(children.len(), usize::try_from(stat.num_children).unwrap_or(0));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_children_and_stat(&self, path: &str) -> Result<(Vec<String>, Stat), Error> {
        let request = GetChildren2Request {
            path: self.server_path(path)?,
            watch: false,
        };
        let response = self.call_op::<op::GetChildren2>(&request).await?;
        Ok((response.children, response.stat))
    }

    /// The number of descendants of the node (servers 3.6+).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let total = client.get_all_children_number("/jobs").await?;
    /// println!("{total} nodes under /jobs");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32, Error> {
        let request = GetAllChildrenNumberRequest {
            path: self.server_path(path)?,
        };
        Ok(self
            .call_op::<op::GetAllChildrenNumber>(&request)
            .await?
            .total_number)
    }

    /// This session's ephemeral nodes whose path starts with `prefix` ("/" for all), inside
    /// the chroot (servers 3.6+).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// for path in client.get_ephemerals("/locks/").await? {
    ///     println!("this session holds {path}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let request = GetEphemeralsRequest {
            prefix_path: self.server_path_sequential(prefix)?,
        };
        let paths = self
            .call_op::<op::GetEphemerals>(&request)
            .await?
            .ephemerals;
        Ok(match &self.inner.chroot {
            Some(chroot) => paths
                .iter()
                .filter_map(|p| chroot.to_client(p))
                .map(str::to_owned)
                .collect(),
            None => paths,
        })
    }

    /// Waits until the connected server has caught up with the leader on `path`, so that
    /// reads after it see every write committed before it.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// client.sync("/config").await?;
    /// let (latest, _stat) = client.get_data("/config").await?;
    /// # let _ = latest;
    /// # Ok(()) }
    /// ```
    pub async fn sync(&self, path: &str) -> Result<(), Error> {
        let request = SyncRequest {
            path: self.server_path(path)?,
        };
        self.call_op::<op::Sync>(&request).await.map(drop)
    }
}

/// An exists reply: `None` for a missing node.
pub(super) fn absent_as_none(result: Result<ExistsResponse, Error>) -> Result<Option<Stat>, Error> {
    match result {
        Ok(response) => Ok(Some(response.stat)),
        Err(Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A getData reply as the `Client` returns it: null data reads as empty.
pub(super) fn data_and_stat(response: GetDataResponse) -> (Bytes, Stat) {
    (response.data.unwrap_or_default(), response.stat)
}
