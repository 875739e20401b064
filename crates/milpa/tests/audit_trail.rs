//! Audit: one record on every terminal path, secrets redacted at any depth.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

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
