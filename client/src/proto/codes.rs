//! Wire code tables: op codes, error codes, event types, keeper states, watch and create modes.
//!
//! Every table keeps unknown values representable (`Unknown(i32)`) so that a newer server's
//! codes decode instead of failing. Build values with `from_i32`: `Unknown` is only ever made
//! for values outside the table, which keeps equality meaningful.

use bytes::BytesMut;

use crate::jute::{Decode, DecodeError, Encode, Reader};

/// Defines a wire enum over `i32` with an `Unknown(i32)` fallback.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident as $jute:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this client does not know.
            Unknown(i32),
        }

        impl $name {
            /// The variant for a wire value, `Unknown` for values not in the table.
            ///
            /// ```
            #[doc = concat!("# use zkwire::proto::", stringify!($name), ";")]
            #[doc = concat!("let known = ", stringify!($name), "::from_i32(1);")]
            /// assert_eq!(known.as_i32(), 1);
            /// // A value from a newer server is kept, not refused:
            #[doc = concat!(
                "assert_eq!(", stringify!($name), "::from_i32(999), ",
                stringify!($name), "::Unknown(999));"
            )]
            /// ```
            pub const fn from_i32(value: i32) -> Self {
                match value {
                    $( $value => Self::$variant, )*
                    other => Self::Unknown(other),
                }
            }

            /// The wire value.
            ///
            /// ```
            #[doc = concat!("# use zkwire::proto::", stringify!($name), ";")]
            #[doc = concat!("let value = ", stringify!($name), "::from_i32(2);")]
            /// assert_eq!(value.as_i32(), 2);
            #[doc = concat!("assert_eq!(", stringify!($name), "::Unknown(999).as_i32(), 999);")]
            /// ```
            pub const fn as_i32(self) -> i32 {
                match self {
                    $( Self::$variant => $value, )*
                    Self::Unknown(value) => value,
                }
            }
        }

        impl From<i32> for $name {
            fn from(value: i32) -> Self {
                Self::from_i32(value)
            }
        }

        impl Encode for $name {
            fn encode(&self, buf: &mut BytesMut) {
                self.as_i32().encode(buf);
            }

            fn encoded_len(&self) -> usize {
                4
            }
        }

        impl Decode for $name {
            const NAME: &'static str = $jute;
            const MIN_LEN: usize = 4;

            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                i32::decode(r).map(Self::from_i32)
            }

            fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
                i32::skip(r)
            }
        }
    };
}

wire_enum! {
    /// Request types (`ZooDefs.OpCode`), identical in servers 3.8 and 3.9.
    pub enum OpCode as "OpCode" {
        /// Never sent; notifications are told apart by xid -1.
        Notification = 0,
        /// `create`
        Create = 1,
        /// `delete`
        Delete = 2,
        /// `exists`
        Exists = 3,
        /// `getData`
        GetData = 4,
        /// `setData`
        SetData = 5,
        /// `getACL`
        GetAcl = 6,
        /// `setACL`
        SetAcl = 7,
        /// `getChildren`
        GetChildren = 8,
        /// `sync`
        Sync = 9,
        /// `ping` (xid -2)
        Ping = 11,
        /// `getChildren2` (children with the parent's Stat)
        GetChildren2 = 12,
        /// `check` (a version check, inside multi only)
        Check = 13,
        /// `multi` (a transaction)
        Multi = 14,
        /// `create2` (create returning a Stat), 3.5+
        Create2 = 15,
        /// `reconfig`, 3.5+
        Reconfig = 16,
        /// `checkWatches`, 3.5+
        CheckWatches = 17,
        /// `removeWatches`, 3.5+
        RemoveWatches = 18,
        /// `createContainer`, 3.5.1+
        CreateContainer = 19,
        /// `deleteContainer` (server-internal)
        DeleteContainer = 20,
        /// `createTTL`, 3.5.3+ with extended types enabled
        CreateTtl = 21,
        /// `multiRead`, 3.6+
        MultiRead = 22,
        /// `auth` (xid -4)
        Auth = 100,
        /// `setWatches`
        SetWatches = 101,
        /// `sasl`
        Sasl = 102,
        /// `getEphemerals`, 3.6+
        GetEphemerals = 103,
        /// `getAllChildrenNumber`, 3.6+
        GetAllChildrenNumber = 104,
        /// `setWatches2`, 3.6+
        SetWatches2 = 105,
        /// `addWatch`, 3.6+
        AddWatch = 106,
        /// `whoAmI`, 3.7+
        WhoAmI = 107,
        /// `createSession` (internal)
        CreateSession = -10,
        /// `closeSession`
        CloseSession = -11,
        /// `error`: the type of a multi error result
        Error = -1,
    }
}

