//! Whole-path operations: create with the missing ancestors, delete a subtree.

use bytes::Bytes;

use super::{Client, CreateOptions};
use crate::error::Error;
use crate::path::{self, InvalidPath};
use crate::proto::{CreateMode, Stat};

/// How many times `create_all` creates the ancestors again when a concurrent delete removes
/// one before the node itself is created.
const CREATE_ATTEMPTS: usize = 5;

/// How many times `delete_all` lists a node again when a concurrent create adds a child
/// between its listing and its delete.
const DELETE_ATTEMPTS: usize = 10;

impl Client {
    /// Creates a node as [`create`](Self::create) does, first creating any missing ancestor
    /// as an empty persistent node (or a container, with
    /// [`CreateOptions::with_container_parents`]) with the same ACL. Ancestors that exist,
    /// or that another client creates meanwhile, are left as they are.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{CreateMode, CreateOptions};
    /// let opts = CreateOptions::persistent();
    /// client.create_all("/app/config/db", b"postgres://db", &opts).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`create`](Self::create); [`Error::NoNode`] only if concurrent deletes keep
    /// removing an ancestor.
    pub async fn create_all(
        &self,
        path: &str,
        data: impl AsRef<[u8]>,
        options: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        let data = Bytes::copy_from_slice(data.as_ref());
        let mut parent_mode = CreateMode::Persistent;
        if options.container_parents {
            parent_mode = CreateMode::Container;
        }
        let parents = CreateOptions::new(parent_mode).with_acl(options.acl.clone());
        for _ in 0..CREATE_ATTEMPTS {
            match self.create_bytes(path, data.clone(), options).await {
                Err(Error::NoNode) => self.create_ancestors(path, &parents).await?,
                done => return done,
            }
        }
        Err(Error::NoNode)
    }

    /// Deletes `path` and everything under it, children first, and returns how many nodes
    /// this call deleted. Nodes deleted meanwhile by someone else are fine; children created
    /// meanwhile are deleted too. A missing `path` is success (0 nodes).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let gone = client.delete_all("/app/jobs").await?;
    /// println!("{gone} nodes deleted");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for `/` (never deleted, chroot or not); [`Error::NotEmpty`] if
    /// concurrent creates keep adding children; [`Error::NoAuth`] for a node the session may
    /// not delete (what was deleted before it stays deleted).
    pub async fn delete_all(&self, path: &str) -> Result<usize, Error> {
        path::validate_path(path)?;
        if path == "/" {
            return Err(InvalidPath::refused(path, "delete_all never deletes the root").into());
        }
        // Depth first, without recursion: `(path, listed)`; a node is deleted once its
        // children, pushed above it, are gone.
        let mut stack = vec![(path.to_owned(), false)];
        let (mut relists, mut deleted) = (0, 0);
        while let Some((node, listed)) = stack.pop() {
            if !listed {
                let children = match self.get_children(&node).await {
                    Ok(children) => children,
                    Err(Error::NoNode) => continue,
                    Err(e) => return Err(e),
                };
                stack.push((node.clone(), true));
                stack.extend(children.into_iter().map(|c| (path::join(&node, &c), false)));
                continue;
            }
            match self.delete(&node, None).await {
                Ok(()) => deleted += 1,
                Err(Error::NoNode) => {}
                Err(Error::NotEmpty) if relists < DELETE_ATTEMPTS => {
                    relists += 1;
                    stack.push((node, false));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// Creates each missing ancestor of `path`, from the top, tolerating existing ones.
    async fn create_ancestors(&self, path: &str, options: &CreateOptions) -> Result<(), Error> {
        for ancestor in path::ancestors(path) {
            match self.create_bytes(ancestor, Bytes::new(), options).await {
                Ok(_) | Err(Error::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
