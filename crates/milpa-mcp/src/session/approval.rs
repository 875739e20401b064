//! Human approvals over MCP: a call parked by a `confirm = "human"` gate answers
//! `APPROVAL_PENDING`, and the calling client can never settle it (DESIGN §5, §6).
//!
//! - When the server serves an approvals page, every `APPROVAL_PENDING` result (the first
//!   call and the replays while nobody decided) carries `data.approve_url =
//!   <page>/<approval_id>`, the page where a person decides.
//! - A client that declared URL-mode elicitation (2025-11-25, `elicitation.url`) is sent
//!   that URL with `elicitation/create` (`mode: "url"`, `elicitationId` = the approval id).
//!   When it accepts (its user agreed to open the page), the call waits for the decision,
//!   bounded by the approval's expiry and by the request's cancellation; while it waits, a
//!   request that carried a `progressToken` gets `notifications/progress` every
//!   [`WAITING_PROGRESS_EVERY`], so clients whose request timeout resets on progress keep
//!   waiting. Once decided (or expired) the client gets `notifications/elicitation/complete`
//!   and the ticket is redeemed through the pipeline ([`milpa::ToolRegistry::redeem`]): the
//!   tool's result after a grant, `FORBIDDEN` after a reject, the invalid-token refusal once
//!   expired. The decision is the person's, on the page; the client's accept only means
//!   "keep the call open while I wait".
//! - A decline, a cancel or an error from the client leaves `APPROVAL_PENDING` as it was:
//!   the approval stays in the queue, a person may still decide, and the caller replays.
//!   So does a cancelled call (`notifications/cancelled`, a dropped HTTP response stream, a
//!   deleted session): the wait ends, nothing is decided or run, and no response is sent.

use std::time::Duration;

use milpa::{ApprovalTicket, CallOutcome, CallPeer, ToolContext, ToolRegistry};
use serde_json::json;

use crate::client_link::ClientLink;
use crate::peer::Peer;

/// How often a call waiting for a person's decision reports progress (when its request
/// carried a `progressToken`). Clients commonly time requests out after a minute without
/// news, and reset the clock on progress.
pub(crate) const WAITING_PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// The message of the URL elicitation that sends a client's user to the approvals page;
/// `then_answer` for a 2026-07-28 round, whose client answers once the page was opened.
pub(super) fn approval_message(ticket: &ApprovalTicket, then_answer: bool) -> String {
    let then = if then_answer { ", then answer" } else { "" };
    format!(
        "A person other than you must approve {}: open the approvals page{then}.",
        ticket.summary()
    )
}

/// The part of the server a parked approval meets: the registry that waits for and redeems
/// it, and the approvals page where a person decides. Borrowed from the server's shared
/// state for one call, so the approval path takes nothing else of the session.
#[derive(Debug, Clone, Copy)]
pub(super) struct HumanApproval<'a> {
    /// Waits for decisions and redeems granted approvals.
    pub registry: &'a ToolRegistry,
    /// The approvals page (`http://host:port/approvals`), when the server serves one.
    pub page: Option<&'a str>,
}

