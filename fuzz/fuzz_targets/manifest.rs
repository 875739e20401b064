//! The manifest parser and everything built from a manifest it accepts: the registry (policy,
//! rules, rate limit, verification and command tools), the authenticator, the server
//! options and each command tool's argv for its defaults.

#![no_main]

use libfuzzer_sys::fuzz_target;
use milpa_cli::command_tool::CommandTool;
use milpa_cli::manifest::Manifest;
use milpa_cli::setup;
use milpa_cli::store::{StoreUrl, Stores};
use serde_json::json;

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
    // The store a manifest names parses or is refused; the registry is built on memory.
    if let Some(url) = &manifest.store.url {
        let _ = StoreUrl::parse(url.get_ref(), manifest.base_dir());
    }
    let _ = setup::build_registry(&manifest, &Stores::memory(), None, Box::new(|_, _| Ok(())));
    let _ = setup::authenticator(&manifest);
    let _ = setup::server_options(&manifest);
    for spec in &manifest.tools {
        let tool = CommandTool::from_spec(spec, None);
        let _ = tool.argv(&json!({}));
        let _ = spec.input_schema();
    }
});
