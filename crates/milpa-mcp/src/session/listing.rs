//! `tools/list`: the tool entries, computed once per server, served in pages with opaque
//! cursors.

use serde_json::{Map, Value};

use crate::jsonrpc::{ErrorObject, INVALID_PARAMS};

/// The `tools/list` entries and the page size.
#[derive(Debug)]
pub(crate) struct ToolListing {
    tools: Vec<Value>,
    page_size: usize,
}

impl ToolListing {
    pub fn new(tools: Vec<Value>, page_size: usize) -> Self {
        ToolListing {
            tools,
            page_size: page_size.max(1),
        }
    }

    /// Answers `tools/list` with these params (`cursor`: absent, null or one we gave).
    pub fn list(&self, params: Option<&Value>) -> Result<Value, ErrorObject> {
        let cursor = params
            .and_then(|p| p.get("cursor"))
            .filter(|c| !c.is_null());
        match cursor {
            None => self.page(None),
            Some(Value::String(cursor)) => self.page(Some(cursor)),
            Some(_) => Err(invalid_cursor()),
        }
    }

    fn page(&self, cursor: Option<&str>) -> Result<Value, ErrorObject> {
        let total = self.tools.len();
        let start = match cursor {
            None => 0,
            Some(cursor) => decode_cursor(cursor, total).ok_or_else(invalid_cursor)?,
        };
        let end = (start + self.page_size).min(total);
        let mut result = Map::new();
        result.insert(
            "tools".into(),
            Value::Array(self.tools[start..end].to_vec()),
        );
        if end < total {
            result.insert(
                "nextCursor".into(),
                Value::String(encode_cursor(end, total)),
            );
        }
        Ok(Value::Object(result))
    }
}

fn invalid_cursor() -> ErrorObject {
    ErrorObject::new(INVALID_PARAMS, "Invalid cursor")
}

/// A cursor names the next offset and the list's length, so a cursor from a listing of
/// another length is refused rather than misread.
fn encode_cursor(offset: usize, total: usize) -> String {
    format!("t{offset:x}.{total:x}")
}

fn decode_cursor(cursor: &str, total: usize) -> Option<usize> {
    let (offset, count) = cursor.strip_prefix('t')?.split_once('.')?;
    let offset = usize::from_str_radix(offset, 16).ok()?;
    let count = usize::from_str_radix(count, 16).ok()?;
    (count == total && offset < total).then_some(offset)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cursors_are_checked() {
        assert_eq!(decode_cursor(&encode_cursor(3, 10), 10), Some(3));
        assert_eq!(decode_cursor(&encode_cursor(3, 10), 11), None);
        assert_eq!(decode_cursor("garbage", 10), None);
        assert_eq!(decode_cursor(&encode_cursor(10, 10), 10), None);
    }

    #[test]
    fn pages_follow_their_cursors_to_the_end() {
        let listing = ToolListing::new((0..5).map(|i| json!({"name": i})).collect(), 2);
        let mut names = Vec::new();
        let mut params = None;
        loop {
            let page = listing.list(params.as_ref()).unwrap();
            names.extend(page["tools"].as_array().unwrap().iter().cloned());
            match page.get("nextCursor") {
                Some(cursor) => params = Some(json!({"cursor": cursor})),
                None => break,
            }
        }
        assert_eq!(
            names,
            (0..5).map(|i| json!({"name": i})).collect::<Vec<_>>()
        );
        assert!(listing.list(Some(&json!({"cursor": 3}))).is_err());
        assert!(listing.list(Some(&json!({"cursor": null}))).is_ok());
    }
}
