//! `milpa audit verify` draws a progress bar on standard error when it is a terminal, and
//! prints only its verdict otherwise.

mod common;

use common::terminal::run_with_terminal_stderr;
use common::{Sandbox, run};
use milpa::audit::chain::{ChainHead, seal};

/// A `serve --audit` file of `records` sealed records; the path.
fn chain_file(sb: &Sandbox, records: usize) -> std::path::PathBuf {
    let mut head = ChainHead::genesis();
    let mut text = Vec::new();
    for n in 0..records {
        let record = format!(r#"{{"tool":"add","n":{n}}}"#);
        head = seal(record.as_bytes(), &head, &mut text);
        text.push(b'\n');
    }
    let path = sb.path().join("audit.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_file_check_shows_a_bar_on_a_terminal() {
    let sb = Sandbox::new();
    let file = chain_file(&sb, 2000);
    let mut cmd = sb.milpa();
    cmd.args(["audit", "verify"]).arg(&file);
    let r = run_with_terminal_stderr(&cmd);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(": intact, 2000 records"), "{}", r.stdout);
    assert!(
        r.stderr.contains("checking the audit chain"),
        "{:?}",
        r.stderr
    );
    assert!(r.stderr.contains("2000/2000 records"), "{:?}", r.stderr);
    // Piped, the same check prints its verdict and nothing else.
    let piped = run(sb.milpa().args(["audit", "verify"]).arg(&file));
    assert_eq!(piped.code, 0);
    assert_eq!(piped.stdout, r.stdout);
    assert_eq!(piped.stderr, "");
}

#[test]
fn a_broken_chain_stops_the_bar_where_it_broke() {
    let sb = Sandbox::new();
    let file = chain_file(&sb, 30);
    let text = std::fs::read_to_string(&file).unwrap();
    let tampered = text.replacen(r#""n":20,"#, r#""n":21,"#, 1);
    std::fs::write(&file, tampered).unwrap();
    let mut cmd = sb.milpa();
    cmd.args(["audit", "verify"]).arg(&file);
    let r = run_with_terminal_stderr(&cmd);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("20/30 records"), "{:?}", r.stderr);
    assert!(!r.stderr.contains("30/30 records"), "{:?}", r.stderr);
    assert!(r.stderr.contains("broken"), "{:?}", r.stderr);
}

#[test]
fn the_stores_trail_shows_a_bar_on_a_terminal_and_none_when_piped() {
    let sb = Sandbox::new();
    for n in 0..3 {
        let r = run(sb
            .milpa()
            .args(["call", "add", &format!(r#"{{"a":{n},"b":1}}"#)]));
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let mut cmd = sb.milpa();
    cmd.args(["audit", "verify"]);
    let r = run_with_terminal_stderr(&cmd);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("intact, 3 records"), "{}", r.stdout);
    assert!(r.stderr.contains("3/3 records"), "{:?}", r.stderr);
    let piped = run(sb.milpa().args(["audit", "verify"]));
    assert_eq!(piped.code, 0);
    assert!(
        piped.stdout.contains("intact, 3 records"),
        "{}",
        piped.stdout
    );
    assert_eq!(piped.stderr, "");
}
