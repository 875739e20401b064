//! The manifest parser and everything built from a manifest it accepts: the registry (policy,
//! rules, rate limit, verification and command tools), the authenticator, the server
//! options and each command tool's argv for its defaults.

#![no_main]

use libfuzzer_sys::fuzz_target;
use milpa_cli::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let manifest = match Manifest::parse("fuzz.toml", text) {
        Ok(manifest) => manifest,
        Err(error) => {
            // Every refusal names the file.
            assert!(error.to_string().starts_with("fuzz.toml"), "{error}");
            return;
        }
    };
    // The store URL it names, the registry on memory stores, the authenticator, the
    // server options and each command tool's argv: built, never run.
    milpa_cli::build_all_of(&manifest);
});
