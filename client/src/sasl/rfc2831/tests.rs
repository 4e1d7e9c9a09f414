use super::*;

/// RFC 2831 §4's example, with its digest URI.
fn rfc_example() -> DigestMd5 {
    DigestMd5::new(
        "chris",
        Password::new(b"secret"),
        "imap",
        "elwood.innosoft.com",
        "OA6MHXh6VqTrRk".to_owned(),
    )
}

const RFC_CHALLENGE: &[u8] = b"realm=\"elwood.innosoft.com\",nonce=\"OA6MG9tEQGm2hh\",\
    qop=\"auth\",algorithm=md5-sess,charset=utf-8";

fn raw_directive(message: &[u8], key: &str) -> Option<Vec<u8>> {
    let all = parse(message).unwrap();
    single(&all, key).unwrap().map(<[u8]>::to_vec)
}

fn directive(message: &[u8], key: &str) -> String {
    lossy(&raw_directive(message, key).unwrap())
}

/// ZooKeeper's challenge (realm `zk-sasl-md5`, nonce `n`), `charset=utf-8` offered or not.
fn zk_challenge(utf8: bool) -> Vec<u8> {
    let charset = if utf8 { "charset=utf-8," } else { "" };
    format!("realm=\"zk-sasl-md5\",nonce=\"n\",qop=\"auth\",{charset}algorithm=md5-sess")
        .into_bytes()
}

/// `user`'s exchange with ZooKeeper (service `zookeeper`, host `zk-sasl-md5`, client nonce `c`).
fn zk_client(user: &str, password: &[u8]) -> DigestMd5 {
    DigestMd5::new(
        user,
        Password::new(password),
        "zookeeper",
        "zk-sasl-md5",
        "c".into(),
    )
}

/// `user`'s exchange (client nonce `c`) after answering [`zk_challenge`], and the answer.
fn zk_response(user: &str, password: &[u8], utf8: bool) -> (DigestMd5, Vec<u8>) {
    let mut d = zk_client(user, password);
    let response = d.step(&zk_challenge(utf8)).unwrap().unwrap();
    (d, response)
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
    let pairs: Vec<(&str, &[u8])> = all
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    assert_eq!(pairs, [("a", &b"1"[..]), ("b", b"x, \"y\""), ("c", b"")]);
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
    let mut d = zk_client("a\"b", b"pw");
    let challenge = b"realm=\"one\",realm=\"two\",nonce=\"n\",qop=\"auth,auth-int\",\
        algorithm=md5-sess";
    let response = d.step(challenge).unwrap().unwrap();
    assert_eq!(directive(&response, "username"), "a\"b");
    assert_eq!(directive(&response, "realm"), "one");
    assert_eq!(directive(&response, "digest-uri"), "zookeeper/zk-sasl-md5");
}

#[test]
fn credentials_are_latin1_whenever_every_character_fits() {
    for charset in [Charset::Latin1, Charset::Utf8] {
        assert_eq!(charset.credential("pässwörd").as_slice(), b"p\xe4ssw\xf6rd");
        assert_eq!(charset.credential("plain").as_slice(), b"plain");
        assert_eq!(charset.credential("\u{ff}").as_slice(), b"\xff");
    }
}

#[test]
fn credentials_beyond_latin1_are_utf8_only_when_offered() {
    let utf8 = Charset::Utf8;
    let latin1 = Charset::Latin1;
    assert_eq!(utf8.credential("пароль").as_slice(), "пароль".as_bytes());
    assert_eq!(latin1.credential("пароль").as_slice(), b"??????");
    // The whole text goes one way: `ä` is UTF-8 too once `€` is there.
    assert_eq!(utf8.credential("päss€").as_slice(), "päss€".as_bytes());
    assert_eq!(latin1.credential("päss€").as_slice(), b"p\xe4ss?");
    assert_eq!(utf8.credential("\u{100}").as_slice(), "\u{100}".as_bytes());
    // One `?` per code point, outside the BMP too (a surrogate pair to Java).
    assert_eq!(latin1.credential("k🔑").as_slice(), b"k?");
}

#[test]
fn only_utf8_is_offered_as_a_charset() {
    assert_eq!(Charset::offered(None), Ok(Charset::Latin1));
    assert_eq!(Charset::offered(Some(b"utf-8")), Ok(Charset::Utf8));
    assert_eq!(Charset::offered(Some(b"UTF-8")), Ok(Charset::Utf8));
    let challenge = b"nonce=\"n\",charset=iso-8859-1,algorithm=md5-sess";
    assert_eq!(
        rfc_example().step(challenge),
        Err(DigestError::UnsupportedCharset("iso-8859-1".into()))
    );
}