wire_enum! {
    /// The `err` field of a reply (`KeeperException.Code`), identical in servers 3.8 and 3.9.
    pub enum ErrorCode as "ErrorCode" {
        /// Success.
        Ok = 0,
        /// Range marker for system errors; never sent.
        SystemError = -1,
        /// A multi op after the failing one.
        RuntimeInconsistency = -2,
        /// A data inconsistency was found.
        DataInconsistency = -3,
        /// The connection to the server was lost.
        ConnectionLoss = -4,
        /// The server could not decode or handle the request.
        MarshallingError = -5,
        /// The operation is not implemented (or not enabled) on the server.
        Unimplemented = -6,
        /// The operation timed out.
        OperationTimeout = -7,
        /// Invalid arguments.
        BadArguments = -8,
        /// The session is unknown to the server.
        UnknownSession = -12,
        /// No quorum of the new configuration is connected.
        NewConfigNoQuorum = -13,
        /// Another reconfiguration is in progress.
        ReconfigInProgress = -14,
        /// Range marker for API errors; never sent.
        ApiError = -100,
        /// The node does not exist.
        NoNode = -101,
        /// Not authorized by the node's ACL.
        NoAuth = -102,
        /// The version did not match.
        BadVersion = -103,
        /// Ephemeral nodes may not have children.
        NoChildrenForEphemerals = -108,
        /// The node already exists.
        NodeExists = -110,
        /// The node has children.
        NotEmpty = -111,
        /// The session has expired.
        SessionExpired = -112,
        /// Invalid callback.
        InvalidCallback = -113,
        /// Invalid ACL.
        InvalidAcl = -114,
        /// Authentication failed.
        AuthFailed = -115,
        /// The session moved to another server.
        SessionMoved = -118,
        /// A write sent to a read-only server.
        NotReadOnly = -119,
        /// An ephemeral create on a local session.
        EphemeralOnLocalSession = -120,
        /// No watcher to remove or check.
        NoWatcher = -121,
        /// The request timed out.
        RequestTimeout = -122,
        /// Reconfiguration is disabled.
        ReconfigDisabled = -123,
        /// The session is closed because it requires SASL authentication.
        SessionClosedRequireSaslAuth = -124,
        /// A hard quota was exceeded.
        QuotaExceeded = -125,
        /// The server throttled the operation.
        Throttled = -127,
    }
}

wire_enum! {
    /// The type of a watch notification (`Watcher.Event.EventType`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::EventType;
    ///
    /// let (_stat, watcher) = client.exists_and_watch("/ready").await?;
    /// match watcher.await.event_type {
    ///     EventType::NodeCreated => println!("ready"),
    ///     EventType::None => println!("the session ended first"),
    ///     other => println!("{other:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub enum EventType as "EventType" {
        /// A session-state change (client-local).
        None = -1,
        /// The node was created.
        NodeCreated = 1,
        /// The node was deleted.
        NodeDeleted = 2,
        /// The node's data changed.
        NodeDataChanged = 3,
        /// The node's children changed.
        NodeChildrenChanged = 4,
        /// A data watch was removed (client-local).
        DataWatchRemoved = 5,
        /// A child watch was removed (client-local).
        ChildWatchRemoved = 6,
        /// A persistent watch was removed (client-local).
        PersistentWatchRemoved = 7,
    }
}

wire_enum! {
    /// The session state carried by a notification (`Watcher.Event.KeeperState`).
    ///
    /// Every server notification carries `SyncConnected`; the others are client-local.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{EventType, KeeperState};
    ///
    /// let (_data, _stat, watcher) = client.get_data_and_watch("/config").await?;
    /// let event = watcher.await;
    /// if event.event_type == EventType::None && event.state == KeeperState::Expired {
    ///     println!("the session expired before /config changed");
    /// }
    /// # Ok(()) }
    /// ```
    pub enum KeeperState as "KeeperState" {
        /// Java's deprecated `Unknown` state (-1).
        LegacyUnknown = -1,
        /// Disconnected from the server.
        Disconnected = 0,
        /// Deprecated.
        NoSyncConnected = 1,
        /// Connected.
        SyncConnected = 3,
        /// Authentication failed.
        AuthFailed = 4,
        /// Connected to a read-only server.
        ConnectedReadOnly = 5,
        /// SASL authentication succeeded.
        SaslAuthenticated = 6,
        /// The session expired.
        Expired = -112,
        /// The client was closed.
        Closed = 7,
    }
}

wire_enum! {
    /// Which watches `removeWatches`/`checkWatches` apply to (`Watcher.WatcherType`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::WatcherType;
    ///
    /// // Remove every watch this session has on /config, whatever its kind.
    /// client.remove_watches("/config", WatcherType::Any).await?;
    /// # Ok(()) }
    /// ```
    pub enum WatcherType as "WatcherType" {
        /// Child watches.
        Children = 1,
        /// Data (and exist) watches.
        Data = 2,
        /// Every kind.
        Any = 3,
        /// Persistent watches (3.9+; a 3.8 server answers MarshallingError).
        Persistent = 4,
        /// Persistent recursive watches (3.9+).
        PersistentRecursive = 5,
    }
}

