use super::*;

/// A listing of `names` that outlives the test (a few bytes leaked per call), so that
/// contenders can borrow it whatever the expression it is built in.
fn listing<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> &'static Children {
    Box::leak(Box::new(names.into_iter().collect()))
}

const U1: &str = "_c_f290140d-9856-42ad-b9bf-348ffc086062-";
const U2: &str = "_c_00000000-0000-4000-8000-000000000000-";
const U3: &str = "_c_ffffffff-ffff-4fff-bfff-ffffffffffff-";

/// The byte scan, and the shortcut before a ten-digit suffix, find what `str::rfind`
/// finds: markers at either end, overlapping candidates, markers with digits and the
/// empty marker included.
#[test]
fn rfind_marker_agrees_with_str_rfind() {
    let names = [
        "",
        "-",
        "lock-",
        "-lock-",
        "a-lock-0000000001",
        "-lock--lock-0000000002",
        "__WRIT____WRIT__",
        "x__READ__y__WRIT__0000000003",
        "____",
        "_c_ab-cd-lock-",
        "k__lock__0000000004",
        "ü-lock-ß",
        "lock-0000000005",
        "0000000006",
        "x-lock-12345678-lock-0000000007",
        "-lock-000000000-0000000008",
        "__READ__-000000009",
        "lock-00000000a0",
        "7-1234567890",
        "a000000000000",
        "lock-lock-00000",
        "ab__READ____READ__00",
    ];
    let markers = [
        "-lock-", "__WRIT__", "__READ__", "__lock__", "__", "-", "", "ß", "lock-", "0", "00", "7-",
    ];
    for name in names {
        for marker in markers {
            assert_eq!(
                rfind_marker(name, marker),
                name.rfind(marker),
                "{name:?} {marker:?}"
            );
        }
    }
}

/// The one look at a name's last bytes under a single marker gives the key and sequence
/// that the marker scan and `parse_sequence` give.
#[test]
fn one_marker_keys_agree_with_the_scan_and_parse() {
    let names = [
        "_c_0f7a-lock-0000000042",
        "lock-0000000005",
        "lock-2147483647",
        "lock-2147483648",
        "lock-9999999999",
        "lock--000000001",
        "x-lock-12345678-lock-0000000007",
        "lock-lock-0000000001",
        "lock-00000000a0",
        "lock-000000000\u{e9}",
        "ü-lock-0000000003",
        "7-1234567890",
        "0000000006",
        "latch-0000000011",
        "k__lock__0000000004",
        "lock-",
        "",
    ];
    let markers = ["lock-", "-lock-", "latch-", "__lock__", "7-", "0", "-", ""];
    for name in names {
        for marker in markers {
            let (scan_at, found) = sort_key_at(name, &[marker]);
            let scan_seq = found.then(|| parse_sequence(&name[scan_at..])).flatten();
            assert_eq!(
                key_and_sequence(name, &[marker]),
                (scan_at, scan_seq),
                "{name:?} {marker:?}"
            );
        }
    }
}

/// Comparing sequence numbers orders contenders as their keys do: mutex, read-write and
/// kazoo names, and foreign children counted like Curator's (no sequence) among them.
#[test]
fn the_order_by_number_is_the_order_by_key() {
    let names: Vec<String> = [
        "_c_a-lock-0000000010",
        "_c_b-lock-0000000009",
        "x-lock-0000000100",
        "foreign",
        "_c_c-__READ__0000000011",
        "_c_d-__WRIT__0000000002",
        "k__lock__0000000003",
        "k__rlock__0000000004",
        "_c_e-lock-2147483647",
        "zzz",
        "_c_f-lock-0000000000",
    ]
    .map(String::from)
    .to_vec();
    let markers = ["lock-", READ_MARKER, WRITE_MARKER];
    let sorted = sort_children(
        listing(names),
        &markers,
        ForeignChildPolicy::CountLikeCurator,
    )
    .unwrap();
    let policy = ForeignChildPolicy::OrderKazoo;
    let kazoo = sort_children(
        listing(
            ["k__lock__0000000003", "_c_a-lock-0000000001"]
                .map(String::from)
                .to_vec(),
        ),
        &markers,
        policy,
    )
    .unwrap();
    for list in [&sorted, &kazoo] {
        for a in list.iter() {
            for b in list.iter() {
                assert_eq!(a.cmp_key(b), a.key().cmp(b.key()), "{} {}", a.name, b.name);
            }
        }
    }
}

fn names(v: &[String]) -> Vec<String> {
    v.to_vec()
}

fn sorted(children: &[String], markers: &[&str]) -> Vec<String> {
    sort_children(
        listing(names(children)),
        markers,
        ForeignChildPolicy::Reject,
    )
    .unwrap()
    .into_iter()
    .map(|c| c.name.to_owned())
    .collect()
}

