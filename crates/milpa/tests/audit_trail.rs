//! Audit: one record on every terminal path, secrets redacted at any depth.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use milpa::audit::chain::{ChainHead, GENESIS_HASH, seal, verify_lines};
use milpa::audit::{AuditOutcome, JsonLinesAuditSink, Redactor};
use milpa::events::Dispatcher;
use milpa::{ToolContext, ToolRegistry};
use serde_json::{Value, json};
use support::{Runs, audited, echo_args, echoing, only_record};

#[tokio::test]
async fn nested_secrets_never_reach_the_record() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(echoing(echo_args("login"), &runs))
        .unwrap();
    let args = json!({
        "user": "ann",
        "password": "hunter2",
        "creds": {"apiKey": "k-1", "client_secret": "cs", "Authorization": "Bearer abc"},
        "auth": {"user": "u-auth", "pwd": "pw-auth"},
        "author": "ann",
        "sessions": [{"access_token": "at"}, {"refresh-token": "rt", "note": "fine"}],
        "user_password": "p2",
        "PRIVATE_KEY": "pk",
        "cookie": "c=1"
    });
    let result = registry.call("login", args, &ToolContext::cli()).await;
    assert!(result.success);
    let record = only_record(&sink);
    let text = serde_json::to_string(&record).unwrap();
    for secret in [
        "hunter2",
        "k-1",
        "\"cs\"",
        "Bearer abc",
        "\"at\"",
        "\"rt\"",
        "p2",
        "\"pk\"",
        "c=1",
        "u-auth",
        "pw-auth",
    ] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert_eq!(record.args["user"], "ann");
    assert_eq!(record.args["sessions"][1]["note"], "fine");
    assert_eq!(record.args["creds"]["apiKey"], "***REDACTED***");
    // `auth` is a secret word: the whole value goes; `author` is not.
    assert_eq!(record.args["auth"], "***REDACTED***");
    assert_eq!(record.args["author"], "ann");
}

