//! Test harness for zkwire: real ZooKeeper servers and ensembles, and shared test helpers.
//!
//! The servers, TLS material and Kerberos realm are [`zkwire_sandbox`]'s, re-exported here at
//! their old paths ([`server`], [`tls`], [`kerberos`]).
#![forbid(unsafe_code)]

pub mod evil;
pub mod java;
mod listening;
pub mod partition;
pub mod proxy;
mod pump;
pub mod rng;
pub mod support;

pub use zkwire_sandbox::{kerberos, server, tls};
