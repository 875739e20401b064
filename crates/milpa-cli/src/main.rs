//! The `milpa` binary.

// mimalloc rather than the system allocator: under `bench_http` with 16 connections, glibc's
// malloc, free and their consolidation were about 16 % of the server's CPU (perf, default
// store), spread over the worker threads' many small allocations (headers, bodies, JSON).
// The library crates leave the allocator to their host; only this binary chooses one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    milpa_cli::main()
}
