//! Tool listings for models and MCP clients: the registry's listing and token-budget
//! methods, over [`ToolSummary`].

use crate::budget::{BudgetCheck, BudgetSelection, TokenEstimator, ToolsTokenEstimate};
use crate::context::scope_matches;
use crate::registry::ToolRegistry;
use crate::tool_summary::ToolSummary;

/// Listings and token budgeting.
impl ToolRegistry {
    /// Every tool's summary, in registration order (the MCP `tools/list` shape).
    pub fn tool_summaries(&self) -> Vec<ToolSummary> {
        self.definitions()
            .map(|definition| ToolSummary::from_definition(&definition))
            .collect()
    }

    /// The summaries of the tools a caller holding `scopes` may call: tools without scopes,
    /// and tools with at least one scope a held scope grants. Unlike the original, held
    /// scopes match as everywhere else: `*` grants everything and `ns:*` grants `ns:…`.
    pub fn tools_by_scopes<S: AsRef<str>>(&self, scopes: &[S]) -> Vec<ToolSummary> {
        self.definitions()
            .filter(|definition| {
                definition.scopes().is_empty()
                    || definition.scopes().iter().any(|required| {
                        scopes
                            .iter()
                            .any(|held| scope_matches(held.as_ref(), required))
                    })
            })
            .map(|definition| ToolSummary::from_definition(&definition))
            .collect()
    }

    /// The summaries of the tools whose name starts with `prefix`, in registration order.
    pub fn tools_by_prefix(&self, prefix: &str) -> Vec<ToolSummary> {
        self.definitions()
            .filter(|definition| definition.name().starts_with(prefix))
            .map(|definition| ToolSummary::from_definition(&definition))
            .collect()
    }

    /// The tools to offer `model` within its tool budget (30 % of its context).
    ///
    /// Tools named in `priority_tools` go first, in registration order (the order of the
    /// priority list itself does not matter), then the rest; then
    /// [`TokenEstimator::select_within_budget`] picks greedily, skipping a tool that does
    /// not fit and trying the next. Logs a warning when a tool was left out.
    pub fn tools_within_budget(
        &self,
        model: &str,
        priority_tools: Option<&[&str]>,
    ) -> BudgetSelection {
        let mut summaries = self.tool_summaries();
        if let Some(priority) = priority_tools {
            // A stable sort on a bool keeps registration order within each group.
            summaries.sort_by_key(|summary| !priority.contains(&summary.name.as_str()));
        }
        let selection = TokenEstimator::new().select_within_budget(summaries, model);
        if !selection.excluded.is_empty() {
            let shown = selection
                .excluded
                .iter()
                .take(5)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            let more = if selection.excluded.len() > 5 {
                "..."
            } else {
                ""
            };
            tracing::warn!(
                target: "milpa::budget",
                model,
                excluded = selection.excluded.len(),
                "[ToolRegistry] Token budget exceeded. Excluded {} tools: {shown}{more}",
                selection.excluded.len()
            );
        }
        selection
    }

    /// Estimated tokens of every tool's summary.
    pub fn estimate_tokens(&self) -> ToolsTokenEstimate {
        TokenEstimator::new().estimate_tools_tokens(&self.tool_summaries())
    }

    /// Whether all tools fit `model`'s tool budget.
    pub fn check_token_budget(&self, model: &str) -> BudgetCheck {
        TokenEstimator::new().check_budget(&self.tool_summaries(), model)
    }

    /// The text report of [`TokenEstimator::usage_report`] for all tools.
    pub fn token_usage_report(&self, model: &str) -> String {
        TokenEstimator::new().usage_report(&self.tool_summaries(), model)
    }
}
