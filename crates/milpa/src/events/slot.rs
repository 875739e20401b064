//! [`InterceptionSlot`]: how a `tool.executing` listener answers for a tool or vetoes it.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::definition::ToolOutput;

/// Travels with `tool.executing`. A listener may [`short_circuit`](Self::short_circuit)
/// (answer instead of the tool: the call returns that answer, audited as cache-served) or
/// [`stop`](Self::stop) (veto: the call returns a blocked result). Either stops the
/// remaining listeners.
#[derive(Debug, Default)]
pub struct InterceptionSlot {
    // Every call with a dispatcher asks whether the slot was stopped after each listener
    // and once more at the end, and almost never finds it so: an atomic flag answers that
    // with a plain load, where the one lock over both fields it replaces cost a lock and
    // an unlock each time. Set (`Release`) only after an answer is in `result`, so a
    // reader that sees it unset knows there is no answer without taking the lock.
    stopped: AtomicBool,
    result: Mutex<Option<ToolOutput>>,
}

impl InterceptionSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers for the tool (a later call overwrites the answer) and stops the listeners.
    pub fn short_circuit(&self, result: impl Into<ToolOutput>) {
        let result = result.into();
        *self.result.lock() = Some(result);
        self.stopped.store(true, Ordering::Release);
    }

    /// Vetoes the call without an answer (an answer set before is kept).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Whether a listener stopped the call (by answering or vetoing).
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Whether a listener answered.
    pub fn has_result(&self) -> bool {
        self.is_stopped() && self.result.lock().is_some()
    }

    /// Takes the answer, if any.
    pub fn take_result(&self) -> Option<ToolOutput> {
        if !self.is_stopped() {
            return None;
        }
        self.result.lock().take()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_untouched_slot_is_neither_stopped_nor_answered() {
        let slot = InterceptionSlot::new();
        assert!(!slot.is_stopped());
        assert!(!slot.has_result());
        assert!(slot.take_result().is_none());
    }

    #[test]
    fn an_answer_stops_and_is_taken_once_and_a_later_answer_wins() {
        let slot = InterceptionSlot::new();
        slot.short_circuit(json!(1));
        slot.short_circuit(json!(2));
        assert!(slot.is_stopped());
        assert!(slot.has_result());
        match slot.take_result() {
            Some(ToolOutput::Data(data)) => assert_eq!(data, json!(2)),
            other => panic!("expected the later answer, got {other:?}"),
        }
        assert!(slot.take_result().is_none(), "taken once");
        assert!(slot.is_stopped(), "still stopped after the answer is taken");
    }

    #[test]
    fn a_veto_keeps_an_answer_given_before_it() {
        let slot = InterceptionSlot::new();
        slot.stop();
        assert!(slot.is_stopped());
        assert!(!slot.has_result());
        slot.short_circuit(json!("cached"));
        slot.stop();
        assert!(slot.has_result());
    }

    #[test]
    fn an_answer_given_on_another_thread_is_seen_with_its_flag() {
        let slot = InterceptionSlot::new();
        std::thread::scope(|scope| {
            scope.spawn(|| slot.short_circuit(json!({"from": "thread"})));
        });
        assert!(slot.is_stopped());
        assert!(matches!(slot.take_result(), Some(ToolOutput::Data(_))));
    }
}
