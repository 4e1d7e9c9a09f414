//! Options shared by every recipe.

use std::time::Duration;

use bytes::Bytes;
use zkwire::Acl;

use crate::sequence::ForeignChildPolicy;

/// Options of a lock: node data and ACL, how to treat foreign children, and what may make
/// [`lost`](crate::MutexGuard::lost) fire earlier than the session's lease.
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
    pub(crate) lease_margin: Option<Duration>,
    pub(crate) local_queue: bool,
    pub(crate) local_handoffs: u32,
}

impl Default for LockOptions {
    fn default() -> Self {
        Self {
            data: Bytes::new(),
            acl: Acl::open_unsafe(),
            parent_acl: Acl::open_unsafe(),
            foreign_children: ForeignChildPolicy::default(),
            disconnect_grace: None,
            lease_margin: None,
            local_queue: true,
            local_handoffs: 0,
        }
    }
}

impl LockOptions {
    /// The defaults: empty node data, open ACLs, foreign children rejected, holds trusted
    /// until [`lease_margin`](crate::lease_margin) before the session's lease deadline.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::{LockOptions, Mutex};
    /// let options = LockOptions::new().with_data("host-1");
    /// let mutex = Mutex::with_options(client, "/locks/reports", options);
    /// # let _ = mutex;
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The data of each lock node (default empty; Curator writes the host's IP address).
    ///
    /// ```
    /// use zkwire_recipes::LockOptions;
    /// // What `Mutex::holder` readers (and Curator's tools) show as the holder.
    /// let options = LockOptions::new().with_data("host-1:8080");
    /// # let _ = options;
    /// ```
    pub fn with_data(mut self, data: impl Into<Bytes>) -> Self {
        self.data = data.into();
        self
    }

    /// The ACL of each lock node (default `world:anyone`, every permission).
    ///
    /// ```
    /// use zkwire::Acl;
    /// use zkwire_recipes::LockOptions;
    ///
    /// // Lock nodes only the identities of the holder's session may change (the session must have
    /// // authenticated), readable by everyone.
    /// let mut acl = Acl::creator_all();
    /// acl.extend(Acl::read_unsafe());
    /// let options = LockOptions::new().with_acl(acl);
    /// # let _ = options;
    /// ```
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = acl;
        self
    }

    /// The ACL of the container nodes created for missing parents (default open, as
    /// Curator without an `ACLProvider`).
    ///
    /// ```
    /// use zkwire::{Acl, Id, Perms};
    /// use zkwire_recipes::LockOptions;
    ///
    /// // Anyone may contend (list, create and delete children); only the admin may do the rest.
    /// let parents = vec![
    ///     Acl::new(Perms::READ | Perms::CREATE | Perms::DELETE, Id::anyone()),
    ///     Acl::digest(Perms::ALL, "admin", "admin-password"),
    /// ];
    /// let options = LockOptions::new().with_parent_acl(parents);
    /// # let _ = options;
    /// ```
    pub fn with_parent_acl(mut self, acl: Vec<Acl>) -> Self {
        self.parent_acl = acl;
        self
    }

    /// What to do with children of the lock directory that are not contenders (default
    /// [`ForeignChildPolicy::Reject`]).
    ///
    /// ```
    /// use zkwire_recipes::{ForeignChildPolicy, LockOptions};
    /// // A directory other tools write into too: count their nodes as Curator does.
    /// let policy = ForeignChildPolicy::CountLikeCurator;
    /// let options = LockOptions::new().with_foreign_children(policy);
    /// # let _ = options;
    /// ```
    pub fn with_foreign_children(mut self, policy: ForeignChildPolicy) -> Self {
        self.foreign_children = policy;
        self
    }

    /// Also gives the hold up once the client has been disconnected for `grace` (e.g.
    /// `Duration::ZERO`: at the first disconnection, Curator's advice for SUSPENDED),
    /// counted from the disconnection itself ([`zkwire::Client::disconnected_since`]) even
    /// when the hold is first asked about later. This only ever shortens a hold: the lease
    /// rule ([`lease_margin`](crate::lease_margin)) applies whatever the connection state.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire_recipes::LockOptions;
    /// // Curator's advice: treat a suspended connection as a lost lock.
    /// let options = LockOptions::new().with_disconnect_grace(Duration::ZERO);
    /// # let _ = options;
    /// ```
    pub fn with_disconnect_grace(mut self, grace: Duration) -> Self {
        self.disconnect_grace = Some(grace);
        self
    }

    /// A larger margin before the lease deadline than [`lease_margin`](crate::lease_margin)
    /// (a smaller one is ignored): holds end `margin` before the server may expire the
    /// session.
    ///
    /// Use it when the application needs longer to stop acting. A server cut off from the
    /// leader needs no extra margin: the lease counts only what the leader vouched for (see
    /// [`ClientBuilder::with_server_tick`](zkwire::ClientBuilder::with_server_tick)). A
    /// larger margin leaves less room for the lease's normal lag, and a hold that no longer
    /// fits is refused ([`LockError::LeaseTooShort`](crate::LockError::LeaseTooShort)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire_recipes::LockOptions;
    /// // The holder needs up to 3 s to stop its writers: end holds 3 s before the lease does.
    /// let options = LockOptions::new().with_lease_margin(Duration::from_secs(3));
    /// # let _ = options;
    /// ```
    pub fn with_lease_margin(mut self, margin: Duration) -> Self {
        self.lease_margin = Some(margin);
        self
    }

    /// Whether a [`Mutex`](crate::Mutex)'s contenders of one session queue in process first
    /// (default `true`; see the type's docs). With `false`, every waiting task creates its own
    /// node and contends in ZooKeeper, as before the local queue existed: more nodes, watches
    /// and notifications for the same grants. Reentrancy is the same either way.
    ///
    /// ```
    /// use zkwire_recipes::LockOptions;
    /// let options = LockOptions::new().with_local_queue(false);
    /// # let _ = options;
    /// ```
    pub fn with_local_queue(mut self, enabled: bool) -> Self {
        self.local_queue = enabled;
        self
    }

    /// Lets a released [`Mutex`](crate::Mutex) hold pass its node straight to the next task
    /// of the local queue, up to `max` times in a row (default 0: never). Each hand-off saves
    /// the delete, create and list of a new node, but trades fairness for it: while the node
    /// is passed on, contenders of other processes wait, and the tasks that share it share
    /// its fencing token (they are one contender to ZooKeeper). A hand-off happens on
    /// [`release`](crate::MutexGuard::release) with a local waiter present and the hold still
    /// trusted; a dropped guard always gives the node back. The tasks also share the hold's
    /// loss signal: a [`lost`](crate::MutexGuard::lost) future taken before a hand-off
    /// resolves when the node's last holder loses or releases it, not at the hand-off.
    ///
    /// ```
    /// use zkwire_recipes::LockOptions;
    /// // Up to 3 tasks of this process in a row on one node, then back to the end of the queue.
    /// let options = LockOptions::new().with_local_handoff(3);
    /// # let _ = options;
    /// ```
    pub fn with_local_handoff(mut self, max: u32) -> Self {
        self.local_handoffs = max;
        self
    }
}
