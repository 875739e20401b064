//! What a call's end becomes: the guest's answer, a trap or a limit turned into a
//! [`ToolResult`] with its code. No wasmtime backtrace ever reaches a message: traps are
//! reported by their first line.
//!
//! | how the call ended | code | meta |
//! |---|---|---|
//! | `ok(text)`, JSON, within `max_result_bytes` | success, the JSON as data | |
//! | `ok(text)` over `max_result_bytes` | `RESULT_TOO_LARGE` | |
//! | `ok(text)` not JSON | `INVALID_RESULT` | |
//! | `err(invalid-args(msg))` | `VALIDATION_ERROR` | |
//! | `err(failed(msg))` | `TOOL_FAILED` | `stderr` (its tail) |
//! | memory, table, stack or output limit | `SANDBOX_LIMIT` | `sandbox_limit` |
//! | wall time | `TIMEOUT` | `sandbox_limit = "time"` |
//! | any other trap | `SANDBOX_TRAP` | `stderr` (its tail) |
//!
//! Failures are results the tool built (like a command tool's `COMMAND_FAILED`), so they
//! are audited as executed calls with `success: false` and their code.

use milpa::{ErrorCode, ToolOutput, ToolResult};
use serde_json::{Value, json};
use wasmtime::Trap;

use crate::bindings;
use crate::limits::LimitHit;
use crate::runtime::first_line;

/// A sandbox limit stopped the call; `meta.sandbox_limit` says which.
pub const SANDBOX_LIMIT: &str = "SANDBOX_LIMIT";
/// The guest trapped for a reason of its own (`unreachable`, a bad memory access, an
/// `exit`, …).
pub const SANDBOX_TRAP: &str = "SANDBOX_TRAP";
/// The guest's result was not JSON.
pub const INVALID_RESULT: &str = "INVALID_RESULT";
/// The guest answered `failed(msg)`.
pub const TOOL_FAILED: &str = "TOOL_FAILED";

/// How much of standard error a failure carries in `meta.stderr` (its end).
pub const STDERR_TAIL_BYTES: usize = 2048;

/// The result of a guest that returned.
pub(crate) fn returned(
    answer: Result<String, bindings::ToolError>,
    max_result_bytes: usize,
    stderr: &[u8],
) -> ToolOutput {
    let text = match answer {
        Ok(text) => text,
        Err(bindings::ToolError::InvalidArgs(message)) => {
            return ToolResult::validation_error(message).into();
        }
        Err(bindings::ToolError::Failed(message)) => {
            return with_stderr(
                ToolResult::error_with_code(ErrorCode::Other(TOOL_FAILED.into()), message),
                stderr,
            )
            .into();
        }
    };
    if text.len() > max_result_bytes {
        return ToolResult::error_with_code(
            ErrorCode::ResultTooLarge,
            format!(
                "The component returned a result of {} bytes, more than its max_result_bytes ({max_result_bytes}); it was not returned",
                text.len()
            ),
        )
        .into();
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(data) => ToolOutput::Data(data),
        Err(error) => ToolResult::error_with_code(
            ErrorCode::Other(INVALID_RESULT.into()),
            format!(
                "The component's result is not JSON ({error}); it began with {}",
                opening(&text)
            ),
        )
        .into(),
    }
}

/// The result of a call that ended in an error: a limit, a trap, or a host failure.
pub(crate) fn trapped(error: &wasmtime::Error, stderr: &[u8]) -> ToolOutput {
    if let Some(hit) = error.downcast_ref::<LimitHit>() {
        return limit(*hit).into();
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => limit(LimitHit::Stack).into(),
        Some(Trap::Interrupt) => limit(LimitHit::WallTime).into(),
        Some(trap) => with_stderr(
            ToolResult::error_with_code(
                ErrorCode::Other(SANDBOX_TRAP.into()),
                format!("The component trapped: {}", first_line(&trap.to_string())),
            ),
            stderr,
        )
        .into(),
        None => with_stderr(
            ToolResult::error_with_code(
                ErrorCode::Other(SANDBOX_TRAP.into()),
                format!("The component failed: {}", first_line(&error.to_string())),
            ),
            stderr,
        )
        .into(),
    }
}

