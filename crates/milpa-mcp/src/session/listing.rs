//! `tools/list`: the tool entries, computed once per generation of the registry's tool list
//! (again after it changed), served in pages with opaque cursors. A cursor names the
//! generation it was given in: once the list changed, an old cursor is refused ("Invalid
//! cursor") rather than read against another list, so no listing mixes two generations.

use std::sync::Arc;

use arc_swap::ArcSwap;
use milpa::ToolRegistry;
use serde_json::{Map, Value};

use crate::jsonrpc::{ErrorObject, INVALID_PARAMS};
use crate::mapping;

/// The server's listing of its registry, kept until the registry's tool list changes:
/// every session lists from it, and the first request after a change lists again.
#[derive(Debug)]
pub(crate) struct ListingCache {
    listing: ArcSwap<ToolListing>,
}

impl ListingCache {
    /// Lists `registry` now, in pages of `page_size`.
    pub fn new(registry: &ToolRegistry, page_size: usize) -> ListingCache {
        ListingCache {
            listing: ArcSwap::from_pointee(list_tools(registry, page_size)),
        }
    }

    /// The listing of `registry`'s current tool list: the kept one, or a fresh one when
    /// the list changed since.
    pub fn current(&self, registry: &ToolRegistry, page_size: usize) -> Arc<ToolListing> {
        let listing = self.listing.load_full();
        if listing.generation() == registry.tool_list_generation() {
            return listing;
        }
        let fresh = Arc::new(list_tools(registry, page_size));
        self.listing.store(Arc::clone(&fresh));
        fresh
    }
}

/// The `tools/list` entries of `registry`'s tool list as it is now.
fn list_tools(registry: &ToolRegistry, page_size: usize) -> ToolListing {
    // The generation first: a change while listing makes the listing look stale, so
    // the next request lists again rather than keeping a listing of a newer list under
    // an older generation.
    let generation = registry.tool_list_generation();
    let (names, tools) = registry
        .definitions()
        .map(|d| (d.name().to_owned(), mapping::tool_entry(&d)))
        .unzip();
    ToolListing {
        names,
        tools,
        page_size: page_size.max(1),
        generation,
    }
}

/// The `tools/list` entries of one generation of the tool list, and the page size.
#[derive(Debug)]
pub(crate) struct ToolListing {
    /// The tools' names, beside their entries: what a caller may see is decided by name.
    names: Vec<String>,
    tools: Vec<Value>,
    page_size: usize,
    generation: u64,
}

impl ToolListing {
    #[cfg(test)]
    pub fn new(tools: Vec<Value>, page_size: usize, generation: u64) -> Self {
        ToolListing {
            names: (0..tools.len()).map(|i| i.to_string()).collect(),
            tools,
            page_size: page_size.max(1),
            generation,
        }
    }

    /// The generation of the registry's tool list these entries are of.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Answers `tools/list` with these params (`cursor`: absent, null or one we gave).
    #[cfg(test)]
    pub fn list(&self, params: Option<&Value>) -> Result<Value, ErrorObject> {
        self.page(read_cursor(params)?.as_deref(), None)
    }

    /// The page a cursor read by [`read_cursor`] names (`None`: the first), of every entry
    /// or of those whose name `shown` keeps. Pages and cursors count the kept entries only,
    /// so a caller's pages are as full as anyone's.
    pub fn page(
        &self,
        cursor: Option<&str>,
        shown: Option<&dyn Fn(&str) -> bool>,
    ) -> Result<Value, ErrorObject> {
        let Some(shown) = shown else {
            return self.page_of(cursor, &self.tools);
        };
        let kept: Vec<Value> = self
            .names
            .iter()
            .zip(&self.tools)
            .filter(|(name, _)| shown(name))
            .map(|(_, entry)| entry.clone())
            .collect();
        self.page_of(cursor, &kept)
    }

    fn page_of(&self, cursor: Option<&str>, tools: &[Value]) -> Result<Value, ErrorObject> {
        let total = tools.len();
        let start = match cursor {
            None => 0,
            Some(cursor) => {
                decode_cursor(cursor, total, self.generation).ok_or_else(invalid_cursor)?
            }
        };
        let end = (start + self.page_size).min(total);
        let mut result = Map::new();
        result.insert("tools".into(), Value::Array(tools[start..end].to_vec()));
        if end < total {
            result.insert(
                "nextCursor".into(),
                Value::String(encode_cursor(end, total, self.generation)),
            );
        }
        Ok(Value::Object(result))
    }
}

/// The `cursor` of `tools/list` params: absent or null is the first page, a string one we
/// gave; anything else is "Invalid cursor".
pub(crate) fn read_cursor(params: Option<&Value>) -> Result<Option<String>, ErrorObject> {
    match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(cursor)) => Ok(Some(cursor.clone())),
        Some(_) => Err(invalid_cursor()),
    }
}

fn invalid_cursor() -> ErrorObject {
    ErrorObject::new(INVALID_PARAMS, "Invalid cursor")
}

/// A cursor names the next offset, the list's length and its generation, so a cursor from
/// another listing is refused rather than misread.
fn encode_cursor(offset: usize, total: usize, generation: u64) -> String {
    format!("t{offset:x}.{total:x}.{generation:x}")
}

fn decode_cursor(cursor: &str, total: usize, generation: u64) -> Option<usize> {
    let mut parts = cursor.strip_prefix('t')?.split('.');
    let offset = usize::from_str_radix(parts.next()?, 16).ok()?;
    let count = usize::from_str_radix(parts.next()?, 16).ok()?;
    let given_in = u64::from_str_radix(parts.next()?, 16).ok()?;
    (parts.next().is_none() && count == total && given_in == generation && offset < total)
        .then_some(offset)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cursors_are_checked() {
        assert_eq!(decode_cursor(&encode_cursor(3, 10, 1), 10, 1), Some(3));
        assert_eq!(decode_cursor(&encode_cursor(3, 10, 1), 11, 1), None);
        assert_eq!(
            decode_cursor(&encode_cursor(3, 10, 1), 10, 2),
            None,
            "the list changed since"
        );
        assert_eq!(decode_cursor("garbage", 10, 1), None);
        assert_eq!(decode_cursor("t3.a.1.0", 10, 1), None);
        assert_eq!(decode_cursor(&encode_cursor(10, 10, 1), 10, 1), None);
    }

    #[test]
    fn pages_follow_their_cursors_to_the_end() {
        let listing = ToolListing::new((0..5).map(|i| json!({"name": i})).collect(), 2, 0);
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

    /// A filtered listing pages over what it keeps: full pages, cursors to its own end.
    #[test]
    fn a_filtered_listing_pages_over_what_it_keeps() {
        let listing = ToolListing::new((0..6).map(|i| json!({"name": i})).collect(), 2, 0);
        let odd = |name: &str| name.parse::<u32>().unwrap() % 2 == 1;
        let first = listing.page(None, Some(&odd)).unwrap();
        assert_eq!(first["tools"], json!([{"name": 1}, {"name": 3}]));
        let cursor = first["nextCursor"].as_str().unwrap().to_owned();
        let second = listing.page(Some(&cursor), Some(&odd)).unwrap();
        assert_eq!(second["tools"], json!([{"name": 5}]));
        assert!(second.get("nextCursor").is_none());
    }
}
