//! `write-latency`: create, setData and delete, one at a time, 100-byte payloads.
//!
//! Two windows per client: setData in a loop on one node (its CPU and allocations are its
//! own), then create and delete alternating on another node (CPU and allocations averaged
//! over both).

use bytes::Bytes;
use zkwire::proto::frames::request_frame;
use zkwire::proto::{Acl, CreateMode, CreateRequest, DeleteRequest, OpCode, SetDataRequest};

use crate::measure::Measured;
use crate::raw::RawConn;
use crate::runner::{run_workers, Worker};
use crate::{BenchError, Ctx, Who, PAYLOAD};

const DATA: [u8; PAYLOAD] = [b'w'; PAYLOAD];

/// setData, create, delete.
pub(crate) async fn run(ctx: &Ctx, who: Who) -> Result<[Measured; 3], BenchError> {
    let set_path = ctx.path(&format!("set-{}", who.name()));
    let node_path = ctx.path(&format!("node-{}", who.name()));
    match who {
        Who::Zkwire => run_zkwire(ctx, set_path, node_path).await,
        Who::Kezhuw => run_kezhuw(ctx, set_path, node_path).await,
        Who::Raw => run_raw(ctx, set_path, node_path).await,
    }
}

async fn run_zkwire(
    ctx: &Ctx,
    set_path: String,
    node_path: String,
) -> Result<[Measured; 3], BenchError> {
    let client = ctx.zkwire().await?;
    let persistent = zkwire::CreateOptions::persistent();
    ensure_zkwire(&client, &set_path, &persistent).await?;
    let [set] = run_workers(
        ctx,
        vec![ZkwireSet {
            client: client.clone(),
            path: set_path,
        }],
    )
    .await?;
    let worker = ZkwireCreateDelete {
        client: client.clone(),
        path: node_path,
        options: persistent,
        created: false,
    };
    let [create, delete] = run_workers(ctx, vec![worker]).await?;
    client.close().await?;
    Ok([set, create, delete])
}

async fn run_kezhuw(
    ctx: &Ctx,
    set_path: String,
    node_path: String,
) -> Result<[Measured; 3], BenchError> {
    let client = ctx.kezhuw().await?;
    let options =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    match client.create(&set_path, &DATA, &options).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(e) => return Err(e.into()),
    }
    let [set] = run_workers(
        ctx,
        vec![KezhuwSet {
            client: client.clone(),
            path: set_path,
        }],
    )
    .await?;
    let worker = KezhuwCreateDelete {
        client: client.clone(),
        path: node_path,
        created: false,
    };
    let [create, delete] = run_workers(ctx, vec![worker]).await?;
    drop(client);
    Ok([set, create, delete])
}

async fn run_raw(
    ctx: &Ctx,
    set_path: String,
    node_path: String,
) -> Result<[Measured; 3], BenchError> {
    let mut conn = RawConn::connect(&ctx.addr, 30_000).await?;
    conn.send(&create_frame(&set_path)).await?;
    let _ = conn.recv().await?; // OK or NodeExists
    let set = request_frame(
        1,
        OpCode::SetData,
        &SetDataRequest {
            path: set_path,
            data: Some(Bytes::from_static(&DATA)),
            version: -1,
        },
    );
    let [set] = run_workers(
        ctx,
        vec![RawSteps {
            conn,
            frames: vec![set],
            next: 0,
        }],
    )
    .await?;
    let conn = RawConn::connect(&ctx.addr, 30_000).await?;
    let create = create_frame(&node_path);
    let delete = request_frame(
        1,
        OpCode::Delete,
        &DeleteRequest {
            path: node_path,
            version: -1,
        },
    );
    let [create, delete] = run_workers(
        ctx,
        vec![RawSteps {
            conn,
            frames: vec![create, delete],
            next: 0,
        }],
    )
    .await?;
    Ok([set, create, delete])
}

/// The frame that creates `path` (persistent, open ACL, the payload).
fn create_frame(path: &str) -> Bytes {
    request_frame(
        1,
        OpCode::Create2,
        &CreateRequest {
            path: path.to_owned(),
            data: Some(Bytes::from_static(&DATA)),
            acl: Acl::open_unsafe(),
            mode: CreateMode::Persistent,
        },
    )
}

async fn ensure_zkwire(
    client: &zkwire::Client,
    path: &str,
    options: &zkwire::CreateOptions,
) -> Result<(), BenchError> {
    match client.create(path, &DATA, options).await {
        Ok(_) | Err(zkwire::Error::NodeExists) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

struct ZkwireSet {
    client: zkwire::Client,
    path: String,
}

impl Worker for ZkwireSet {
    async fn step(&mut self) -> Result<usize, BenchError> {
        self.client.set_data(&self.path, &DATA, None).await?;
        Ok(0)
    }
}

struct ZkwireCreateDelete {
    client: zkwire::Client,
    path: String,
    options: zkwire::CreateOptions,
    created: bool,
}

impl Worker for ZkwireCreateDelete {
    async fn step(&mut self) -> Result<usize, BenchError> {
        if self.created {
            self.client.delete(&self.path, None).await?;
            self.created = false;
            Ok(1)
        } else {
            self.client.create(&self.path, &DATA, &self.options).await?;
            self.created = true;
            Ok(0)
        }
    }

    async fn finish(self) -> Result<(), BenchError> {
        if self.created {
            self.client.delete(&self.path, None).await?;
        }
        Ok(())
    }
}

struct KezhuwSet {
    client: zookeeper_client::Client,
    path: String,
}

impl Worker for KezhuwSet {
    async fn step(&mut self) -> Result<usize, BenchError> {
        self.client.set_data(&self.path, &DATA, None).await?;
        Ok(0)
    }
}

struct KezhuwCreateDelete {
    client: zookeeper_client::Client,
    path: String,
    created: bool,
}

impl Worker for KezhuwCreateDelete {
    async fn step(&mut self) -> Result<usize, BenchError> {
        if self.created {
            self.client.delete(&self.path, None).await?;
            self.created = false;
            Ok(1)
        } else {
            let options = zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all());
            self.client.create(&self.path, &DATA, &options).await?;
            self.created = true;
            Ok(0)
        }
    }

    async fn finish(self) -> Result<(), BenchError> {
        if self.created {
            self.client.delete(&self.path, None).await?;
        }
        Ok(())
    }
}

/// Pre-encoded frames sent in turn, each awaited.
struct RawSteps {
    conn: RawConn,
    frames: Vec<Bytes>,
    next: usize,
}

impl Worker for RawSteps {
    async fn step(&mut self) -> Result<usize, BenchError> {
        let i = self.next;
        self.next = (i + 1) % self.frames.len();
        self.conn.send(&self.frames[i]).await?;
        self.conn.recv().await?.ok()?;
        Ok(i)
    }

    async fn finish(mut self) -> Result<(), BenchError> {
        // Frames after the current one complete the cycle (the delete after a create).
        while self.next != 0 {
            self.step().await?;
        }
        self.conn.close().await;
        Ok(())
    }
}
