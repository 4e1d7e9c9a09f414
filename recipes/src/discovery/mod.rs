//! [`ServiceDiscovery`]: service registration and lookup in the layout and JSON of
//! Curator's `curator-x-discovery` (`ServiceDiscoveryImpl` with a `JsonInstanceSerializer`),
//! so zkwire and Curator services find each other. See docs/recipes.md §13.
//!
//! An instance is the node `basePath/<name>/<id>` holding the JSON of a [`ServiceInstance`];
//! its [`ServiceType`] gives the node's mode. A registration is kept by a
//! [`PersistentNode`](crate::PersistentNode), so it comes back after an outside delete or a
//! session renewal.
//!
//! The instance record is in `instance.rs`, its URI template in `uri.rs` and its Curator JSON
//! in `json.rs`; registration and queries in `registry.rs`; the [`ServiceCache`] in `cache.rs`
//! and the [`ServiceProvider`] with its strategies in `provider.rs`, its down-instance
//! policy in `down.rs`.

mod cache;
mod down;
mod instance;
mod json;
mod provider;
mod registry;
mod uri;

pub use cache::ServiceCache;
pub use down::DownInstancePolicy;
pub use instance::{ServiceInstance, ServiceInstanceBuilder, ServiceType};
pub use json::InstanceFormatError;
pub use provider::{ProviderStrategy, ServiceProvider};
pub use registry::{Registration, ServiceDiscovery};
pub use uri::{UriPart, UriSpec};
