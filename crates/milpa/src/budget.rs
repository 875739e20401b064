//! Token budgeting: how much of a model's context the tool list may take, and which tools
//! to offer when they do not all fit.
//!
//! Every tool offered to a model costs context tokens before the conversation starts. The
//! estimate is deliberately simple and stable: a quarter of the bytes of the tool's summary
//! as compact JSON (the shape sent in `tools/list`). The recommended budget is 30 % of the
//! model's context window.
//!
//! ```
//! use milpa::budget::TokenEstimator;
//!
//! let estimator = TokenEstimator::new();
//! assert_eq!(estimator.model_limit("gpt-4o-2024-05-13"), 128_000);
//! assert_eq!(estimator.tool_budget("gpt-3.5-turbo"), 1228);
//! assert_eq!(estimator.estimate_tokens("abcde"), 2);
//! ```
//!
//! Slashes: the original measured PHP's JSON, which escapes `/` as `\/`; this port measures
//! `serde_json`'s compact output, which does not, because that is what it actually sends. A
//! summary with *n* slashes is therefore estimated up to ⌈n/4⌉ tokens lower than the
//! original did. Non-ASCII text is unescaped in both, and counted in UTF-8 bytes.

use serde::Serialize;

use crate::tool_summary::ToolSummary;

/// Bytes per estimated token.
pub const CHARS_PER_TOKEN: usize = 4;

/// Share of the context window the tool list should take, in percent.
pub const RECOMMENDED_TOOL_BUDGET_PERCENT: u64 = 30;

/// Context window assumed for a model the table does not know.
pub const DEFAULT_MODEL_LIMIT: u64 = 8192;

/// The share of a context window that tools may take: ⌊limit × 30 / 100⌋.
fn budget_within(model_limit: u64) -> u64 {
    model_limit * RECOMMENDED_TOOL_BUDGET_PERCENT / 100
}

/// Known context windows, by model id or id prefix (the longest matching prefix wins).
pub const MODEL_LIMITS: &[(&str, u64)] = &[
    ("gpt-3.5-turbo", 4096),
    ("gpt-4", 8192),
    ("gpt-4-32k", 32768),
    ("gpt-4-turbo", 128_000),
    ("gpt-4o", 128_000),
    ("claude-2", 100_000),
    ("claude-3-haiku", 200_000),
    ("claude-3-sonnet", 200_000),
    ("claude-3-opus", 200_000),
    ("claude-3.5-sonnet", 200_000),
    ("claude-sonnet", 200_000),
    ("claude-haiku", 200_000),
    ("claude-opus", 200_000),
];

/// One tool's estimated cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolTokens {
    /// The tool.
    pub name: String,
    /// Its estimated tokens.
    pub tokens: u64,
}

/// The estimated cost of a list of tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolsTokenEstimate {
    /// Sum of the parts.
    pub total: u64,
    /// Per tool, in the list's order.
    pub per_tool: Vec<ToolTokens>,
}

/// Whether a list of tools fits a model's tool budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetCheck {
    /// `used <= budget`.
    pub fits: bool,
    /// Estimated tokens of the list.
    pub used: u64,
    /// The model's tool budget.
    pub budget: u64,
    /// `used / budget` in percent, rounded to 2 decimals (100 when the budget is 0).
    pub percent: f64,
    /// Tokens over the budget (0 when it fits).
    pub overflow: u64,
    /// The model's context window.
    pub model_limit: u64,
}

/// The tools chosen to fit a budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetSelection {
    /// The tools that fit, in the order considered.
    pub selected: Vec<ToolSummary>,
    /// Names of the tools left out, in the order considered.
    pub excluded: Vec<String>,
    /// Estimated tokens of `selected`.
    pub tokens_used: u64,
    /// The budget.
    pub budget: u64,
}

/// Estimates tool-list tokens and fits lists to model budgets.
///
/// Holds the model table; [`TokenEstimator::new`] has the built-in one ([`MODEL_LIMITS`]),
/// and [`with_model_limit`](Self::with_model_limit) adds or overrides entries.
#[derive(Debug, Clone)]
pub struct TokenEstimator {
    limits: Vec<(String, u64)>,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        TokenEstimator {
            limits: MODEL_LIMITS
                .iter()
                .map(|(model, limit)| ((*model).to_owned(), *limit))
                .collect(),
        }
    }
}

impl TokenEstimator {
    /// An estimator with the built-in model table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a model id or prefix in the table.
    pub fn with_model_limit(mut self, model: impl Into<String>, limit: u64) -> Self {
        let model = model.into();
        match self.limits.iter_mut().find(|(known, _)| *known == model) {
            Some(entry) => entry.1 = limit,
            None => self.limits.push((model, limit)),
        }
        self
    }

    /// ⌈bytes / 4⌉ of `text` (UTF-8 bytes, not characters).
    pub fn estimate_tokens(&self, text: &str) -> u64 {
        text.len().div_ceil(CHARS_PER_TOKEN) as u64
    }