#[test]
fn keys_follow_curator_standard_fix_for_sorting() {
    let n = format!("{U1}lock-0000000759");
    let (at, found) = sort_key_at(&n, MUTEX_MARKERS);
    assert!(found);
    assert_eq!(&n[at..], "0000000759");
    // The LAST occurrence counts.
    let n = "lock-lock-0000000003";
    assert_eq!(&n[sort_key_at(n, MUTEX_MARKERS).0..], "0000000003");
    // No marker: the whole name.
    assert_eq!(sort_key_at("foo", MUTEX_MARKERS), (0, false));
    // Read/write: __READ__ then __WRIT__.
    let r = format!("{U1}__READ__0000000002");
    let w = format!("{U1}__WRIT__0000000001");
    assert_eq!(&r[sort_key_at(&r, RW_MARKERS).0..], "0000000002");
    assert_eq!(&w[sort_key_at(&w, RW_MARKERS).0..], "0000000001");
}

#[test]
fn the_uuid_never_affects_the_order() {
    let kids = vec![
        format!("{U3}lock-0000000001"),
        format!("{U1}lock-0000000003"),
        format!("{U2}lock-0000000002"),
        "lock-0000000000".to_owned(), // unprotected (e.g. an older client) still counts
    ];
    assert_eq!(
        sorted(&kids, MUTEX_MARKERS),
        ["lock-0000000000", &kids[0], &kids[2], &kids[1]].map(str::to_owned)
    );
}

/// `names` in lock order, kazoo's contenders ordered among ours.
fn kazoo_ordered(names: &[String], markers: &[&str]) -> Vec<Contender<'static>> {
    sort_children(listing(names), markers, ForeignChildPolicy::OrderKazoo).unwrap()
}

#[test]
fn kazoo_contenders_are_ordered_by_their_sequence() {
    let kazoo = "4f1c0a3e9b7d4c2a8e6f1b3d5a7c9e0f";
    let kids = vec![
        format!("{U1}lock-0000000004"),
        format!("{kazoo}__lock__0000000002"),
        format!("{U2}lock-0000000003"),
        format!("{kazoo}__rlock__0000000001"),
    ];
    let order = kazoo_ordered(&kids, MUTEX_MARKERS);
    assert_eq!(
        order.iter().map(|c| c.name).collect::<Vec<_>>(),
        [&kids[3], &kids[1], &kids[2], &kids[0]]
    );
    let writers: Vec<bool> = order.iter().map(Contender::is_writer).collect();
    assert_eq!(writers, [false, true, false, false]);
    assert_eq!(exclusive(&order, &kids[2]), Decision::Wait(kids[1].clone()));
    // Readers of a read/write lock wait for kazoo's writers, not for its readers.
    let rw = vec![
        format!("{kazoo}__rlock__0000000001"),
        format!("{U1}__READ__0000000002"),
        format!("{kazoo}__lock__0000000003"),
        format!("{U2}__READ__0000000004"),
    ];
    let order = kazoo_ordered(&rw, RW_MARKERS);
    assert_eq!(shared(&order, &rw[1]), Decision::Held);
    assert_eq!(shared(&order, &rw[3]), Decision::Wait(rw[2].clone()));
    // Other foreign children, and kazoo names under the other policies, stay foreign.
    for policy in [ForeignChildPolicy::OrderKazoo, ForeignChildPolicy::Reject] {
        let r = sort_children(listing(["config"]), MUTEX_MARKERS, policy);
        assert!(matches!(r, Err(LockError::ForeignChild { .. })));
    }
    let r = sort_children(
        listing(vec![kids[1].clone()]),
        MUTEX_MARKERS,
        ForeignChildPolicy::Reject,
    );
    assert!(matches!(r, Err(LockError::ForeignChild { .. })));
    let r = sort_children(
        listing(vec![format!("{kazoo}__lock__-000000001")]),
        MUTEX_MARKERS,
        ForeignChildPolicy::OrderKazoo,
    );
    assert!(matches!(r, Err(LockError::SequenceWrapped { .. })));
}

#[test]
fn foreign_children_rejected_or_counted_like_curator() {
    let kids = vec![format!("{U1}lock-0000000001"), "config".to_owned()];
    assert_eq!(
        sort_children(
            listing(kids.clone()),
            MUTEX_MARKERS,
            ForeignChildPolicy::Reject
        ),
        Err(LockError::ForeignChild {
            name: "config".into()
        })
    );
    let counted = sort_children(
        listing(kids.clone()),
        MUTEX_MARKERS,
        ForeignChildPolicy::CountLikeCurator,
    )
    .unwrap();
    // "0…" < "c…": the foreign child sorts after the lock node, keyed by its whole name.
    assert_eq!(
        counted.iter().map(|c| c.name).collect::<Vec<_>>(),
        [&kids[0], "config"]
    );
    assert_eq!(counted[1].seq, None);
    // A marker with a malformed tail, or a read/write node in a mutex dir, is foreign too.
    for bad in [
        "lock-12",
        "lock-abcdefghij",
        "x-lock-00000000001",
        "_c_x-__WRIT__0000000001",
    ] {
        let r = sort_children(
            listing(vec![bad.to_owned()]),
            MUTEX_MARKERS,
            ForeignChildPolicy::Reject,
        );
        assert_eq!(
            r,
            Err(LockError::ForeignChild { name: bad.into() }),
            "{bad}"
        );
    }
}

