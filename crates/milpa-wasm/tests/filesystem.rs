//! Files: without a grant the guest sees no folder at all; a read grant reads, a write
//! grant writes, and nothing else on the host is reachable.

mod common;

use milpa_wasm::Sandbox;
use serde_json::json;

#[tokio::test]
async fn etc_passwd_is_out_of_reach_without_a_grant() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "read", "path": "/etc/passwd"})).await;
    assert!(!result.success);
    assert_eq!(common::code(&result), "TOOL_FAILED");
    let message = result.error.clone().unwrap();
    assert!(message.starts_with("/etc/passwd: "), "{message}");
    assert!(!result.data.to_string().contains("root:"));
    // The host is still up and the next call answers.
    assert!(common::call(&tool, json!({"do": "echo"})).await.success);
}

#[tokio::test]
async fn the_users_ssh_folder_is_out_of_reach() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let ssh = format!("{home}/.ssh");
    for action in ["list", "read"] {
        let path = if action == "read" {
            format!("{ssh}/id_ed25519")
        } else {
            ssh.clone()
        };
        let result = common::call(&tool, json!({"do": action, "path": path})).await;
        assert_eq!(common::code(&result), "TOOL_FAILED", "{action}: {result:?}");
        assert!(result.error.unwrap().starts_with(&path));
    }
}

#[tokio::test]
async fn a_read_grant_reads_and_nothing_else() {
    let granted = tempfile::tempdir().unwrap();
    std::fs::write(granted.path().join("note.txt"), "plain words").unwrap();
    let Some(tool) = common::load("probe", Sandbox::new().allow_read(granted.path())).await else {
        return;
    };
    let canonical = granted.path().canonicalize().unwrap();
    let note = canonical.join("note.txt");
    let result = common::call(&tool, json!({"do": "read", "path": note})).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.data["content"], "plain words");

    // Read-only: no new file, no overwrite.
    let new_file = canonical.join("new.txt");
    let result = common::call(&tool, json!({"do": "write", "path": new_file})).await;
    assert_eq!(common::code(&result), "TOOL_FAILED", "{result:?}");
    assert!(!new_file.exists());
    let result = common::call(&tool, json!({"do": "write", "path": note})).await;
    assert_eq!(common::code(&result), "TOOL_FAILED", "{result:?}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "plain words");

    // A sibling of the granted folder stays out of reach, `..` or not.
    let outside = format!("{}/../", canonical.display());
    let result = common::call(&tool, json!({"do": "list", "path": outside})).await;
    assert_eq!(common::code(&result), "TOOL_FAILED", "{result:?}");
}

#[tokio::test]
async fn writes_land_only_in_the_write_grant() {
    let writable = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let Some(tool) = common::load("probe", Sandbox::new().allow_write(writable.path())).await
    else {
        return;
    };
    let inside = writable.path().canonicalize().unwrap().join("out.txt");
    let result = common::call(&tool, json!({"do": "write", "path": inside})).await;
    assert!(result.success, "{result:?}");
    assert_eq!(
        std::fs::read_to_string(&inside).unwrap(),
        "written by the guest\n"
    );

    for target in [
        elsewhere.path().join("escape.txt"),
        std::path::PathBuf::from(format!(
            "{}/../escape.txt",
            writable.path().canonicalize().unwrap().display()
        )),
    ] {
        let result = common::call(&tool, json!({"do": "write", "path": target})).await;
        assert_eq!(
            common::code(&result),
            "TOOL_FAILED",
            "{target:?}: {result:?}"
        );
        assert!(result.error.unwrap().contains("escape.txt"));
    }
    assert!(!elsewhere.path().join("escape.txt").exists());
    assert!(
        !writable
            .path()
            .parent()
            .unwrap()
            .join("escape.txt")
            .exists()
    );
}
