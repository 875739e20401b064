//! When the stdio loop polls its input instead of parking its thread: an adaptive spin.
//!
//! Parking a thread and waking it again costs tens of microseconds on a virtual machine,
//! which dominates one call at a time when the client answers within microseconds (a
//! benchmark, a proxy in front of a fast server). Polling for a moment after each answer
//! avoids that wake-up, but every poll that finds nothing is CPU time taken from the rest
//! of the machine: a client that calls every 2 ms (a real agent's pace) would pay the
//! whole window on every call and gain nothing.
//!
//! So the spin is judged by its results. An *episode* starts when the loop has answered
//! something (input it read, or a call running in its own task that finished) and lasts
//! at most a window ([`IDLE_POLL`], or [`CALL_POLL`] while calls run). The next event of the
//! client or of a call either comes within the window (a hit: the spin paid) or the window
//! runs out and the thread parks (a miss: the window was burnt for nothing). A credit goes
//! up by [`HIT_GAIN`] per hit and down by [`MISS_COST`] per miss, between 0 and
//! [`MAX_CREDIT`]; the loop spins only while it has credit. With these weights spinning
//! continues while at least three episodes in five pay, and stops after a few misses in a
//! row. While it is stopped, each episode is still judged by the time the next event took:
//! one that came within twice the window (the wake-up of the parked thread is part of what
//! is measured) would have been a hit, and earns credit back.
//!
//! Only answers start an episode. Notifications a running call sends (progress, logs) are
//! not answers, so a chatty tool does not keep a core busy; nor do messages the server
//! sends on its own.
//!
//! It can be turned off: [`ServerOptions::spin_before_park`](crate::ServerOptions::spin_before_park) or the
//! environment variable [`STDIO_SPIN_ENV`] set to `0` (or `off`).

use std::time::{Duration, Instant};

/// After an answer, how long the connection keeps polling its input through the reactor
/// (yielding to other tasks in between) before it parks, when nothing runs.
///
/// A client waiting for an answer usually sends its next message within microseconds,
/// and waking a parked thread costs tens of microseconds on virtual machines, which
/// dominates one-at-a-time calls. Measured with `bench_stdio` on an idle two-core VM,
/// one call in flight: about 48 000 calls/s with this poll (and the eager reader,
/// `unix::EagerReader`), 10 500 without; 32 in flight is the same either way (about
/// 205 000-220 000). The cost is at most this much CPU time per episode, and episodes
/// stop when they stop paying (see the module doc).
pub(super) const IDLE_POLL: Duration = Duration::from_micros(50);

/// While a call of this connection runs in its own task (an async tool waiting on I/O: a
/// gateway's upstream, say), the window instead of `IDLE_POLL`, so an answer that comes
/// back within it is picked up without a thread wake-up.
///
/// Measured with `bench_stdio --tool get-sum --proxy milpa -- node …/server-everything…`
/// (the npm reference server behind `milpa proxy`, one call in flight, both builds in one
/// run): the proxy added 12.5 µs per call with this poll, 63.1 µs without, because the
/// Node server answers after about 80 µs, when an `IDLE_POLL` alone has already parked the
/// thread.
pub(super) const CALL_POLL: Duration = Duration::from_micros(300);

/// Credit a paying episode earns.
const HIT_GAIN: u8 = 2;

/// Credit an episode that ran out costs: a miss burns a whole window, a hit saves one
/// wake-up, which on the machines measured costs about as much as the idle window.
const MISS_COST: u8 = 3;

/// The most credit: after a long run of hits, this many misses in a row stop the spin
/// (MAX_CREDIT / MISS_COST, rounded up).
const MAX_CREDIT: u8 = 12;

/// The environment variable that turns the spin off when set to `0` or `off` (for a
/// machine where every core is busy, or to measure without it).
pub const STDIO_SPIN_ENV: &str = "MILPA_MCP_SPIN";

/// Whether the environment turns the spin off.
pub(super) fn disabled_by_env() -> bool {
    std::env::var(STDIO_SPIN_ENV).is_ok_and(|value| {
        let value = value.trim();
        value == "0" || value.eq_ignore_ascii_case("off") || value.eq_ignore_ascii_case("false")
    })
}

/// The spin's state for one connection.
#[derive(Debug)]
pub(super) struct Spin {
    enabled: bool,
    credit: u8,
    /// When the current episode started (the last answer was written).
    since: Option<Instant>,
    /// The current episode's window, as last decided.
    window: Duration,
    /// The episode is over: it ran out of its window, or it was never spun for lack of
    /// credit.
    resolved: bool,
    /// The episode was spun (so running out of its window was a miss).
    spun: bool,
}

impl Spin {
    /// A spin that starts with full credit (the first calls of a fast client pay at once),
    /// or never spins when `enabled` is false.
    pub(super) fn new(enabled: bool) -> Spin {
        Spin {
            enabled,
            credit: MAX_CREDIT,
            since: None,
            window: IDLE_POLL,
            resolved: true,
            spun: false,
        }
    }

