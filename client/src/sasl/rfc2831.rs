//! The client side of SASL DIGEST-MD5 (RFC 2831), `qop=auth` only.
//!
//! Three messages: the client's empty first token, the server's challenge answered with the
//! digest response, and the server's `rspauth`, checked so that the server too proves it
//! knows the password.
//!
//! Credentials are hashed as the Java server hashes them (`docs/security.md`, "SASL"; see
//! [`Charset::credential`]): ISO 8859-1 whenever it can hold them, UTF-8 only when the
//! challenge offered `charset=utf-8` and it cannot. The response names `charset=utf-8` only
//! when offered: the Java server refuses a charset it did not offer.

use std::fmt;
use std::sync::Arc;

use md5::{Digest, Md5};
use zeroize::Zeroizing;

/// Why a DIGEST-MD5 exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DigestError {
    /// The challenge could not be parsed.
    #[error("malformed DIGEST-MD5 challenge: {0}")]
    Malformed(&'static str),
    /// A directive that must appear once appeared twice.
    #[error("DIGEST-MD5 challenge repeats `{0}`")]
    Repeated(String),
    /// The challenge lacks a required directive.
    #[error("DIGEST-MD5 challenge has no `{0}`")]
    Missing(&'static str),
    /// The server offers no quality of protection this client supports (`auth`).
    #[error("DIGEST-MD5: the server offers qop {0:?}; only `auth` is supported")]
    UnsupportedQop(String),
    /// The server asks for an algorithm other than `md5-sess`.
    #[error("DIGEST-MD5: unsupported algorithm {0:?}")]
    UnsupportedAlgorithm(String),
    /// The server offers a charset other than `utf-8`, the only one RFC 2831 names.
    #[error("DIGEST-MD5: unsupported charset {0:?}")]
    UnsupportedCharset(String),
    /// The server's `rspauth` does not match: it does not know the password.
    #[error("DIGEST-MD5: the server's proof (rspauth) is wrong")]
    BadServerProof,
    /// A message arrived when none was expected.
    #[error("DIGEST-MD5: unexpected message from the server")]
    Unexpected,
}

/// A password as the caller gave it: one copy, shared by a mechanism and its exchanges, and
/// zeroed when the last of them drops it. No `Debug`: it is never shown.
#[derive(Clone)]
pub(crate) struct Password(Arc<Zeroizing<Vec<u8>>>);

impl Password {
    /// Keeps a copy of `bytes`.
    pub(crate) fn new(bytes: &[u8]) -> Self {
        Self(Arc::new(Zeroizing::new(bytes.to_vec())))
    }

    /// The bytes to hash under `charset`: valid UTF-8 is text, encoded by
    /// [`Charset::credential`]; other bytes are hashed as given (the caller chose their
    /// encoding, ISO 8859-1 say).
    fn hash_input(&self, charset: Charset) -> Zeroizing<Vec<u8>> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => charset.credential(text),
            Err(_) => Zeroizing::new(self.0.to_vec()),
        }
    }
}

/// The exchange's charset: what the challenge's `charset` directive offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charset {
    /// No `charset` directive: ISO 8859-1, RFC 2831's default.
    Latin1,
    /// `charset=utf-8`: the exchange's text is UTF-8, and the response says so.
    Utf8,
}

impl Charset {
    /// The charset a challenge's `charset` directive (`None`: absent) offers.
    fn offered(directive: Option<&[u8]>) -> Result<Self, DigestError> {
        match directive {
            None => Ok(Self::Latin1),
            Some(value) if value.eq_ignore_ascii_case(b"utf-8") => Ok(Self::Utf8),
            Some(value) => Err(DigestError::UnsupportedCharset(lossy(value))),
        }
    }

    /// A challenge's value as text.
    fn decode(self, bytes: &[u8]) -> Result<String, DigestError> {
        match self {
            Self::Latin1 => Ok(bytes.iter().copied().map(char::from).collect()),
            Self::Utf8 => String::from_utf8(bytes.to_vec())
                .map_err(|_| DigestError::Malformed("a value that is not UTF-8")),
        }
    }

