//! The plain-text rendering of a plan, for terminals.

use std::fmt::Write;

use super::plan::{InvocationPlan, StepPresence, StepRole, WiringState};

fn presence(p: StepPresence) -> &'static str {
    match p {
        StepPresence::Active => "active",
        StepPresence::Conditional => "conditional",
        StepPresence::Dormant => "dormant",
        StepPresence::Skipped => "skipped",
    }
}

fn role(r: StepRole) -> &'static str {
    match r {
        StepRole::Guard => "guard",
        StepRole::Transform => "transform",
        StepRole::Branch => "branch",
        StepRole::Hook => "hook",
        StepRole::Execution => "execution",
        StepRole::Boundary => "boundary",
        StepRole::Outcome => "outcome",
    }
}

fn wiring(w: WiringState) -> &'static str {
    match w {
        WiringState::Present => "present",
        WiringState::Absent => "absent",
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

// The text rendering lives here, beside its words, so the plan's own module never reaches
// into its rendering.
impl InvocationPlan {
    /// The plan as a plain-text table, then assumptions and wiring.
    pub fn to_text(&self) -> String {
        render(self)
    }
}

fn render(plan: &InvocationPlan) -> String {
    let mut out = String::new();
    let actor = plan.context.actor.as_deref().unwrap_or("(anonymous)");
    let scopes = if plan.context.scopes.is_empty() {
        "(none)".to_owned()
    } else {
        plan.context.scopes.join(", ")
    };
    let _ = writeln!(
        out,
        "{} on channel '{}' as {actor} [scopes: {scopes}; mode: {}]",
        plan.operation, plan.channel, plan.context.mode
    );
    let _ = writeln!(out);
    let rows: Vec<[String; 6]> = plan
        .steps
        .iter()
        .map(|s| {
            [
                s.kind.as_str().to_owned(),
                role(s.role).to_owned(),
                presence(s.presence).to_owned(),
                yes_no(s.blocking).to_owned(),
                yes_no(s.mutates).to_owned(),
                s.source.clone(),
            ]
        })
        .collect();
    let header = ["kind", "role", "presence", "blocking", "mutates", "source"].map(str::to_owned);
    let mut widths = [0usize; 5];
    for row in std::iter::once(&header).chain(rows.iter()) {
        for (i, cell) in row.iter().take(5).enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(rows.iter()) {
        for (i, cell) in row.iter().take(5).enumerate() {
            let _ = write!(out, "{cell:<width$}  ", width = widths[i]);
        }
        let _ = writeln!(out, "{}", row[5]);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "assumptions:");
    if plan.assumptions.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for assumption in &plan.assumptions {
        let _ = writeln!(out, "  - {assumption}");
    }
    let _ = writeln!(
        out,
        "wiring: rate limiter {}, dispatcher {}, rule provider {}",
        wiring(plan.wiring.rate_limiter),
        wiring(plan.wiring.dispatcher),
        wiring(plan.wiring.rule_provider)
    );
    out
}
