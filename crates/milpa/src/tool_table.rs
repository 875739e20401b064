//! The registered tools as the pipeline finds them: the fixed table (`register`), and the
//! groups replaced while serving (`replace_tools`, an upstream's tools). The registry fills
//! them; `resolve` reads them through a [`ToolLookup`]. Kept out of the registry so that the
//! pipeline depends on the tools it runs, not on the registry that runs it.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::definition::ToolDefinition;
use crate::rate_limit::Quota;
use crate::schema::InputValidator;

/// A tool with what the pipeline precomputed for it.
pub(crate) struct RegisteredTool {
    pub definition: ToolDefinition,
    pub validator: InputValidator,
    pub quota: Quota,
}

/// Up to this many tools, a lookup scans the list instead of hashing the name.
pub(crate) const LINEAR_LOOKUP_MAX: usize = 8;

/// The registered tools, in registration order, and the index `resolve` finds them by.
#[derive(Default)]
pub(crate) struct ToolTable {
    tools: Vec<RegisteredTool>,
    // foldhash: the lookup is on every call, and SipHash showed in profiles. Its seed is
    // random per process, and callers only look keys up, never insert them.
    index: HashMap<Arc<str>, usize, foldhash::fast::RandomState>,
}

impl ToolTable {
    #[inline]
    pub(crate) fn lookup(&self, name: &str) -> Option<&RegisteredTool> {
        // A few tools are found faster by comparing names (mostly just their lengths) than
        // by hashing the name; names are unique, so both find the same tool.
        if self.tools.len() <= LINEAR_LOOKUP_MAX {
            return self
                .tools
                .iter()
                .find(|tool| tool.definition.name() == name);
        }
        self.index.get(name).map(|i| &self.tools[*i])
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    pub(crate) fn push(&mut self, tool: RegisteredTool) {
        self.index
            .insert(tool.definition.name_arc().clone(), self.tools.len());
        self.tools.push(tool);
    }

    pub(crate) fn len(&self) -> usize {
        self.tools.len()
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, RegisteredTool> {
        self.tools.iter()
    }
}

/// Tools that are replaced while the registry serves (an upstream's, re-discovered when it
/// says its list changed), by group, groups in the order they were first set. A call holds
/// the `Arc` of the tool it resolved, so a replacement never pulls a tool from under a
/// running call; the next call sees the new table.
#[derive(Default)]
pub(crate) struct SwappableTools {
    groups: Vec<(Arc<str>, Vec<Arc<RegisteredTool>>)>,
    index: HashMap<Arc<str>, Arc<RegisteredTool>, foldhash::fast::RandomState>,
}

impl SwappableTools {
    /// This table with `group`'s tools replaced by `tools` (the group removed when empty).
    pub(crate) fn with_group(
        &self,
        group: &str,
        tools: Vec<Arc<RegisteredTool>>,
    ) -> SwappableTools {
        let mut groups = self.groups.clone();
        match groups.iter().position(|(name, _)| &**name == group) {
            Some(i) if tools.is_empty() => {
                groups.remove(i);
            }
            Some(i) => groups[i].1 = tools,
            None if tools.is_empty() => {}
            None => groups.push((Arc::from(group), tools)),
        }
        let index = groups
            .iter()
            .flat_map(|(_, tools)| tools.iter())
            .map(|tool| (tool.definition.name_arc().clone(), Arc::clone(tool)))
            .collect();
        SwappableTools { groups, index }
    }

    /// The group holding `name`, if any.
    pub(crate) fn group_of(&self, name: &str) -> Option<&str> {
        self.groups
            .iter()
            .find(|(_, tools)| tools.iter().any(|t| t.definition.name() == name))
            .map(|(group, _)| &**group)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<RegisteredTool>> {
        self.groups.iter().flat_map(|(_, tools)| tools.iter())
    }

    /// The tool named `name`, shared: it stays valid when its group is replaced meanwhile.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        self.index.get(name).cloned()
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }
}

/// Where `resolve` looks a name up: the fixed table (borrowed, the hot path), then the
/// replaceable groups.
///
/// The registry keeps both in this one struct so that a call takes one pointer to them: as
/// two references, the call's future loaded them as one 16-byte value written by two 8-byte
/// stores just before, a store-forwarding stall at the start of every call (perf, about 3%
/// of a trivial call).
pub(crate) struct ToolLookup {
    pub table: ToolTable,
    pub swappable: ArcSwap<SwappableTools>,
}

impl ToolLookup {
    /// Whether `name` is taken, in the table or in a group.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.table.contains(name) || self.swappable.load().contains(name)
    }

    /// A tool of a group, shared: it stays valid when the group is replaced meanwhile.
    #[cold]
    pub(crate) fn swappable(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        self.swappable.load().get(name)
    }
}