    /// The estimate of one tool: its summary as compact JSON.
    pub fn estimate_tool_tokens(&self, tool: &ToolSummary) -> u64 {
        self.estimate_tokens(&tool.to_compact_json())
    }

    /// The estimate of each tool and of all of them.
    pub fn estimate_tools_tokens(&self, tools: &[ToolSummary]) -> ToolsTokenEstimate {
        let per_tool: Vec<ToolTokens> = tools
            .iter()
            .map(|tool| ToolTokens {
                name: tool.name.clone(),
                tokens: self.estimate_tool_tokens(tool),
            })
            .collect();
        ToolsTokenEstimate {
            total: per_tool.iter().map(|t| t.tokens).sum(),
            per_tool,
        }
    }

    /// The context window of `model`: an exact entry, else the longest entry that is a
    /// prefix of it (so `gpt-4o-2024-05-13` is `gpt-4o`, not `gpt-4`), else 8192.
    pub fn model_limit(&self, model: &str) -> u64 {
        // Entries are unique, so an exact entry is also the longest matching prefix.
        self.limits
            .iter()
            .filter(|(known, _)| model.starts_with(known.as_str()))
            .max_by_key(|(known, _)| known.len())
            .map_or(DEFAULT_MODEL_LIMIT, |(_, limit)| *limit)
    }

    /// ⌊limit × 30 / 100⌋.
    pub fn tool_budget(&self, model: &str) -> u64 {
        budget_within(self.model_limit(model))
    }

    /// Whether `tools` fit `model`'s budget, and by how much.
    pub fn check_budget(&self, tools: &[ToolSummary], model: &str) -> BudgetCheck {
        self.check_used(self.estimate_tools_tokens(tools).total, model)
    }

    /// [`check_budget`](Self::check_budget) for an estimate already made.
    fn check_used(&self, used: u64, model: &str) -> BudgetCheck {
        let model_limit = self.model_limit(model);
        let budget = budget_within(model_limit);
        let percent = if budget == 0 {
            100.0
        } else {
            (used as f64 / budget as f64 * 100.0 * 100.0).round() / 100.0
        };
        BudgetCheck {
            fits: used <= budget,
            used,
            budget,
            percent,
            overflow: used.saturating_sub(budget),
            model_limit,
        }
    }

    /// Picks tools in the given order while they fit: a tool that would overflow the budget
    /// is left out and the next one is still tried, so a later, smaller tool can fit.
    pub fn select_within_budget(&self, tools: Vec<ToolSummary>, model: &str) -> BudgetSelection {
        let budget = self.tool_budget(model);
        let mut selection = BudgetSelection {
            selected: Vec::new(),
            excluded: Vec::new(),
            tokens_used: 0,
            budget,
        };
        for tool in tools {
            let cost = self.estimate_tool_tokens(&tool);
            if selection.tokens_used + cost <= budget {
                selection.tokens_used += cost;
                selection.selected.push(tool);
            } else {
                selection.excluded.push(tool.name);
            }
        }
        selection
    }

    /// A text report of what `tools` cost against `model`'s budget, with the ten most
    /// expensive tools:
    ///
    /// ```text
    /// === Token Usage Report ===
    /// Model: gpt-4
    /// Context Limit: 8192 tokens
    /// Tool Budget (30%): 2457 tokens
    ///
    /// Tools Registered: 2
    /// Tokens Used: 46 tokens
    /// Budget Usage: 1.87%
    ///
    /// Status: ✅ Within budget
    ///
    /// Top 10 Tools by Token Usage:
    ///   - one: 23 tokens
    ///   - two: 23 tokens
    /// ```
    pub fn usage_report(&self, tools: &[ToolSummary], model: &str) -> String {
        let estimate = self.estimate_tools_tokens(tools);
        let check = self.check_used(estimate.total, model);
        let status = if check.fits {
            "✅ Within budget".to_owned()
        } else {
            format!("⚠️ OVER BUDGET by {} tokens", check.overflow)
        };
        let mut lines = vec![
            "=== Token Usage Report ===".to_owned(),
            format!("Model: {model}"),
            format!("Context Limit: {} tokens", check.model_limit),
            format!(
                "Tool Budget ({RECOMMENDED_TOOL_BUDGET_PERCENT}%): {} tokens",
                check.budget
            ),
            String::new(),
            format!("Tools Registered: {}", tools.len()),
            format!("Tokens Used: {} tokens", check.used),
            format!("Budget Usage: {}%", check.percent),
            String::new(),
            format!("Status: {status}"),
            String::new(),
            "Top 10 Tools by Token Usage:".to_owned(),
        ];
        let mut ranked = estimate.per_tool;
        ranked.sort_by_key(|t| std::cmp::Reverse(t.tokens));
        lines.extend(
            ranked
                .iter()
                .take(10)
                .map(|t| format!("  - {}: {} tokens", t.name, t.tokens)),
        );
        lines.join("\n")
    }
}
