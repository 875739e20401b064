//! [`TerminalRenderer`]: the `cli` layout, with ANSI colours when they help.

use std::io::IsTerminal;

use serde_json::Value;

use crate::context::{ToolContext, channel};
use crate::escape::EscapeControl;
use crate::render::{
    ChannelRenderer, item_id_and_name, json_text, label, pagination_numbers, scalar_text,
};
use crate::result::ToolResult;

/// The text styles of the layout (Symfony Console's tags in the original).
#[derive(Debug, Clone, Copy)]
enum Style {
    /// `<info>`: green.
    Info,
    /// `<comment>`: yellow.
    Comment,
    /// `<error>`: white on red.
    Error,
    /// Bold yellow (the confirmation banner).
    Warning,
    /// Bold red (the blocked banner).
    Danger,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Info => "32",
            Style::Comment => "33",
            Style::Error => "37;41",
            Style::Warning => "1;33",
            Style::Danger => "1;31",
        }
    }
}

/// Renders results for a person at a terminal (the `cli` channel only).
///
/// One layout per result type, every line ending in `\n`:
///
/// * `list`: the message (or `Results`), a rule, then `  [OK] #7    name` per item (the
///   status only when the item has an `available` flag), and the page when paginated;
/// * `detail`: the entity (and message), a rule, `  Label:          value` per field, and the
///   available actions;
/// * `confirmation`: a `⚠ CONFIRMATION REQUIRED` banner, the message and details, and how
///   to answer;
/// * `blocked`: a `⛔ OPERATION BLOCKED` banner, the reason and the suggestion;
/// * `error`: `✗ Error: <error>`;
/// * anything else: `✓` or `✗`, the message, and the data.
///
/// Colours are ANSI escape codes, on or off per renderer: [`TerminalRenderer::detect`]
/// turns them on only when standard output is a terminal and `NO_COLOR` is not set (see
/// <https://no-color.org>), so piped output stays clean.
///
/// The result's own texts never reach the terminal raw: their control characters other
/// than `\n` and `\t` (ESC, BEL, CR, C1…) are written as escapes (`\u{1b}`, `\r`), with or
/// without colours, so a tool's output cannot move the cursor, rewrite a line or retitle
/// the window. (The [`PlainRenderer`](crate::render::PlainRenderer) keeps texts as they
/// are: it is the default for channels that are not terminals; `milpa call` always renders
/// through this renderer.)
///
/// ```
/// use milpa::render::{ChannelRenderer, TerminalRenderer};
/// use milpa::ToolResult;
///
/// let plain = TerminalRenderer::new(false);
/// assert_eq!(plain.render(&ToolResult::error("disk full"), None), "✗ Error: disk full\n");
/// let coloured = TerminalRenderer::new(true);
/// assert_eq!(
///     coloured.render(&ToolResult::error("disk full"), None),
///     "\u{1b}[37;41m✗ Error: disk full\u{1b}[0m\n"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalRenderer {
    colour: bool,
    tables: bool,
}

impl Default for TerminalRenderer {
    fn default() -> Self {
        Self::detect()
    }
}

impl TerminalRenderer {
    /// A renderer with colours on or off.
    pub fn new(colour: bool) -> Self {
        TerminalRenderer {
            colour,
            tables: false,
        }
    }

    /// This renderer, showing a generic result whose data is a list of records (objects
    /// whose values are all scalars, e.g. `[{"id": 1, "text": "milk"}]`) as a table: a count,
    /// then one column per key (in the order the keys first appear) and one row per record.
    /// Off by default (the original's layout lists each record as JSON, `  0: {…}`); `milpa
    /// call` turns it on.
    ///
    /// ```
    /// use milpa::render::{ChannelRenderer, TerminalRenderer};
    /// use milpa::ToolResult;
    /// use serde_json::json;
    ///
    /// let notes = ToolResult::success(json!([
    ///     {"id": 1, "text": "buy milk"},
    ///     {"id": 12, "text": "call ana"}
    /// ]));
    /// let text = TerminalRenderer::new(false).with_tables(true).render(&notes, None);
    /// assert_eq!(text, "✓ 2 items\nID  TEXT\n1   buy milk\n12  call ana\n");
    /// ```
    pub fn with_tables(mut self, tables: bool) -> Self {
        self.tables = tables;
        self
    }