    /// Text for the response: UTF-8, or ISO 8859-1 with `?` for a character it cannot hold
    /// (what the Java side's encoder writes, so the server reads back what it hashes).
    fn encode(self, text: &str) -> Vec<u8> {
        match self {
            Self::Latin1 => latin1_lossy(text),
            Self::Utf8 => text.as_bytes().to_vec(),
        }
    }

    /// A credential (user name, realm or password) as the Java server hashes it (the JDK's
    /// DIGEST-MD5, after RFC 2831 §2.1.2.1): ISO 8859-1 when every character is at most
    /// U+00FF, whatever the charset; UTF-8 only when `charset=utf-8` was offered and some
    /// character is beyond U+00FF; otherwise ISO 8859-1 with `?` for each such character.
    /// The whole text goes one way: "päss€" is all UTF-8, `ä` included.
    fn credential(self, text: &str) -> Zeroizing<Vec<u8>> {
        let beyond_latin1 = text.chars().any(|c| u32::from(c) > 0xFF);
        if self == Self::Utf8 && beyond_latin1 {
            Zeroizing::new(text.as_bytes().to_vec())
        } else {
            Zeroizing::new(latin1_lossy(text))
        }
    }
}

/// ISO 8859-1, with one `?` for each character beyond it (a whole code point: Java's
/// encoder, too, replaces a surrogate pair with one `?`). Allocated once, at its final size
/// or more, so that no reallocation leaves a copy of a password behind.
fn latin1_lossy(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    out.extend(
        text.chars()
            .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?')),
    );
    out
}

/// The exchange's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    AwaitingChallenge,
    AwaitingProof,
    Complete,
}

/// One DIGEST-MD5 exchange. `Debug` shows neither the password nor anything derived from it.
pub(crate) struct DigestMd5 {
    username: String,
    password: Password,
    digest_uri: String,
    cnonce: String,
    stage: Stage,
    /// What the server's proof must equal, once the response is sent.
    expected_proof: Option<String>,
}

impl fmt::Debug for DigestMd5 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DigestMd5")
            .field("username", &self.username)
            .field("digest_uri", &self.digest_uri)
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
}

/// What a challenge asks of the response, checked.
struct Challenge<'a> {
    nonce: &'a [u8],
    charset: Charset,
    /// The first realm offered, as text.
    realm: Option<String>,
}

impl<'a> Challenge<'a> {
    /// Reads and checks the directives this client depends on.
    fn read(directives: &'a [(String, Vec<u8>)]) -> Result<Self, DigestError> {
        let once = |key: &'static str| single(directives, key);
        let nonce = once("nonce")?.ok_or(DigestError::Missing("nonce"))?;
        let algorithm = once("algorithm")?.ok_or(DigestError::Missing("algorithm"))?;
        if !algorithm.eq_ignore_ascii_case(b"md5-sess") {
            return Err(DigestError::UnsupportedAlgorithm(lossy(algorithm)));
        }
        let charset = Charset::offered(once("charset")?)?;
        let qop = once("qop")?.unwrap_or(b"auth");
        if !qop.split(|&b| b == b',').any(|q| q.trim_ascii() == b"auth") {
            return Err(DigestError::UnsupportedQop(lossy(qop)));
        }
        // Several realms may be offered; the first is ours.
        let realm = directives
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("realm"))
            .map(|(_, v)| charset.decode(v))
            .transpose()?;
        Ok(Self {
            nonce,
            charset,
            realm,
        })
    }
}

impl DigestMd5 {
    /// An exchange for `username`; the digest URI is `service/host`.
    pub(crate) fn new(
        username: &str,
        password: Password,
        service: &str,
        host: &str,
        cnonce: String,
    ) -> Self {
        Self {
            username: username.to_owned(),
            password,
            digest_uri: format!("{service}/{host}"),
            cnonce,
            stage: Stage::AwaitingChallenge,
            expected_proof: None,
        }
    }

    /// DIGEST-MD5 has no initial response: an empty token asks for the challenge.
    pub(crate) fn initial_response(&mut self) -> Vec<u8> {
        Vec::new()
    }

