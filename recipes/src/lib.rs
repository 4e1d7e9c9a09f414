//! Coordination recipes on top of [`zkwire`]: mutex, read-write lock and semaphore.
//!
//! Nothing is implemented yet; the recipes arrive with their own issue.
#![forbid(unsafe_code)]
