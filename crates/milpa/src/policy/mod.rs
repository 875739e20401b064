//! Authorization: [`PolicyGate`] with per-channel policies and an optional rule provider.

mod call_policy;
mod channel;
mod gate;
mod rules;
mod subject;

pub use call_policy::{AccessInput, CallPolicy, ListingInput, PolicyDecision, PolicyInput};
pub use channel::ChannelPolicy;
pub use gate::{Authorization, Confirmation, PolicyGate};
pub(crate) use gate::{CallerDenial, blocks_mutating, caller_denial};
pub use rules::{
    PolicyRule, PolicyRuleProvider, RuleEffect, RuleQuery, StaticRule, StaticRuleProvider,
    glob_matches,
};
pub use subject::Access;
pub(crate) use subject::Subject;
