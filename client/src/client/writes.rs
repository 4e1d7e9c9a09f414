//! Writes of nodes: create, delete, set data, set ACL.

use std::time::Duration;

use bytes::Bytes;

use super::{Client, CreateOptions};
use crate::error::Error;
use crate::proto::{
    op, Acl, CreateMode, CreateRequest, CreateTtlRequest, DeleteRequest, SetAclRequest,
    SetDataRequest, Stat,
};

impl Client {
    /// Creates a node; returns its path (with the sequence number, if sequential) and Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{CreateMode, CreateOptions};
    /// let (path, _stat) = client
    ///     .create("/jobs/job-", b"payload", &CreateOptions::persistent_sequential())
    ///     .await?;
    /// assert!(path.starts_with("/jobs/job-"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NodeExists`]; [`Error::NoNode`] when the parent is missing;
    /// [`Error::NoChildrenForEphemerals`]; [`Error::InvalidAcl`]; [`Error::Unimplemented`] for
    /// TTL modes on a server without extended types; [`Error::InvalidArgument`] for a TTL
    /// mode without a TTL or a TTL on another mode.
    pub async fn create(
        &self,
        path: &str,
        data: impl AsRef<[u8]>,
        options: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        let data = Bytes::copy_from_slice(data.as_ref());
        self.create_bytes(path, data, options).await
    }

    /// [`create`](Self::create) with data already in a `Bytes`.
    pub(super) async fn create_bytes(
        &self,
        path: &str,
        data: Bytes,
        options: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        // Alone, a plain create is sent as create2, whose reply carries the Stat.
        let response = match self.create_record(path, data, options)? {
            CreateRecord::Plain(r) => self.call_op::<op::Create2>(&r).await?,
            CreateRecord::Container(r) => self.call_op::<op::CreateContainer>(&r).await?,
            CreateRecord::Ttl(r) => self.call_op::<op::CreateTtl>(&r).await?,
        };
        Ok((self.client_path(response.path), response.stat))
    }

    /// Deletes a node, if its version is `version` (any version when `None`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (_data, stat) = client.get_data("/config").await?;
    /// client.delete("/config", Some(stat.version)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`]; [`Error::NotEmpty`].
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        let request = DeleteRequest {
            path: self.server_path(path)?,
            version: version.unwrap_or(-1),
        };
        self.call_op::<op::Delete>(&request).await
    }

    /// Sets the node's data, if its version is `version` (any when `None`); returns the new Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// // Compare-and-set: fails with BadVersion if someone wrote in between.
    /// let (_old, stat) = client.get_data("/counter").await?;
    /// let stat = client.set_data("/counter", b"42", Some(stat.version)).await?;
    /// assert!(stat.version > 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`].
    pub async fn set_data(
        &self,
        path: &str,
        data: impl AsRef<[u8]>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let request = SetDataRequest {
            path: self.server_path(path)?,
            data: Some(Bytes::copy_from_slice(data.as_ref())),
            version: version.unwrap_or(-1),
        };
        Ok(self.call_op::<op::SetData>(&request).await?.stat)
    }

    /// Sets the node's ACL, if its ACL version is `version` (any when `None`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::Acl;
    /// client.set_acl("/config", &Acl::read_unsafe(), None).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`]; [`Error::InvalidAcl`].
    pub async fn set_acl(
        &self,
        path: &str,
        acl: &[Acl],
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let request = SetAclRequest {
            path: self.server_path(path)?,
            acl: acl.to_vec(),
            version: version.unwrap_or(-1),
        };
        Ok(self.call_op::<op::SetAcl>(&request).await?.stat)
    }

    /// The request record of a create, alone or inside a multi: the server path (a
    /// sequential one may end with `/`) and, for the TTL modes, a TTL in range.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for a TTL mode without a TTL, a TTL
    /// on another mode, or a TTL out of range.
    pub(super) fn create_record(
        &self,
        path: &str,
        data: Bytes,
        options: &CreateOptions,
    ) -> Result<CreateRecord, Error> {
        let mode = options.mode;
        let path = if mode.is_sequential() {
            self.server_path_sequential(path)?
        } else {
            self.server_path(path)?
        };
        let (data, acl) = (Some(data), options.acl.clone());
        match (mode.is_ttl(), options.ttl) {
            (true, Some(ttl)) => Ok(CreateRecord::Ttl(CreateTtlRequest {
                path,
                data,
                acl,
                mode,
                ttl: ttl_millis(ttl)?,
            })),
            (true, None) => Err(Error::InvalidArgument("a TTL create mode needs a TTL")),
            (false, Some(_)) => Err(Error::InvalidArgument(
                "a TTL is only valid with a TTL create mode",
            )),
            (false, None) => {
                let request = CreateRequest {
                    path,
                    data,
                    acl,
                    mode,
                };
                Ok(if mode == CreateMode::Container {
                    CreateRecord::Container(request)
                } else {
                    CreateRecord::Plain(request)
                })
            }
        }
    }
}

/// A TTL in ms, as the server accepts it: 1 ms to `0xFF_FFFF_FFFF` ms.
pub(super) fn ttl_millis(ttl: Duration) -> Result<i64, Error> {
    let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    if (1..=0xFF_FFFF_FFFF).contains(&ms) {
        Ok(ms)
    } else {
        Err(Error::InvalidArgument(
            "TTL must be 1 ms to 0xFFFFFFFFFF ms",
        ))
    }
}

/// A create's request record, by the op code family it is sent with.
pub(super) enum CreateRecord {
    /// A plain (persistent, ephemeral, sequential) create: `create2` alone, `create` in a
    /// multi.
    Plain(CreateRequest),
    /// `createContainer`.
    Container(CreateRequest),
    /// `createTTL`.
    Ttl(CreateTtlRequest),
}
