//! What a program milpa starts sees of milpa's environment: nothing but `PATH`, `HOME`,
//! `LANG` and what its configuration names, so tokens and keys in milpa's own environment
//! do not leak into tools and upstream servers.

use std::ffi::OsString;

/// Environment variables every child program gets (when milpa has them).
pub const BASE_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// [`BASE_ENV`] and the variables `allowed` names, each with milpa's own value when set.
pub fn inherited(allowed: &[String]) -> Vec<(String, OsString)> {
    BASE_ENV
        .iter()
        .map(|name| (*name).to_owned())
        .chain(allowed.iter().cloned())
        .filter_map(|name| std::env::var_os(&name).map(|value| (name, value)))
        .collect()
}