    /// Colours when standard output is a terminal and `NO_COLOR` is unset or empty.
    pub fn detect() -> Self {
        let no_color = std::env::var_os("NO_COLOR");
        Self::new(Self::colour_wanted(
            std::io::stdout().is_terminal(),
            no_color.as_deref(),
        ))
    }

    /// The decision behind [`detect`](Self::detect): colour for a terminal, unless
    /// `NO_COLOR` holds a non-empty value.
    pub fn colour_wanted(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        is_terminal && no_color.is_none_or(|value| value.is_empty())
    }

    /// Whether this renderer writes colours.
    pub fn colour(&self) -> bool {
        self.colour
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.colour {
            format!("\u{1b}[{}m{text}\u{1b}[0m", style.code())
        } else {
            text.to_owned()
        }
    }

    /// A value as the layout shows it: `N/A` for null, `Yes`/`No`, JSON for arrays and
    /// objects, text otherwise.
    fn value(&self, value: &Value) -> String {
        match value {
            Value::Null => self.paint(Style::Comment, "N/A"),
            Value::Bool(true) => self.paint(Style::Info, "Yes"),
            Value::Bool(false) => self.paint(Style::Comment, "No"),
            Value::Array(_) | Value::Object(_) => json_text(value),
            other => scalar_text(other),
        }
    }

    fn list(&self, result: &ToolResult, out: &mut Lines) {
        out.push(self.paint(Style::Info, result.message.as_deref().unwrap_or("Results")));
        out.push("-".repeat(50));
        let items: &[Value] = match &result.data {
            Value::Array(items) => items,
            Value::Null => &[],
            other => std::slice::from_ref(other),
        };
        if items.is_empty() {
            out.push(self.paint(Style::Comment, "No results found."));
        }
        for (index, item) in items.iter().enumerate() {
            let status = match item.get("available") {
                Some(flag) if !flag.is_null() => {
                    if truthy(flag) {
                        "[OK]"
                    } else {
                        "[--]"
                    }
                }
                _ => "",
            };
            let (id, name) = item_id_and_name(index, item);
            out.push(format!("  {status} #{id:<4} {name}"));
        }
        if let Some([page, total_pages, total_items]) = pagination_numbers(result) {
            out.push("-".repeat(50));
            out.push(self.paint(
                Style::Comment,
                &format!("Page {page}/{total_pages} ({total_items} total items)"),
            ));
        }
    }

    fn detail(&self, result: &ToolResult, out: &mut Lines) {
        let entity = result
            .meta
            .get("entity")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
            .unwrap_or("Item");
        let mut header = self.paint(Style::Info, entity);
        if let Some(message) = result.message.as_deref().filter(|m| !m.is_empty()) {
            header.push_str(" - ");
            header.push_str(message);
        }
        out.push(header);
        out.push("=".repeat(40));
        for (key, value) in entries(&result.data) {
            let padded = format!("{:<15}", format!("{}:", label(&key)));
            out.push(format!(
                "  {} {}",
                self.paint(Style::Comment, &padded),
                self.value(value)
            ));
        }
        let actions = result.actions();
        if !actions.is_empty() {
            out.push(String::new());
            out.push(self.paint(Style::Info, "Available actions:"));
            for action in actions {
                out.push(match action {
                    Value::Object(fields) => {
                        let text = |key: &str| fields.get(key).map(scalar_text).unwrap_or_default();
                        format!("  - {}: {}", text("label"), text("action"))
                    }
                    other => format!("  - {}", scalar_text(other)),
                });
            }
        }
    }

    fn confirmation(&self, result: &ToolResult, out: &mut Lines) {
        out.push(self.paint(Style::Warning, "⚠ CONFIRMATION REQUIRED"));
        out.push("-".repeat(40));
        out.push(
            result
                .message
                .clone()
                .unwrap_or_else(|| "Confirmation required".to_owned()),
        );
        let fields = entries(&result.data);
        if !fields.is_empty() {
            out.push(String::new());
            for (key, value) in fields {
                out.push(format!("  {}: {}", label(&key), self.value(value)));
            }
        }
        out.push(String::new());
        out.push(self.paint(Style::Comment, "Type 'yes' to confirm or 'no' to cancel."));
    }

