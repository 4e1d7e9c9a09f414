#[test]
fn ancestors_from_the_top() {
    let all = |p| ancestors(p).collect::<Vec<_>>();
    assert_eq!(all("/a/b/c"), ["/a", "/a/b"]);
    assert_eq!(all("/a/b/"), ["/a", "/a/b"], "a sequential prefix");
    assert!(all("/a").is_empty());
    assert!(all("/").is_empty());
}

use super::*;
use proptest::prelude::*;

/// Asserts that `path` is rejected for `reason`, echoing the path back.
fn assert_rejected(result: Result<(), InvalidPath>, path: &str, reason: &str) {
    match result {
        Ok(()) => panic!("{path:?} was accepted, expected rejection: {reason}"),
        Err(err) => {
            assert_eq!(err.path(), path, "echoed path");
            assert_eq!(err.reason(), reason, "reason for {path:?}");
        }
    }
}

const VALID: &[&str] = &[
    "/",
    "/a",
    "/a/b/c",
    "/zookeeper",
    "/zookeeper/config",
    "/.a",
    "/a.",
    "/a..",
    "/..a",
    "/...",
    "/a/.b/c",
    "/a b",
    "/zkwire/ünïcödé/路径",
    "/\u{a0}",     // just past the C1 controls
    "/\u{d7ff}",   // just below the surrogates
    "/\u{f900}",   // just past the private-use area
    "/\u{ffef}",   // just below the specials
    "/0000000001", // a sequential node's full name
    "/a/-2147483648",
];

const INVALID: &[(&str, &str)] = &[
    ("", EMPTY),
    ("a", NOT_ABSOLUTE),
    ("a/b", NOT_ABSOLUTE),
    (" /a", NOT_ABSOLUTE),
    ("/a/", TRAILING_SLASH),
    ("/a/b/", TRAILING_SLASH),
    ("//", TRAILING_SLASH),
    ("/a//b", EMPTY_SEGMENT),
    ("//a", EMPTY_SEGMENT),
    ("/.", RELATIVE_SEGMENT),
    ("/..", RELATIVE_SEGMENT),
    ("/a/./b", RELATIVE_SEGMENT),
    ("/a/../b", RELATIVE_SEGMENT),
    ("/a/.", RELATIVE_SEGMENT),
    ("/a/..", RELATIVE_SEGMENT),
    ("/a\u{0}b", NUL_CHAR),
    ("/\u{0}", NUL_CHAR),
    ("/a\u{1}", CONTROL_CHAR),
    ("/a\nb", CONTROL_CHAR),
    ("/a\tb", CONTROL_CHAR),
    ("/\u{1f}", CONTROL_CHAR),
    ("/\u{7f}", CONTROL_CHAR),
    ("/\u{85}", CONTROL_CHAR),
    ("/\u{9f}", CONTROL_CHAR),
    ("/\u{e000}", PRIVATE_USE_CHAR),
    ("/x\u{f8ff}", PRIVATE_USE_CHAR),
    ("/\u{fff0}", SPECIALS_CHAR),
    ("/\u{fff5}", SPECIALS_CHAR),
    ("/\u{fffd}", SPECIALS_CHAR),
    ("/\u{ffff}", SPECIALS_CHAR),
    ("/\u{10000}", SUPPLEMENTARY_CHAR),
    ("/emoji/😀", SUPPLEMENTARY_CHAR),
    ("/\u{10ffff}", SUPPLEMENTARY_CHAR),
    // The first problem from the left wins.
    ("/\u{7f}//", TRAILING_SLASH),
    ("/a//\u{0}", EMPTY_SEGMENT),
    ("/\u{0}//a", NUL_CHAR),
    ("/./\u{e000}", RELATIVE_SEGMENT),
];

#[test]
fn valid_paths_are_accepted() {
    for path in VALID {
        assert_eq!(validate_path(path), Ok(()), "{path:?}");
        assert_eq!(
            validate_sequential_path(path),
            Ok(()),
            "sequential {path:?}"
        );
    }
}

#[test]
fn invalid_paths_are_rejected_with_reason() {
    for &(path, reason) in INVALID {
        assert_rejected(validate_path(path), path, reason);
    }
}

