//! [`KeySpace`]: how the stores spell their Redis keys.
//!
//! ```text
//! <prefix>rate:<channel>:<principal>:<tool>    GCRA state: one string, TTL = time to refill
//! <prefix>confirm:<token>                      a pending confirmation: one hash, PXAT its expiry
//! <prefix>{verification}:request:<id>          a verification request: one hash, TTL = retention
//! <prefix>{verification}:pending               pending request ids, scored by created_at_ms
//! <prefix>{verification}:resolved              resolved request ids, scored by resolved_at_ms
//! <prefix>secret:<name>                        a shared secret: 32 random bytes, no expiry
//! <prefix>{passkeys}:credential:<id>           an approver's passkey: one hash, no expiry
//! <prefix>{passkeys}:actor:<actor>             that actor's credential ids, by enrolment time
//! <prefix>passkey-enrolment:<sha256>           a one-time enrolment: one hash, PXAT its expiry
//! <prefix>pin:<kind>:<len>:<scope>:<name>      a pinned definition: one hash, no expiry
//! ```
//!
//! The budget, confirmation and pin scripts each touch one key, so those keys carry no hash tag
//! (a tag would only pin unrelated keys to one slot). The verification scripts change a
//! request and its place in the two indexes atomically, and Redis Cluster runs a script
//! only on keys of one slot: the `{verification}` tag puts a deployment's requests and
//! indexes in one slot (a prefix with braces of its own would decide the tag instead, so a
//! clustered deployment keeps braces out of its prefix). A request's id comes after
//! `request:`, so no id can spell an index's key.
//!
//! A passkey, enrolment, secret or confirmation key ends in its one caller-given part, so
//! that part cannot spell another key. A pin has two, a scope and a name, either of which
//! may hold a `:`, so its scope goes behind its length in bytes: scope `a:b` with name `c`
//! is `pin:tool:3:a:b:c`, scope `a` with name `b:c` is `pin:tool:1:a:b:c`, and no two
//! pairs share a key. `<kind>` is `tool` or `prompt`.

use milpa::approval::pins::DefinitionKind;
use milpa::rate_limit::RateKey;

/// The keys of one deployment (one prefix).
#[derive(Debug, Clone)]
pub(crate) struct KeySpace {
    prefix: String,
    pending_verifications: String,
    resolved_verifications: String,
}

/// What every passkey key starts with after the prefix: a hash tag, so a credential and
/// its actor's index share a cluster slot.
const PASSKEY_TAG: &str = "{passkeys}:";

/// What every verification key starts with after the prefix: the hash tag that keeps them
/// in one cluster slot.
const VERIFICATION_TAG: &str = "{verification}:";

impl KeySpace {
    pub(crate) fn new(prefix: &str) -> Self {
        KeySpace {
            prefix: prefix.to_owned(),
            pending_verifications: format!("{prefix}{VERIFICATION_TAG}pending"),
            resolved_verifications: format!("{prefix}{VERIFICATION_TAG}resolved"),
        }
    }

    /// The budget of `key`, spelled as the core spells it (`channel:principal:tool`).
    pub(crate) fn rate(&self, key: RateKey<'_>) -> String {
        let mut out = self.with_capacity("rate:", 0);
        key.write_to(&mut out);
        out
    }

    /// A pending confirmation.
    pub(crate) fn confirmation(&self, token: &str) -> String {
        let mut out = self.with_capacity("confirm:", token.len());
        out.push_str(token);
        out
    }

    /// A verification request.
    pub(crate) fn verification(&self, id: &str) -> String {
        let mut out = self.with_capacity(VERIFICATION_TAG, "request:".len() + id.len());
        out.push_str("request:");
        out.push_str(id);
        out
    }

    /// A secret every replica shares.
    pub(crate) fn secret(&self, name: &str) -> String {
        let mut out = self.with_capacity("secret:", name.len());
        out.push_str(name);
        out
    }

    /// An enrolled passkey, by credential id.
    pub(crate) fn passkey(&self, credential_id: &str) -> String {
        let mut out = self.with_capacity(PASSKEY_TAG, "credential:".len() + credential_id.len());
        out.push_str("credential:");
        out.push_str(credential_id);
        out
    }

