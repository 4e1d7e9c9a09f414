//! The client side of SASL DIGEST-MD5 (RFC 2831), `qop=auth` only.
//!
//! Three messages: the client's empty first token, the server's challenge answered with the
//! digest response, and the server's `rspauth`, checked so that the server too proves it
//! knows the password. Credentials are hashed as the UTF-8 bytes given (RFC 2831 asks for
//! ISO 8859-1 when every character fits; the two agree on ASCII credentials).

use std::fmt;

use md5::{Digest, Md5};

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
    /// The server's `rspauth` does not match: it does not know the password.
    #[error("DIGEST-MD5: the server's proof (rspauth) is wrong")]
    BadServerProof,
    /// A message arrived when none was expected.
    #[error("DIGEST-MD5: unexpected message from the server")]
    Unexpected,
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
    password: Vec<u8>,
    digest_uri: String,
    cnonce: String,
    stage: Stage,
    /// `HEX(H(A1))` and what the server's proof must equal, once the response is sent.
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

impl DigestMd5 {
    /// An exchange for `username`; the digest URI is `service/host`.
    pub(crate) fn new(
        username: &str,
        password: &[u8],
        service: &str,
        host: &str,
        cnonce: String,
    ) -> Self {
        Self {
            username: username.to_owned(),
            password: password.to_vec(),
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

    fn respond(&mut self, challenge: &[u8]) -> Result<Vec<u8>, DigestError> {
        let directives = parse(challenge)?;
        let once = |key: &'static str| single(&directives, key);
        let nonce = once("nonce")?.ok_or(DigestError::Missing("nonce"))?;
        let algorithm = once("algorithm")?.ok_or(DigestError::Missing("algorithm"))?;
        if !algorithm.eq_ignore_ascii_case("md5-sess") {
            return Err(DigestError::UnsupportedAlgorithm(algorithm.to_owned()));
        }
        once("charset")?;
        let qop = once("qop")?.unwrap_or("auth");
        if !qop.split(',').any(|q| q.trim() == "auth") {
            return Err(DigestError::UnsupportedQop(qop.to_owned()));
        }
        // Several realms may be offered; the first is ours. None: the server's host name.
        let realm = directives
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("realm"))
            .map_or_else(
                || self.digest_uri.split('/').nth(1).unwrap_or("").to_owned(),
                |(_, v)| v.clone(),
            );
        let ha1 = self.ha1(&realm, nonce);
        let response = kd(
            &ha1,
            nonce,
            &self.cnonce,
            &format!("AUTHENTICATE:{}", self.digest_uri),
        );
        self.expected_proof = Some(kd(
            &ha1,
            nonce,
            &self.cnonce,
            &format!(":{}", self.digest_uri),
        ));
        let message = format!(
            "charset=utf-8,username={},realm={},nonce={},nc={NONCE_COUNT},cnonce={},\
             digest-uri={},maxbuf=65536,response={response},qop=auth",
            quote(&self.username),
            quote(&realm),
            quote(nonce),
            quote(&self.cnonce),
            quote(&self.digest_uri),
        );
        Ok(message.into_bytes())
    }

    /// `HEX(H(A1))` with `A1 = H(user:realm:password):nonce:cnonce`.
    fn ha1(&self, realm: &str, nonce: &str) -> String {
        let mut secret = Md5::new();
        secret.update(self.username.as_bytes());
        secret.update(b":");
        secret.update(realm.as_bytes());
        secret.update(b":");
        secret.update(&self.password);
        let mut a1 = Md5::new();
        a1.update(secret.finalize());
        a1.update(format!(":{nonce}:{}", self.cnonce));
        hex(&a1.finalize())
    }

    fn check_proof(&self, token: &[u8]) -> Result<(), DigestError> {
        let directives = parse(token)?;
        let got = single(&directives, "rspauth")?.ok_or(DigestError::Missing("rspauth"))?;
        let want = self
            .expected_proof
            .as_deref()
            .ok_or(DigestError::Unexpected)?;
        if constant_time_eq(got.as_bytes(), want.as_bytes()) {
            Ok(())
        } else {
            Err(DigestError::BadServerProof)
        }
    }
}

/// The nonce count: one response per nonce.
const NONCE_COUNT: &str = "00000001";

/// `HEX(KD(ha1, nonce:nc:cnonce:auth:HEX(H(a2))))`, KD(k, s) being `H(k:s)`.
fn kd(ha1: &str, nonce: &str, cnonce: &str, a2: &str) -> String {
    let ha2 = hex(&Md5::digest(a2.as_bytes()));
    let mut h = Md5::new();
    h.update(format!("{ha1}:{nonce}:{NONCE_COUNT}:{cnonce}:auth:{ha2}"));
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .map(char::from)
        .collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A quoted-string, with `"` and `\` escaped.
fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The value of `key`, which must not appear twice.
fn single<'a>(
    directives: &'a [(String, String)],
    key: &str,
) -> Result<Option<&'a str>, DigestError> {
    let mut found = directives
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(key));
    let first = found.next().map(|(_, v)| v.as_str());
    if found.next().is_some() {
        return Err(DigestError::Repeated(key.to_owned()));
    }
    Ok(first)
}

/// Parses `key=value` or `key="quoted value"` directives separated by commas (RFC 2831
/// §7.1's `#rule`: empty elements and whitespace around them allowed).
fn parse(token: &[u8]) -> Result<Vec<(String, String)>, DigestError> {
    let text = std::str::from_utf8(token).map_err(|_| DigestError::Malformed("not UTF-8"))?;
    let mut directives = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
        if rest.is_empty() {
            return Ok(directives);
        }
        let eq = rest
            .find('=')
            .ok_or(DigestError::Malformed("a directive without `=`"))?;
        let key = rest[..eq].trim();
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(DigestError::Malformed("a bad directive name"));
        }
        let (value, after) = value(rest[eq + 1..].trim_start())?;
        directives.push((key.to_owned(), value));
        let after = after.trim_start();
        if !(after.is_empty() || after.starts_with(',')) {
            return Err(DigestError::Malformed("text after a value"));
        }
        rest = after;
    }
}

