//! The `milpa` binary.

fn main() -> std::process::ExitCode {
    milpa_cli::main()
}
