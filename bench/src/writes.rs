//! `write-latency`: create, setData and delete, one at a time, 100-byte payloads.
//!
//! Two windows per client: setData in a loop on one node (its CPU and allocations are its
//! own), then create and delete alternating on another node (CPU and allocations averaged
//! over both).

use std::future::Future;

use bytes::Bytes;
use zkwire::proto::frames::request_frame;
use zkwire::proto::{
    Acl, Create2Response, CreateMode, CreateRequest, DeleteRequest, ErrorCode, OpCode,
    SetDataRequest, SetDataResponse,
};

use crate::measure::Measured;
use crate::raw::RawConn;
use crate::relay::{Relay, RelayClient};
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
        Who::Relay => {
            let relay = Relay::connect(&ctx.addr).await?;
            let measured = run_client(ctx, &relay.client, set_path, node_path).await;
            relay.close().await;
            measured
        }
    }
}

async fn run_zkwire(
    ctx: &Ctx,
    set_path: String,
    node_path: String,
) -> Result<[Measured; 3], BenchError> {
    let client = ZkwireWrites {
        client: ctx.zkwire().await?,
        options: zkwire::CreateOptions::persistent(),
    };
    let measured = run_client(ctx, &client, set_path, node_path).await?;
    client.client.close().await?;
    Ok(measured)
}

async fn run_kezhuw(
    ctx: &Ctx,
    set_path: String,
    node_path: String,
) -> Result<[Measured; 3], BenchError> {
    let client = ctx.kezhuw().await?;
    run_client(ctx, &client, set_path, node_path).await
}

/// The two windows on a client library: setData on `set_path` (created first if absent), then
/// create and delete alternating on `node_path`.
async fn run_client<C: Writes>(
    ctx: &Ctx,
    client: &C,
    set_path: String,
    node_path: String,
) -> Result<[Measured; 3], BenchError> {
    client.create_node(&set_path, true).await?;
    let set = SetLoop {
        client: client.clone(),
        path: set_path,
    };
    let [set] = run_workers(ctx, vec![set]).await?;
    let worker = CreateDelete {
        client: client.clone(),
        path: node_path,
        created: false,
    };
    let [create, delete] = run_workers(ctx, vec![worker]).await?;
    Ok([set, create, delete])
}

async fn run_raw(
    ctx: &Ctx,
    set_path: String,
    node_path: String,
) -> Result<[Measured; 3], BenchError> {
    let mut conn = RawConn::connect(&ctx.addr).await?;
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
    let conn = RawConn::connect(&ctx.addr).await?;
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
            acl: Acl::open_unsafe().into(),
            mode: CreateMode::Persistent,
        },
    )
}

/// The calls the workload makes, on either client library: persistent nodes with an open ACL
/// and the payload, any version.
trait Writes: Clone + Send + Sync + 'static {
    /// Creates `path`; with `exists_ok`, one that exists already is no error.
    fn create_node(
        &self,
        path: &str,
        exists_ok: bool,
    ) -> impl Future<Output = Result<(), BenchError>> + Send;
    fn set_node(&self, path: &str) -> impl Future<Output = Result<(), BenchError>> + Send;
    fn delete_node(&self, path: &str) -> impl Future<Output = Result<(), BenchError>> + Send;
}

/// A zkwire client with the create options built once (as an application would keep them).
#[derive(Clone)]
struct ZkwireWrites {
    client: zkwire::Client,
    options: zkwire::CreateOptions,
}

impl Writes for ZkwireWrites {
    async fn create_node(&self, path: &str, exists_ok: bool) -> Result<(), BenchError> {
        match self.client.create(path, &DATA, &self.options).await {
            Ok(_) => Ok(()),
            Err(zkwire::Error::NodeExists) if exists_ok => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn set_node(&self, path: &str) -> Result<(), BenchError> {
        self.client.set_data(path, &DATA, None).await?;
        Ok(())
    }

    async fn delete_node(&self, path: &str) -> Result<(), BenchError> {
        Ok(self.client.delete(path, None).await?)
    }
}

impl Writes for zookeeper_client::Client {
    async fn create_node(&self, path: &str, exists_ok: bool) -> Result<(), BenchError> {
        let options = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        match self.create(path, &DATA, &options).await {
            Ok(_) => Ok(()),
            Err(zookeeper_client::Error::NodeExists) if exists_ok => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn set_node(&self, path: &str) -> Result<(), BenchError> {
        self.set_data(path, &DATA, None).await?;
        Ok(())
    }

    async fn delete_node(&self, path: &str) -> Result<(), BenchError> {
        Ok(self.delete(path, None).await?)
    }
}

impl Writes for RelayClient {
    async fn create_node(&self, path: &str, exists_ok: bool) -> Result<(), BenchError> {
        let reply = self.call(create_frame(path)).await?;
        match reply.header.err {
            ErrorCode::NodeExists if exists_ok => Ok(()),
            _ => reply.ok()?.decode::<Create2Response>().map(drop),
        }
    }

    async fn set_node(&self, path: &str) -> Result<(), BenchError> {
        let request = SetDataRequest {
            path: path.to_owned(),
            data: Some(Bytes::from_static(&DATA)),
            version: -1,
        };
        let reply = self
            .call(request_frame(1, OpCode::SetData, &request))
            .await?;
        reply.ok()?.decode::<SetDataResponse>().map(drop)
    }

    async fn delete_node(&self, path: &str) -> Result<(), BenchError> {
        let request = DeleteRequest {
            path: path.to_owned(),
            version: -1,
        };
        self.call(request_frame(1, OpCode::Delete, &request))
            .await?
            .ok()
            .map(drop)
    }
}

/// setData in a loop on one node.
struct SetLoop<C> {
    client: C,
    path: String,
}

impl<C: Writes> Worker for SetLoop<C> {
    async fn step(&mut self) -> Result<usize, BenchError> {
        self.client.set_node(&self.path).await?;
        Ok(0)
    }
}

/// Create (kind 0) and delete (kind 1) alternating on one node.
struct CreateDelete<C> {
    client: C,
    path: String,
    created: bool,
}

impl<C: Writes> Worker for CreateDelete<C> {
    async fn step(&mut self) -> Result<usize, BenchError> {
        if self.created {
            self.client.delete_node(&self.path).await?;
            self.created = false;
            Ok(1)
        } else {
            self.client.create_node(&self.path, false).await?;
            self.created = true;
            Ok(0)
        }
    }

    async fn finish(self) -> Result<(), BenchError> {
        if self.created {
            self.client.delete_node(&self.path).await?;
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