/// One value, quoted or not, and what follows it.
fn value(text: &str) -> Result<(String, &str), DigestError> {
    let Some(quoted) = text.strip_prefix('"') else {
        let end = text.find(',').unwrap_or(text.len());
        return Ok((text[..end].trim_end().to_owned(), &text[end..]));
    };
    let mut out = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => out.push(escaped),
                None => break,
            },
            '"' => return Ok((out, &quoted[i + 1..])),
            other => out.push(other),
        }
    }
    Err(DigestError::Malformed("an unterminated quoted string"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 2831 §4's example, with its digest URI.
    fn rfc_example() -> DigestMd5 {
        DigestMd5::new(
            "chris",
            b"secret",
            "imap",
            "elwood.innosoft.com",
            "OA6MHXh6VqTrRk".to_owned(),
        )
    }

    const RFC_CHALLENGE: &[u8] = b"realm=\"elwood.innosoft.com\",nonce=\"OA6MG9tEQGm2hh\",\
        qop=\"auth\",algorithm=md5-sess,charset=utf-8";

    fn directive(message: &[u8], key: &str) -> String {
        let all = parse(message).unwrap();
        single(&all, key).unwrap().unwrap().to_owned()
    }

    #[test]
    fn the_rfc_example_response_and_proof() {
        let mut d = rfc_example();
        assert!(d.initial_response().is_empty());
        let response = d.step(RFC_CHALLENGE).unwrap().unwrap();
        assert_eq!(
            directive(&response, "response"),
            "d388dad90d4bbd760a152321f2143af7"
        );
        assert_eq!(
            directive(&response, "digest-uri"),
            "imap/elwood.innosoft.com"
        );
        assert_eq!(directive(&response, "nc"), "00000001");
        assert!(!d.is_complete());
        assert_eq!(
            d.step(b"rspauth=ea40f60335c427b5527b84dbabcdfffd"),
            Ok(None)
        );
        assert!(d.is_complete());
        assert_eq!(d.step(b"rspauth=x"), Err(DigestError::Unexpected));
    }

    #[test]
    fn a_wrong_server_proof_is_refused() {
        let mut d = rfc_example();
        d.step(RFC_CHALLENGE).unwrap();
        assert_eq!(
            d.step(b"rspauth=ea40f60335c427b5527b84dbabcdfffe"),
            Err(DigestError::BadServerProof)
        );
        let mut d = rfc_example();
        d.step(RFC_CHALLENGE).unwrap();
        assert_eq!(
            d.step(b"nothing=here"),
            Err(DigestError::Missing("rspauth"))
        );
    }

    #[test]
    fn challenges_are_parsed_strictly_and_quoting_is_honoured() {
        let all = parse(b" a=1 ,, b=\"x, \\\"y\\\"\" ,c=\"\"").unwrap();
        let pairs: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(pairs, [("a", "1"), ("b", "x, \"y\""), ("c", "")]);
        assert!(parse(b"a=\"open").is_err());
        assert!(parse(b"novalue").is_err());
        assert!(parse(b"a=\"1\"junk").is_err());
        let step = |challenge: &[u8]| rfc_example().step(challenge);
        assert_eq!(
            step(b"realm=\"r\",algorithm=md5-sess"),
            Err(DigestError::Missing("nonce"))
        );
        assert_eq!(
            step(b"nonce=\"a\",nonce=\"b\",algorithm=md5-sess"),
            Err(DigestError::Repeated("nonce".into()))
        );
        assert!(matches!(
            step(b"nonce=\"a\",qop=\"auth-conf\",algorithm=md5-sess"),
            Err(DigestError::UnsupportedQop(_))
        ));
        assert!(matches!(
            step(b"nonce=\"a\",algorithm=md5"),
            Err(DigestError::UnsupportedAlgorithm(_))
        ));
    }

    #[test]
    fn names_are_quoted_and_the_first_realm_is_used() {
        let mut d = DigestMd5::new("a\"b", b"pw", "zookeeper", "zk-sasl-md5", "c".into());
        let challenge = b"realm=\"one\",realm=\"two\",nonce=\"n\",qop=\"auth,auth-int\",\
            algorithm=md5-sess";
        let response = d.step(challenge).unwrap().unwrap();
        assert_eq!(directive(&response, "username"), "a\"b");
        assert_eq!(directive(&response, "realm"), "one");
        assert_eq!(directive(&response, "digest-uri"), "zookeeper/zk-sasl-md5");
    }

    #[test]
    fn debug_shows_no_secret() {
        let mut d = rfc_example();
        d.step(RFC_CHALLENGE).unwrap();
        let shown = format!("{d:?}");
        assert!(
            !shown.contains("secret") && !shown.contains("ea40f6"),
            "{shown}"
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_server_tokens_never_panic(
            first in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            second in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        ) {
            let mut d = rfc_example();
            let _ = d.step(&first);
            let _ = d.step(&second);
        }
    }
}