    /// The client or a call did something the loop answers (input arrived, a call
    /// finished), at `now`: judges the episode before it.
    pub(super) fn event(&mut self, now: Instant) {
        if !self.enabled {
            return;
        }
        let Some(since) = self.since.take() else {
            return;
        };
        let gap = now.saturating_duration_since(since);
        let paid = if !self.resolved {
            // Came while the loop was still polling (or before it even looked).
            true
        } else if self.spun {
            // Ran out and was counted as a miss then.
            false
        } else {
            // Not spun for lack of credit: would it have paid? The gap includes waking the
            // parked thread.
            gap < self.window.saturating_mul(2)
        };
        if paid {
            self.credit = self.credit.saturating_add(HIT_GAIN).min(MAX_CREDIT);
        }
        self.resolved = true;
    }

    /// An answer was just written, at `now`: a new episode starts.
    pub(super) fn answered(&mut self, now: Instant) {
        if !self.enabled {
            return;
        }
        self.since = Some(now);
        self.resolved = false;
        self.spun = false;
    }

    /// Whether the loop should poll (yield) rather than park, at `now`, with
    /// `calls_running` calls of this connection in their own tasks.
    pub(super) fn polling(&mut self, now: Instant, calls_running: bool) -> bool {
        if !self.enabled || self.resolved {
            return false;
        }
        let Some(since) = self.since else {
            return false;
        };
        self.window = if calls_running { CALL_POLL } else { IDLE_POLL };
        if self.credit == 0 {
            self.resolved = true;
            return false;
        }
        if now.saturating_duration_since(since) < self.window {
            self.spun = true;
            return true;
        }
        self.resolved = true;
        if self.spun {
            self.credit = self.credit.saturating_sub(MISS_COST);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An episode that runs out of its window.
    fn miss(spin: &mut Spin, at: &mut Instant) {
        spin.answered(*at);
        assert!(spin.polling(*at, false), "spins at the start of an episode");
        *at += IDLE_POLL * 2;
        assert!(!spin.polling(*at, false));
        *at += Duration::from_millis(2);
        spin.event(*at);
    }

    /// An episode whose next event comes while polling.
    fn hit(spin: &mut Spin, at: &mut Instant) -> bool {
        spin.answered(*at);
        let polled = spin.polling(*at, false);
        *at += IDLE_POLL / 5;
        spin.event(*at);
        polled
    }

    #[test]
    fn a_fast_client_keeps_it_spinning() {
        let mut spin = Spin::new(true);
        let mut at = Instant::now();
        for _ in 0..1000 {
            assert!(hit(&mut spin, &mut at));
        }
    }

    #[test]
    fn a_paced_client_stops_it_after_a_few_misses() {
        let mut spin = Spin::new(true);
        let mut at = Instant::now();
        for _ in 0..MAX_CREDIT.div_ceil(MISS_COST) {
            miss(&mut spin, &mut at);
        }
        // Out of credit: the next episodes are not spun at all.
        for _ in 0..100 {
            spin.answered(at);
            assert!(!spin.polling(at, false));
            at += Duration::from_millis(2);
            spin.event(at);
        }
    }

    #[test]
    fn a_client_that_speeds_up_again_earns_the_spin_back() {
        let mut spin = Spin::new(true);
        let mut at = Instant::now();
        for _ in 0..MAX_CREDIT.div_ceil(MISS_COST) {
            miss(&mut spin, &mut at);
        }
        // Not spun, but the next input came soon after the answer.
        spin.answered(at);
        assert!(!spin.polling(at, false));
        at += IDLE_POLL;
        spin.event(at);
        spin.answered(at);
        assert!(spin.polling(at, false));
    }

    #[test]
    fn mostly_misses_do_not_keep_it_spinning() {
        let mut spin = Spin::new(true);
        let mut at = Instant::now();
        let mut wasted = 0;
        for _ in 0..100 {
            hit(&mut spin, &mut at);
            for _ in 0..3 {
                spin.answered(at);
                if spin.polling(at, false) {
                    wasted += 1;
                    at += IDLE_POLL * 2;
                    assert!(!spin.polling(at, false));
                }
                at += Duration::from_millis(2);
                spin.event(at);
            }
        }
        // One event in four comes fast: spinning every time would burn 300 windows.
        assert!(wasted <= 110, "{wasted} windows of 300 burnt");
    }

    #[test]
    fn a_running_call_gets_the_longer_window() {
        let mut spin = Spin::new(true);
        let at = Instant::now();
        spin.answered(at);
        assert!(spin.polling(at + IDLE_POLL * 2, true));
        assert!(!spin.polling(at + CALL_POLL, true));
    }

    #[test]
    fn turned_off_it_never_spins() {
        let mut spin = Spin::new(false);
        let at = Instant::now();
        spin.answered(at);
        assert!(!spin.polling(at, false));
        assert!(!spin.polling(at, true));
    }

    #[test]
    fn nothing_answered_nothing_spun() {
        let mut spin = Spin::new(true);
        assert!(!spin.polling(Instant::now(), true));
    }
}
