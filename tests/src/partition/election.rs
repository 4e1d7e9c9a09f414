//! The first message of a leader-election connection, and the rewriter that points its
//! announced address at a relay (see the [module docs](super)).

use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};

/// The first long of an election connection using protocol version 1 (one address).
const ELECTION_PROTOCOL_V1: i64 = -65536;
/// The first long of an election connection using protocol version 2 (several addresses).
const ELECTION_PROTOCOL_V2: i64 = -65535;
/// The longest address string a ZooKeeper server accepts in the first election message.
const ELECTION_MAX_ADDRESS: usize = 2048;
/// Bytes before the address string: version, server id, length.
const ELECTION_HEADER: usize = 8 + 8 + 4;

/// Rewrites the address in the first election message of a connection.
#[derive(Debug)]
pub(super) struct Rewriter {
    advertised: Bytes,
    pub(super) buf: BytesMut,
}

/// How far the first election message has arrived.
#[derive(Debug, PartialEq, Eq)]
enum Initial {
    /// More bytes are needed to decide.
    Incomplete,
    /// Not a message this relay rewrites (old format, or malformed): pass it on unchanged.
    Other,
    /// A whole message of `len` bytes whose address string starts at [`ELECTION_HEADER`].
    Message { len: usize },
}

/// Parses the start of an election connection (see the [module docs](super)).
fn parse_initial(buf: &[u8]) -> Initial {
    let Some(version) = buf.get(..8) else {
        return Initial::Incomplete;
    };
    let version = i64::from_be_bytes(version.try_into().unwrap_or([0; 8]));
    if version != ELECTION_PROTOCOL_V1 && version != ELECTION_PROTOCOL_V2 {
        return Initial::Other;
    }
    let Some(len) = buf.get(16..ELECTION_HEADER) else {
        return Initial::Incomplete;
    };
    let len = i32::from_be_bytes(len.try_into().unwrap_or([0; 4]));
    match usize::try_from(len) {
        Ok(len) if (1..=ELECTION_MAX_ADDRESS).contains(&len) => {
            if buf.len() >= ELECTION_HEADER + len {
                Initial::Message {
                    len: ELECTION_HEADER + len,
                }
            } else {
                Initial::Incomplete
            }
        }
        _ => Initial::Other,
    }
}

impl Rewriter {
    pub(super) fn new(advertised: SocketAddr) -> Self {
        Self {
            advertised: Bytes::from(advertised.to_string()),
            buf: BytesMut::new(),
        }
    }

    /// Takes more bytes of the forward direction. Returns `None` while the first message is
    /// incomplete, then everything buffered so far (with the message rewritten if it is
    /// one) and whether it was rewritten; the caller then passes the rest through raw.
    pub(super) fn feed(&mut self, data: &[u8]) -> Option<(Bytes, bool)> {
        self.buf.extend_from_slice(data);
        match parse_initial(&self.buf) {
            Initial::Incomplete => None,
            Initial::Other => Some((self.buf.split().freeze(), false)),
            Initial::Message { len } => {
                let rest = self.buf.split_off(len);
                let mut out =
                    BytesMut::with_capacity(ELECTION_HEADER + self.advertised.len() + rest.len());
                out.extend_from_slice(&self.buf[..16]);
                // The advertised address is an "ip:port" string, far below i32::MAX.
                out.put_i32(i32::try_from(self.advertised.len()).unwrap_or(i32::MAX));
                out.extend_from_slice(&self.advertised);
                out.extend_from_slice(&rest);
                self.buf.clear();
                Some((out.freeze(), true))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn message(version: i64, sid: i64, addr: &str) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&version.to_be_bytes());
        m.extend_from_slice(&sid.to_be_bytes());
        m.extend_from_slice(&i32::try_from(addr.len()).unwrap_or(0).to_be_bytes());
        m.extend_from_slice(addr.as_bytes());
        m
    }

    #[test]
    fn rewriter_replaces_the_address_and_keeps_the_rest() {
        let advertised = SocketAddr::from((Ipv4Addr::LOCALHOST, 4242));
        let mut input = message(ELECTION_PROTOCOL_V1, 3, "127.0.0.1:39999");
        input.extend_from_slice(b"tail");
        // Fed one byte at a time: nothing comes out until the message is whole.
        let mut rw = Rewriter::new(advertised);
        let mut out = None;
        for (k, b) in input.iter().enumerate() {
            let got = rw.feed(&[*b]);
            if k + 1 < input.len() - 4 {
                assert!(got.is_none(), "output after {k} bytes");
            } else if got.is_some() {
                out = got;
                break;
            }
        }
        let (bytes, rewritten) = out.unwrap_or_default();
        assert!(rewritten);
        assert_eq!(
            bytes.as_ref(),
            message(ELECTION_PROTOCOL_V1, 3, "127.0.0.1:4242").as_slice()
        );

        let mut rw = Rewriter::new(advertised);
        let (bytes, rewritten) = rw.feed(&input).unwrap_or_default();
        assert!(rewritten);
        let mut expected = message(ELECTION_PROTOCOL_V1, 3, "127.0.0.1:4242");
        expected.extend_from_slice(b"tail");
        assert_eq!(bytes.as_ref(), expected.as_slice());

        // Version 2 with several addresses becomes the one advertised address.
        let v2 = message(ELECTION_PROTOCOL_V2, 1, "127.0.0.1:1|10.0.0.1:2");
        let (bytes, _) = Rewriter::new(advertised).feed(&v2).unwrap_or_default();
        assert_eq!(
            bytes.as_ref(),
            message(ELECTION_PROTOCOL_V2, 1, "127.0.0.1:4242").as_slice()
        );
    }

    #[test]
    fn rewriter_passes_other_streams_through() {
        let advertised = SocketAddr::from((Ipv4Addr::LOCALHOST, 4242));
        // The pre-3.5 format: the server id alone.
        let old = 7_i64.to_be_bytes();
        assert_eq!(
            Rewriter::new(advertised).feed(&old),
            Some((Bytes::copy_from_slice(&old), false))
        );
        // A length ZooKeeper would refuse.
        let mut bad = message(ELECTION_PROTOCOL_V1, 1, "x");
        bad[16..20].copy_from_slice(&5000_i32.to_be_bytes());
        assert_eq!(
            Rewriter::new(advertised).feed(&bad),
            Some((Bytes::from(bad.clone()), false))
        );
    }
}
