//! Times as a person reads them on the page: "3 min ago", "(expires) in 57 min".

/// How long `ms` milliseconds are, in the largest unit that keeps the number small:
/// `12 s`, `3 min`, `5 h`, `2 days`.
pub(crate) fn span(ms: u64) -> String {
    let seconds = ms / 1000;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..172_800 => format!("{} h", seconds / 3600),
        _ => format!("{} days", seconds / 86_400),
    }
}

/// `3 min ago` for a moment `at_ms` before `now_ms` (`just now` under five seconds).
pub(crate) fn ago(at_ms: u64, now_ms: u64) -> String {
    let elapsed = now_ms.saturating_sub(at_ms);
    if elapsed < 5_000 {
        "just now".to_owned()
    } else {
        format!("{} ago", span(elapsed))
    }
}

/// `in 57 min` until `expires_at_ms` (read after "Expires"), or `now` once it has passed.
pub(crate) fn remaining(expires_at_ms: u64, now_ms: u64) -> String {
    if expires_at_ms <= now_ms {
        "now".to_owned()
    } else {
        format!("in {}", span(expires_at_ms - now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_pick_a_readable_unit() {
        assert_eq!(span(0), "0 s");
        assert_eq!(span(59_999), "59 s");
        assert_eq!(span(60_000), "1 min");
        assert_eq!(span(57 * 60_000 + 30_000), "57 min");
        assert_eq!(span(3_600_000), "1 h");
        assert_eq!(span(47 * 3_600_000), "47 h");
        assert_eq!(span(3 * 86_400_000), "3 days");
    }

    #[test]
    fn ages_and_expiries_read_as_sentences() {
        let now = 10_000_000;
        assert_eq!(ago(now - 1_000, now), "just now");
        assert_eq!(ago(now - 180_000, now), "3 min ago");
        // A clock that stepped back does not produce a negative age.
        assert_eq!(ago(now + 5_000, now), "just now");
        assert_eq!(remaining(now + 57 * 60_000, now), "in 57 min");
        assert_eq!(remaining(now, now), "now");
    }
}
