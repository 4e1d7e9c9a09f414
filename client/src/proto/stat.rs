//! `Stat`: a znode's metadata.

use crate::jute::record;

record! {
    /// A znode's metadata, fields in wire order (68 bytes).
    ///
    /// ```text
    /// class Stat {
    ///     long czxid; long mzxid; long ctime; long mtime;
    ///     int version; int cversion; int aversion;
    ///     long ephemeralOwner; int dataLength; int numChildren; long pzxid;
    /// }
    /// ```
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// if let Some(stat) = client.exists("/leader").await? {
    ///     println!("version {}, {} bytes", stat.version, stat.data_length);
    ///     if stat.ephemeral_owner == client.session_id() {
    ///         println!("we lead: the node goes with our session");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    #[derive(Default, Copy, Hash)]
    pub struct Stat as "Stat" {
        /// The zxid of the change that created the node.
        pub czxid: i64,
        /// The zxid of the last change to the node's data.
        pub mzxid: i64,
        /// Creation time, ms since the epoch (the leader's clock).
        pub ctime: i64,
        /// Last modification time, ms since the epoch (the leader's clock).
        pub mtime: i64,
        /// Data version (wraps).
        pub version: i32,
        /// Children version (wraps).
        pub cversion: i32,
        /// ACL version (wraps).
        pub aversion: i32,
        /// The owner session of an ephemeral node; 0 for a persistent node;
        /// `0x8000000000000000` for a container; `0xff00…|ttl` for a TTL node.
        pub ephemeral_owner: i64,
        /// Length of the data in bytes.
        pub data_length: i32,
        /// Number of children.
        pub num_children: i32,
        /// The zxid of the last change to the children list.
        pub pzxid: i64,
    }
}