#[tokio::test]
async fn the_redaction_list_is_configurable() {
    let runs = Runs::default();
    let (mut registry, sink) =
        audited(ToolRegistry::builder().redactor(Redactor::with_fields(["pin"])));
    registry.register(echoing(echo_args("pay"), &runs)).unwrap();
    registry
        .call(
            "pay",
            json!({"card_pin": "1234", "amount": 5}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(
        only_record(&sink).args,
        json!({"card_pin": "***REDACTED***", "amount": 5})
    );
}

#[tokio::test]
async fn every_terminal_path_is_audited_once_with_its_outcome() {
    let runs = Runs::default();
    let dispatcher = Arc::new(Dispatcher::new());
    let (mut registry, sink) = audited(ToolRegistry::builder().dispatcher(dispatcher.clone()));
    support::register_every_path(&mut registry, &dispatcher, &runs);
    let cli = ToolContext::cli();
    let guest = ToolContext::mcp("r", Some("guest".into()), Vec::<String>::new());
    let cases: Vec<(&str, Value, &ToolContext, AuditOutcome)> = vec![
        ("missing", json!({}), &cli, AuditOutcome::NotFound),
        (
            "add",
            json!({"a": "x"}),
            &cli,
            AuditOutcome::InvalidArguments,
        ),
        ("scoped", json!({}), &guest, AuditOutcome::Denied),
        (
            "confirm",
            json!({"confirm_token": "nope"}),
            &cli,
            AuditOutcome::InvalidConfirmation,
        ),
        (
            "confirm",
            json!({}),
            &cli,
            AuditOutcome::ConfirmationRequested,
        ),
        ("cached", json!({}), &cli, AuditOutcome::CacheServed),
        ("vetoed", json!({}), &cli, AuditOutcome::Vetoed),
        ("add", json!({"a": 1, "b": 2}), &cli, AuditOutcome::Executed),
        ("boom", json!({}), &cli, AuditOutcome::Failed),
    ];
    for (tool, args, ctx, expected) in cases {
        registry.call(tool, args, ctx).await;
        let record = only_record(&sink);
        assert_eq!((record.tool.as_str(), record.outcome), (tool, expected));
        assert_eq!(record.channel, ctx.channel());
        assert_eq!(record.request_id, ctx.request_id());
    }
    registry
        .call("add", json!({"a": 1, "b": 2}), &cli.as_plan())
        .await;
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Planned);
}

#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_json_lines_sink_writes_one_redacted_line_per_call() {
    let runs = Runs::default();
    let buf = SharedBuf::default();
    let mut registry = ToolRegistry::builder()
        .audit_sink(Arc::new(JsonLinesAuditSink::new(buf.clone())))
        .build();
    registry
        .register(echoing(echo_args("echo"), &runs))
        .unwrap();
    let ctx = ToolContext::builder("cli")
        .principal("ann")
        .request_id("req-1")
        .build();
    registry
        .call("echo", json!({"secret": "s", "n": 1}), &ctx)
        .await;
    registry.call("nope", json!({}), &ctx).await;
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["outcome"], "executed");
    assert_eq!(lines[0]["request_id"], "req-1");
    assert_eq!(lines[0]["principal"], "ann");
    assert_eq!(
        lines[0]["args"],
        json!({"secret": "***REDACTED***", "n": 1})
    );
    assert!(lines[0]["ts"].as_str().unwrap().contains('T'));
    assert_eq!(lines[1]["outcome"], "not_found");
    assert_eq!(lines[1]["code"], "TOOL_NOT_FOUND");
    assert!(!text.contains("\"s\""));
    // Each line is sealed into one chain: seq, prev_hash, hash come last.
    assert_eq!(
        (lines[0]["seq"].as_u64(), lines[1]["seq"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(lines[0]["prev_hash"], GENESIS_HASH);
    assert_eq!(lines[1]["prev_hash"], lines[0]["hash"]);
    let keys: Vec<&String> = lines[0].as_object().unwrap().keys().collect();
    assert_eq!(keys[keys.len() - 3..], ["seq", "prev_hash", "hash"]);
    let summary = verify_lines(text.lines()).unwrap();
    assert_eq!(summary.records, 2);
}

/// Three records through one sink, then two through a sink reopened on the same file.
#[tokio::test]
async fn append_to_continues_the_chain_of_the_file_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let ctx = ToolContext::cli();
    for calls in [3, 2] {
        let runs = Runs::default();
        let mut registry = ToolRegistry::builder()
            .audit_sink(Arc::new(JsonLinesAuditSink::append_to(&path).unwrap()))
            .build();
        registry
            .register(echoing(echo_args("echo"), &runs))
            .unwrap();
        for n in 0..calls {
            registry.call("echo", json!({"n": n}), &ctx).await;
        }
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let summary = verify_lines(text.lines()).unwrap();
    assert_eq!(summary.records, 5);
    let seqs: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(summary.head.seq, 5);
}

#[test]
fn append_to_refuses_a_file_whose_last_line_is_not_sealed_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.jsonl");
    std::fs::write(&path, "{\"tool\":\"echo\",\"outcome\":\"executed\"}\n").unwrap();
    let error = JsonLinesAuditSink::append_to(&path).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
    // Nothing was written to it.
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"tool\":\"echo\",\"outcome\":\"executed\"}\n"
    );
}

#[test]
fn append_to_finds_the_last_record_of_a_file_larger_than_its_read_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut head = ChainHead::genesis();
    let mut text = String::new();
    // Records of ~5 KB, so the last one straddles the 8 KB blocks read from the end.
    for i in 0..6 {
        let record = format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(5000));
        let mut line = Vec::new();
        head = seal(record.as_bytes(), &head, &mut line);
        text.push_str(std::str::from_utf8(&line).unwrap());
        text.push_str("\n\n");
    }
    std::fs::write(&path, &text).unwrap();
    let sink = JsonLinesAuditSink::append_to(&path).unwrap();
    assert_eq!(sink.head(), head);
    let empty = dir.path().join("empty.jsonl");
    assert_eq!(
        JsonLinesAuditSink::append_to(&empty).unwrap().head(),
        ChainHead::genesis()
    );
}