    fn blocked(&self, result: &ToolResult, out: &mut Lines) {
        out.push(self.paint(Style::Danger, "⛔ OPERATION BLOCKED"));
        out.push("-".repeat(40));
        out.push(self.paint(
            Style::Error,
            result.error.as_deref().unwrap_or("Operation blocked"),
        ));
        if let Some(suggestion) = result.meta.get("suggestion").filter(|s| truthy(s)) {
            out.push(format!(
                "{} {}",
                self.paint(Style::Info, "💡 Suggestion:"),
                scalar_text(suggestion)
            ));
        }
    }

    fn error(&self, result: &ToolResult, out: &mut Lines) {
        out.push(self.paint(
            Style::Error,
            &format!(
                "✗ Error: {}",
                result.error.as_deref().unwrap_or("Unknown error")
            ),
        ));
    }

    fn generic(&self, result: &ToolResult, out: &mut Lines) {
        let mark = if result.success {
            self.paint(Style::Info, "✓")
        } else {
            self.paint(Style::Error, "✗")
        };
        let text = result.message.as_deref().or(result.error.as_deref());
        if self.tables && text.is_none() && result.data.as_array().is_some_and(Vec::is_empty) {
            out.push(format!("{mark} no items"));
            return;
        }
        if self.tables
            && let Some(records) = records(&result.data)
        {
            let count = match records.len() {
                1 => "1 item".to_owned(),
                n => format!("{n} items"),
            };
            out.push(format!("{mark} {}", text.unwrap_or(&count)));
            self.table(&records, out);
            return;
        }
        // A bare scalar answer (an echo, a sum) reads best on the status line itself.
        let scalar = !result.data.is_null() && !result.data.is_array() && !result.data.is_object();
        match text {
            Some(text) => out.push(format!("{mark} {text}")),
            None if scalar => out.push(format!("{mark} {}", scalar_text(&result.data))),
            None => out.push(format!("{mark} ")),
        }
        if scalar {
            if text.is_some() {
                out.push(format!("  {}", self.value(&result.data)));
            }
            return;
        }
        for (key, value) in entries(&result.data) {
            out.push(format!("  {}: {}", label(&key), self.value(value)));
        }
    }
}

impl TerminalRenderer {
    /// `records` as columns padded to their widest cell, two spaces apart (the last one
    /// not padded), under a header of the keys in upper case. Each cell is on one line: its
    /// control characters, line breaks included, are shown as escapes.
    fn table(&self, records: &[&serde_json::Map<String, Value>], out: &mut Lines) {
        let mut keys: Vec<&str> = Vec::new();
        for record in records {
            for key in record.keys() {
                if !keys.contains(&key.as_str()) {
                    keys.push(key);
                }
            }
        }
        let cell = |value: Option<&Value>| match value {
            None | Some(Value::Null) => "-".to_owned(),
            Some(Value::Bool(true)) => "yes".to_owned(),
            Some(Value::Bool(false)) => "no".to_owned(),
            Some(other) => EscapeControl::all(&scalar_text(other)).to_string(),
        };
        let header: Vec<String> = keys
            .iter()
            .map(|key| EscapeControl::all(key).to_string().to_uppercase())
            .collect();
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|record| keys.iter().map(|key| cell(record.get(*key))).collect())
            .collect();
        let mut widths = vec![0usize; keys.len()];
        for row in std::iter::once(&header).chain(&rows) {
            for (width, text) in widths.iter_mut().zip(row) {
                *width = (*width).max(text.chars().count());
            }
        }
        for (index, row) in std::iter::once(&header).chain(&rows).enumerate() {
            let mut line = String::new();
            for (column, text) in row.iter().enumerate() {
                if column > 0 {
                    line.push_str("  ");
                }
                line.push_str(text);
                if column + 1 < row.len() {
                    let pad = widths[column].saturating_sub(text.chars().count());
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            let line = line.trim_end().to_owned();
            out.push(if index == 0 {
                self.paint(Style::Comment, &line)
            } else {
                line
            });
        }
    }
}

/// The records of a list shown as a table: a non-empty array of objects whose values are
/// all scalars (or null); `None` for anything else.
fn records(data: &Value) -> Option<Vec<&serde_json::Map<String, Value>>> {
    let items = data.as_array().filter(|items| !items.is_empty())?;
    items
        .iter()
        .map(|item| {
            let fields = item.as_object().filter(|fields| !fields.is_empty())?;
            fields
                .values()
                .all(|value| !value.is_array() && !value.is_object())
                .then_some(fields)
        })
        .collect()
}

impl ChannelRenderer for TerminalRenderer {
    fn supports(&self, channel: &str) -> bool {
        channel == channel::CLI
    }

