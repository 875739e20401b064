//! Confirmation: one-time tokens that hold a mutating call until its caller confirms it.
//!
//! The first call of a tool that needs confirmation stores its (validated, clamped)
//! arguments under a fresh token and hands back a
//! [`ConfirmationTicket`](crate::ConfirmationTicket) instead of running. Redeeming it
//! ([`ToolRegistry::redeem`](crate::ToolRegistry::redeem), or a legacy replay with the
//! `confirm_token` argument) runs the **stored** arguments. A token is bound to the tool,
//! the principal and the channel that asked for it, expires (60 s by default) and works once.

mod memory;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::ToolContext;
use crate::deferred::Deferred;

pub use crate::random_id::random_hex_128;
pub use crate::store_error::StoreError;
pub use memory::InMemoryConfirmationStore;

/// How long a token lives when nothing else is configured.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// The message of every refused token: unknown, expired, reused, foreign or not a string.
pub const INVALID_TOKEN_MESSAGE: &str = "Invalid or expired confirmation token";

/// Milliseconds since the Unix epoch.
pub fn unix_millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Who a token was issued to; a redemption must match all three.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmationBinding {
    /// The tool the token confirms.
    pub tool: String,
    /// The principal that asked (`None` when anonymous).
    pub principal: Option<String>,
    /// The channel it asked over.
    pub channel: String,
}

impl ConfirmationBinding {
    /// The binding of a call to `tool` in `ctx`: the one rule both the pipeline (issuing and
    /// redeeming) and a transport (revoking a declined token) follow.
    pub fn for_call(tool: &str, ctx: &ToolContext) -> Self {
        ConfirmationBinding {
            tool: tool.to_owned(),
            principal: ctx.principal().map(str::to_owned),
            channel: ctx.channel().to_owned(),
        }
    }
}

/// A call waiting for its confirmation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingConfirmation {
    /// Who may redeem it.
    pub binding: ConfirmationBinding,
    /// The first call's arguments, which the redemption runs.
    pub args: Value,
    /// `tool(key=value, …)`, for people.
    pub action_summary: String,
    /// Expiry, in milliseconds since the Unix epoch (valid up to and including it).
    pub expires_at_ms: u64,
}

/// Where pending confirmations live. Implementations must make `consume` atomic: two
/// concurrent redemptions of one token never both succeed.
pub trait ConfirmationStore: Send + Sync + 'static {
    /// Stores `pending` under `token`. Fails (changing nothing) when the backend does.
    fn insert<'a>(
        &'a self,
        token: String,
        pending: PendingConfirmation,
    ) -> Deferred<'a, Result<(), StoreError>>;

    /// Removes and returns the pending call if `token` exists, has not expired at `now_ms`
    /// and was issued to `binding`. A token presented by someone else stays redeemable by
    /// its owner; an expired one is removed. Fails when the backend does; the pipeline then
    /// refuses the call (`UNAVAILABLE`).
    fn consume<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>>;

    /// Returns the pending call under `token`, *without* removing it, if it exists, has not
    /// expired at `now_ms` and was issued to `binding`; changes nothing either way.
    ///
    /// The authorize stage reads with it the arguments a replay will run, so that the call
    /// policy judges those (not the token the replay sent) before anything is spent; the
    /// confirm stage then redeems with [`consume`](Self::consume), which alone is one-time.
    /// Fails when the backend does; the pipeline then refuses the call (`UNAVAILABLE`).
    fn peek<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>>;
}
