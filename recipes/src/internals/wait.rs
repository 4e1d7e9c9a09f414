//! The wait for the grant: list the directory, decide by the contest's predicate, watch the
//! predecessor, and again.

use zkwire::{path, Backoff, Children, Error, EventType};

use super::{Attempt, Contest};
use crate::cleanup::{self, Job};
use crate::error::LockError;
use crate::poll::ready_now;
use crate::sequence::{sort_children, Contender, Decision, ForeignChildPolicy};

use super::pause_if_retryable;

/// What ended a wait on the predecessor.
enum Woken {
    /// The lock is ours (the first contender went, ours still there).
    Granted,
    /// List the directory again.
    LookAgain,
}

impl Attempt {
    /// Lists the directory until the predicate grants our node, watching the node it names;
    /// `listing` is a first listing already in hand.
    ///
    /// One notification per hand-off: when the node we watch was the first contender of our
    /// listing and the contest allows it ([`Contest::first_goes_grants`]), its deletion
    /// grants us the lock without listing again, provided our own node is still there (see
    /// [`await_predecessor`](Self::await_predecessor)). Every node created after that
    /// listing got a larger sequence number from the directory (sequence numbers only grow,
    /// and every contender here is sequential), so once the first one is gone nothing sorts
    /// before us. Any other wake-up (a data change, a session event, a predecessor that was
    /// not first, anything happening to our node) lists again.
    pub(super) async fn wait(
        &mut self,
        contest: &Contest,
        blocking: bool,
        mut listing: Option<Children>,
    ) -> Result<bool, LockError> {
        let mut backoff = Backoff::new();
        loop {
            let Some(node) = self.node.as_ref() else {
                self.create(contest).await?;
                continue;
            };
            if !node.stat.is_owned_by(self.dir.client.session_id()) {
                // A node of a session the client has renewed (the server may not have
                // expired it yet, docs/renewal.md): never ours to hold. Start over on the
                // current session, as for a node deleted under us; the old node is deleted
                // in the background rather than keep everyone waiting until the server
                // expires its session.
                tracing::debug!(node = node.path, "our lock node is an old session's");
                let stale = node.path.clone();
                self.renew_guid();
                cleanup::enqueue(&self.dir.client, Job::Delete(stale));
                continue;
            }
            let ours = node.name();
            let children = match listing.take() {
                Some(children) => children,
                None => match self.dir.client.get_children_compact(&self.dir.path).await {
                    Ok(children) => children,
                    Err(Error::NoNode) => Children::default(),
                    Err(e) => {
                        pause_if_retryable(&mut backoff, e).await?;
                        continue;
                    }
                },
            };
            self.delete_duplicates(&children, ours).await;
            let sorted = sort_children(
                &children,
                contest.sort_markers,
                self.dir.options.foreign_children,
            )?;
            match (contest.predicate)(&sorted, ours) {
                Decision::Held => return Ok(true),
                Decision::Missing => {
                    // Deleted under us (by someone else; an expired session fails the list
                    // instead). Start over with a fresh guid and node, as Curator does.
                    tracing::debug!(node = ours, "our lock node vanished; creating a new one");
                    self.renew_guid();
                }
                Decision::Wait(_) if !blocking => return Ok(false),
                Decision::Wait(predecessor) => {
                    let first = self.first_goes_grants(contest, &sorted, &predecessor);
                    match self.await_predecessor(&predecessor, ours, first).await {
                        Ok(Woken::Granted) => return Ok(true),
                        Ok(Woken::LookAgain) => {}
                        Err(e) => pause_if_retryable(&mut backoff, e).await?,
                    }
                }
            }
        }
    }

    /// Watches `predecessor` until something happens to it; with `first`, also watches our
    /// own node `ours` (both requests in one write), and reports a grant when the
    /// predecessor is deleted while our node still exists.
    ///
    /// Why our node is watched too: someone may delete it while we wait (an operator, a
    /// revoker); the predecessor's deletion must not then grant a lock we have no node for.
    /// On one connection a session's watch events arrive in the order of the changes that
    /// fired them, so if our node went before the predecessor did, its event is already in
    /// when the predecessor's is; one deleted later is a loss of a lock that was ours. After
    /// a reconnect that no longer holds: the server answers the restored watches with the
    /// events of what changed meanwhile in the order of the paths listed, not of the
    /// changes, and the two may be handled apart. So a predecessor's deletion heard on
    /// another connection than the one the watches were set on only means "list again".
    async fn await_predecessor(
        &self,
        predecessor: &str,
        ours: &str,
        first: bool,
    ) -> Result<Woken, Error> {
        let watched = path::join(&self.dir.path, predecessor);
        if !first {
            return match self.dir.client.get_data_and_watch(&watched).await {
                // Any event (deleted, changed, session over) means: look again.
                Ok((_, _, watcher)) => {
                    drop(watcher.await);
                    Ok(Woken::LookAgain)
                }
                Err(Error::NoNode) => Ok(Woken::LookAgain),
                Err(e) => Err(e),
            };
        }
        let own_path = path::join(&self.dir.path, ours);
        // Transports opened so far: read before the watches are set, so that any event that
        // comes on a later connection is seen as such.
        let connection = self.dir.client.stats().connections;
        let (theirs, own) = tokio::join!(
            self.dir.client.get_data_and_watch(&watched),
            self.dir.client.get_data_and_watch(&own_path)
        );
        let mut own = match own {
            Ok((_, _, watcher)) => watcher,
            // Ours is gone (the listing says so next), or the session is in trouble.
            Err(Error::NoNode) => return Ok(Woken::LookAgain),
            Err(e) => return Err(e),
        };
        let theirs = match theirs {
            Ok((_, _, watcher)) => watcher,
            // Deleted between our listing and the watch, ours still there: granted.
            Err(Error::NoNode) => return Ok(Woken::Granted),
            Err(e) => return Err(e),
        };
        tokio::select! {
            // Our node first: an event for it that came in with the predecessor's wins.
            biased;
            _ = &mut own => Ok(Woken::LookAgain),
            event = theirs => {
                let gone = event.event_type == EventType::NodeDeleted;
                let ours_untouched = ready_now(&mut own).is_none();
                let live = self.dir.client.stats().connections == connection;
                Ok(if gone && ours_untouched && live { Woken::Granted } else { Woken::LookAgain })
            }
        }
    }

    /// Whether the deletion of `predecessor` grants us the lock without a new listing: the
    /// contest allows it, `predecessor` is the first of `sorted`, and no child can sort
    /// before a sequential node created later (no foreign children counted by name).
    fn first_goes_grants(
        &self,
        contest: &Contest,
        sorted: &[Contender],
        predecessor: &str,
    ) -> bool {
        contest.first_goes_grants
            && contest.tie.is_none()
            && self.dir.options.foreign_children != ForeignChildPolicy::CountLikeCurator
            && sorted.first().is_some_and(|c| c.name == predecessor)
            && sorted.iter().all(|c| c.seq.is_some())
    }
}
