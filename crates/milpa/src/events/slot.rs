//! [`InterceptionSlot`]: how a `tool.executing` listener answers for a tool or vetoes it.

use parking_lot::Mutex;

use crate::definition::ToolOutput;

#[derive(Debug, Default)]
struct SlotState {
    stopped: bool,
    result: Option<ToolOutput>,
}

/// Travels with `tool.executing`. A listener may [`short_circuit`](Self::short_circuit)
/// (answer instead of the tool: the call returns that answer, audited as cache-served) or
/// [`stop`](Self::stop) (veto: the call returns a blocked result). Either stops the
/// remaining listeners.
#[derive(Debug, Default)]
pub struct InterceptionSlot {
    state: Mutex<SlotState>,
}

impl InterceptionSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut SlotState) -> R) -> R {
        let mut guard = self.state.lock();
        f(&mut guard)
    }

    /// Answers for the tool (a later call overwrites the answer) and stops the listeners.
    pub fn short_circuit(&self, result: impl Into<ToolOutput>) {
        let result = result.into();
        self.with(|s| {
            s.result = Some(result);
            s.stopped = true;
        });
    }

    /// Vetoes the call without an answer (an answer set before is kept).
    pub fn stop(&self) {
        self.with(|s| s.stopped = true);
    }

    /// Whether a listener stopped the call (by answering or vetoing).
    pub fn is_stopped(&self) -> bool {
        self.with(|s| s.stopped)
    }

    /// Whether a listener answered.
    pub fn has_result(&self) -> bool {
        self.with(|s| s.result.is_some())
    }

    /// Takes the answer, if any.
    pub fn take_result(&self) -> Option<ToolOutput> {
        self.with(|s| s.result.take())
    }
}