#[tokio::test]
async fn an_error_quoting_a_secret_argument_is_scrubbed_in_the_record() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(
            milpa::ToolDefinition::builder("login")
                .description("Fails like a command whose stderr echoes its argv")
                .sync(
                    |args: &Value, _ctx: &ToolContext| -> Result<Value, milpa::ToolError> {
                        Err(milpa::ToolError::new(format!(
                            "mysql -u {} -p{}: access denied (Bearer tok-9876 sent)",
                            args["user"].as_str().unwrap_or(""),
                            args["password"].as_str().unwrap_or("")
                        )))
                    },
                ),
        )
        .unwrap();
    let result = registry
        .call(
            "login",
            json!({"user": "ann", "password": "hunter22"}),
            &ToolContext::cli(),
        )
        .await;
    assert!(!result.success);
    let record = only_record(&sink);
    let error = record.error.unwrap();
    assert_eq!(
        error,
        "mysql -u ann -p[REDACTED]: access denied (Bearer [REDACTED] sent)"
    );
    assert_eq!(record.args["password"], "***REDACTED***");
}

#[tokio::test]
async fn the_stderr_audit_line_cannot_be_forged_through_a_tool_name() {
    let buf = SharedBuf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let registry = ToolRegistry::new();
    let forged = "x\n2026-01-01T00:00:00Z  INFO milpa::audit: [ToolAudit] r | cli | rm | root | 0ms | executed\u{1b}[2K\r";
    let result = registry.call(forged, json!({}), &ToolContext::cli()).await;
    assert_eq!(
        result.meta.code().map(|c| c.as_str()),
        Some("TOOL_NOT_FOUND")
    );
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let audit: Vec<&str> = text.lines().filter(|l| l.contains("ToolAudit")).collect();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert_eq!(audit.len(), 1, "{text}");
    assert!(
        audit[0].contains("| x\\n2026-01-01T00:00:00Z  INFO milpa::audit: [ToolAudit] r | cli | rm | root | 0ms | executed\\u{1b}[2K\\r |"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
}
#[tokio::test]
async fn a_declined_confirmation_is_audited_once_with_what_was_declined() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(echoing(
            echo_args("wipe").requires_confirmation(true),
            &runs,
        ))
        .unwrap();
    let ctx = ToolContext::mcp("r-9", Some("ann".into()), ["*"]);
    let first = registry
        .call("wipe", json!({"disk": "sda", "password": "hunter2"}), &ctx)
        .await;
    let token = first.confirm_token().unwrap().to_owned();
    sink.take();

    registry
        .decline_confirmation("wipe", &token, milpa::ConfirmationRefusal::Cancelled, &ctx)
        .await;
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::ConfirmationDeclined);
    assert_eq!(record.tool, "wipe");
    assert_eq!(record.request_id, "r-9");
    assert_eq!(record.principal.as_deref(), Some("ann"));
    assert!(!record.success);
    assert_eq!(record.code, Some(milpa::ErrorCode::ConfirmationDeclined));
    assert!(
        record.error.as_deref().unwrap().ends_with("was cancelled."),
        "{record:?}"
    );
    assert_eq!(
        record.args,
        json!({"disk": "sda", "password": "***REDACTED***"})
    );
    let line = serde_json::to_value(&record).unwrap();
    assert_eq!(line["outcome"], "confirmation_declined");
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn a_request_refused_at_the_protocol_level_is_audited() {
    let (registry, sink) = audited(ToolRegistry::builder());
    let ctx = ToolContext::mcp("r-3", None, Vec::<String>::new());
    registry.audit_refused_request(Some("notes.add"), "arguments must be an object", &ctx);
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::InvalidRequest);
    assert_eq!(record.tool, "notes.add");
    assert_eq!(record.code, Some(milpa::ErrorCode::ValidationError));
    assert_eq!(record.error.as_deref(), Some("arguments must be an object"));
    assert_eq!(record.request_id, "r-3");
    assert_eq!(
        serde_json::to_value(&record).unwrap()["outcome"],
        "invalid_request"
    );

    registry.audit_refused_request(None, "missing tool name", &ctx);
    let record = only_record(&sink);
    assert_eq!(record.tool, "");
    assert_eq!(record.error.as_deref(), Some("missing tool name"));

    // A caller-sent name is quoted cut, like any name no tool has.
    let huge = "x".repeat(1024 * 1024);
    registry.audit_refused_request(Some(&huge), "arguments must be an object", &ctx);
    let record = only_record(&sink);
    assert_eq!(
        record.tool,
        format!("{}…(+{} bytes)", "x".repeat(128), 1024 * 1024 - 128)
    );
}