#[test]
fn sequential_paths_may_leave_the_last_segment_to_the_server() {
    for path in ["/", "/locks/", "/a/b/", "/lock-", "/a/.", "/a/..", "/."] {
        assert_eq!(validate_sequential_path(path), Ok(()), "{path:?}");
    }
    let invalid: &[(&str, &str)] = &[
        ("", EMPTY),
        ("locks/", NOT_ABSOLUTE),
        ("//", EMPTY_SEGMENT),
        ("/a//", EMPTY_SEGMENT),
        ("/a//b", EMPTY_SEGMENT),
        ("/./", RELATIVE_SEGMENT),
        ("/../x-", RELATIVE_SEGMENT),
        ("/a/\u{0}", NUL_CHAR),
        ("/a\u{85}/", CONTROL_CHAR),
        ("/\u{e000}-", PRIVATE_USE_CHAR),
    ];
    for &(path, reason) in invalid {
        assert_rejected(validate_sequential_path(path), path, reason);
    }
}

#[test]
fn error_message_names_path_and_reason() {
    let Err(err) = validate_path("/a/") else {
        panic!("/a/ accepted");
    };
    assert_eq!(
        err.to_string(),
        "invalid path \"/a/\": path must not end with '/'"
    );
}

#[test]
fn chroot_of_root_is_none() {
    assert_eq!(Chroot::new("/"), Ok(None));
}

#[test]
fn chroot_must_be_a_valid_path() {
    for &(path, reason) in INVALID {
        match Chroot::new(path) {
            Err(err) => assert_eq!(err.reason(), reason, "{path:?}"),
            Ok(chroot) => panic!("{path:?} accepted as chroot {chroot:?}"),
        }
    }
}