    fn render(&self, result: &ToolResult, _ctx: Option<&ToolContext>) -> String {
        let safe;
        let result = if needs_escaping(result) {
            safe = escaped(result);
            &safe
        } else {
            result
        };
        let mut out = Lines::default();
        match result.result_type() {
            "list" => self.list(result, &mut out),
            "detail" => self.detail(result, &mut out),
            "confirmation" => self.confirmation(result, &mut out),
            "blocked" => self.blocked(result, &mut out),
            "error" => self.error(result, &mut out),
            _ => self.generic(result, &mut out),
        }
        out.finish()
    }
}

/// Whether a text of `result` (message, error, data with its keys, meta values) holds a
/// control character other than `\n` and `\t`.
fn needs_escaping(result: &ToolResult) -> bool {
    fn text(text: &str) -> bool {
        EscapeControl::keeping_layout(text).needed()
    }
    fn value(v: &Value) -> bool {
        match v {
            Value::String(s) => text(s),
            Value::Array(items) => items.iter().any(value),
            Value::Object(fields) => fields.iter().any(|(k, v)| text(k) || value(v)),
            _ => false,
        }
    }
    result.message.as_deref().is_some_and(text)
        || result.error.as_deref().is_some_and(text)
        || value(&result.data)
        || result.meta.fields().values().any(value)
}

/// A copy of `result` whose texts have their control characters (but `\n` and `\t`) made
/// visible: a tool's output cannot move the cursor, retitle the window, ring the bell or
/// overwrite a line of the terminal it is printed on.
fn escaped(result: &ToolResult) -> ToolResult {
    fn text(text: &str) -> String {
        EscapeControl::keeping_layout(text).to_string()
    }
    fn value(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(text(s)),
            Value::Array(items) => Value::Array(items.iter().map(value).collect()),
            Value::Object(fields) => {
                Value::Object(fields.iter().map(|(k, v)| (text(k), value(v))).collect())
            }
            other => other.clone(),
        }
    }
    let mut safe = result.clone();
    safe.message = result.message.as_deref().map(text);
    safe.error = result.error.as_deref().map(text);
    safe.data = value(&result.data);
    // The layout reads meta by key (`entity`, `suggestion`, `actions`…): its values are
    // what is shown.
    for (key, field) in result.meta.fields() {
        safe.meta.insert(key.clone(), value(field));
    }
    safe
}

/// Lines, each ending in `\n` when joined.
#[derive(Default)]
struct Lines(Vec<String>);

impl Lines {
    fn push(&mut self, line: String) {
        self.0.push(line);
    }

    fn finish(self) -> String {
        let mut text = String::new();
        for line in self.0 {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }
}

/// The fields of `data` with their keys: an object's entries, a list's items keyed by
/// position (from 0, as the original printed them), nothing for a scalar.
fn entries(data: &Value) -> Vec<(String, &Value)> {
    match data {
        Value::Object(fields) => fields.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| (index.to_string(), item))
            .collect(),
        _ => Vec::new(),
    }
}

/// PHP truthiness, which decided the original's `[OK]`/`[--]` and whether to show a
/// suggestion.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty() && text != "0",
        Value::Array(items) => !items.is_empty(),
        Value::Object(fields) => !fields.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(TerminalRenderer::colour_wanted(true, None));
        assert!(TerminalRenderer::colour_wanted(true, Some(OsStr::new(""))));
        assert!(!TerminalRenderer::colour_wanted(
            true,
            Some(OsStr::new("1"))
        ));
        assert!(!TerminalRenderer::colour_wanted(false, None));
    }

    #[test]
    fn php_truthiness() {
        assert!(!truthy(&Value::from("0")));
        assert!(!truthy(&Value::from(0)));
        assert!(truthy(&Value::from(0.5)));
        assert!(truthy(&Value::from("no")));
    }
}
