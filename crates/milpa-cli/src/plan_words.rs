//! `milpa tools inspect TOOL` for a person: what calling the tool does, in order, in the
//! words of someone using it ("asks you to confirm first", "no one can approve it: …"),
//! instead of the plan's library words ("no dispatcher wired", "rule provider absent").
//! `--json` prints the plan itself, its keys unchanged (DESIGN §4).

use milpa::inspect::{InvocationPlan, StepPresence};
use milpa::policy::ChannelPolicy;
use milpa::{Mode, StepKind, ToolDefinition};

/// Who could decide a parked call of this setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Approvers {
    /// The store keeps nothing past the process (`--store memory`): a parked call cannot be
    /// decided by anyone.
    pub(crate) memory_store: bool,
    /// Who may decide on the `/approvals` page of `serve --http`: the manifest's tokens
    /// holding `approvals:grant` (or `*`); `None` without a manifest, whose `serve --http`
    /// makes an approver token of its own at start.
    pub(crate) page_principals: Option<Vec<String>>,
}

/// What the setup around one plan says: the channel's policy, whether policy rules are
/// loaded, and who could approve.
#[derive(Debug, Clone)]
pub(crate) struct Setup<'a> {
    /// The policy of the plan's channel (its own, or the fail-closed one).
    pub(crate) policy: ChannelPolicy,
    /// Whether the channel has a policy of its own.
    pub(crate) channel_known: bool,
    /// Whether policy rules (`[[rules]]`, milpa's own) are consulted.
    pub(crate) rules: bool,
    /// The call policy's own account of what can apply to the tool (a Cedar policy:
    /// its file and the policies that can apply), when one is loaded.
    pub(crate) call_policy: Option<String>,
    /// How long a confirmation token lives.
    pub(crate) confirmation_ttl: std::time::Duration,
    /// How long a parked call waits for a person.
    pub(crate) approval_ttl: std::time::Duration,
    /// Who could approve a parked call.
    pub(crate) approvers: &'a Approvers,
}

/// The plan for `tool` in a person's words: a heading, what a call does step by step
/// (`✓` a step that acts, `✗` where this caller would be refused), then what is not in
/// effect and why.
pub(crate) fn explain(plan: &InvocationPlan, tool: &ToolDefinition, setup: &Setup<'_>) -> String {
    let mut out = String::new();
    let description = tool.description().lines().next().unwrap_or("").trim();
    if description.is_empty() {
        out.push_str(&format!("{}\n", plan.operation));
    } else {
        out.push_str(&format!("{} — {description}\n", plan.operation));
    }
    out.push_str(&format!(
        "Called on the {} channel {}.\n\n",
        plan.channel,
        caller(plan)
    ));
    out.push_str("What a call does, in order:\n");
    let mut absent: Vec<String> = Vec::new();
    let presence = |kind| plan.step(kind).presence;
    let options = tool.options();

    match presence(StepKind::Validate) {
        StepPresence::Skipped => {
            absent.push("argument checks: the tool declares no input schema".to_owned())
        }
        _ => step(
            &mut out,
            "Checks the arguments against the tool's input schema: a wrong type, a value out of \
             range or a missing field is refused, and nothing runs.",
        ),
    }
    match presence(StepKind::Clamp) {
        StepPresence::Skipped => {}
        _ => {
            let fields: Vec<&str> = options.clamps.iter().map(|(f, _)| f.as_str()).collect();
            step(
                &mut out,
                &format!(
                    "Moves out-of-range numbers into their allowed range ({}).",
                    fields.join(", ")
                ),
            );
        }
    }

    let refusal = refusal(plan, tool, setup);
    let refused = refusal.is_some();
    if let Some(refusal) = refusal {
        out.push_str(&format!("  ✗ Refuses you here: {refusal}.\n"));
        out.push_str("    Nothing after this point happens for you.\n");
    } else {
        let mut who = match options.scopes.as_slice() {
            [] => "Lets you call it (it needs no scope)".to_owned(),
            [one] => format!("Lets you call it: it needs the scope {one}, which you hold"),
            many => format!(
                "Lets you call it: it needs one of the scopes {}, and you hold one",
                many.join(", ")
            ),
        };
        who.push('.');
        step(&mut out, &who);
    }
    if setup.rules {
        out.push_str(
            "    Policy rules are checked too (the manifest's [[rules]] and milpa's own); \
             their answer is known only when the call is made.\n",
        );
    }
    if let Some(policy) = &setup.call_policy {
        out.push_str(&format!(
            "    Then a call policy reads the arguments and may refuse the call: {policy}.\n"
        ));
    }

    // A refused caller gets no further: the rest is what happens for one let through.
    if !refused {
        match presence(StepKind::RateLimit) {
            StepPresence::Skipped => absent.push("rate limit: none is configured".to_owned()),
            _ => step(
                &mut out,
                &format!(
                    "Counts the call against your rate limit (this tool costs {} of the budget).",
                    if tool.is_mutating() { 5 } else { 1 }
                ),
            ),
        }

        if plan.context.mode == Mode::Plan {
            step(
                &mut out,
                "Stops there, in plan mode: the answer says what the call would do, and the tool \
                 does not run.",
            );
        }

        let by_channel = !tool.requires_human_approval()
            && tool.is_mutating()
            && setup.policy.require_human_approval_for_mutating;
        let human = tool.requires_human_approval() || by_channel;
        match presence(StepKind::Confirm) {
            StepPresence::Skipped | StepPresence::Dormant => {}
            _ if human => {
                let why = if by_channel {
                    format!(
                        " (the {} channel makes every tool that changes things wait for a person)",
                        plan.channel
                    )
                } else {
                    String::new()
                };
                step(
                    &mut out,
                    &format!(
                        "Waits for a person's approval{why}: the call is parked and nothing runs \
                         until a person other than you grants it (it expires after {}); after a \
                         grant, repeating the call with --confirm-token <approval id> runs it once.",
                        seconds(setup.approval_ttl)
                    ),
                );
                out.push_str(&format!("    {}\n", approvers(plan, setup.approvers)));
            }
            _ => step(
                &mut out,
                &format!(
                    "Asks for a confirmation first: the first call runs nothing and answers with a \
                     one-time token, which expires after {}; repeating the call with it (`milpa \
                     call` asks `Proceed? [y/N]` at a terminal) runs the first call's arguments.",
                    seconds(setup.confirmation_ttl)
                ),
            ),
        }

        match presence(StepKind::EmitExecuting) {
            StepPresence::Skipped => absent
                .push("event listeners: none is registered to see or stop the call".to_owned()),
            _ => step(
                &mut out,
                "Tells the event listeners it is about to run; one may answer in the tool's place \
                 or stop the call.",
            ),
        }

        let mut run = String::from("Runs the tool");
        if let Some(upstream) = tool.upstream() {
            run.push_str(&format!(" on the upstream server {upstream}"));
        }
        run.push_str(if tool.is_mutating() {
            " (it changes things)."
        } else {
            " (it only reads)."
        });
        run.push_str(&format!(
            " A run longer than {} is flagged as slow",
            seconds(options.timeout)
        ));
        match options.hard_timeout {
            Some(limit) => run.push_str(&format!(", and stopped after {}.", seconds(limit))),
            None => run.push_str(", not stopped."),
        }
        step(&mut out, &run);
        step(
            &mut out,
            "Records the call in the audit trail, whatever its outcome (secret arguments \
             redacted).",
        );
    }

    if !setup.channel_known {
        absent.push(format!(
            "a policy for the {} channel: it has none, so the strictest applies (a signed-in \
             caller is required)",
            plan.channel
        ));
    }
    if !absent.is_empty() {
        out.push_str("\nNot in effect:\n");
        for line in absent {
            out.push_str(&format!("  - {line}\n"));
        }
    }
    out
}

