//! Test harness for zkwire: real ZooKeeper servers and ensembles, and shared test helpers.
#![forbid(unsafe_code)]

pub mod evil;
pub mod java;
pub mod kerberos;
pub mod partition;
pub mod proxy;
pub mod rng;
pub mod server;
pub mod support;
pub mod tls;