fn app_x() -> Chroot {
    match Chroot::new("/app/x") {
        Ok(Some(chroot)) => chroot,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn chroot_accessors() {
    let chroot = app_x();
    assert_eq!(chroot.to_string(), "/app/x");
}

#[test]
fn chroot_maps_client_paths_to_server_paths() {
    let chroot = app_x();
    assert_eq!(chroot.to_server("/"), "/app/x");
    assert_eq!(chroot.to_server("/a"), "/app/x/a");
    assert_eq!(chroot.to_server("/a/b"), "/app/x/a/b");
    assert_eq!(chroot.to_server("/locks/"), "/app/x/locks/");
}

#[test]
fn chroot_maps_sequential_paths_by_concatenation() {
    let chroot = app_x();
    assert_eq!(chroot.to_server_sequential("/"), "/app/x/");
    assert_eq!(chroot.to_server_sequential("/locks/"), "/app/x/locks/");
    assert_eq!(chroot.to_server_sequential("/lock-"), "/app/x/lock-");
    // What the server then creates maps back inside the chroot.
    assert_eq!(chroot.to_client("/app/x/0000000001"), Some("/0000000001"));
}

#[test]
fn chroot_maps_server_paths_to_client_paths() {
    let chroot = app_x();
    assert_eq!(chroot.to_client("/app/x"), Some("/"));
    assert_eq!(chroot.to_client("/app/x/a"), Some("/a"));
    assert_eq!(chroot.to_client("/app/x/a/b"), Some("/a/b"));
    assert_eq!(chroot.to_client("/app/xy"), None);
    assert_eq!(chroot.to_client("/app/x0000000001"), None);
    assert_eq!(chroot.to_client("/app"), None);
    assert_eq!(chroot.to_client("/"), None);
    assert_eq!(chroot.to_client("/zookeeper/config"), None);
    assert_eq!(chroot.to_client(""), None);
}

#[test]
fn strip_or_pass_strips_inside_and_passes_outside() {
    let chroot = app_x();
    assert_eq!(strip_or_pass(Some(&chroot), "/app/x/a"), "/a");
    assert_eq!(strip_or_pass(Some(&chroot), "/app/x"), "/");
    assert_eq!(
        strip_or_pass(Some(&chroot), "/zookeeper/config"),
        "/zookeeper/config"
    );
    assert_eq!(strip_or_pass(Some(&chroot), "/app/xy"), "/app/xy");
    assert_eq!(strip_or_pass(None, "/app/x/a"), "/app/x/a");
}

#[test]
fn parent_of_paths() {
    assert_eq!(parent("/a/b/c"), Some("/a/b"));
    assert_eq!(parent("/a/b"), Some("/a"));
    assert_eq!(parent("/a"), Some("/"));
    assert_eq!(parent("/路径/ü"), Some("/路径"));
    assert_eq!(parent("/"), None);
    assert_eq!(parent(""), None);
    assert_eq!(parent("a"), None);
}

#[test]
fn join_paths() {
    assert_eq!(join("/", "a"), "/a");
    assert_eq!(join("/x", "a"), "/x/a");
    assert_eq!(join("/x/y", "路径"), "/x/y/路径");
}

/// Asserts `read(input) == expected` for each case, naming the input that fails.
fn check_each(read: fn(&str) -> Option<i32>, cases: &[(&str, Option<i32>)]) {
    for &(input, expected) in cases {
        assert_eq!(read(input), expected, "{input:?}");
    }
}

#[test]
fn parse_sequence_accepts_exactly_java_format() {
    let cases: &[(&str, Option<i32>)] = &[
        ("0000000000", Some(0)),
        ("0000000001", Some(1)),
        ("0000000042", Some(42)),
        ("2147483647", Some(i32::MAX)),
        ("-2147483648", Some(i32::MIN)),
        ("-2147483647", Some(-2_147_483_647)),
        ("-1000000000", Some(-1_000_000_000)),
        ("-999999999", Some(-999_999_999)),
        ("-000000001", Some(-1)),
        // Malformed or impossible.
        ("2147483648", None),
        ("-2147483649", None),
        ("-000000000", None),
        ("-0000000001", None),
        ("-0999999999", None),
        ("000000001", None),
        ("00000000001", None),
        ("+000000001", None),
        ("+0000000001", None),
        ("-00000001", None),
        ("00000000a1", None),
        ("", None),
        ("-", None),
    ];
    check_each(parse_sequence, cases);
}

#[test]
fn sequence_suffix_of_names() {
    let cases: &[(&str, Option<i32>)] = &[
        ("0000000001", Some(1)),
        ("lock-0000000005", Some(5)),
        ("x-72057594037927936-0000000123", Some(123)),
        ("/locks/lock-0000000007", Some(7)),
        ("node2147483647", Some(i32::MAX)),
        ("node-2147483648", Some(i32::MIN)),
        ("lock--2147483648", Some(i32::MIN)),
        ("-2147483648", Some(i32::MIN)),
        ("node-000000005", Some(-5)),
        ("lock--999999999", Some(-999_999_999)),
        // Ambiguous; read as non-negative (see the docs).
        ("lock-1234567890", Some(1_234_567_890)),
        ("路径0000000009", Some(9)),
        // No suffix.
        ("lock", None),
        ("lock-", None),
        ("lock-123", None),
        ("000000001", None),
        ("", None),
        ("路径", None),
        ("ü000000001", None),
        ("node-000000000", None),
        ("node2147483648", None),
    ];
    check_each(sequence_suffix, cases);
}

/// Characters ZooKeeper accepts in a segment, '/' excluded.
fn allowed_char() -> impl Strategy<Value = char> {
    // '/' (U+002F) is left out: it separates segments.
    proptest::char::ranges(
        vec![
            ' '..='.',
            '0'..='~',
            '\u{a0}'..='\u{d7ff}',
            '\u{f900}'..='\u{ffef}',
        ]
        .into(),
    )
}

fn segment() -> impl Strategy<Value = String> {
    proptest::collection::vec(allowed_char(), 1..8)
        .prop_map(|chars| chars.into_iter().collect::<String>())
        .prop_filter("relative", |s| s != "." && s != "..")
}

fn valid_path() -> impl Strategy<Value = String> {
    proptest::collection::vec(segment(), 0..5).prop_map(|segments| {
        if segments.is_empty() {
            "/".to_owned()
        } else {
            segments.iter().map(|s| format!("/{s}")).collect()
        }
    })
}

proptest! {
    #[test]
    fn generated_valid_paths_pass(path in valid_path()) {
        prop_assert_eq!(validate_path(&path), Ok(()));
        prop_assert_eq!(validate_sequential_path(&path), Ok(()));
        prop_assert_eq!(validate_sequential_path(&join(&path, "")), Ok(()));
    }

    #[test]
    fn inserting_a_forbidden_char_fails(
        path in valid_path(),
        bad in proptest::char::ranges(
            vec![
                '\0'..='\u{1f}',
                '\u{7f}'..='\u{9f}',
                '\u{e000}'..='\u{f8ff}',
                '\u{fff0}'..='\u{ffff}',
                '\u{10000}'..=char::MAX,
            ]
            .into(),
        ),
    ) {
        let bad_path = format!("{path}{bad}");
        let result = validate_path(&bad_path);
        prop_assert!(result.is_err(), "{:?} accepted", bad_path);
    }

    #[test]
    fn chroot_round_trips(prefix in valid_path(), path in valid_path()) {
        if let Ok(Some(chroot)) = Chroot::new(&prefix) {
            let server = chroot.to_server(&path);
            prop_assert_eq!(validate_path(&server), Ok(()));
            prop_assert_eq!(chroot.to_client(&server), Some(path.as_str()));
            prop_assert_eq!(strip_or_pass(Some(&chroot), &server), path.as_str());
        }
    }

    #[test]
    fn sequential_chroot_paths_stay_inside(
        prefix in valid_path(),
        path in valid_path(),
        n in 0..=i32::MAX,
    ) {
        if let Ok(Some(chroot)) = Chroot::new(&prefix) {
            let request = join(&path, "lock-");
            let created = format!("{}{n:010}", chroot.to_server_sequential(&request));
            let expected = format!("{request}{n:010}");
            prop_assert_eq!(chroot.to_client(&created), Some(expected.as_str()));
        }
    }

    #[test]
    fn parent_and_join_are_inverse(path in valid_path(), child in segment()) {
        let joined = join(&path, &child);
        prop_assert_eq!(validate_path(&joined), Ok(()));
        prop_assert_eq!(parent(&joined), Some(path.as_str()));
    }

    #[test]
    fn a_name_is_valid_when_it_joins_as_exactly_one_more_segment(
        path in valid_path(),
        name in "[a./\u{1}\u{e000}]{0,3}|\\PC{0,4}",
    ) {
        let joined = join(&path, &name);
        let one_segment = !name.is_empty() && !name.contains('/');
        let expected = one_segment && validate_path(&joined).is_ok();
        prop_assert_eq!(validate_name(&name).is_ok(), expected, "{:?}", name);
        if let Err(invalid) = validate_name(&name) {
            prop_assert_eq!(invalid.path(), name.as_str());
        }
    }

    #[test]
    fn parse_sequence_agrees_with_the_format_rules_and_str_parse(
        suffix in "-?[0-9]{0,11}|-?[0-9]{0,4}[a+ -][0-9]{0,6}",
    ) {
        // The rules in plain words: ten digits, or a sign and nine or ten digits that do not
        // start with the padding of a shorter number; then the range of an i32.
        let digits = suffix.strip_prefix('-').unwrap_or(&suffix);
        let negative = digits.len() != suffix.len();
        let shape = digits.bytes().all(|b| b.is_ascii_digit())
            && match (negative, digits.len()) {
                (false, 10) => true,
                (true, 9) => digits != "000000000",
                (true, 10) => !digits.starts_with('0'),
                _ => false,
            };
        let expected = if shape { suffix.parse::<i32>().ok() } else { None };
        prop_assert_eq!(parse_sequence(&suffix), expected);
    }

    #[test]
    fn parse_sequence_inverts_java_format(n in any::<i32>()) {
        // Rust's "{:010}" pads like Java's "%010d": the sign counts towards the width.
        prop_assert_eq!(parse_sequence(&format!("{n:010}")), Some(n));
    }

    #[test]
    fn sequence_suffix_after_any_prefix(prefix in "[a-z_-]{0,6}", n in any::<i32>()) {
        let name = format!("{prefix}{n:010}");
        let expected = if (-2_147_483_647..=-1_000_000_000).contains(&n) {
            // The documented ambiguity: the sign may belong to the prefix.
            -n
        } else {
            n
        };
        prop_assert_eq!(sequence_suffix(&name), Some(expected));
    }
}

/// The one-pass check of printable paths (with its branch-free shortcut) finds the same
/// first fault as the character walk, for every body of up to 7 characters over `/`, `.`,
/// `a` and ` `, plain and sequential; a byte outside printable ASCII defers to the walk.
#[test]
fn the_printable_pass_agrees_with_the_walk() {
    const ALPHABET: [char; 4] = ['/', '.', 'a', ' '];
    let mut checked = 0;
    for len in 1..=7u32 {
        for mut n in 0..ALPHABET.len().pow(len) {
            let mut body = String::new();
            for _ in 0..len {
                body.push(ALPHABET[n % ALPHABET.len()]);
                n /= ALPHABET.len();
            }
            for sequential in [false, true] {
                assert_eq!(
                    printable_segments(body.as_bytes(), sequential),
                    Some(walk_segments(&body, sequential)),
                    "{body:?}, sequential {sequential}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2 * (4 + 16 + 64 + 256 + 1024 + 4096 + 16384));
    for body in ["a/é", "a/\u{7f}b", "a\u{1f}/b", "\tb"] {
        assert_eq!(printable_segments(body.as_bytes(), false), None, "{body:?}");
    }
}

#[test]
fn names_are_refused_for_the_rule_they_break() {
    assert_eq!(validate_name("api-1"), Ok(()));
    assert_eq!(validate_name(".hidden"), Ok(()));
    assert_rejected(validate_name(""), "", EMPTY_NAME);
    assert_rejected(validate_name("a/b"), "a/b", SLASH_IN_NAME);
    assert_rejected(validate_name("/"), "/", SLASH_IN_NAME);
    assert_rejected(validate_name(".."), "..", RELATIVE_SEGMENT);
    assert_rejected(validate_name("a\u{1}"), "a\u{1}", CONTROL_CHAR);
}
