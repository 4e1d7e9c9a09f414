//! Helpers shared by the integration tests: a client isolated under its own chroot.
#![allow(clippy::expect_used)] // a test helper: failing loudly with the reason is its contract

use zkwire::{Client, CreateMode, CreateOptions, Error};

use crate::server::shared_server;

/// Deletes `path` and everything under it; a missing node is fine.
///
/// # Errors
/// Any error other than `NoNode`.
pub async fn delete_recursive(client: &Client, path: &str) -> Result<(), Error> {
    let children = match client.get_children(path).await {
        Ok(children) => children,
        Err(Error::NoNode) => return Ok(()),
        Err(e) => return Err(e),
    };
    for child in children {
        let child_path = if path == "/" { format!("/{child}") } else { format!("{path}/{child}") };
        Box::pin(delete_recursive(client, &child_path)).await?;
    }
    match client.delete(path, None).await {
        Ok(()) | Err(Error::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A fresh, empty chroot `/<name>` on the shared server, and its connect string.
///
/// # Panics
/// When the server cannot be started or reached: the test then fails with the reason.
pub async fn fresh_chroot(name: &str) -> String {
    let server = shared_server();
    let root = Client::connect(&server.connect_string()).await.expect("connect to the shared server");
    let chroot = format!("/{name}");
    delete_recursive(&root, &chroot).await.expect("clean the chroot");
    root.create(&chroot, b"", &CreateOptions::new(CreateMode::Persistent)).await.expect("create the chroot");
    root.close().await.expect("close");
    format!("{}{chroot}", server.connect_string())
}

/// A client connected under a fresh chroot `/<name>` on the shared server.
///
/// # Panics
/// As [`fresh_chroot`].
pub async fn client_in_chroot(name: &str) -> Client {
    let cs = fresh_chroot(name).await;
    Client::connect(&cs).await.expect("connect under the chroot")
}