    /// Takes the server's token: the response to send, or `None` once the server's proof
    /// checks out.
    pub(crate) fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, DigestError> {
        match self.stage {
            Stage::AwaitingChallenge => {
                let response = self.respond(token)?;
                self.stage = Stage::AwaitingProof;
                Ok(Some(response))
            }
            Stage::AwaitingProof => {
                self.check_proof(token)?;
                self.stage = Stage::Complete;
                Ok(None)
            }
            Stage::Complete => Err(DigestError::Unexpected),
        }
    }

    /// Whether the exchange has completed.
    #[cfg(test)]
    pub(crate) fn is_complete(&self) -> bool {
        self.stage == Stage::Complete
    }

    fn respond(&mut self, token: &[u8]) -> Result<Vec<u8>, DigestError> {
        let directives = parse(token)?;
        let Challenge {
            nonce,
            charset,
            realm,
        } = Challenge::read(&directives)?;
        // No realm offered: the server's host name.
        let realm =
            realm.unwrap_or_else(|| self.digest_uri.split('/').nth(1).unwrap_or("").to_owned());
        let ha1 = self.ha1(charset, &realm, nonce);
        let a2 = |method: &str| charset.encode(&format!("{method}:{}", self.digest_uri));
        let response = kd(&ha1, nonce, &self.cnonce, &a2("AUTHENTICATE"));
        self.expected_proof = Some(kd(&ha1, nonce, &self.cnonce, &a2("")));
        Ok(self.message(charset, &realm, nonce, &response))
    }

    /// `HEX(H(A1))` with `A1 = H(user:realm:password):nonce:cnonce`, each credential encoded
    /// by [`Charset::credential`]. `H(user:realm:password)`, as good as the password to whoever
    /// knows the realm, and the result are zeroed when dropped.
    fn ha1(&self, charset: Charset, realm: &str, nonce: &[u8]) -> Zeroizing<String> {
        let mut secret = Md5::new();
        secret.update(charset.credential(&self.username).as_slice());
        secret.update(b":");
        secret.update(charset.credential(realm).as_slice());
        secret.update(b":");
        secret.update(self.password.hash_input(charset).as_slice());
        let mut secret_hash = Zeroizing::new([0u8; 16]);
        secret.finalize_into((&mut *secret_hash).into());
        let parts: [&[u8]; 5] = [
            secret_hash.as_slice(),
            b":",
            nonce,
            b":",
            self.cnonce.as_bytes(),
        ];
        let mut a1 = Md5::new();
        for part in parts {
            a1.update(part);
        }
        Zeroizing::new(hex(&a1.finalize()))
    }

    /// The digest response, its text in `charset`. `charset=utf-8` is named only when the
    /// challenge offered it; the nonce goes back byte for byte.
    fn message(&self, charset: Charset, realm: &str, nonce: &[u8], response: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        if charset == Charset::Utf8 {
            push_directive(&mut out, "charset", b"utf-8", false);
        }
        push_directive(&mut out, "username", &charset.encode(&self.username), true);
        push_directive(&mut out, "realm", &charset.encode(realm), true);
        push_directive(&mut out, "nonce", nonce, true);
        push_directive(&mut out, "nc", NONCE_COUNT.as_bytes(), false);
        push_directive(&mut out, "cnonce", self.cnonce.as_bytes(), true);
        let uri = charset.encode(&self.digest_uri);
        push_directive(&mut out, "digest-uri", &uri, true);
        push_directive(&mut out, "maxbuf", b"65536", false);
        push_directive(&mut out, "response", response.as_bytes(), false);
        push_directive(&mut out, "qop", b"auth", false);
        out
    }

    fn check_proof(&self, token: &[u8]) -> Result<(), DigestError> {
        let directives = parse(token)?;
        let got = single(&directives, "rspauth")?.ok_or(DigestError::Missing("rspauth"))?;
        let want = self
            .expected_proof
            .as_deref()
            .ok_or(DigestError::Unexpected)?;
        if constant_time_eq(got, want.as_bytes()) {
            Ok(())
        } else {
            Err(DigestError::BadServerProof)
        }
    }
}

/// The nonce count: one response per nonce.
const NONCE_COUNT: &str = "00000001";

