//! What the command writes for a person at a terminal: tables, JSON, and text with its
//! control and format characters shown as escapes (so a tool's output cannot reorder or
//! hide what a person reads). Every command's printing goes through here.

use std::io::Write;

use milpa::escape::EscapeControl;

use crate::CliError;

/// Writes to standard output; a reader that went away (`milpa tools | head -1`) is not an
/// error worth a panic.
pub(crate) fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::failed(format!("cannot write JSON: {e}")))?;
    emit(&text);
    emit("\n");
    Ok(())
}

/// Columns padded to their widest cell (the last one is not padded), two spaces apart.
/// Every cell is shown [`printable`]: a tool's name or description (an upstream server's
/// words) cannot break the table or reorder what it shows.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths = vec![0usize; header.len()];
    for row in std::iter::once(&header).chain(rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `text` for a terminal, on one line: control characters (`\n` included), format
/// characters (bidi overrides and isolates, zero-width characters) and line separators
/// escaped, so a tool name, principal or summary holding them cannot move the cursor, hide
/// a line or show its words in another order.
pub(crate) fn printable(text: &str) -> String {
    EscapeControl::all(text).to_string()
}

/// `text` for a terminal, keeping its lines and tabs: as [`printable`] otherwise.
pub(crate) fn printable_lines(text: &str) -> String {
    EscapeControl::keeping_layout(text).to_string()
}
