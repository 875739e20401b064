//! `confirm`: one-time tokens bound to tool, principal and channel; the replay runs the first
//! call's arguments.

mod support;

use std::sync::Arc;
use std::time::Duration;

use milpa::audit::AuditOutcome;
use milpa::{ErrorCode, ToolContext, ToolRegistry};
use serde_json::{Value, json};
use support::{Runs, audited, echo_args, echoing, two_ints};

const INVALID: &str = "Invalid or expired confirmation token";

fn registry(runs: &Runs) -> (ToolRegistry, Arc<milpa::audit::MemoryAuditSink>) {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    let strict = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": false
    });
    registry
        .register(echoing(
            echo_args("transfer")
                .input_schema(strict)
                .mutating(true)
                .requires_confirmation(true),
            runs,
        ))
        .unwrap();
    registry
        .register(echoing(
            echo_args("other")
                .input_schema(two_ints())
                .requires_confirmation(true),
            runs,
        ))
        .unwrap();
    (registry, sink)
}

fn token_of(result: &milpa::ToolResult) -> String {
    result
        .confirm_token()
        .expect("a confirmation result")
        .to_owned()
}

#[tokio::test]
async fn the_first_call_returns_a_token_and_the_replay_runs_the_first_arguments() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let ctx = ToolContext::cli();
    let first = registry
        .call("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await;
    assert!(first.success);
    assert_eq!(first.result_type(), "confirmation");
    assert_eq!(first.meta.get("requires_confirmation"), Some(&json!(true)));
    assert_eq!(first.message.as_deref(), Some("transfer(a=1, b=2)"));
    assert_eq!(first.data["requires_confirmation"], true);
    assert_eq!(first.data["action_summary"], "transfer(a=1, b=2)");
    let token = token_of(&first);
    assert_eq!(token.len(), 32);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    let expires = first.data["expires_at"].as_str().unwrap();
    assert!(
        expires.ends_with("+00:00") && expires.len() == 25,
        "{expires}"
    );
    assert_eq!(runs.count(), 0);

    // Different arguments on the replay are inert: the stored ones run. The token is not
    // an "unknown property" even though the schema forbids extra keys.
    let replay = registry
        .call(
            "transfer",
            json!({"a": 9, "b": 9, "confirm_token": token}),
            &ctx,
        )
        .await;
    assert!(replay.success, "{replay:?}");
    assert_eq!(replay.data, json!({"a": 1, "b": 2}));
    assert_eq!(runs.count(), 1);
    let outcomes: Vec<_> = sink.take().into_iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [AuditOutcome::ConfirmationRequested, AuditOutcome::Executed]
    );
}

#[tokio::test]
async fn a_replay_may_send_only_the_token() {
    let runs = Runs::default();
    let (registry, _) = registry(&runs);
    let ctx = ToolContext::cli();
    let token = token_of(
        &registry
            .call("transfer", json!({"a": 3, "b": 4}), &ctx)
            .await,
    );
    let replay = registry
        .call("transfer", json!({"confirm_token": token}), &ctx)
        .await;
    assert_eq!(replay.data, json!({"a": 3, "b": 4}));
}