/// `HEX(KD(ha1, nonce:nc:cnonce:auth:HEX(H(a2))))`, KD(k, s) being `H(k:s)`.
fn kd(ha1: &str, nonce: &[u8], cnonce: &str, a2: &[u8]) -> String {
    let ha2 = hex(&Md5::digest(a2));
    let parts: [&[u8]; 9] = [
        ha1.as_bytes(),
        b":",
        nonce,
        b":",
        NONCE_COUNT.as_bytes(),
        b":",
        cnonce.as_bytes(),
        b":auth:",
        ha2.as_bytes(),
    ];
    let mut h = Md5::new();
    for part in parts {
        h.update(part);
    }
    hex(&h.finalize())
}

/// Lower-case hex, allocated once at its size (no reallocation leaves a copy behind).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Appends `key=value` (comma-separated from what precedes it), `value` as a quoted-string
/// with `"` and `\` escaped when `quoted`. Escaping bytewise is right in UTF-8 too: neither
/// byte occurs inside a multi-byte character.
fn push_directive(out: &mut Vec<u8>, key: &str, value: &[u8], quoted: bool) {
    if !out.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(key.as_bytes());
    out.push(b'=');
    if !quoted {
        out.extend_from_slice(value);
        return;
    }
    out.push(b'"');
    for &b in value {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// The value of `key`, which must not appear twice.
fn single<'a>(
    directives: &'a [(String, Vec<u8>)],
    key: &str,
) -> Result<Option<&'a [u8]>, DigestError> {
    let mut found = directives
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(key));
    let first = found.next().map(|(_, v)| v.as_slice());
    if found.next().is_some() {
        return Err(DigestError::Repeated(key.to_owned()));
    }
    Ok(first)
}

/// Parses `key=value` or `key="quoted value"` directives separated by commas (RFC 2831
/// §7.1's `#rule`: empty elements and whitespace around them allowed). Values stay bytes:
/// their charset is known only once the `charset` directive has been read.
fn parse(token: &[u8]) -> Result<Vec<(String, Vec<u8>)>, DigestError> {
    let mut directives = Vec::new();
    let mut rest = token;
    loop {
        rest = skip_separators(rest);
        if rest.is_empty() {
            return Ok(directives);
        }
        let eq = rest
            .iter()
            .position(|&b| b == b'=')
            .ok_or(DigestError::Malformed("a directive without `=`"))?;
        let key = directive_name(&rest[..eq])?;
        let (value, after) = value(rest[eq + 1..].trim_ascii_start())?;
        directives.push((key, value));
        let after = after.trim_ascii_start();
        if !(after.is_empty() || after.starts_with(b",")) {
            return Err(DigestError::Malformed("text after a value"));
        }
        rest = after;
    }
}

/// `text` without the commas and whitespace it starts with.
fn skip_separators(text: &[u8]) -> &[u8] {
    let start = text
        .iter()
        .position(|&b| b != b',' && !b.is_ascii_whitespace())
        .unwrap_or(text.len());
    &text[start..]
}

/// A directive's name: letters, digits and `-`.
fn directive_name(raw: &[u8]) -> Result<String, DigestError> {
    let name = raw.trim_ascii();
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
        return Err(DigestError::Malformed("a bad directive name"));
    }
    Ok(lossy(name))
}

/// One value, quoted or not, and what follows it.
fn value(text: &[u8]) -> Result<(Vec<u8>, &[u8]), DigestError> {
    let Some(quoted) = text.strip_prefix(b"\"") else {
        let end = text.iter().position(|&b| b == b',').unwrap_or(text.len());
        return Ok((text[..end].trim_ascii_end().to_vec(), &text[end..]));
    };
    let mut out = Vec::new();
    let mut bytes = quoted.iter().enumerate();
    while let Some((i, &b)) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some((_, &escaped)) => out.push(escaped),
                None => break,
            },
            b'"' => return Ok((out, &quoted[i + 1..])),
            other => out.push(other),
        }
    }
    Err(DigestError::Malformed("an unterminated quoted string"))
}

#[cfg(test)]
mod tests;
