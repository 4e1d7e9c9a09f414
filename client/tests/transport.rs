//! The driver runs over any byte stream: here an in-memory duplex pipe to a scripted fake
//! server, with no socket at all.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::io;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use zkwire::connect_string::HostPort;
use zkwire::driver::Connect;
use zkwire::jute::{encode_frame, Decode, Encode, FrameDecoder, Reader};
use zkwire::proto::{
    ConnectRequest, ConnectResponse, ErrorCode, GetDataRequest, GetDataResponse, OpCode,
    ReplyHeader, RequestHeader, Stat,
};
use zkwire::Client;

/// Hands out the client end of a fresh pipe whose server end is played by `serve`.
#[derive(Clone, Default)]
struct Pipes {
    hosts_dialled: Arc<Mutex<Vec<String>>>,
}

impl Connect for Pipes {
    type Stream = DuplexStream;

    async fn connect(&self, host: &HostPort) -> io::Result<DuplexStream> {
        self.hosts_dialled.lock().unwrap().push(host.to_string());
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(serve(server));
        Ok(client)
    }
}

async fn read_frame(io: &mut DuplexStream, frames: &mut FrameDecoder) -> Option<Bytes> {
    loop {
        if let Some(frame) = frames.next_frame().unwrap() {
            return Some(frame);
        }
        if io.read_buf(frames.buffer_mut()).await.ok()? == 0 {
            return None;
        }
    }
}

/// A fake server: accepts the session, answers getData with the path as data, and closes on
/// closeSession.
async fn serve(mut io: DuplexStream) {
    let mut frames = FrameDecoder::default();
    let connect = read_frame(&mut io, &mut frames).await.unwrap();
    let request = ConnectRequest::decode_exact(&connect).unwrap();
    let response = ConnectResponse {
        protocol_version: 0,
        timeout: request.timeout,
        session_id: 0x42,
        passwd: Bytes::from_static(&[9; 16]),
        read_only: Some(false),
    };
    let mut out = BytesMut::new();
    encode_frame(&mut out, |b| response.encode(b));
    io.write_all(&out).await.unwrap();
    while let Some(frame) = read_frame(&mut io, &mut frames).await {
        let mut r = Reader::new(&frame);
        let header = r.read::<RequestHeader>().unwrap();
        let mut out = BytesMut::new();
        let reply = ReplyHeader {
            xid: header.xid,
            zxid: 7,
            err: ErrorCode::Ok,
        };
        match header.op {
            OpCode::GetData => {
                let request = GetDataRequest::decode_exact(&frame.slice(8..)).unwrap();
                let body = GetDataResponse {
                    data: Some(request.path.into_bytes().into()),
                    stat: Stat::default(),
                };
                encode_frame(&mut out, |b| {
                    reply.encode(b);
                    body.encode(b);
                });
            }
            OpCode::CloseSession => {
                encode_frame(&mut out, |b| reply.encode(b));
                io.write_all(&out).await.unwrap();
                return;
            }
            _ => {
                encode_frame(&mut out, |b| reply.encode(b));
            }
        }
        io.write_all(&out).await.unwrap();
    }
}

#[tokio::test]
async fn client_runs_over_an_in_memory_stream() {
    let pipes = Pipes::default();
    let client = Client::builder()
        .connect_with("fake-host:1/app", pipes.clone())
        .await
        .unwrap();
    assert_eq!(client.session_id(), 0x42);
    let (data, _) = client.get_data("/x").await.unwrap();
    assert_eq!(&data[..], b"/app/x", "the chroot is added on the way out");
    client.close().await.unwrap();
    assert_eq!(*pipes.hosts_dialled.lock().unwrap(), ["fake-host:1"]);
}
