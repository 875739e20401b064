//! Line and column of a byte offset, for errors: Cedar reports spans (miette labels) as byte
//! offsets into the policy text.

use miette::Diagnostic;

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, text[line_start..offset].chars().count() + 1)
}

/// The offset of a diagnostic's first label (0 when it has none).
pub(crate) fn first_offset(diagnostic: &dyn Diagnostic) -> usize {
    diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map_or(0, |label| label.offset())
}

/// The message of a diagnostic with its help, if any.
pub(crate) fn message(diagnostic: &dyn Diagnostic) -> String {
    match diagnostic.help() {
        Some(help) => format!("{diagnostic} ({help})"),
        None => diagnostic.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::line_column;

    #[test]
    fn lines_and_columns_are_one_based_and_count_characters() {
        let text = "ab\nçd ef\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 3), (2, 1));
        // 'ç' is two bytes: byte 6 is the space after "çd", the third character.
        assert_eq!(line_column(text, 6), (2, 3));
        assert_eq!(line_column(text, 100), (3, 1));
    }
}
