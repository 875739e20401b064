//! Path arguments: a string argument declared a path is normalised before validation and
//! policy, and the normal form replaces it, so the schema, a Cedar policy and the tool all see
//! one spelling. A string pattern such as `like "/etc/*"` is no path check: `//etc/hostname`,
//! `/./etc/hostname` and `/tmp/../etc/hostname` name the same file and match no such pattern.
//!
//! Normalising is lexical (repeated `/` collapsed, `.` removed, `..` taken back, never above
//! `/`); a relative path is refused unless the rule names a `base` to take it against. With
//! `resolve`, the path is then resolved against the filesystem (symlinks followed; a missing
//! last part is kept as written, under its resolved folder). With `within`, a path outside
//! every listed folder is refused.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

/// How one path argument is normalised and where it may point.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathRule {
    /// The folder a relative path is taken against; without one a relative path is refused.
    pub base: Option<PathBuf>,
    /// Whether the path is resolved against the filesystem (symlinks followed).
    pub resolve: bool,
    /// The folders the path must be in (itself or below); empty: anywhere.
    pub within: Vec<PathBuf>,
}

/// Why a path argument was refused. The messages never quote the value (they reach audit
/// logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathRefusal {
    /// Relative, and the rule has no `base`.
    #[error("must be an absolute path")]
    Relative,
    /// Empty or holding a NUL byte.
    #[error("is not a path")]
    NotAPath,
    /// Outside every `within` folder.
    #[error("is outside the allowed folders ({0})")]
    Outside(String),
    /// `resolve` could not resolve it.
    #[error("cannot be resolved: {0}")]
    Unresolvable(String),
}

impl PathRule {
    /// A rule that only normalises lexically, refuses relative paths, and allows anywhere.
    pub fn new() -> PathRule {
        PathRule::default()
    }

    /// Takes relative paths against `base` (an absolute folder).
    pub fn base(mut self, base: impl Into<PathBuf>) -> PathRule {
        self.base = Some(base.into());
        self
    }

    /// Resolves paths against the filesystem (symlinks followed).
    pub fn resolve(mut self, resolve: bool) -> PathRule {
        self.resolve = resolve;
        self
    }

    /// Allows only paths in one of `folders`.
    pub fn within(mut self, folders: impl IntoIterator<Item = impl Into<PathBuf>>) -> PathRule {
        self.within = folders.into_iter().map(Into::into).collect();
        self
    }

    /// The normal form of `raw`, or why it is refused.
    ///
    /// ```
    /// use milpa::schema::PathRule;
    ///
    /// let rule = PathRule::new();
    /// for raw in ["//etc/hostname", "/./etc/hostname", "/tmp/../etc/hostname", "/../etc/hostname"] {
    ///     assert_eq!(rule.normalise(raw).unwrap(), std::path::Path::new("/etc/hostname"));
    /// }
    /// assert!(rule.normalise("etc/hostname").is_err());
    /// let notes = PathRule::new().within(["/srv/notes"]);
    /// assert!(notes.normalise("/srv/notes/../secrets").is_err());
    /// ```
    pub fn normalise(&self, raw: &str) -> Result<PathBuf, PathRefusal> {
        if raw.is_empty() || raw.contains('\0') {
            return Err(PathRefusal::NotAPath);
        }
        let given = Path::new(raw);
        let joined = match (&self.base, given.is_absolute()) {
            (_, true) => given.to_path_buf(),
            (Some(base), false) => base.join(given),
            (None, false) => return Err(PathRefusal::Relative),
        };
        if !joined.is_absolute() {
            return Err(PathRefusal::Relative);
        }
        let path = if self.resolve {
            resolved(&joined)?
        } else {
            lexical(&joined)
        };
        if self.within.is_empty() {
            return Ok(path);
        }
        let inside = self.within.iter().any(|folder| {
            let folder = lexical(folder);
            let folder = if self.resolve {
                std::fs::canonicalize(&folder).unwrap_or(folder)
            } else {
                folder
            };
            path.starts_with(&folder)
        });
        if inside {
            Ok(path)
        } else {
            let folders: Vec<String> = self
                .within
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            Err(PathRefusal::Outside(folders.join(", ")))
        }
    }
}

