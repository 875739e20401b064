//! The state folder and its SQLite files are private to their owner (they hold parked calls'
//! arguments, tokens and the key that seals `requestState`), and a state file other users
//! could write is refused.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use common::http::milpa_command;
use common::stdio::StdioClient;
use common::{Sandbox, run};
use serde_json::json;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .mode()
        & 0o7777
}

#[test]
fn a_fresh_state_folder_is_0700_and_its_files_0600() {
    let sb = Sandbox::new();
    let home = sb.path().join("state/milpa");
    let mut command = milpa_command(&sb);
    command.env(common::HOME_ENV, &home).arg("serve");
    // A server keeps the store open, so the -wal and -shm files exist while it runs.
    let mut server = StdioClient::start(command, &sb.path().join("serve.log"));
    let added = server.call("notes_add", json!({"text": "milk"}));
    assert_eq!(added["isError"], false, "{added}");
    let db = home.join("state.db");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(home.join("state.db-wal").exists() && home.join("state.db-shm").exists()) {
        assert!(
            Instant::now() < deadline,
            "no -wal and -shm beside {}",
            db.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(mode(&home), 0o700);
    assert_eq!(mode(&sb.path().join("state")), 0o700);
    for file in ["state.db", "state.db-wal", "state.db-shm"] {
        assert_eq!(mode(&home.join(file)), 0o600, "{file}");
    }
    drop(server);

    // A call from a shell on the same state keeps it so.
    let r = run(sb
        .milpa()
        .env(common::HOME_ENV, &home)
        .args(["call", "notes_list"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("milk"), "{}", r.stdout);
    assert_eq!(mode(&db), 0o600);
}

#[test]
fn a_state_file_or_folder_others_can_write_is_refused() {
    let sb = Sandbox::new();
    let first = run(sb.milpa().args(["call", "notes_add", r#"{"text":"milk"}"#]));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let db = sb.path().join("state.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o666)).unwrap();

    let r = run(sb
        .milpa()
        .args(["call", "notes_add", r#"{"text":"forged"}"#]));
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "the state file {} is writable by other users (mode 0666)",
            db.display()
        )) && r.stderr.contains(&format!("chmod 600 {}", db.display())),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");

    // After the fix it opens again, with nothing added meanwhile.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let listed = run(sb.milpa().args(["call", "notes_list", "--json"]));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(!listed.stdout.contains("forged"), "{}", listed.stdout);

    // A folder others can write (without the sticky bit) is refused too.
    let shared = sb.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = run(sb
        .milpa()
        .env(common::HOME_ENV, &shared)
        .args(["call", "echo"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("chmod 700 {}", shared.display())),
        "{}",
        r.stderr
    );
    assert!(!shared.join("state.db").exists());
}
