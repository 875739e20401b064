//! A program with its own tools gets every `milpa` subcommand in one line; a manifest, when
//! there is one, still adds its policy, tokens and command tools.
//!
//! ```sh
//! cargo run -p milpa-cli --example own_tools -- tools
//! cargo run -p milpa-cli --example own_tools -- call shout '{"text": "hi"}'
//! cargo run -p milpa-cli --example own_tools -- serve
//! ```

use std::sync::Arc;

use milpa::tools;

/// Tools that change text.
#[derive(Debug, Default)]
struct Text;

#[tools]
impl Text {
    /// Upper-cases the text.
    #[tool]
    fn shout(&self, #[param(description = "What to shout")] text: String) -> String {
        text.to_uppercase()
    }
}

fn main() -> std::process::ExitCode {
    milpa_cli::main_with(|registry, _setup| registry.register_provider(Arc::new(Text)).map(|_| ()))
}
