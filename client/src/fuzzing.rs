//! Fuzz entry points. Internal: no stability guarantee, not part of the public API.
//!
//! Compiled under `cfg(fuzzing)` (which `cargo fuzz` sets) or with the `fuzzing` feature (which
//! the corpus-replay test in `tests/` enables), and for the unit tests, which share the session
//! target's driver loop (`harness`). Each function takes the fuzzer's raw bytes and is
//! what one target in `fuzz/fuzz_targets/` calls, so a target is a one-liner and a crasher
//! replays under plain `cargo test`. Every function accepts any input; it panics only when an
//! invariant of the crate is broken, and the panic message says which.
//!
//! | target | checks |
//! |---|---|
//! | [`frame_decoder`] | any chunking splits a stream like a reference splitter; payloads ≤ cap |
//! | [`decode_reply`] | a reply frame decodes as the session and `Client` would for its op |
//! | [`roundtrip`] | decode → encode is the identity; `skip` agrees with `decode` |
//! | [`session`] | a scripted [`Session`](crate::session::Session) against a model server |

mod codec;
pub(crate) mod harness;
mod model;
mod script;
mod seeds;
mod stateful;

#[cfg(test)]
pub(crate) use codec::compact_listing;
pub use codec::{decode_reply, frame_decoder, roundtrip};
pub use seeds::{seeds, Seed};
pub use stateful::session;
