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
    ///     if stat.is_owned_by(client.session_id()) {
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

impl Stat {
    /// Whether the node is an ephemeral node of session `session`: it goes when that session
    /// ends. Never for session 0, which no session has (a persistent node's owner is 0).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// if let Some(stat) = client.exists("/leader").await? {
    ///     if stat.is_owned_by(client.session_id()) {
    ///         println!("we lead: the node goes with our session");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_owned_by(&self, session: i64) -> bool {
        session != 0 && self.ephemeral_owner == session
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jute::{Decode, DecodeErrorKind, Reader};
    use crate::proto::GetDataResponse;
    use bytes::Bytes;

    /// A `Stat` is integers only: skipped in one step when whole, walked field by field when
    /// cut short (so that the error names the field), and a record holding a buffer is not
    /// fixed-width.
    #[test]
    fn a_stat_is_fixed_width_and_a_short_one_names_its_field() {
        assert_eq!(Stat::FIXED_LEN, Some(68));
        assert_eq!(<GetDataResponse as Decode>::FIXED_LEN, None);
        let whole = Bytes::from_static(&[0; 70]);
        let mut r = Reader::new(&whole);
        assert_eq!(r.skip::<Stat>(), Ok(()));
        assert_eq!(r.remaining(), 2);
        // Cut in `ephemeralOwner` (bytes 44..52): the walk stops there, as `decode` does.
        let short = Bytes::from_static(&[0; 47]);
        let skipped = Reader::new(&short).skip::<Stat>().unwrap_err();
        assert_eq!(Reader::new(&short).read::<Stat>().unwrap_err(), skipped);
        assert!(matches!(
            skipped.kind(),
            DecodeErrorKind::UnexpectedEnd { offset: 44, needed: 8, available: 3 }
        ));
    }

    #[test]
    fn only_an_ephemeral_node_is_owned_and_never_by_session_zero() {
        let ephemeral = Stat {
            ephemeral_owner: 0x42,
            ..Stat::default()
        };
        assert!(ephemeral.is_owned_by(0x42));
        assert!(!ephemeral.is_owned_by(0x43));
        let persistent = Stat::default();
        assert!(!persistent.is_owned_by(0));
    }
}