#[test]
fn any_negative_suffix_is_a_wrap() {
    let mixed = vec![
        format!("{U1}lock-0000000001"),
        format!("{U2}lock--2147483648"),
    ];
    assert_eq!(
        sort_children(
            listing(mixed),
            MUTEX_MARKERS,
            ForeignChildPolicy::CountLikeCurator
        ),
        Err(LockError::SequenceWrapped {
            name: format!("{U2}lock--2147483648")
        })
    );
    // Negatives only are mis-ordered as well: -2147483648 was created first but sorts last.
    let negatives = vec![
        format!("{U1}lock--2147483647"),
        format!("{U2}lock--000000042"),
    ];
    assert!(matches!(
        sort_children(
            listing(negatives),
            MUTEX_MARKERS,
            ForeignChildPolicy::Reject
        ),
        Err(LockError::SequenceWrapped { .. })
    ));
}

#[test]
fn exclusive_waits_on_the_immediate_predecessor() {
    let kids = vec![
        format!("{U1}lock-0000000004"),
        format!("{U2}lock-0000000001"),
        format!("{U3}lock-0000000002"),
    ];
    let s = sort_children(
        listing(kids.clone()),
        MUTEX_MARKERS,
        ForeignChildPolicy::Reject,
    )
    .unwrap();
    assert_eq!(exclusive(&s, &kids[1]), Decision::Held);
    assert_eq!(exclusive(&s, &kids[2]), Decision::Wait(kids[1].clone()));
    assert_eq!(exclusive(&s, &kids[0]), Decision::Wait(kids[2].clone()));
    assert_eq!(exclusive(&s, "nope"), Decision::Missing);
}

#[test]
fn readers_wait_on_the_nearest_lower_writer_and_tolerate_ties() {
    let w1 = format!("{U1}__WRIT__0000000001");
    let r2 = format!("{U2}__READ__0000000002");
    let w3 = format!("{U3}__WRIT__0000000003");
    let r4 = format!("{U2}__READ__0000000004");
    let kids = vec![r4.clone(), w3.clone(), r2.clone(), w1.clone()];
    let s = sort_children(listing(kids), RW_MARKERS, ForeignChildPolicy::Reject).unwrap();
    assert_eq!(
        shared(&s, &r4),
        Decision::Wait(w3.clone()),
        "nearest, not first, writer"
    );
    assert_eq!(shared(&s, &r2), Decision::Wait(w1.clone()));
    assert_eq!(exclusive(&s, &w1), Decision::Held);
    assert_eq!(exclusive(&s, &w3), Decision::Wait(r2.clone()));

    // Curator >= 5.5 downgrade: a non-sequential read node tied with its writer's suffix.
    let tie = format!("{U3}__READ__0000000001");
    let s = sort_children(
        listing(vec![w3.clone(), tie.clone(), w1.clone(), r2.clone()]),
        RW_MARKERS,
        ForeignChildPolicy::Reject,
    )
    .unwrap();
    assert_eq!(
        shared(&s, &tie),
        Decision::Held,
        "a tie with a writer does not block the reader"
    );
    assert_eq!(shared(&s, &r2), Decision::Wait(w1.clone()));
    // Once the writer is gone, the tie read node blocks later writers but not readers.
    let s = sort_children(
        listing(vec![w3.clone(), tie.clone(), r2.clone()]),
        RW_MARKERS,
        ForeignChildPolicy::Reject,
    )
    .unwrap();
    assert_eq!(shared(&s, &r2), Decision::Held);
    assert_eq!(exclusive(&s, &w3), Decision::Wait(r2.clone()));
    // A writer tied with another node is never granted.
    let s = sort_children(
        listing(vec![w1.clone(), tie.clone()]),
        RW_MARKERS,
        ForeignChildPolicy::Reject,
    )
    .unwrap();
    assert!(matches!(exclusive(&s, &w1), Decision::Wait(_)));
}

#[test]
fn suffix_of_our_node() {
    assert_eq!(
        suffix_after(&format!("{U1}__WRIT__0000000042"), WRITE_MARKER),
        Some("0000000042")
    );
    assert_eq!(suffix_after("__WRIT__42", WRITE_MARKER), None);
}