wire_enum! {
    /// The mode of `addWatch` (`AddWatchMode`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::AddWatchMode;
    ///
    /// // Changes to /config itself; changes anywhere under /services.
    /// let config = client.add_watch("/config", AddWatchMode::Persistent).await?;
    /// let services = client.add_watch("/services", AddWatchMode::PersistentRecursive).await?;
    /// # drop((config, services));
    /// # Ok(()) }
    /// ```
    pub enum AddWatchMode as "AddWatchMode" {
        /// Fires for the node itself, and stays.
        Persistent = 0,
        /// Fires for the node and every descendant, and stays.
        PersistentRecursive = 1,
    }
}

wire_enum! {
    /// The `flags` of a create request (`CreateMode`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{CreateMode, CreateOptions};
    ///
    /// // A node that goes with the session, named with a sequence number.
    /// let worker = CreateOptions::ephemeral_sequential();
    /// let (path, _stat) = client.create("/workers/w-", b"host-1", &worker).await?;
    /// println!("registered as {path}");
    /// # Ok(()) }
    /// ```
    pub enum CreateMode as "CreateMode" {
        /// A node that stays until deleted.
        Persistent = 0,
        /// A node deleted when its session ends.
        Ephemeral = 1,
        /// A persistent node with a sequence number appended.
        PersistentSequential = 2,
        /// An ephemeral node with a sequence number appended.
        EphemeralSequential = 3,
        /// A node the server deletes once its last child is gone (opcode createContainer).
        Container = 4,
        /// A persistent node deleted after a TTL without children (opcode createTTL).
        PersistentWithTtl = 5,
        /// A sequential persistent node with a TTL (opcode createTTL).
        PersistentSequentialWithTtl = 6,
    }
}

impl CreateMode {
    /// Whether the server appends a sequence number to the path.
    ///
    /// ```
    /// use zkwire::CreateMode;
    /// assert!(CreateMode::EphemeralSequential.is_sequential());
    /// assert!(!CreateMode::Ephemeral.is_sequential());
    /// ```
    pub const fn is_sequential(self) -> bool {
        matches!(
            self,
            Self::PersistentSequential
                | Self::EphemeralSequential
                | Self::PersistentSequentialWithTtl
        )
    }

    /// Whether the node is deleted when its session ends.
    ///
    /// ```
    /// use zkwire::CreateMode;
    /// assert!(CreateMode::Ephemeral.is_ephemeral());
    /// assert!(!CreateMode::Container.is_ephemeral());
    /// ```
    pub const fn is_ephemeral(self) -> bool {
        matches!(self, Self::Ephemeral | Self::EphemeralSequential)
    }

    /// Whether the mode needs a TTL (and the createTTL opcode).
    ///
    /// ```
    /// use zkwire::CreateMode;
    /// assert!(CreateMode::PersistentWithTtl.is_ttl());
    /// assert!(!CreateMode::Persistent.is_ttl());
    /// ```
    pub const fn is_ttl(self) -> bool {
        matches!(
            self,
            Self::PersistentWithTtl | Self::PersistentSequentialWithTtl
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_round_trip() {
        assert_eq!(OpCode::from_i32(999), OpCode::Unknown(999));
        assert_eq!(OpCode::Unknown(999).as_i32(), 999);
        assert_eq!(ErrorCode::from_i32(-999), ErrorCode::Unknown(-999));
        assert_eq!(EventType::from_i32(99), EventType::Unknown(99));
        assert_eq!(KeeperState::from_i32(42), KeeperState::Unknown(42));
        assert_eq!(WatcherType::from_i32(9).as_i32(), 9);
    }

    #[test]
    fn known_values_match_the_java_tables() {
        assert_eq!(OpCode::from_i32(-11), OpCode::CloseSession);
        assert_eq!(OpCode::from_i32(106), OpCode::AddWatch);
        assert_eq!(ErrorCode::from_i32(-127), ErrorCode::Throttled);
        assert_eq!(ErrorCode::SessionExpired.as_i32(), -112);
        assert_eq!(KeeperState::from_i32(-112), KeeperState::Expired);
        assert_eq!(
            CreateMode::from_i32(6),
            CreateMode::PersistentSequentialWithTtl
        );
        assert!(CreateMode::EphemeralSequential.is_sequential());
        assert!(CreateMode::EphemeralSequential.is_ephemeral());
        assert!(!CreateMode::Container.is_ttl());
    }
}
