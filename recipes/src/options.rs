//! Options shared by every recipe.

use std::time::Duration;

use bytes::Bytes;
use zkwire::Acl;

use crate::sequence::ForeignChildPolicy;

/// The fraction of the negotiated session timeout T that a hold survives a disconnection
/// before [`lost`](crate::MutexGuard::lost) fires: T/4 (numerator, denominator).
///
/// Why: the client reports `Disconnected` either at once (the connection broke) or after its
/// read timeout, 2/3 T without hearing from the server. The server expires the session no
/// sooner than T after it last heard from us, and it heard us at the latest when it sent the
/// last reply we read. So when `Disconnected` is reported at least T − 2/3 T = T/3 remains
/// before anyone else can be granted our lock; T/4 keeps T/12 of that as a margin for network
/// latency and timer lag. (2/3 T, measured from the event, could be up to T/3 too late.)
pub const DISCONNECT_GRACE_RATIO: (u32, u32) = (1, 4);

/// Options of a lock: node data and ACL, how to treat foreign children, and the
/// disconnection grace of [`lost`](crate::MutexGuard::lost).
///
/// ```
/// use zkwire_recipes::{ForeignChildPolicy, LockOptions};
/// let options = LockOptions::new()
///     .with_data(&b"host-1"[..])
///     .with_foreign_children(ForeignChildPolicy::CountLikeCurator);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    pub(crate) data: Bytes,
    pub(crate) acl: Vec<Acl>,
    pub(crate) parent_acl: Vec<Acl>,
    pub(crate) foreign_children: ForeignChildPolicy,
    pub(crate) disconnect_grace: Option<Duration>,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
            parent_acl: Acl::open_unsafe(),
            foreign_children: ForeignChildPolicy::default(),
            disconnect_grace: None,
        }
    }
}

impl LockOptions {
    /// The defaults: empty node data, open ACLs, foreign children rejected, grace T/4.
    pub fn new() -> Self {
        Self::default()
    }

    /// The data of each lock node (default empty; Curator writes the host's IP address).
    pub fn with_data(mut self, data: impl Into<Bytes>) -> Self {
        self.data = data.into();
        self
    }

    /// The ACL of each lock node (default `world:anyone`, every permission).
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = acl;
        self
    }

    /// The ACL of the container nodes created for missing parents (default open, as
    /// Curator without an `ACLProvider`).
    pub fn with_parent_acl(mut self, acl: Vec<Acl>) -> Self {
        self.parent_acl = acl;
        self
    }

    /// What to do with children of the lock directory that are not contenders (default
    /// [`ForeignChildPolicy::Reject`]).
    pub fn with_foreign_children(mut self, policy: ForeignChildPolicy) -> Self {
        self.foreign_children = policy;
        self
    }

    /// How long a guard survives a disconnection before [`lost`](crate::MutexGuard::lost)
    /// fires, instead of [`DISCONNECT_GRACE_RATIO`] of the negotiated session timeout.
    /// `Duration::ZERO` gives up the hold at the first disconnection (Curator's SUSPENDED
    /// advice). Longer than T/3 is unsafe: another client may hold the lock by then.
    pub fn with_disconnect_grace(mut self, grace: Duration) -> Self {
        self.disconnect_grace = Some(grace);
        self
    }
}
