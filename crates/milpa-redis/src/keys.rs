//! [`KeySpace`]: how the stores spell their Redis keys.
//!
//! ```text
//! <prefix>rate:<channel>:<principal>:<tool>   GCRA state: one string, TTL = time to refill
//! <prefix>confirm:<token>                     a pending confirmation: one hash, PXAT its expiry
//! <prefix>verification:<id>                   a verification request: one hash, TTL = retention
//! ```
//!
//! No hash tags: every script reads and writes exactly one key, which is all Redis Cluster
//! asks of a script, and a tag would only pin unrelated keys to one slot (one node).

use milpa::rate_limit::RateKey;

/// The keys of one deployment (one prefix).
#[derive(Debug, Clone)]
pub(crate) struct KeySpace {
    prefix: String,
}

impl KeySpace {
    pub(crate) fn new(prefix: &str) -> Self {
        KeySpace {
            prefix: prefix.to_owned(),
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
        let mut out = self.with_capacity("verification:", id.len());
        out.push_str(id);
        out
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
        assert_eq!(keys.verification("r-1"), "milpa:verification:r-1");
    }
}
