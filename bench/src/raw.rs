//! The ceiling: pre-encoded frames written on a plain tokio `TcpStream`, replies split with
//! zkwire's `FrameDecoder`. No session logic beyond the handshake: nothing is matched,
//! nothing is timed out, xids are whatever the frame was encoded with (the server echoes them).

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkwire::jute::{Decode, Encode, FrameDecoder, Reader};
use zkwire::proto::frames::{frame, request_frame};
use zkwire::proto::{
    ConnectRequest, ConnectResponse, ErrorCode, OpCode, ReplyHeader, NEW_SESSION_PASSWD,
};

use crate::BenchError;

/// The session timeout the raw and relay sessions ask for: the zkwire client's default, so
/// that every client's session is alike.
const SESSION_TIMEOUT_MS: i32 = 30_000;

/// One raw session.
pub(crate) struct RawConn {
    stream: TcpStream,
    decoder: FrameDecoder,
    /// The session id the server gave.
    pub(crate) session_id: i64,
}

/// A reply: its header and the undecoded record after it.
pub(crate) struct RawReply {
    pub(crate) header: ReplyHeader,
    pub(crate) body: Bytes,
}

impl RawReply {
    /// Fails unless the server answered OK.
    pub(crate) fn ok(self) -> Result<Self, BenchError> {
        match self.header.err {
            ErrorCode::Ok => Ok(self),
            err => Err(BenchError::msg(format!("raw request failed: {err:?}"))),
        }
    }

    /// Decodes the record.
    pub(crate) fn decode<T: Decode>(&self) -> Result<T, BenchError> {
        T::decode_exact(&self.body).map_err(|e| BenchError::msg(format!("raw decode: {e}")))
    }
}

impl RawConn {
    /// Connects and completes the handshake (a new session, `timeout_ms` requested).
    pub(crate) async fn connect(addr: &str) -> Result<Self, BenchError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut conn = Self {
            stream,
            decoder: FrameDecoder::default(),
            session_id: 0,
        };
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: SESSION_TIMEOUT_MS,
            session_id: 0,
            passwd: Bytes::from_static(&NEW_SESSION_PASSWD),
            read_only: false,
        };
        conn.stream.write_all(&frame(|b| request.encode(b))).await?;
        let payload = conn.next_payload().await?;
        let response = ConnectResponse::decode_exact(&payload)
            .map_err(|e| BenchError::msg(format!("raw handshake: {e}")))?;
        if response.is_expired() {
            return Err(BenchError::msg("raw handshake refused"));
        }
        conn.session_id = response.session_id;
        Ok(conn)
    }

    /// Writes bytes as they are.
    pub(crate) async fn send(&mut self, bytes: &[u8]) -> Result<(), BenchError> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    async fn next_payload(&mut self) -> Result<Bytes, BenchError> {
        loop {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => return Ok(frame),
                Ok(None) => {}
                Err(e) => return Err(BenchError::msg(format!("raw frame: {e}"))),
            }
            let buf = self.decoder.buffer_mut();
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(64 * 1024);
            }
            if self.stream.read_buf(buf).await? == 0 {
                return Err(BenchError::msg("raw connection closed by the server"));
            }
        }
    }

    /// The next frame from the server (replies and notifications alike).
    pub(crate) async fn recv(&mut self) -> Result<RawReply, BenchError> {
        let payload = self.next_payload().await?;
        split_reply(payload)
    }

    /// Sends closeSession and waits for its reply (or the server closing the socket).
    pub(crate) async fn close(mut self) {
        let close = request_frame(1, OpCode::CloseSession, &());
        if self.send(&close).await.is_ok() {
            // Replies still in flight come first; the server closes the socket after the
            // closeSession reply.
            let drain = async { while self.recv().await.is_ok() {} };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), drain).await;
        }
    }

    /// The next frame if one is already buffered, without reading the socket.
    pub(crate) fn try_recv(&mut self) -> Result<Option<RawReply>, BenchError> {
        match self.decoder.next_frame() {
            Ok(Some(payload)) => split_reply(payload).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(BenchError::msg(format!("raw frame: {e}"))),
        }
    }
}

fn split_reply(payload: Bytes) -> Result<RawReply, BenchError> {
    let mut r = Reader::new(&payload);
    let header = r
        .read::<ReplyHeader>()
        .map_err(|e| BenchError::msg(format!("raw header: {e}")))?;
    let body = payload.slice(r.position()..);
    Ok(RawReply { header, body })
}