fn step(out: &mut String, text: &str) {
    out.push_str("  ✓ ");
    out.push_str(text);
    out.push('\n');
}

/// `as alice, holding notes:write`, `anonymously, holding no scope`.
fn caller(plan: &InvocationPlan) -> String {
    let who = match &plan.context.actor {
        Some(actor) => format!("as {actor}"),
        None => "anonymously (no signed-in caller)".to_owned(),
    };
    let scopes = match plan.context.scopes.as_slice() {
        [] => "holding no scope".to_owned(),
        [all] if all == "*" => "holding every scope (*)".to_owned(),
        many => format!("holding {}", many.join(", ")),
    };
    format!("{who}, {scopes}")
}

/// Why this caller would be refused before the tool runs, as the gate checks it: a
/// signed-in caller first, then the tool's scopes, then a channel that blocks mutating
/// tools (unless a rule allows it).
fn refusal(plan: &InvocationPlan, tool: &ToolDefinition, setup: &Setup<'_>) -> Option<String> {
    let policy = &setup.policy;
    if policy.require_auth && plan.context.actor.is_none() {
        return Some(format!(
            "the {} channel needs a signed-in caller, and you call anonymously",
            plan.channel
        ));
    }
    let scopes = &tool.options().scopes;
    let holds = |scope: &String| {
        plan.context
            .scopes
            .iter()
            .any(|held| held == "*" || held == scope)
    };
    if !scopes.is_empty() && !scopes.iter().any(holds) {
        return Some(format!(
            "the tool needs the scope {}, which you do not hold",
            scopes.join(" or ")
        ));
    }
    if !policy.allow_all && policy.block_mutating && tool.is_mutating() {
        let unless = if setup.rules {
            " (unless a policy rule allows it)"
        } else {
            ""
        };
        return Some(format!(
            "the {} channel does not run tools that change things{unless}",
            plan.channel
        ));
    }
    None
}

