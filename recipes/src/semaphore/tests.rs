#![allow(clippy::unwrap_used)]

use super::limit::{decode_count, encode_count};
use super::*;

#[test]
fn shared_count_encoding_is_curators() {
    assert_eq!(encode_count(5), [0, 0, 0, 5]);
    assert_eq!(encode_count(0x0102_0304), [1, 2, 3, 4]);
    assert_eq!(decode_count("/c", &[0, 0, 1, 0]).unwrap(), 256);
    for bad in [
        &b""[..],
        &[0, 0, 5][..],
        &[0, 0, 0, 0, 5][..],
        &[0xff, 0xff, 0xff, 0xff][..],
        b"5",
    ] {
        assert_eq!(
            decode_count("/c", bad),
            Err(LockError::BadSharedCount {
                path: "/c".into(),
                data: bad.to_vec()
            }),
            "{bad:?}"
        );
    }
}

#[test]
fn quantity_against_limit() {
    assert!(check_quantity(3, 3).is_ok());
    assert_eq!(
        check_quantity(4, 3),
        Err(LockError::TooManyLeases {
            requested: 4,
            max: 3
        })
    );
    assert!(check_quantity(1, 0).is_err());
    assert!(check_quantity(usize::MAX, u32::MAX).is_err());
}

#[test]
fn lease_children_and_foreign_ones() {
    let ok = vec![
        "_c_f290140d-9856-42ad-b9bf-348ffc086062-lease-0000000007".to_owned(),
        "lease-0000000001".to_owned(),
        // Wrapped: harmless for a count.
        "_c_f290140d-9856-42ad-b9bf-348ffc086062-lease--2147483648".to_owned(),
    ];
    assert!(check_children(&ok, ForeignChildPolicy::Reject).is_ok());
    let mut with_foreign = ok.clone();
    with_foreign.push("_c_f290140d-9856-42ad-b9bf-348ffc086062-lock-0000000001".to_owned());
    assert!(matches!(
        check_children(&with_foreign, ForeignChildPolicy::Reject),
        Err(LockError::ForeignChild { .. })
    ));
    assert!(check_children(&with_foreign, ForeignChildPolicy::CountLikeCurator).is_ok());
}
