//! Test harness for zkwire.
#![forbid(unsafe_code)]
