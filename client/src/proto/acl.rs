//! Access control: `Id`, `ACL` and permissions.

use std::ops::BitOr;

use bytes::BytesMut;

use crate::jute::{record, Decode, DecodeError, Encode, Reader};

record! {
    /// An identity in an authentication scheme, such as `world:anyone` or `digest:user:hash`.
    ///
    /// ```text
    /// class Id { ustring scheme; ustring id; }
    /// ```
    /// Both strings decode leniently (invalid UTF-8 becomes U+FFFD): servers copy them from other
    /// clients, and Java writes non-BMP characters as CESU-8.
    ///
    /// ```
    /// use zkwire::Id;
    ///
    /// let everyone = Id::anyone();
    /// assert_eq!((everyone.scheme.as_str(), everyone.id.as_str()), ("world", "anyone"));
    /// let office = Id::new("ip", "10.1.0.0/16");
    /// # let _ = office;
    /// ```
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Id as "Id", lenient strings {
        /// The scheme: `world`, `auth`, `digest`, `ip`, `sasl`, `x509`, …
        pub scheme: String,
        /// The identity within the scheme.
        pub id: String,
    }
}

impl Id {
    /// An id from its scheme and value.
    ///
    /// ```
    /// use zkwire::{Acl, Id, Perms};
    /// // Read access for one host.
    /// let entry = Acl::new(Perms::READ, Id::new("ip", "192.168.1.17"));
    /// # let _ = entry;
    /// ```
    pub fn new(scheme: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    /// `world:anyone`: everybody.
    ///
    /// ```
    /// use zkwire::{Acl, Id, Perms};
    /// assert_eq!(Id::anyone(), Id::new("world", "anyone"));
    /// let readable_by_all = Acl::new(Perms::READ, Id::anyone());
    /// # let _ = readable_by_all;
    /// ```
    pub fn anyone() -> Self {
        Self::new("world", "anyone")
    }

    /// `auth:`: the ids the creating session has authenticated with.
    ///
    /// ```
    /// use zkwire::{Acl, Id, Perms};
    /// assert_eq!(Id::creator(), Id::new("auth", ""));
    /// // Everything for whoever created the node (the session must have authenticated).
    /// let owner_only = Acl::new(Perms::ALL, Id::creator());
    /// # let _ = owner_only;
    /// ```
    pub fn creator() -> Self {
        Self::new("auth", "")
    }

    /// The `digest` id of `user` with `password`: `digest:<user>:<base64(sha1(user:password))>`,
    /// the identity a session gets from `add_auth("digest", "user:password")`.
    ///
    /// An ACL must name this form: `digest:alice:secret` written as the id (the plain
    /// password) matches no session, and the node is then closed to everyone but a superuser.
    ///
    /// ```
    /// use zkwire::Id;
    /// let id = Id::digest("super", "test");
    /// assert_eq!(id.id, "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    /// ```
    pub fn digest(user: &str, password: &str) -> Self {
        use base64::Engine as _;
        let hash = sha1_smol::Sha1::from(format!("{user}:{password}"))
            .digest()
            .bytes();
        let encoded = base64::engine::general_purpose::STANDARD.encode(hash);
        Self::new("digest", format!("{user}:{encoded}"))
    }
}

/// A set of permissions (`ZooDefs.Perms`). Its `Debug` names them.
///
/// ```
/// use zkwire::Perms;
/// assert_eq!(format!("{:?}", Perms::READ | Perms::WRITE), "Perms(READ | WRITE)");
/// assert_eq!(format!("{:?}", Perms(0)), "Perms(NONE)");
/// assert_eq!(format!("{:?}", Perms(33)), "Perms(READ | 0x20)");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Perms(pub i32);

impl std::fmt::Debug for Perms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [(Perms, &str); 5] = [
            (Perms::READ, "READ"),
            (Perms::WRITE, "WRITE"),
            (Perms::CREATE, "CREATE"),
            (Perms::DELETE, "DELETE"),
            (Perms::ADMIN, "ADMIN"),
        ];
        let mut names: Vec<String> = NAMES
            .iter()
            .filter(|(p, _)| self.contains(*p))
            .map(|(_, name)| (*name).to_owned())
            .collect();
        let unknown = self.0 & !Self::ALL.0;
        if unknown != 0 {
            names.push(format!("{unknown:#x}"));
        }
        if names.is_empty() {
            return f.write_str("Perms(NONE)");
        }
        write!(f, "Perms({})", names.join(" | "))
    }
}

