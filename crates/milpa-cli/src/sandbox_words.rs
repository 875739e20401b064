//! `milpa tools inspect` on a `wasm` tool: its sandbox's grants and limits in words, from
//! the description milpa-wasm gives ([`milpa_wasm::Sandbox::describe`] plus the component's
//! path), so what is printed is what the sandbox enforces.

use serde_json::Value;

/// The grants as a paragraph after the plan: the component, what it may read, write and
/// reach, the variables it sees (by name), and the limits that stop a call.
pub(crate) fn explain(grants: &Value) -> String {
    let list = |field: &str| -> Vec<String> {
        grants[field]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .map_or_else(|| item.to_string(), str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let or_none = |items: Vec<String>| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    let number = |field: &str| grants[field].as_f64().unwrap_or(0.0);
    let mut text = format!(
        "\nSandbox: the WebAssembly component {} runs with only these grants:\n",
        grants["wasm"].as_str().unwrap_or("?")
    );
    text.push_str(&format!(
        "  - reads the folders: {}\n",
        or_none(list("fs_read"))
    ));
    text.push_str(&format!(
        "  - reads and writes the folders: {}\n",
        or_none(list("fs_write"))
    ));
    let hosts = list("allow_hosts");
    if hosts.is_empty() {
        text.push_str("  - network: none (no outgoing HTTP, no sockets)\n");
    } else {
        text.push_str(&format!(
            "  - network: outgoing HTTP to {} only (no sockets)\n",
            hosts.join(", ")
        ));
    }
    text.push_str(&format!(
        "  - environment variables: {}\n",
        match list("env") {
            names if names.is_empty() => "none".to_owned(),
            names => format!("{} (values not shown)", names.join(", ")),
        }
    ));
    text.push_str(&format!(
        "  - limits: {} MiB of memory, {}s of wall time (then stopped: TIMEOUT), a result of at most {} bytes, output kept up to {} bytes\n",
        number("memory_mib"),
        number("timeout_seconds"),
        number("max_result_bytes"),
        number("max_output_bytes"),
    ));
    text.push_str("  A fresh instance runs each call and is dropped after it: nothing is kept between callers.\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_and_their_absence_are_said() {
        let sandbox = milpa_wasm::Sandbox::new()
            .allow_read("/srv/data")
            .allow_host("api.example.com")
            .with_env("TOKEN", "s3cret");
        let mut grants = sandbox.describe();
        grants["wasm"] = Value::String("/etc/milpa/tools/t.wasm".into());
        let text = explain(&grants);
        assert!(text.contains("component /etc/milpa/tools/t.wasm"), "{text}");
        assert!(text.contains("reads the folders: /srv/data"), "{text}");
        assert!(
            text.contains("reads and writes the folders: none"),
            "{text}"
        );
        assert!(
            text.contains("outgoing HTTP to api.example.com only"),
            "{text}"
        );
        assert!(text.contains("TOKEN (values not shown)"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("64 MiB of memory"), "{text}");
        let text = explain(&milpa_wasm::Sandbox::new().describe());
        assert!(
            text.contains("network: none (no outgoing HTTP, no sockets)"),
            "{text}"
        );
        assert!(text.contains("environment variables: none"), "{text}");
    }
}
