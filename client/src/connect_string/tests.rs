use super::*;
use proptest::prelude::*;

fn hp(host: &str, port: u16) -> HostPort {
    HostPort {
        host: host.to_owned(),
        port,
    }
}

fn chroot(prefix: &str) -> Option<Chroot> {
    match Chroot::new(prefix) {
        Ok(chroot) => chroot,
        Err(err) => panic!("bad test chroot: {err}"),
    }
}

fn parsed(s: &str) -> ConnectString {
    match ConnectString::parse(s) {
        Ok(parsed) => parsed,
        Err(err) => panic!("{s:?} rejected: {err}"),
    }
}

#[test]
fn valid_connect_strings() {
    let cases: &[(&str, &[HostPort], Option<&str>)] = &[
        ("127.0.0.1:2181", &[hp("127.0.0.1", 2181)], None),
        ("localhost", &[hp("localhost", 2181)], None),
        ("a,b:2182", &[hp("a", 2181), hp("b", 2182)], None),
        (
            "[::1]:2181,[fe80::1]",
            &[hp("::1", 2181), hp("fe80::1", 2181)],
            None,
        ),
        ("[fe80::1%eth0]:3000", &[hp("fe80::1%eth0", 3000)], None),
        ("[localhost]:1", &[hp("localhost", 1)], None),
        (
            "h1:1,h2:2/app/chroot",
            &[hp("h1", 1), hp("h2", 2)],
            Some("/app/chroot"),
        ),
        ("h/", &[hp("h", 2181)], None),
        ("h:2181/", &[hp("h", 2181)], None),
        (" a , b ", &[hp("a", 2181), hp("b", 2181)], None),
        ("\ta:1 ,\n b:2 /x", &[hp("a", 1), hp("b", 2)], Some("/x")),
        ("h:65535", &[hp("h", 65535)], None),
        ("h:00080", &[hp("h", 80)], None),
        ("a,a", &[hp("a", 2181), hp("a", 2181)], None),
        (
            "zk.example.com:2181/路径",
            &[hp("zk.example.com", 2181)],
            Some("/路径"),
        ),
        ("h/a b", &[hp("h", 2181)], Some("/a b")),
    ];
    for &(s, hosts, expected_chroot) in cases {
        let parsed = parsed(s);
        assert_eq!(parsed.hosts(), hosts, "{s:?}");
        assert_eq!(
            parsed.chroot().map(ToString::to_string).as_deref(),
            expected_chroot,
            "{s:?}"
        );
        assert_eq!(s.parse::<ConnectString>().as_ref(), Ok(&parsed), "{s:?}");
    }
}

#[test]
fn invalid_connect_strings() {
    use InvalidConnectString::*;
    let bad_port = |host: &str, port: &str| BadPort {
        host: host.to_owned(),
        port: port.to_owned(),
    };
    let bad_host = |host: &str, reason| BadHost {
        host: host.to_owned(),
        reason,
    };
    let bad_chroot = |path: &str| match Chroot::new(path) {
        Err(err) => BadChroot(err),
        Ok(chroot) => panic!("{path:?} is a valid chroot: {chroot:?}"),
    };
    let cases: Vec<(&str, InvalidConnectString)> = vec![
        ("", NoHosts),
        ("   ", NoHosts),
        ("/app", NoHosts),
        (" /app", NoHosts),
        (",", EmptyHost { index: 0 }),
        ("a,", EmptyHost { index: 1 }),
        ("a,,b", EmptyHost { index: 1 }),
        ("a, ,b", EmptyHost { index: 1 }),
        (":2181", EmptyHost { index: 0 }),
        ("a,[]:2181", EmptyHost { index: 1 }),
        ("h:99999", bad_port("h", "99999")),
        ("h:65536", bad_port("h", "65536")),
        ("h:0", bad_port("h", "0")),
        ("h:", bad_port("h", "")),
        ("h:+80", bad_port("h", "+80")),
        ("h:-1", bad_port("h", "-1")),
        ("h:abc", bad_port("h", "abc")),
        ("h: 80", bad_port("h", " 80")),
        ("[::1]:", bad_port("::1", "")),
        ("[::1]:x", bad_port("::1", "x")),
        (
            "[::1",
            UnclosedBracket {
                host: "[::1".to_owned(),
            },
        ),
        (
            "a,[::1:2181/app",
            UnclosedBracket {
                host: "[::1:2181".to_owned(),
            },
        ),
        (
            "::1",
            bad_host(
                "::1",
                "more than one ':'; write IPv6 addresses as [address]:port",
            ),
        ),
        (
            "fe80::1:2181",
            bad_host(
                "fe80::1:2181",
                "more than one ':'; write IPv6 addresses as [address]:port",
            ),
        ),
        (
            "[::1]2181",
            bad_host("[::1]2181", "expected ':port' or nothing after ']'"),
        ),
        (
            "[[::1]]",
            bad_host("[[::1]]", "expected ':port' or nothing after ']'"),
        ),
        ("[a[b]", bad_host("[a[b]", "misplaced '[' or ']'")),
        ("a]:1", bad_host("a]:1", "misplaced '[' or ']'")),
        ("a b:1", bad_host("a b:1", "host name contains whitespace")),
        ("h :1", bad_host("h :1", "host name contains whitespace")),
        ("h//x", bad_chroot("//x")),
        ("h/app/", bad_chroot("/app/")),
        ("h/./x", bad_chroot("/./x")),
        // Hosts are checked before the chroot.
        ("h:0//x", bad_port("h", "0")),
    ];
    for (s, expected) in cases {
        assert_eq!(ConnectString::parse(s), Err(expected), "{s:?}");
    }
}