    /// The credential ids of `actor`, scored by enrolment time.
    pub(crate) fn passkeys_of(&self, actor: &str) -> String {
        let mut out = self.with_capacity(PASSKEY_TAG, "actor:".len() + actor.len());
        out.push_str("actor:");
        out.push_str(actor);
        out
    }

    /// A pending enrolment, by the SHA-256 of its token.
    pub(crate) fn enrolment(&self, token_hash: &str) -> String {
        let mut out = self.with_capacity("passkey-enrolment:", token_hash.len());
        out.push_str(token_hash);
        out
    }

    /// The pin of `scope`'s `kind` named `name`. The scope is length-prefixed, since both
    /// it and the name may hold any character (a `:` included).
    pub(crate) fn pin(&self, scope: &str, kind: DefinitionKind, name: &str) -> String {
        let mut out = self.with_capacity("pin:", scope.len() + name.len() + 16);
        out.push_str(kind.as_str());
        out.push(':');
        out.push_str(&scope.len().to_string());
        out.push(':');
        out.push_str(scope);
        out.push(':');
        out.push_str(name);
        out
    }

    /// The ids of the pending verification requests, scored by `created_at_ms`.
    pub(crate) fn pending_verifications(&self) -> &str {
        &self.pending_verifications
    }

    /// The ids of the resolved verification requests, scored by `resolved_at_ms`.
    pub(crate) fn resolved_verifications(&self) -> &str {
        &self.resolved_verifications
    }

    fn with_capacity(&self, kind: &str, extra: usize) -> String {
        let mut out = String::with_capacity(self.prefix.len() + kind.len() + extra + 32);
        out.push_str(&self.prefix);
        out.push_str(kind);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_prefix_and_their_kind() {
        let keys = KeySpace::new("milpa:");
        let rate = RateKey {
            channel: "mcp",
            principal: "alice",
            tool: "echo",
        };
        assert_eq!(keys.rate(rate), "milpa:rate:mcp:alice:echo");
        assert_eq!(keys.confirmation("ab12"), "milpa:confirm:ab12");
        assert_eq!(keys.verification("r-1"), "milpa:{verification}:request:r-1");
        assert_eq!(keys.secret("state"), "milpa:secret:state");
        assert_eq!(keys.pending_verifications(), "milpa:{verification}:pending");
        assert_eq!(
            keys.resolved_verifications(),
            "milpa:{verification}:resolved"
        );
        // No id spells an index's key.
        assert_ne!(keys.verification("pending"), keys.pending_verifications());
        assert_eq!(
            keys.pin("fs", DefinitionKind::Tool, "read"),
            "milpa:pin:tool:2:fs:read"
        );
    }

    #[test]
    fn no_scope_and_name_spell_another_pairs_pin() {
        let keys = KeySpace::new("milpa:");
        let pin = |scope, name| keys.pin(scope, DefinitionKind::Tool, name);
        assert_ne!(pin("a:b", "c"), pin("a", "b:c"));
        assert_ne!(pin("1:a", "b"), pin("1", "a:b"));
        assert_ne!(pin("", "a:b"), pin("a", "b"));
        assert_ne!(
            keys.pin("fs", DefinitionKind::Tool, "read"),
            keys.pin("fs", DefinitionKind::Prompt, "read")
        );
    }

    /// The part of `key` Redis Cluster hashes to pick its slot: the text between the first
    /// `{` and the next `}`, when not empty; the whole key otherwise.
    fn hashed_part(key: &str) -> &str {
        if let Some(open) = key.find('{')
            && let Some(len) = key[open + 1..].find('}')
            && len > 0
        {
            return &key[open + 1..open + 1 + len];
        }
        key
    }

    #[test]
    fn a_deployments_verification_keys_share_one_cluster_slot() {
        for prefix in ["milpa:", "", "ops:eu-1:"] {
            let keys = KeySpace::new(prefix);
            for key in [
                keys.verification("r-1"),
                keys.verification("{other}"),
                keys.pending_verifications().to_owned(),
                keys.resolved_verifications().to_owned(),
            ] {
                assert_eq!(hashed_part(&key), "verification", "{key}");
            }
        }
    }
}
