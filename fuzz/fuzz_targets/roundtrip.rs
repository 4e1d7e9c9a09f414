//! `zkwire::fuzzing::roundtrip`; see its documentation for the input format and the invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkwire::fuzzing::roundtrip(data));
