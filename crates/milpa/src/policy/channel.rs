//! [`ChannelPolicy`]: what a channel demands of every call made over it.

use serde::{Deserialize, Serialize};

/// The rules a channel applies to every call. Missing keys read as `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelPolicy {
    /// Lets mutating tools through even when `block_mutating` is set. It does **not** skip
    /// authentication, scopes or rules.
    pub allow_all: bool,
    /// Denies calls without a principal.
    pub require_auth: bool,
    /// Denies every mutating tool.
    pub block_mutating: bool,
    /// Makes every mutating tool ask for confirmation.
    pub require_confirmation_for_mutating: bool,
}

impl ChannelPolicy {
    /// `cli`: a person at their own terminal; every call is allowed.
    pub const CLI: ChannelPolicy = ChannelPolicy {
        allow_all: true,
        require_auth: false,
        block_mutating: false,
        require_confirmation_for_mutating: false,
    };

    /// `mcp` and `web`: an authenticated principal is required.
    pub const AUTHENTICATED: ChannelPolicy = ChannelPolicy {
        allow_all: false,
        require_auth: true,
        block_mutating: false,
        require_confirmation_for_mutating: false,
    };

    /// `telegram`: mutating tools ask for confirmation.
    pub const TELEGRAM: ChannelPolicy = ChannelPolicy {
        allow_all: false,
        require_auth: false,
        block_mutating: false,
        require_confirmation_for_mutating: true,
    };

    /// Any channel without a policy: treated as untrusted (requires authentication).
    pub const FAIL_CLOSED: ChannelPolicy = ChannelPolicy::AUTHENTICATED;
}