/// `path` (absolute) with `.` removed, `..` taken back (never above `/`) and repeated
/// separators collapsed.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// `path` resolved against the filesystem as the kernel would (symlinks first, then `..`);
/// a missing last part is kept as written under its resolved folder.
fn resolved(path: &Path) -> Result<PathBuf, PathRefusal> {
    match std::fs::canonicalize(path) {
        Ok(real) => Ok(real),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(PathRefusal::Unresolvable(error.to_string()));
            };
            if !matches!(path.components().next_back(), Some(Component::Normal(_))) {
                return Err(PathRefusal::Unresolvable(error.to_string()));
            }
            Ok(resolved(parent)?.join(name))
        }
        Err(error) => Err(PathRefusal::Unresolvable(error.to_string())),
    }
}

/// Normalises every string argument `rules` names, in place; the first refusal as a
/// validation message (`path: must be an absolute path`).
pub(crate) fn normalise_args(rules: &[(String, PathRule)], args: &mut Value) -> Result<(), String> {
    let Value::Object(map) = args else {
        return Ok(());
    };
    for (field, rule) in rules {
        if let Some(Value::String(raw)) = map.get_mut(field) {
            let normal = rule
                .normalise(raw)
                .map_err(|refusal| format!("{field}: {refusal}"))?;
            match normal.into_os_string().into_string() {
                Ok(text) => *raw = text,
                Err(_) => return Err(format!("{field}: {}", PathRefusal::NotAPath)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_file_normalise_to_one() {
        let rule = PathRule::new();
        for raw in [
            "/etc/hostname",
            "//etc/hostname",
            "/./etc/hostname",
            "/tmp/../etc/hostname",
            "/../../etc/./hostname",
            "///etc//hostname/",
        ] {
            assert_eq!(
                rule.normalise(raw).unwrap(),
                Path::new("/etc/hostname"),
                "{raw}"
            );
        }
        assert_eq!(rule.normalise("etc/hostname"), Err(PathRefusal::Relative));
        assert_eq!(rule.normalise("./x"), Err(PathRefusal::Relative));
        assert_eq!(rule.normalise(""), Err(PathRefusal::NotAPath));
        let based = PathRule::new().base("/srv/notes");
        assert_eq!(
            based.normalise("a/../b").unwrap(),
            Path::new("/srv/notes/b")
        );
        assert_eq!(based.normalise("../../etc").unwrap(), Path::new("/etc"));
    }

    #[test]
    fn within_refuses_paths_outside_its_folders() {
        let rule = PathRule::new().within(["/srv/notes"]);
        assert!(rule.normalise("/srv/notes").is_ok());
        assert!(rule.normalise("/srv/notes/a/b").is_ok());
        assert!(matches!(
            rule.normalise("/srv/notes/../secret"),
            Err(PathRefusal::Outside(_))
        ));
        assert!(rule.normalise("/srv/notes-old/a").is_err());
    }

    #[test]
    fn resolve_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("notes")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("notes/escape")).unwrap();
        let rule = PathRule::new().resolve(true).within([root.join("notes")]);
        assert_eq!(
            rule.normalise(root.join("notes/new.txt").to_str().unwrap())
                .unwrap(),
            root.join("notes/new.txt")
        );
        assert!(matches!(
            rule.normalise(root.join("notes/escape/hostname").to_str().unwrap()),
            Err(PathRefusal::Outside(_))
        ));
        let lexical_only = PathRule::new().within([root.join("notes")]);
        assert!(
            lexical_only
                .normalise(root.join("notes/escape/hostname").to_str().unwrap())
                .is_ok()
        );
    }

    #[test]
    fn arguments_are_replaced_by_their_normal_form() {
        let rules = vec![("path".to_owned(), PathRule::new())];
        let mut args = serde_json::json!({"path": "/tmp/../etc/hostname", "n": 1});
        normalise_args(&rules, &mut args).unwrap();
        assert_eq!(args["path"], "/etc/hostname");
        let mut relative = serde_json::json!({"path": "etc/hostname"});
        assert_eq!(
            normalise_args(&rules, &mut relative).unwrap_err(),
            "path: must be an absolute path"
        );
    }
}
