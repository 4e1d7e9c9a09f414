//! Real Apache ZooKeeper on localhost, for tests, demos and local development: standalone
//! servers and N-node ensembles ([`server`]) launched from the jars of Debian's `zookeeper`
//! package, TLS certificates and key stores generated per run ([`tls`]), and a throwaway MIT
//! Kerberos realm ([`kerberos`]) for SASL GSSAPI. [`java`] finds the Java runtime and jars.
//!
//! Every process started here dies with the process that started it (a watchdog per JVM and
//! KDC), and its temporary directory goes with it. Nothing is skipped silently: a missing
//! prerequisite is an error that names the package to install.
#![forbid(unsafe_code)]

pub mod java;
pub mod kerberos;
pub mod server;
pub mod tls;