#[test]
fn charset_is_sent_only_when_offered() {
    let (_, offered) = zk_response("u", b"pw", true);
    assert!(
        offered.starts_with(b"charset=utf-8,"),
        "{}",
        lossy(&offered)
    );
    let (_, not_offered) = zk_response("u", b"pw", false);
    assert_eq!(raw_directive(&not_offered, "charset"), None);
    assert!(
        not_offered.starts_with(b"username="),
        "{}",
        lossy(&not_offered)
    );
}

/// Known answers computed apart from this code (MD5 over explicitly encoded bytes, after
/// RFC 2831 §2.1.2.1 and the Java server's rule), for user `u`, realm `zk-sasl-md5`,
/// nonce `n`, client nonce `c`: (password, charset=utf-8 offered, response, rspauth).
const KNOWN_ANSWERS: &[(&str, bool, &str, &str)] = &[
    (
        "pässwörd",
        true,
        "94287a35b5c46cce3e09480af77b62c6",
        "8eefea72e7016cdb26464d3a866e1b0a",
    ),
    (
        "pässwörd",
        false,
        "94287a35b5c46cce3e09480af77b62c6",
        "8eefea72e7016cdb26464d3a866e1b0a",
    ),
    (
        "пароль",
        true,
        "be7bf31164028af08032510b5514420d",
        "a9262b31ab1c460fb7288df46ed8c3f4",
    ),
    (
        "пароль",
        false,
        "197828125d883edad0bca9d27601edc6",
        "da16a1f22fabf09b819fb4acdf98e975",
    ),
    (
        "päss€",
        true,
        "255def7ebf5ad7eef9804b87b1fdf7e7",
        "8a2755e964b1d96281f404667ce6dbad",
    ),
    (
        "päss€",
        false,
        "7d8c7320009d20edb760297003210c02",
        "638abf870ce8c6a89debb403bc0cd94a",
    ),
];

#[test]
fn passwords_hash_by_the_charset_rule() {
    for &(password, utf8, response, rspauth) in KNOWN_ANSWERS {
        let (mut d, message) = zk_response("u", password.as_bytes(), utf8);
        assert_eq!(
            directive(&message, "response"),
            response,
            "{password} {utf8}"
        );
        let proof = format!("rspauth={rspauth}");
        assert_eq!(d.step(proof.as_bytes()), Ok(None), "{password} {utf8}");
    }
}

#[test]
fn password_bytes_that_are_not_utf8_are_hashed_as_given() {
    // "pässwörd" in ISO 8859-1: the same hash as the text.
    let (_, message) = zk_response("u", b"p\xe4ssw\xf6rd", true);
    assert_eq!(directive(&message, "response"), KNOWN_ANSWERS[0].2);
}

#[test]
fn without_utf8_the_response_is_latin1_and_the_nonce_goes_back_as_sent() {
    let (_, message) = zk_response("jörg", b"pw", false);
    assert_eq!(raw_directive(&message, "username").unwrap(), b"j\xf6rg");
    let (_, message) = zk_response("jörg", b"pw", true);
    assert_eq!(
        raw_directive(&message, "username").unwrap(),
        "jörg".as_bytes()
    );
    // A realm and nonce in ISO 8859-1, which is not UTF-8.
    let mut d = zk_client("u", b"pw");
    let challenge = b"realm=\"r\xe9alm\",nonce=\"n\",qop=auth,algorithm=md5-sess";
    let message = d.step(challenge).unwrap().unwrap();
    assert_eq!(raw_directive(&message, "realm").unwrap(), b"r\xe9alm");
    assert_eq!(raw_directive(&message, "nonce").unwrap(), b"n");
    // Computed apart, as KNOWN_ANSWERS, with realm "réalm" in ISO 8859-1.
    assert_eq!(
        directive(&message, "response"),
        "d8d57375ce440b09c038dc16f7844f38"
    );
}

#[test]
fn with_utf8_offered_a_realm_must_be_utf8() {
    let challenge = b"realm=\"r\xe9alm\",nonce=\"n\",charset=utf-8,algorithm=md5-sess";
    assert!(matches!(
        rfc_example().step(challenge),
        Err(DigestError::Malformed(_))
    ));
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

    #[test]
    fn latin1_text_is_hashed_as_latin1_whatever_the_charset(
        text in "[\\u{0}-\\u{ff}]{0,40}",
    ) {
        let want: Vec<u8> = text.chars().map(|c| u8::try_from(u32::from(c)).unwrap()).collect();
        for charset in [Charset::Latin1, Charset::Utf8] {
            let got = charset.credential(&text);
            proptest::prop_assert_eq!(got.as_slice(), want.as_slice());
        }
    }
}