impl Perms {
    /// Read data and list children.
    pub const READ: Self = Self(1);
    /// Set data.
    pub const WRITE: Self = Self(2);
    /// Create children.
    pub const CREATE: Self = Self(4);
    /// Delete children.
    pub const DELETE: Self = Self(8);
    /// Set the ACL.
    pub const ADMIN: Self = Self(16);
    /// Every permission.
    pub const ALL: Self = Self(31);

    /// Whether every permission in `other` is in `self`.
    ///
    /// ```
    /// use zkwire::Perms;
    /// let read_write = Perms::READ | Perms::WRITE;
    /// assert!(read_write.contains(Perms::READ));
    /// assert!(!read_write.contains(Perms::READ | Perms::DELETE));
    /// assert!(Perms::ALL.contains(read_write));
    /// ```
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Perms {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl Encode for Perms {
    fn encode(&self, buf: &mut BytesMut) {
        self.0.encode(buf);
    }

    fn encoded_len(&self) -> usize {
        4
    }
}

impl Decode for Perms {
    const NAME: &'static str = "Perms";
    const MIN_LEN: usize = 4;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        i32::decode(r).map(Self)
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        i32::skip(r)
    }
}

record! {
    /// One access-control entry.
    ///
    /// ```text
    /// class ACL { int perms; Id id; }
    /// ```
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{Acl, CreateMode, CreateOptions, Id, Perms};
    ///
    /// // Everyone may read; alice (digest) may do everything.
    /// let acl = vec![
    ///     Acl::new(Perms::READ, Id::anyone()),
    ///     Acl::digest(Perms::ALL, "alice", "alice-secret"),
    /// ];
    /// let options = CreateOptions::persistent().with_acl(acl);
    /// client.create("/reports", b"", &options).await?;
    /// # Ok(()) }
    /// ```
    #[derive(Hash)]
    pub struct Acl as "ACL" {
        /// The permissions granted.
        pub perms: Perms,
        /// To whom.
        pub id: Id,
    }
}

/// A create's ACL as the records hold it: shared, so that the ACL of a [`CreateOptions`]
/// used for create after create is not copied into every request (BENCHMARKS.md,
/// "Allocations per lock cycle"). Encoded and decoded as a `vector<ACL>`.
///
/// [`CreateOptions`]: crate::CreateOptions
pub type Acls = std::sync::Arc<[Acl]>;

impl Acl {
    /// An entry granting `perms` to `id`.
    ///
    /// ```
    /// use zkwire::{Acl, Id, Perms};
    /// let entry = Acl::new(Perms::READ | Perms::WRITE, Id::new("ip", "10.0.0.0/8"));
    /// assert!(entry.perms.contains(Perms::WRITE));
    /// ```
    pub fn new(perms: Perms, id: Id) -> Self {
        Self { perms, id }
    }

    /// `OPEN_ACL_UNSAFE`: everything for everybody.
    ///
    /// ```
    /// use zkwire::{Acl, Id, Perms};
    /// assert_eq!(Acl::open_unsafe(), vec![Acl::new(Perms::ALL, Id::anyone())]);
    /// ```
    pub fn open_unsafe() -> Vec<Self> {
        vec![Self::new(Perms::ALL, Id::anyone())]
    }

    /// `READ_ACL_UNSAFE`: read for everybody.
    ///
    /// ```
    /// use zkwire::{Acl, CreateMode, CreateOptions};
    /// // Published settings: everyone reads, nobody changes them (but a superuser).
    /// let published = CreateOptions::persistent().with_acl(Acl::read_unsafe());
    /// # let _ = published;
    /// ```
    pub fn read_unsafe() -> Vec<Self> {
        vec![Self::new(Perms::READ, Id::anyone())]
    }

    /// `CREATOR_ALL_ACL`: everything for the creator's authenticated ids.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{Acl, CreateMode, CreateOptions};
    ///
    /// client.add_auth("digest", "alice:alice-secret").await?;
    /// // Only the session's identities (here digest:alice:...) may touch the node.
    /// let private = CreateOptions::persistent().with_acl(Acl::creator_all());
    /// client.create("/alice", b"", &private).await?;
    /// # Ok(()) }
    /// ```
    pub fn creator_all() -> Vec<Self> {
        vec![Self::new(Perms::ALL, Id::creator())]
    }

    /// An entry granting `perms` to `user` with `password`, as [`Id::digest`] computes it.
    ///
    /// ```
    /// use zkwire::{Acl, Id, Perms};
    /// let entry = Acl::digest(Perms::ALL, "super", "test");
    /// assert_eq!(entry.id, Id::digest("super", "test"));
    /// ```
    pub fn digest(perms: Perms, user: &str, password: &str) -> Self {
        Self::new(perms, Id::digest(user, password))
    }
}
