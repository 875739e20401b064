//! # milpa-process
//!
//! The child processes milpa starts: command tools and notify commands of `milpa-cli`, and
//! the stdio upstreams of `milpa-gateway`. Both users need the same two guarantees, so they
//! live here rather than in either of them:
//!
//! - [`child_env`]: what a child sees of milpa's environment (`PATH`, `HOME`, `LANG` and the
//!   variables its configuration names, nothing else).
//! - [`process_tree`]: starting a child in a process group of its own, and killing it and
//!   everything it started (including what left the group, on Linux) when it is done with.

pub mod child_env;
pub mod process_tree;
