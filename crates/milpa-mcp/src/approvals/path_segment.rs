//! An id placed in a link or a form's action (`/approvals/{id}`): ids come from stores and
//! agents, so one must neither leave its path segment nor end the path. The templates then
//! HTML-escape the result like any other value.

/// `text` as one URL path segment: unreserved characters as they are, every other byte
/// `%XX`, so an id can neither leave its segment (`/`, `..`) nor end the path (`?`, `#`).
pub(crate) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    if out == "." || out == ".." {
        return out.replace('.', "%2E");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::path_segment;

    #[test]
    fn ids_stay_in_their_path_segment() {
        assert_eq!(path_segment("3f2a-09_b.c~"), "3f2a-09_b.c~");
        assert_eq!(path_segment("../../mcp?x=1#y"), "..%2F..%2Fmcp%3Fx%3D1%23y");
        assert_eq!(path_segment(".."), "%2E%2E");
        assert_eq!(path_segment("é \"<"), "%C3%A9%20%22%3C");
    }
}
