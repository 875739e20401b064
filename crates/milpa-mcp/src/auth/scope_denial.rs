//! The slot through which a call's scope denial reaches the HTTP response.
//!
//! The session records into it whatever the transport, so it is in every build; only the
//! HTTP endpoint of an OAuth resource server hands one out and reads it.

use std::sync::{Arc, OnceLock};

/// Where the `authorize` stage's scope denial of a call (the scopes the call needs, from
/// [`milpa::ToolResult::required_scopes`]) is left for the HTTP layer, which turns the
/// response into a `403 insufficient_scope` challenge. One per request; the first denial
/// wins.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScopeDenial(Arc<OnceLock<Vec<String>>>);

impl ScopeDenial {
    /// Records the scopes a denied call needs.
    pub(crate) fn record(&self, needed: Vec<String>) {
        let _ = self.0.set(needed);
    }

    /// The scopes recorded, if a call was denied for lacking one.
    #[cfg(feature = "oauth")]
    pub(crate) fn needed(&self) -> Option<&[String]> {
        self.0.get().map(Vec::as_slice)
    }
}