impl HumanApproval<'_> {
    /// Links the approvals page to an `APPROVAL_PENDING` ticket and, for a `client` that
    /// declared URL-mode elicitation, sends it there and completes the call once a person
    /// decided.
    pub async fn seek(
        self,
        pending: ApprovalTicket,
        client: &ClientLink,
        ctx: &ToolContext,
        peer: &Peer,
    ) -> CallOutcome {
        let pending = self.link(pending);
        let Some(url) = pending.url() else {
            return CallOutcome::AwaitingApproval(pending);
        };
        if !client.supports_url_elicitation() {
            return CallOutcome::AwaitingApproval(pending);
        }
        // Owned: the ticket goes back whole on every path that does not redeem it.
        let (tool, id, summary) = (
            pending.tool().to_owned(),
            pending.id().to_owned(),
            pending.summary().to_owned(),
        );
        let (tool, id) = (tool.as_str(), id.as_str());
        let params = json!({
            "mode": "url",
            "elicitationId": id,
            "url": url,
            "message": approval_message(&pending, false),
        });
        let action = match peer.request_client("elicitation/create", params).await {
            Ok(answer) => answer
                .get("action")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_owned(),
            Err(error) => {
                tracing::info!(target: "milpa_mcp", tool, approval_id = %id, %error, "URL elicitation failed; the approval stays pending for a replay");
                return CallOutcome::AwaitingApproval(pending);
            }
        };
        if action != "accept" {
            tracing::info!(target: "milpa_mcp", tool, approval_id = %id, action, "the client did not open the approvals page; the approval stays pending for a replay");
            return CallOutcome::AwaitingApproval(pending);
        }
        let decided = tokio::select! {
            biased;
            // The call is dropped unanswered; the approval is left as it stands.
            () = peer.cancelled() => return CallOutcome::AwaitingApproval(pending),
            decided = self.wait_for_person(id, &summary, peer) => decided,
        };
        if let Err(error) = decided {
            tracing::warn!(target: "milpa_mcp", tool, approval_id = %id, %error, "could not wait for the approval; the caller replays");
            return CallOutcome::AwaitingApproval(pending);
        }
        peer.notify_client(
            "notifications/elicitation/complete",
            &json!({"elicitationId": id}),
        );
        self.registry.redeem(tool, id, ctx).await
    }

    /// The ticket with the page where a person decides (`approve_url`), when the server
    /// serves an approvals page.
    pub fn link(self, pending: ApprovalTicket) -> ApprovalTicket {
        match self.page {
            Some(page) => {
                let url = format!("{}/{}", page.trim_end_matches('/'), pending.id());
                pending.with_url(url)
            }
            None => pending,
        }
    }

    /// Waits until approval `id` is decided or expired, reporting progress meanwhile.
    async fn wait_for_person(
        self,
        id: &str,
        summary: &str,
        peer: &Peer,
    ) -> Result<milpa::approval::Approval, milpa::approval::ApprovalError> {
        let decision = self.registry.approvals().wait_for_decision(id);
        tokio::pin!(decision);
        let start = tokio::time::Instant::now() + WAITING_PROGRESS_EVERY;
        let mut ticks = tokio::time::interval_at(start, WAITING_PROGRESS_EVERY);
        let message = format!("Waiting for a person to approve {summary}");
        let mut sent = 0u32;
        loop {
            tokio::select! {
                decided = &mut decision => return decided,
                _ = ticks.tick() => {
                    // Counts up: MCP progress must increase. A tool that runs after the
                    // grant reports on the same token, so only its values above the last
                    // tick reach the client.
                    sent += 1;
                    peer.progress(f64::from(sent), None, Some(&message));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::client_link::{OutRx, out_channel};
    use milpa::approval::Verdict;
    use milpa::{ToolContext, ToolDefinition, ToolRegistry};
    use serde_json::{Value, json};
    use tokio::time::Instant;

    use super::WAITING_PROGRESS_EVERY;
    use crate::jsonrpc::{self, RequestId};
    use crate::protocol::ServerOptions;
    use crate::session::{Caller, Dispatch, Out, Route, Session, Shared};

    fn handle(session: &Arc<Session>, message: Value, route: &Route) -> Option<Dispatch> {
        let jsonrpc::Parsed::Single(message) = jsonrpc::parse(message.to_string().as_bytes())
        else {
            panic!("not a single message");
        };
        session.handle(message, &Caller::local_process(), route)
    }

    /// The next message on the call's route; a minute of (paused, so virtual) time
    /// without one fails the test.
    async fn next(rx: &mut OutRx) -> Value {
        match tokio::time::timeout(Duration::from_secs(60), rx.recv()).await {
            Ok(Some(Out::Msg(message))) => serde_json::from_str(&message).unwrap(),
            other => panic!("no message: {other:?}"),
        }
    }

    /// A call waiting for a person reports progress on its request's token every
    /// [`WAITING_PROGRESS_EVERY`] (counting up, as MCP requires), so clients whose
    /// request timeout resets on progress keep waiting; the decision ends it.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_call_reports_progress_until_a_person_decides() {
        let mut registry = ToolRegistry::new();
        registry
            .register(
                ToolDefinition::builder("deploy")
                    .input_schema(json!({"type": "object"}))
                    .requires_human_approval(true)
                    .sync(|_, _| json!("deployed")),
            )
            .unwrap();
        let registry = Arc::new(registry);
        let shared = Shared::with_approval_page(
            registry.clone(),
            ServerOptions::default(),
            Some("http://127.0.0.1:9/approvals".into()),
        );
        let session = Session::new(shared, None);
        handle(
            &session,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"url": {}}}}}),
            &Route::Standalone,
        );
        let (tx, mut rx) = out_channel();
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "deploy", "arguments": {"env": "prod"}, "_meta": {"progressToken": "wait-1"}}});
        let Some(Dispatch::Call(call, _cancel)) = handle(&session, call, &Route::Channel(tx))
        else {
            panic!("not a call");
        };
        let call = tokio::spawn(call);

        let request = next(&mut rx).await;
        assert_eq!(request["params"]["mode"], "url");
        let id = request["params"]["elicitationId"]
            .as_str()
            .unwrap()
            .to_owned();
        let asked = RequestId::from_value(&request["id"]).unwrap();
        session.answer(&asked, Ok(json!({"action": "accept"})));
        let waiting = Instant::now();
        for tick in 1..=3u32 {
            let progress = next(&mut rx).await;
            assert_eq!(
                progress,
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": "wait-1", "progress": f64::from(tick),
                    "message": "Waiting for a person to approve deploy(env=prod)"}})
            );
            let elapsed = waiting.elapsed();
            assert!(elapsed >= WAITING_PROGRESS_EVERY * tick, "{elapsed:?}");
            assert!(elapsed < WAITING_PROGRESS_EVERY * tick + Duration::from_secs(1));
        }
        let alice = ToolContext::web("alice", ["approvals:grant"]);
        registry
            .decide_approval(&id, Verdict::Grant, None, &alice)
            .await
            .unwrap();
        let complete = next(&mut rx).await;
        assert_eq!(complete["method"], "notifications/elicitation/complete");
        let response: Value =
            serde_json::from_str(&call.await.unwrap().expect("a response").to_json()).unwrap();
        assert_eq!(
            response["result"]["structuredContent"]["result"],
            "deployed"
        );
        // Nothing more: the progress stops with the decision.
        assert!(rx.try_recv().is_err());
    }
}
