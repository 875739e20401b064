//! [`ChannelPolicy`]: what a channel demands of every call made over it.

use serde::{Deserialize, Serialize};

/// The rules a channel applies to every call. Missing keys read as `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
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
    /// Parks every mutating tool until a person other than the caller approves it (see
    /// [`approval`](crate::approval)); wins over `require_confirmation_for_mutating`.
    pub require_human_approval_for_mutating: bool,
}

impl ChannelPolicy {
    /// `cli`: a person at their own terminal; every call is allowed.
    pub const CLI: ChannelPolicy = ChannelPolicy {
        allow_all: true,
        require_auth: false,
        block_mutating: false,
        require_confirmation_for_mutating: false,
        require_human_approval_for_mutating: false,
    };

    /// `mcp` and `web`: an authenticated principal is required.
    pub const AUTHENTICATED: ChannelPolicy = ChannelPolicy {
        allow_all: false,
        require_auth: true,
        block_mutating: false,
        require_confirmation_for_mutating: false,
        require_human_approval_for_mutating: false,
    };

    /// `telegram`: mutating tools ask for confirmation.
    pub const TELEGRAM: ChannelPolicy = ChannelPolicy {
        allow_all: false,
        require_auth: false,
        block_mutating: false,
        require_confirmation_for_mutating: true,
        require_human_approval_for_mutating: false,
    };

    /// Any channel without a policy: treated as untrusted (requires authentication).
    pub const FAIL_CLOSED: ChannelPolicy = ChannelPolicy::AUTHENTICATED;

    /// The same policy with `allow_all` set to `on` (the struct is `#[non_exhaustive]`:
    /// build policies from a constant or the default with these).
    pub const fn with_allow_all(mut self, on: bool) -> Self {
        self.allow_all = on;
        self
    }

    /// The same policy with `require_auth` set to `on`.
    pub const fn with_require_auth(mut self, on: bool) -> Self {
        self.require_auth = on;
        self
    }

    /// The same policy with `block_mutating` set to `on`.
    pub const fn with_block_mutating(mut self, on: bool) -> Self {
        self.block_mutating = on;
        self
    }

    /// The same policy with `require_confirmation_for_mutating` set to `on`.
    pub const fn with_require_confirmation_for_mutating(mut self, on: bool) -> Self {
        self.require_confirmation_for_mutating = on;
        self
    }

    /// The same policy with `require_human_approval_for_mutating` set to `on`.
    pub const fn with_require_human_approval_for_mutating(mut self, on: bool) -> Self {
        self.require_human_approval_for_mutating = on;
        self
    }
}