#[test]
fn error_messages() {
    let cases: &[(&str, &str)] = &[
        ("", "connect string has no hosts"),
        (
            "a,,b",
            "host #1 of the connect string is empty (counting from 0)",
        ),
        (
            "h:99999",
            "invalid port \"99999\" for host \"h\": expected a number from 1 to 65535",
        ),
        ("[::1", "host \"[::1\" opens '[' without a matching ']'"),
        (
            "h//x",
            "invalid chroot in connect string: invalid path \"//x\": \
             path must not contain an empty segment ('//')",
        ),
    ];
    for &(s, message) in cases {
        match ConnectString::parse(s) {
            Err(err) => assert_eq!(err.to_string(), message, "{s:?}"),
            Ok(parsed) => panic!("{s:?} accepted: {parsed:?}"),
        }
    }
}

#[test]
fn trailing_whitespace_belongs_to_the_chroot() {
    assert_eq!(parsed("h/x y").chroot(), chroot("/x y").as_ref());
}

#[test]
fn host_port_display() {
    assert_eq!(hp("zk1", 2181).to_string(), "zk1:2181");
    assert_eq!(hp("127.0.0.1", 1).to_string(), "127.0.0.1:1");
    assert_eq!(hp("::1", 2181).to_string(), "[::1]:2181");
    assert_eq!(hp("fe80::1%eth0", 3).to_string(), "[fe80::1%eth0]:3");
}

#[test]
fn connect_string_display_is_canonical() {
    let cases: &[(&str, &str)] = &[
        ("a", "a:2181"),
        (" a , [::1] /app", "a:2181,[::1]:2181/app"),
        ("h1:1,h2:2/app/chroot", "h1:1,h2:2/app/chroot"),
        ("h:2181/", "h:2181"),
    ];
    for &(s, canonical) in cases {
        assert_eq!(parsed(s).to_string(), canonical, "{s:?}");
    }
}

fn host_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9.-]{0,12}",
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        "[0-9a-f]{0,4}:[0-9a-f:]{1,12}",
    ]
}

fn chroot_path() -> impl Strategy<Value = String> {
    proptest::collection::vec("[a-z0-9._-]{1,6}", 0..3).prop_map(|segments| {
        segments
            .iter()
            .filter(|s| *s != "." && *s != "..")
            .map(|s| format!("/{s}"))
            .collect()
    })
}

proptest! {
    #[test]
    fn display_round_trips(
        hosts in proptest::collection::vec((host_name(), 1..=u16::MAX), 1..5),
        chroot_path in chroot_path(),
    ) {
        let written: Vec<String> =
            hosts.iter().map(|(host, port)| hp(host, *port).to_string()).collect();
        let s = format!("{}{chroot_path}", written.join(","));
        let parsed = ConnectString::parse(&s);
        let Ok(parsed) = parsed else {
            return Err(TestCaseError::fail(format!("{s:?} rejected: {parsed:?}")));
        };
        let expected: Vec<HostPort> = hosts.iter().map(|(h, p)| hp(h, *p)).collect();
        prop_assert_eq!(parsed.hosts(), expected.as_slice());
        prop_assert_eq!(parsed.to_string(), s);
        prop_assert_eq!(ConnectString::parse(&parsed.to_string()), Ok(parsed));
    }

    #[test]
    fn parse_never_panics(s in "\\PC{0,40}") {
        let _ = ConnectString::parse(&s);
    }

    #[test]
    fn parse_never_panics_on_connect_string_alphabet(s in "[a-z0-9:,\\[\\]/. ]{0,30}") {
        if let Ok(parsed) = ConnectString::parse(&s) {
            prop_assert!(!parsed.hosts().is_empty());
            prop_assert!(parsed.hosts().iter().all(|h| !h.host().is_empty() && h.port() != 0));
            prop_assert_eq!(ConnectString::parse(&parsed.to_string()), Ok(parsed));
        }
    }
}
