//! `[[resources]]` and `[[prompts]]`: what a manifest offers to be read and prompted with,
//! beside its tools. Checked when the manifest loads (each error names its line); served by
//! the CLI's resource and prompt providers.
//!
//! ```toml
//! [[resources]]
//! uri = "docs://readme"
//! file = "README.md"            # one file, read-only
//!
//! [[resources]]
//! uri = "docs://guide/"          # a folder: docs://guide/<path> for each file below it
//! folder = "guide"
//! scopes = ["docs:read"]
//!
//! [[resources]]
//! uri = "status://disk"
//! command = ["df", "-h"]         # run like a command tool, its output is the contents
//!
//! [[prompts]]
//! name = "review"
//! description = "Review a change"
//! template = "Review this change and list the risks:\n\n{diff}"
//! [prompts.arguments.diff]
//! description = "The diff"
//! ```

use std::path::PathBuf;

use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;

use crate::manifest_error::ManifestError;

/// The most bytes a resource's contents may take, unless `max_bytes` says otherwise: 1 MiB.
pub const DEFAULT_RESOURCE_MAX_BYTES: u64 = 1024 * 1024;

/// The longest a command resource may run, unless `timeout_seconds` says otherwise.
pub const DEFAULT_RESOURCE_TIMEOUT_SECONDS: u64 = 30;

/// How often `serve` looks at a folder resource again, unless `rescan_seconds` says
/// otherwise.
pub const DEFAULT_RESCAN_SECONDS: u64 = 5;

/// One `[[resources]]` entry: a file, a folder or a command.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// The URI (a folder's: the prefix its files' paths follow, ending in `/`).
    pub uri: Spanned<String>,
    /// The listed name [default: the URI].
    #[serde(default)]
    pub name: Option<String>,
    /// What it holds.
    #[serde(default)]
    pub description: Option<String>,
    /// Its MIME type [default: by the file's extension; `text/plain` for a command].
    #[serde(default)]
    pub mime_type: Option<String>,
    /// A file, relative to the manifest's folder.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// A folder, relative to the manifest's folder: every file below it (symlinks that
    /// lead out of it are refused).
    #[serde(default)]
    pub folder: Option<PathBuf>,
    /// A program and its arguments (no shell), whose standard output is the contents.
    #[serde(default)]
    pub command: Option<Spanned<Vec<String>>>,
    /// Environment variables a command keeps (besides PATH, HOME and LANG).
    #[serde(default)]
    pub env: Vec<String>,
    /// The scopes a reader must hold one of.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The most bytes a read returns; a larger file is refused, a command's output cut.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// How long a command may run.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// How often `serve` looks for files added to or removed from a folder, and tells
    /// clients when its listing changed (`0`: never) [default: 5].
    #[serde(default)]
    pub rescan_seconds: Option<u64>,
}

/// Where a resource's contents come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceSource {
    /// `file`.
    File,
    /// `folder`.
    Folder,
    /// `command`.
    Command,
}

impl ResourceSpec {
    /// Which of `file`, `folder` and `command` it has (exactly one, once checked).
    pub fn source(&self) -> ResourceSource {
        match (&self.file, &self.folder) {
            (Some(_), _) => ResourceSource::File,
            (None, Some(_)) => ResourceSource::Folder,
            (None, None) => ResourceSource::Command,
        }
    }

    /// How often a folder is looked at again; `None` for other sources and when turned off.
    pub fn rescan_every(&self) -> Option<std::time::Duration> {
        let seconds = self.rescan_seconds.unwrap_or(DEFAULT_RESCAN_SECONDS);
        (self.source() == ResourceSource::Folder && seconds > 0)
            .then(|| std::time::Duration::from_secs(seconds))
    }

    /// The size cap.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes.unwrap_or(DEFAULT_RESOURCE_MAX_BYTES)
    }

    pub(crate) fn check(
        &self,
        at: &dyn Fn(usize, String) -> ManifestError,
    ) -> Result<(), ManifestError> {
        let uri = self.uri.get_ref();
        let start = self.uri.span().start;
        let scheme = uri.split_once(':').map(|(scheme, _)| scheme);
        if !scheme.is_some_and(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        }) {
            return Err(at(
                start,
                format!("resource `{uri}`: a URI starts with a scheme, e.g. docs://readme"),
            ));
        }
        if uri.contains(['{', '}']) {
            return Err(at(
                start,
                format!("resource `{uri}`: braces are not allowed in a URI"),
            ));
        }
        let sources = [
            self.file.is_some(),
            self.folder.is_some(),
            self.command.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() != 1 {
            return Err(at(
                start,
                format!("resource `{uri}`: give exactly one of file, folder or command"),
            ));
        }
        if self.folder.is_some() && !uri.ends_with('/') {
            return Err(at(
                start,
                format!("resource `{uri}`: a folder's URI is a prefix and ends with `/`"),
            ));
        }
        if let Some(command) = &self.command
            && command.get_ref().is_empty()
        {
            return Err(at(
                command.span().start,
                format!("resource `{uri}`: command is empty"),
            ));
        }
        if self.max_bytes == Some(0) || self.timeout_seconds == Some(0) {
            return Err(at(
                start,
                format!("resource `{uri}`: max_bytes and timeout_seconds must be at least 1"),
            ));
        }
        if self.command.is_none() && (self.timeout_seconds.is_some() || !self.env.is_empty()) {
            return Err(at(
                start,
                format!("resource `{uri}`: timeout_seconds and env are for command resources"),
            ));
        }
        if self.folder.is_none() && self.rescan_seconds.is_some() {
            return Err(at(
                start,
                format!("resource `{uri}`: rescan_seconds is for folder resources"),
            ));
        }
        Ok(())
    }
}

/// One `[[prompts]]` entry: a text template with declared arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// The prompt's name.
    pub name: Spanned<String>,
    /// What it is for.
    pub description: String,
    /// A human-readable title.
    #[serde(default)]
    pub title: Option<String>,
    /// The text, with `{argument}` where an argument goes (`{{` and `}}` for braces).
    pub template: Spanned<String>,
    /// The arguments, in order.
    #[serde(default)]
    pub arguments: IndexMap<String, PromptArgumentSpec>,
    /// The scopes a caller must hold one of.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `[prompts.arguments.NAME]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgumentSpec {
    /// What the argument is.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether it must be given [default: true].
    #[serde(default)]
    pub required: Option<bool>,
}

impl PromptSpec {
    pub(crate) fn check(
        &self,
        at: &dyn Fn(usize, String) -> ManifestError,
    ) -> Result<(), ManifestError> {
        let name = self.name.get_ref();
        if name.is_empty() || name.len() > 128 {
            return Err(at(
                self.name.span().start,
                "a prompt's name is 1 to 128 characters".into(),
            ));
        }
        let pieces =
            crate::prompt_text::PromptText::parse(self.template.get_ref()).map_err(|reason| {
                at(
                    self.template.span().start,
                    format!("prompt `{name}`: {reason}"),
                )
            })?;
        for used in pieces.arguments() {
            if !self.arguments.contains_key(used) {
                return Err(at(
                    self.template.span().start,
                    format!(
                        "prompt `{name}`: the template uses `{{{used}}}`, which is not among its arguments"
                    ),
                ));
            }
        }
        Ok(())
    }
}