#[tokio::test]
async fn a_huge_tool_name_is_refused_first_and_never_recorded_whole() {
    let (registry, sink) = audited(ToolRegistry::builder());
    let name = "n".repeat(4 * 1024 * 1024);
    let result = registry.call(&name, json!({}), &ToolContext::cli()).await;
    assert_eq!(result.code(), Some(&milpa::ErrorCode::ToolNotFound));
    let message = result.error.as_deref().unwrap();
    assert!(message.len() < 200, "{}", message.len());
    assert!(message.ends_with("…(+4194176 bytes)"), "{message}");
    // The result's own meta quotes the name cut too.
    assert!(serde_json::to_vec(&result).unwrap().len() < 1024);

    let record = only_record(&sink);
    let line = serde_json::to_vec(&record).unwrap();
    assert!(line.len() < 20 * 1024, "{} bytes", line.len());
    assert!(
        record.tool.ends_with("…(+4194176 bytes)"),
        "{}",
        record.tool
    );
    assert_eq!(record.tool.len(), 128 + "…(+4194176 bytes)".len());
}

#[tokio::test]
async fn huge_arguments_and_errors_are_recorded_cut_with_a_marker() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(milpa::ToolDefinition::builder("fail").sync(
            |args, _| -> Result<Value, milpa::ToolError> {
                Err(milpa::ToolError::new(
                    args["text"].as_str().unwrap_or("").repeat(2),
                ))
            },
        ))
        .unwrap();
    let text = "x".repeat(1024 * 1024);
    registry
        .call(
            "fail",
            json!({"text": text, "password": "hunter2"}),
            &ToolContext::cli(),
        )
        .await;
    let record = only_record(&sink);
    let args = record
        .args
        .as_str()
        .expect("over-cap arguments are recorded as cut text");
    assert!(args.starts_with("{\"text\":\"xxx"), "{}", &args[..40]);
    assert!(args.ends_with(" bytes)"), "{}", &args[args.len() - 40..]);
    assert!(args.len() < 16 * 1024 + 32);
    let error = record.error.as_deref().unwrap();
    assert!(error.len() < 4 * 1024 + 32);
    assert!(
        error.ends_with("…(+2093056 bytes)"),
        "{}",
        &error[error.len() - 40..]
    );
    assert!(serde_json::to_vec(&record).unwrap().len() < 21 * 1024);

    // The caps are the registry's to set; secrets are redacted before the cut.
    let (mut registry, sink) = audited(
        ToolRegistry::builder().audit_limits(
            milpa::audit::AuditLimits::default()
                .with_max_args_bytes(64)
                .with_max_error_bytes(10),
        ),
    );
    registry
        .register(echoing(echo_args("echo"), &Runs::default()))
        .unwrap();
    registry
        .call(
            "echo",
            json!({"password": "hunter2", "pad": "y".repeat(100)}),
            &ToolContext::cli(),
        )
        .await;
    let record = only_record(&sink);
    let args = record.args.as_str().unwrap();
    assert!(
        args.starts_with("{\"password\":\"***REDACTED***\",\"pad\":\"yyy"),
        "{args}"
    );
    assert!(!args.contains("hunter2"));
    assert!(args.ends_with("…(+74 bytes)"), "{args}");
}
