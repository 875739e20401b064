//! `[policy]`: Cedar policies over every call (DESIGN §7), loaded from the files the manifest
//! names and set as the registry's call policy.
//!
//! ```toml
//! [policy]
//! cedar = "policy.cedar"      # or a list; relative to the manifest's folder
//! default = "allow"           # "deny": a call no `permit` covers is denied too
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use milpa_cedar::{CedarPolicy, DefaultEffect};
use serde::Deserialize;
use toml::Spanned;

use crate::manifest_error::ManifestError;

/// `[policy]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// The `.cedar` file, or several (one policy set across them).
    pub cedar: Spanned<CedarFiles>,
    /// What a call no policy decides gets (default `allow`: only a `forbid` denies).
    #[serde(default)]
    pub default: PolicyDefault,
}

/// `cedar = "a.cedar"` or `cedar = ["a.cedar", "b.cedar"]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a .cedar file name or a list of them")]
pub enum CedarFiles {
    /// One file.
    One(String),
    /// Several files.
    Many(Vec<String>),
}

impl CedarFiles {
    /// The names as written.
    pub(crate) fn names(&self) -> &[String] {
        match self {
            CedarFiles::One(name) => std::slice::from_ref(name),
            CedarFiles::Many(names) => names,
        }
    }
}

/// `default = "allow" | "deny"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PolicyDefault {
    /// Only a `forbid` denies.
    #[default]
    Allow,
    /// A call no `permit` covers is denied too.
    Deny,
}

impl PolicySection {
    /// Checks serde cannot do; errors point at the `cedar` line.
    pub(crate) fn check(
        &self,
        at: &dyn Fn(usize, String) -> ManifestError,
    ) -> Result<(), ManifestError> {
        if self.cedar.get_ref().names().is_empty() {
            return Err(at(
                self.cedar.span().start,
                "policy.cedar lists no file".into(),
            ));
        }
        Ok(())
    }
}

impl PolicySection {
    /// The Cedar policy, loaded and validated, its files relative to `base` (the manifest's
    /// folder). An error names the manifest line (through `error_at`, given the section's
    /// offset) and the `.cedar` file, line and column.
    pub(crate) fn load(
        &self,
        base: Option<&Path>,
        error_at: impl Fn(Option<usize>, String) -> ManifestError,
    ) -> Result<Arc<CedarPolicy>, ManifestError> {
        let base = base.map(PathBuf::from).unwrap_or_default();
        let files: Vec<PathBuf> = self
            .cedar
            .get_ref()
            .names()
            .iter()
            .map(|name| base.join(name))
            .collect();
        let default = match self.default {
            PolicyDefault::Allow => DefaultEffect::Allow,
            PolicyDefault::Deny => DefaultEffect::Deny,
        };
        CedarPolicy::from_files(&files, default)
            .map(Arc::new)
            .map_err(|e| error_at(Some(self.cedar.span().start), format!("[policy] {e}")))
    }
}
