//! The store's resource limiter, and [`LimitHit`]: which limit stopped a call.
//!
//! Growth past a limit traps (rather than letting `memory.grow` return -1): a guest that
//! handles a failed `malloc` badly would otherwise run on in an undefined state, and a trap
//! lets the host say exactly which limit was hit.

use wasmtime::ResourceLimiter;

/// Table elements a component may have, all tables together: far more than any compiled
/// C, Rust or JavaScript guest uses for its function tables.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Which sandbox limit a call ran into: `meta.sandbox_limit` of a `SANDBOX_LIMIT` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitHit {
    /// Linear memory past `memory_mib`.
    #[error("the component asked for more than its memory limit of {mib} MiB")]
    Memory {
        /// The cap.
        mib: u32,
    },
    /// Table elements past [`MAX_TABLE_ELEMENTS`].
    #[error("the component grew its tables past {MAX_TABLE_ELEMENTS} elements")]
    Table,
    /// Wasm frames past [`MAX_WASM_STACK`](crate::MAX_WASM_STACK).
    #[error("the component recursed past its stack limit of {} KiB", crate::MAX_WASM_STACK / 1024)]
    Stack,
    /// Standard output or standard error filled its capture.
    #[error("the component wrote more than {bytes} bytes to {stream}")]
    Output {
        /// `stdout` or `stderr`.
        stream: &'static str,
        /// The cap.
        bytes: usize,
    },
    /// The call's wall time ran out (reported with `TIMEOUT`, not `SANDBOX_LIMIT`).
    #[error("the component ran past its timeout")]
    WallTime,
}

impl LimitHit {
    /// The word in `meta.sandbox_limit`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LimitHit::Memory { .. } => "memory",
            LimitHit::Table => "table",
            LimitHit::Stack => "stack",
            LimitHit::Output { .. } => "output",
            LimitHit::WallTime => "time",
        }
    }
}

/// Counts memory and table growth across the whole store against the sandbox's caps.
#[derive(Debug)]
pub(crate) struct Limits {
    memory_mib: u32,
    memory_cap: usize,
    memory_used: usize,
    table_used: usize,
}

impl Limits {
    pub(crate) fn new(memory_mib: u32, memory_cap: usize) -> Limits {
        Limits {
            memory_mib,
            memory_cap,
            memory_used: 0,
            table_used: 0,
        }
    }
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .memory_used
            .saturating_add(desired.saturating_sub(current));
        if total > self.memory_cap {
            return Err(wasmtime::Error::new(LimitHit::Memory {
                mib: self.memory_mib,
            }));
        }
        self.memory_used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .table_used
            .saturating_add(desired.saturating_sub(current));
        if total > MAX_TABLE_ELEMENTS {
            return Err(wasmtime::Error::new(LimitHit::Table));
        }
        self.table_used = total;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_counts_every_memory_of_the_store() {
        let mut limits = Limits::new(1, 1024 * 1024);
        assert!(limits.memory_growing(0, 512 * 1024, None).unwrap());
        assert!(limits.memory_growing(0, 512 * 1024, None).unwrap());
        let error = limits
            .memory_growing(512 * 1024, 576 * 1024, None)
            .unwrap_err();
        assert_eq!(
            error.downcast_ref::<LimitHit>(),
            Some(&LimitHit::Memory { mib: 1 })
        );
    }

    #[test]
    fn tables_are_capped() {
        let mut limits = Limits::new(1, 1024);
        assert!(limits.table_growing(0, 10, None).unwrap());
        let error = limits
            .table_growing(10, MAX_TABLE_ELEMENTS + 1, None)
            .unwrap_err();
        assert_eq!(error.downcast_ref::<LimitHit>(), Some(&LimitHit::Table));
    }
}
