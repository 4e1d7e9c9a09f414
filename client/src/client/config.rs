//! The ensemble's dynamic configuration: read it, change it.

use bytes::Bytes;

use super::reads::data_and_stat;
use super::Client;
use crate::error::Error;
use crate::proto::op;
use crate::proto::{GetDataRequest, ReconfigRequest, Stat};

/// Where the server keeps its configuration; outside any chroot.
const CONFIG_NODE: &str = "/zookeeper/config";

/// A change of the ensemble's membership, for [`Client::reconfig`].
///
/// Server lines are as in the configuration: `server.4=host:2888:3888:participant;2181`.
///
/// ```
/// use zkwire::Reconfig;
///
/// // Add server 4 and remove server 3...
/// let change = Reconfig::Incremental {
///     joining: vec!["server.4=zk4:2888:3888:participant;2181".into()],
///     leaving: vec![3],
/// };
/// // ...or give the whole new membership.
/// let members = Reconfig::Replace {
///     members: vec![
///         "server.1=zk1:2888:3888:participant;2181".into(),
///         "server.2=zk2:2888:3888:participant;2181".into(),
///         "server.4=zk4:2888:3888:participant;2181".into(),
///     ],
/// };
/// # let _ = (change, members);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reconfig {
    /// Add `joining` server lines and remove the servers with the `leaving` ids.
    Incremental {
        /// Server lines to add.
        joining: Vec<String>,
        /// Ids of the servers to remove.
        leaving: Vec<u64>,
    },
    /// Replace the membership with these server lines.
    Replace {
        /// The whole new membership.
        members: Vec<String>,
    },
}

impl Client {
    /// The ensemble's configuration (the data of `/zookeeper/config`, read whatever the
    /// chroot): `server.N=…` lines and `version=…`, and its Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (config, _stat) = client.get_config().await?;
    /// for line in String::from_utf8_lossy(&config).lines() {
    ///     println!("{line}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`] on a server without the node (before 3.5).
    pub async fn get_config(&self) -> Result<(Bytes, Stat), Error> {
        let request = GetDataRequest {
            path: CONFIG_NODE.to_owned(),
            watch: false,
        };
        Ok(data_and_stat(self.call_op::<op::GetData>(&request).await?))
    }

    /// Changes the ensemble's membership, if its configuration is still version
    /// `from_version` (any version when `None`): the `mzxid` of the Stat
    /// [`get_config`](Self::get_config) returned, which its `version=` line writes in
    /// hexadecimal. Returns the new configuration. The server must run with
    /// `reconfigEnabled=true`, and the session needs the right to write `/zookeeper/config`
    /// (a superuser, or a server with `skipACL`). The reply can be lost if the server the
    /// client talks to leaves or was the leader: connect through servers that stay.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::Reconfig;
    /// let (_, stat) = client.get_config().await?;
    /// let change = Reconfig::Incremental { joining: vec![], leaving: vec![3] };
    /// let (config, _stat) = client.reconfig(&change, Some(stat.mzxid)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::ReconfigDisabled`]; [`Error::ReconfigInProgress`];
    /// [`Error::NewConfigNoQuorum`]; [`Error::BadVersion`]; [`Error::NoAuth`];
    /// [`Error::BadArguments`] for a change the server cannot apply.
    pub async fn reconfig(
        &self,
        change: &Reconfig,
        from_version: Option<i64>,
    ) -> Result<(Bytes, Stat), Error> {
        let joined = |lines: &[String]| Some(lines.join(",")).filter(|s| !s.is_empty());
        let (joining, leaving, members) = match change {
            Reconfig::Incremental { joining, leaving } => {
                let ids: Vec<String> = leaving.iter().map(u64::to_string).collect();
                (joined(joining), joined(&ids), None)
            }
            Reconfig::Replace { members } => (None, None, joined(members)),
        };
        let request = ReconfigRequest {
            joining_servers: joining,
            leaving_servers: leaving,
            new_members: members,
            cur_config_id: from_version.unwrap_or(-1),
        };
        Ok(data_and_stat(self.call_op::<op::Reconfig>(&request).await?))
    }
}