#[tokio::test]
async fn a_token_works_once() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let ctx = ToolContext::cli();
    let token = token_of(
        &registry
            .call("transfer", json!({"a": 1, "b": 2}), &ctx)
            .await,
    );
    assert!(
        registry
            .call("transfer", json!({"confirm_token": token}), &ctx)
            .await
            .success
    );
    let again = registry
        .call("transfer", json!({"confirm_token": token}), &ctx)
        .await;
    assert_eq!(again.error.as_deref(), Some(INVALID));
    assert_eq!(again.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        sink.take().last().unwrap().outcome,
        AuditOutcome::InvalidConfirmation
    );
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn unknown_non_string_and_foreign_tokens_are_refused() {
    let runs = Runs::default();
    let (registry, _) = registry(&runs);
    let cli = ToolContext::cli();
    for bad in [
        json!("0123456789abcdef0123456789abcdef"),
        json!(12345),
        json!({"t": 1}),
        json!(true),
    ] {
        let result = registry
            .call(
                "transfer",
                json!({"a": 1, "b": 2, "confirm_token": bad}),
                &cli,
            )
            .await;
        assert_eq!(result.error.as_deref(), Some(INVALID), "{bad}");
    }
    let token = token_of(
        &registry
            .call("transfer", json!({"a": 1, "b": 2}), &cli)
            .await,
    );
    // Another tool, another principal, another channel: all refused.
    let other_tool = registry
        .call(
            "other",
            json!({"a": 1, "b": 2, "confirm_token": token}),
            &cli,
        )
        .await;
    assert_eq!(other_tool.error.as_deref(), Some(INVALID));
    let mallory = ToolContext::web("mallory", ["*"]);
    let stolen = registry
        .call("transfer", json!({"confirm_token": token}), &mallory)
        .await;
    assert_eq!(stolen.error.as_deref(), Some(INVALID));
    let stdio = ToolContext::stdio("r");
    let other_channel = registry
        .call("transfer", json!({"confirm_token": token}), &stdio)
        .await;
    assert_eq!(other_channel.error.as_deref(), Some(INVALID));
    assert_eq!(runs.count(), 0);
    // None of those burned it: its owner can still redeem it.
    let owner = registry
        .call("transfer", json!({"confirm_token": token}), &cli)
        .await;
    assert!(owner.success, "{owner:?}");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn tokens_expire() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::builder()
        .confirmation_ttl(Duration::from_millis(30))
        .build();
    registry
        .register(echoing(echo_args("t").requires_confirmation(true), &runs))
        .unwrap();
    let ctx = ToolContext::cli();
    let token = token_of(&registry.call("t", json!({}), &ctx).await);
    tokio::time::sleep(Duration::from_millis(80)).await;
    let late = registry
        .call("t", json!({"confirm_token": token}), &ctx)
        .await;
    assert_eq!(late.error.as_deref(), Some(INVALID));
    assert_eq!(runs.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_concurrent_redemptions_exactly_one_wins() {
    for _ in 0..50 {
        let runs = Runs::default();
        let (registry, _) = registry(&runs);
        let registry = Arc::new(registry);
        let ctx = ToolContext::cli();
        let token = token_of(
            &registry
                .call("transfer", json!({"a": 1, "b": 2}), &ctx)
                .await,
        );
        let redeem = |registry: Arc<ToolRegistry>, token: String, ctx: ToolContext| {
            tokio::spawn(async move {
                registry
                    .call("transfer", json!({"confirm_token": token}), &ctx)
                    .await
            })
        };
        let a = redeem(registry.clone(), token.clone(), ctx.clone());
        let b = redeem(registry.clone(), token.clone(), ctx.clone());
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!(u8::from(a.success) + u8::from(b.success), 1, "{a:?} {b:?}");
        assert_eq!(runs.count(), 1);
    }
}

#[tokio::test]
async fn the_token_is_bound_to_the_principal_that_asked_on_the_same_channel() {
    let runs = Runs::default();
    let (registry, _) = registry(&runs);
    let alice = ToolContext::mcp("r1", Some("alice".into()), ["*"]);
    let token = token_of(
        &registry
            .call("transfer", json!({"a": 5, "b": 6}), &alice)
            .await,
    );
    let bob = ToolContext::mcp("r2", Some("bob".into()), ["*"]);
    assert_eq!(
        registry
            .call("transfer", json!({"confirm_token": token}), &bob)
            .await
            .error
            .as_deref(),
        Some(INVALID)
    );
    let alice_again = ToolContext::mcp("r3", Some("alice".into()), ["*"]);
    let done = registry
        .call("transfer", json!({"confirm_token": token}), &alice_again)
        .await;
    assert_eq!(done.data, json!({"a": 5, "b": 6}));
    assert_eq!(done.data.get("confirm_token"), None::<&Value>);
}

#[tokio::test]
async fn a_replay_with_other_arguments_runs_the_parked_ones_and_says_so() {
    let runs = Runs::default();
    let (registry, _) = registry(&runs);
    let ctx = ToolContext::cli();
    let token = token_of(
        &registry
            .call("transfer", json!({"a": 3, "b": 4}), &ctx)
            .await,
    );
    let replay = registry
        .call(
            "transfer",
            json!({"a": 1000, "b": 4, "confirm_token": token}),
            &ctx,
        )
        .await;
    assert!(replay.success, "{replay:?}");
    assert_eq!(replay.data, json!({"a": 3, "b": 4}));
    assert_eq!(
        replay.message.as_deref(),
        Some("Ran the confirmed arguments; the arguments sent with the token were ignored.")
    );

    // The same arguments again, or only the token: nothing was ignored, nothing is said.
    for replay_args in [json!({"a": 3, "b": 4}), json!({})] {
        let token = token_of(
            &registry
                .call("transfer", json!({"a": 3, "b": 4}), &ctx)
                .await,
        );
        let mut args = replay_args;
        args["confirm_token"] = json!(token);
        let replay = registry.call("transfer", args, &ctx).await;
        assert!(replay.success, "{replay:?}");
        assert_eq!(replay.message, None);
    }
}

#[tokio::test]
async fn the_summary_never_shows_a_secret_argument() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    let counted = runs.clone();
    registry
        .register(
            echo_args("rotate")
                .mutating(true)
                .requires_confirmation(true)
                .sync(move |args, _ctx| {
                    counted.hit();
                    json!({"received_real_password": args["password"] == "hunter22"})
                }),
        )
        .unwrap();
    let ctx = ToolContext::cli();
    let first = registry
        .call(
            "rotate",
            json!({"user": "ann", "password": "hunter22", "note": "old one was hunter22"}),
            &ctx,
        )
        .await;
    let summary = "rotate(user=ann, password=[REDACTED], note=old one was [REDACTED])";
    assert_eq!(first.data["action_summary"], summary);
    assert_eq!(first.message.as_deref(), Some(summary));
    assert!(!serde_json::to_string(&first).unwrap().contains("hunter22"));
    assert_eq!(sink.take().len(), 1);
    // The replay still runs the real arguments (the tool sees the password; a result that
    // quoted it would come back scrubbed).
    let replay = registry
        .call("rotate", json!({"confirm_token": token_of(&first)}), &ctx)
        .await;
    assert_eq!(replay.data["received_real_password"], true);
    assert_eq!(runs.count(), 1);
}