/// The result of a limit hit: `SANDBOX_LIMIT` (or `TIMEOUT` for wall time) naming it.
pub(crate) fn limit(hit: LimitHit) -> ToolResult {
    let code = match hit {
        LimitHit::WallTime => ErrorCode::Timeout,
        _ => ErrorCode::Other(SANDBOX_LIMIT.into()),
    };
    ToolResult::error_with_code(code, format!("Sandbox limit hit: {hit}"))
        .with_meta("sandbox_limit", json!(hit.as_str()))
}

/// Adds the end of standard error, when there is any, as `meta.stderr`.
fn with_stderr(result: ToolResult, stderr: &[u8]) -> ToolResult {
    if stderr.is_empty() {
        return result;
    }
    let start = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    let tail = String::from_utf8_lossy(&stderr[start..]);
    let tail = tail.trim_start_matches('\u{FFFD}').trim_end();
    result.with_meta("stderr", json!(tail))
}

/// The first characters of a bad result, quoted, so the message shows what came back
/// without repeating all of it.
fn opening(text: &str) -> String {
    const SHOWN: usize = 60;
    let cut: String = text.chars().take(SHOWN).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", json!(cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(output: ToolOutput) -> ToolResult {
        match output {
            ToolOutput::Result(result) => *result,
            ToolOutput::Data(data) => ToolResult::success(data),
            other => panic!("unexpected output {other:?}"),
        }
    }

    #[test]
    fn json_results_become_data() {
        let output = returned(Ok(r#"{"slug":"a-b"}"#.into()), 100, b"");
        assert_eq!(output, ToolOutput::Data(json!({"slug": "a-b"})));
    }

    #[test]
    fn text_that_is_not_json_is_invalid_result() {
        let out = result(returned(Ok("hello there".into()), 100, b""));
        assert_eq!(out.code().map(ErrorCode::as_str), Some(INVALID_RESULT));
        let message = out.error.unwrap();
        assert!(message.contains("not JSON"), "{message}");
        assert!(message.contains("\"hello there\""), "{message}");
    }

    #[test]
    fn large_results_are_refused_before_parsing() {
        let out = result(returned(Ok("[1,2,3,4,5,6]".into()), 4, b""));
        assert_eq!(out.code(), Some(&ErrorCode::ResultTooLarge));
    }

    #[test]
    fn guest_errors_map_to_codes() {
        let invalid = result(returned(
            Err(bindings::ToolError::InvalidArgs("text: empty".into())),
            100,
            b"",
        ));
        assert_eq!(invalid.code(), Some(&ErrorCode::ValidationError));
        assert_eq!(invalid.error.as_deref(), Some("text: empty"));
        let failed = result(returned(
            Err(bindings::ToolError::Failed("disk full".into())),
            100,
            b"warning: low space\n",
        ));
        assert_eq!(failed.code().map(ErrorCode::as_str), Some(TOOL_FAILED));
        assert_eq!(
            failed.meta.get("stderr"),
            Some(&json!("warning: low space"))
        );
    }

    #[test]
    fn limits_name_themselves() {
        let memory = limit(LimitHit::Memory { mib: 8 });
        assert_eq!(memory.code().map(ErrorCode::as_str), Some(SANDBOX_LIMIT));
        assert_eq!(memory.meta.get("sandbox_limit"), Some(&json!("memory")));
        assert!(memory.error.unwrap().contains("8 MiB"));
        let time = limit(LimitHit::WallTime);
        assert_eq!(time.code(), Some(&ErrorCode::Timeout));
    }

    #[test]
    fn traps_keep_their_first_line_only() {
        let error = wasmtime::Error::new(Trap::UnreachableCodeReached)
            .context("error while executing at wasm backtrace:\n    0: 0x1 - f");
        let out = result(trapped(&error, b""));
        assert_eq!(out.code().map(ErrorCode::as_str), Some(SANDBOX_TRAP));
        let message = out.error.unwrap();
        assert!(!message.contains('\n'), "{message}");
        let stack = result(trapped(&wasmtime::Error::new(Trap::StackOverflow), b""));
        assert_eq!(stack.meta.get("sandbox_limit"), Some(&json!("stack")));
    }
}