/// Who could grant a parked call of this setup, or why no one can.
fn approvers(plan: &InvocationPlan, approvers: &Approvers) -> String {
    if approvers.memory_store {
        return "No one can approve it: with --store memory the parked call lives only in \
                this process. Use a durable store (the default SQLite one, or --store \
                redis://…)."
            .to_owned();
    }
    let other = match &plan.context.actor {
        Some(actor) => format!("someone other than {actor}"),
        None => "someone other than the caller".to_owned(),
    };
    let page = match &approvers.page_principals {
        None => "or on the /approvals page of `milpa serve --http` (with the approver token \
                 it prints at start)"
            .to_owned(),
        Some(principals) if principals.is_empty() => {
            "not on the /approvals page: no token of the manifest holds approvals:grant".to_owned()
        }
        Some(principals) => format!(
            "or on the /approvals page of `milpa serve --http` as {}",
            principals.join(", ")
        ),
    };
    format!(
        "Who can approve: {other}, with `milpa approvals grant <id>` at their own shell; {page}."
    )
}

/// `30s`, `1.5s`.
fn seconds(duration: std::time::Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use milpa::{ToolContext, ToolRegistry};
    use serde_json::Value;

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry
            .register(
                ToolDefinition::builder("wipe")
                    .description("Wipes the disk\nfor good")
                    .mutating(true)
                    .scopes(["disk:write"])
                    .requires_human_approval(true)
                    .sync(|_, _| Value::Null),
            )
            .unwrap();
        registry
            .register(
                ToolDefinition::builder("look")
                    .description("Looks")
                    .sync(|_, _| Value::Null),
            )
            .unwrap();
        registry
    }

    fn words(tool: &str, ctx: &ToolContext, approvers: &Approvers) -> String {
        let registry = registry();
        let plan = InvocationPlan::build(&registry, tool, ctx).unwrap();
        let gate = registry.policy_gate();
        let definition = registry.get(tool).unwrap();
        let setup = Setup {
            policy: gate.channel_policy(ctx.channel()),
            channel_known: gate.registered_policy(ctx.channel()).is_some(),
            rules: registry.has_rule_provider(),
            call_policy: None,
            confirmation_ttl: std::time::Duration::from_secs(60),
            approval_ttl: std::time::Duration::from_secs(3600),
            approvers,
        };
        explain(&plan, &definition, &setup)
    }

    const DURABLE: Approvers = Approvers {
        memory_store: false,
        page_principals: None,
    };

    #[test]
    fn a_parked_tool_names_who_can_approve_or_says_no_one_can() {
        let text = words("wipe", &ToolContext::cli(), &DURABLE);
        assert!(text.starts_with("wipe — Wipes the disk\n"), "{text}");
        assert!(text.contains("Waits for a person's approval: "), "{text}");
        assert!(text.contains("(it expires after 3600s)"), "{text}");
        assert!(text.contains("someone other than local-shell"), "{text}");
        assert!(
            text.contains("the approver token it prints at start"),
            "{text}"
        );
        let memory = Approvers {
            memory_store: true,
            page_principals: None,
        };
        let text = words("wipe", &ToolContext::cli(), &memory);
        assert!(
            text.contains("No one can approve it: with --store memory"),
            "{text}"
        );
        let nobody = Approvers {
            memory_store: false,
            page_principals: Some(Vec::new()),
        };
        let text = words("wipe", &ToolContext::cli(), &nobody);
        assert!(
            text.contains("no token of the manifest holds approvals:grant"),
            "{text}"
        );
        let ops = Approvers {
            memory_store: false,
            page_principals: Some(vec!["ops".to_owned()]),
        };
        assert!(words("wipe", &ToolContext::cli(), &ops).contains("as ops."));
    }

    #[test]
    fn a_caller_who_would_be_refused_is_told_why() {
        let anonymous = ToolContext::builder("mcp").build();
        let text = words("wipe", &anonymous, &DURABLE);
        assert!(
            text.contains("✗ Refuses you here: the mcp channel needs a signed-in caller"),
            "{text}"
        );
        assert!(!text.contains("Runs the tool"), "{text}");
        let scoped = ToolContext::builder("mcp")
            .principal("ana")
            .scopes(["notes:read"])
            .build();
        let text = words("wipe", &scoped, &DURABLE);
        assert!(
            text.contains("needs the scope disk:write, which you do not hold"),
            "{text}"
        );
        let unknown = ToolContext::builder("pager").principal("ana").build();
        let text = words("look", &unknown, &DURABLE);
        assert!(
            text.contains("a policy for the pager channel: it has none"),
            "{text}"
        );
    }

    #[test]
    fn no_library_words_reach_the_person() {
        for tool in ["wipe", "look"] {
            let text = words(tool, &ToolContext::cli(), &DURABLE);
            for library in [
                "wired",
                "dispatcher",
                "rule provider",
                "absent",
                "presence",
                "dormant",
            ] {
                assert!(!text.contains(library), "{library} in {text}");
            }
            assert!(text.contains("rate limit: none is configured"), "{text}");
            assert!(
                text.contains("event listeners: none is registered"),
                "{text}"
            );
        }
        let text = words("look", &ToolContext::cli(), &DURABLE);
        assert!(
            text.contains("(it only reads). A run longer than 30s is flagged"),
            "{text}"
        );
        assert!(
            text.contains("argument checks: the tool declares no input schema"),
            "{text}"
        );
    }
}
