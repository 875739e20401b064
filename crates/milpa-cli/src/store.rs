//! Where state lives (DESIGN §5, "Stores"): `--store` beats `MILPA_STORE`, which beats the
//! manifest's `[store] url`, which beats the default, a SQLite file in the user's state
//! folder. One [`Stores`] value then hands every part of the program the same backends.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use milpa::approval::passkeys::{InMemoryPasskeyStore, PasskeyStore};
use milpa::approval::pins::{InMemoryPinStore, PinStore};
use milpa::audit::AuditSink;
use milpa::audit::trail::AuditTrail;
use milpa::confirm::ConfirmationStore;
use milpa::rate_limit::{InMemoryRateLimiter, RateLimiter};
use milpa::verification::{InMemoryVerificationStore, VerificationStore};
use milpa_mcp::protocol::StateSecret;
use milpa_sqlite::private_files::PrivateFileError;

use crate::CliError;
use crate::manifest::Manifest;

/// The environment variable that chooses the store when `--store` is not given.
pub(crate) const STORE_ENV: &str = "MILPA_STORE";

/// The environment variable naming milpa's own state folder (`$MILPA_HOME/state.db`).
pub(crate) const HOME_ENV: &str = "MILPA_HOME";

/// A store, as a URL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum StoreUrl {
    /// In this process's memory: nothing outlives it.
    Memory,
    /// A SQLite file, created on first use.
    Sqlite(PathBuf),
    /// A Redis server (`redis://HOST:PORT[/DB]`, or `rediss://` for TLS).
    Redis(String),
}

impl StoreUrl {
    /// Parses `memory`, `sqlite:PATH` or `redis://…`. A relative SQLite path is taken
    /// relative to `base` when given (the manifest's folder), else to the working folder.
    pub(crate) fn parse(url: &str, base: Option<&Path>) -> Result<StoreUrl, String> {
        if url == "memory" {
            return Ok(StoreUrl::Memory);
        }
        if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(format!(
                    "{url}: sqlite: needs a file path, e.g. sqlite:state.db"
                ));
            }
            let path = Path::new(path);
            return Ok(StoreUrl::Sqlite(match base {
                Some(base) if path.is_relative() => base.join(path),
                _ => path.to_path_buf(),
            }));
        }
        if url.starts_with("redis://") || url.starts_with("rediss://") {
            return Ok(StoreUrl::Redis(url.to_owned()));
        }
        Err(format!(
            "{url}: unknown store; expected memory, sqlite:PATH or redis://HOST:PORT[/DB]"
        ))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("memory"),
            StoreUrl::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            StoreUrl::Redis(url) => f.write_str(&redacted_redis_url(url)),
        }
    }
}

/// A Redis URL without its password (`redis://:secret@host` → `redis://:***@host`), for
/// messages.
fn redacted_redis_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => format!("{scheme}://***@{host}"),
        },
        None => url.to_owned(),
    }
}

/// The store the command line, the environment and the manifest choose, in that order;
/// else the default SQLite file ([`default_sqlite_path`]).
pub(crate) fn choose(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<OsString>,
    manifest: &Manifest,
) -> Result<StoreUrl, CliError> {
    if let Some(url) = flag {
        return StoreUrl::parse(url, None).map_err(|e| CliError::usage(format!("--store {e}")));
    }
    if let Some(url) = env(STORE_ENV).filter(|v| !v.is_empty()) {
        let url = url.to_string_lossy();
        return StoreUrl::parse(&url, None)
            .map_err(|e| CliError::usage(format!("{STORE_ENV}={e}")));
    }
    if let Some(url) = &manifest.store.url {
        return StoreUrl::parse(url.get_ref(), manifest.base_dir()).map_err(|e| {
            CliError::usage(manifest.error_at(Some(url.span().start), e).to_string())
        });
    }
    default_sqlite_path(env).map(StoreUrl::Sqlite).ok_or_else(|| {
        CliError::usage(format!(
            "no state folder: set {HOME_ENV} or HOME, or pass --store sqlite:PATH or --store memory"
        ))
    })
}

/// `$MILPA_HOME/state.db` when `MILPA_HOME` is set, else `$XDG_STATE_HOME/milpa/state.db`,
/// else `~/.local/state/milpa/state.db`; `None` when none of those variables is set.
pub(crate) fn default_sqlite_path(env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(home) = set(HOME_ENV) {
        return Some(home.join("state.db"));
    }
    // The XDG spec says a relative value is invalid and must be ignored.
    if let Some(state) = set("XDG_STATE_HOME").filter(|p| p.is_absolute()) {
        return Some(state.join("milpa").join("state.db"));
    }
    set("HOME").map(|home| home.join(".local/state/milpa/state.db"))
}

/// The backends one `milpa` process uses, opened from the store URL (`--store`,
/// `MILPA_STORE`, the manifest's `[store] url` or the default SQLite file).
///
/// Confirmation tokens, verification requests and rate budgets live in the store; so does
/// the audit trail when the store keeps one (SQLite), and the demo's notes (SQLite).
#[derive(Clone)]
pub struct Stores {
    url: StoreUrl,
    /// Where confirmation tokens live.
    pub confirmations: Option<Arc<dyn ConfirmationStore>>,
    /// Where verification requests live.
    pub verifications: Arc<dyn VerificationStore>,
    /// Rate budgets.
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// Approvers' passkeys and enrolment tokens (the approvals page, `milpa approvals`).
    pub passkeys: Arc<dyn PasskeyStore>,
    /// The pinned definitions of upstream tools and prompts (rug-pull protection).
    pub pins: Arc<dyn PinStore>,
    /// The SQLite store, which also keeps the audit trail and the demo's notes.
    sqlite: Option<milpa_sqlite::SqliteStore>,
    /// The Redis store, which also keeps the shared secrets.
    redis: Option<milpa_redis::RedisStore>,
}

/// The name under which the store keeps the key that seals MCP 2026-07-28 `requestState`.
const REQUEST_STATE_SECRET: &str = "mcp-request-state";

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stores")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Stores {
    /// Everything in this process's memory.
    pub fn memory() -> Stores {
        Stores {
            url: StoreUrl::Memory,
            confirmations: None,
            verifications: Arc::new(InMemoryVerificationStore::new()),
            rate_limiter: Arc::new(InMemoryRateLimiter::new()),
            passkeys: Arc::new(InMemoryPasskeyStore::new()),
            pins: Arc::new(InMemoryPinStore::new()),
            sqlite: None,
            redis: None,
        }
    }

    /// Opens the store `url` names (creating a SQLite file and its folder on first use;
    /// connecting to Redis, which must answer now).
    pub(crate) async fn open(url: &StoreUrl, manifest: &Manifest) -> Result<Stores, CliError> {
        match url {
            StoreUrl::Memory => Ok(Stores::memory()),
            StoreUrl::Sqlite(path) => {
                let store = milpa_sqlite::SqliteStore::open(path).map_err(|e| {
                    match unsafe_permissions(&e) {
                        // The setup is wrong, not the call: a usage error (exit 2).
                        Some(refusal) => CliError::usage(format!("store {url}: {refusal}")),
                        None => {
                            CliError::failed(format!("store {url}: cannot open: {}", chain(&e)))
                        }
                    }
                })?;
                Ok(Stores {
                    url: url.clone(),
                    confirmations: Some(store.confirmations()),
                    verifications: store.verifications(),
                    rate_limiter: store.rate_limiter(),
                    passkeys: store.passkeys(),
                    pins: store.pins(),
                    sqlite: Some(store),
                    redis: None,
                })
            }
            StoreUrl::Redis(redis_url) => {
                let mut options = milpa_redis::RedisOptions::default();
                if let Some(prefix) = &manifest.store.redis_prefix {
                    options = options.with_prefix(prefix.clone());
                }
                let store = milpa_redis::RedisStore::connect(redis_url, options)
                    .await
                    .map_err(|e| {
                        CliError::failed(format!("store {url}: cannot connect: {}", chain(&e)))
                    })?;
                Ok(Stores {
                    url: url.clone(),
                    confirmations: Some(store.confirmations()),
                    verifications: store.verifications(),
                    rate_limiter: store.rate_limiter(),
                    passkeys: store.passkeys(),
                    pins: store.pins(),
                    sqlite: None,
                    redis: Some(store),
                })
            }
        }
    }

    /// The URL the stores were opened from.
    pub(crate) fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// The SQLite store, when that is what is open (the demo keeps its notes there).
    pub fn sqlite(&self) -> Option<&milpa_sqlite::SqliteStore> {
        self.sqlite.as_ref()
    }

    /// The Redis store, when that is what is open.
    pub(crate) fn redis(&self) -> Option<&milpa_redis::RedisStore> {
        self.redis.as_ref()
    }

    /// The key that seals the `requestState` of MCP 2026-07-28 confirmations and approvals,
    /// kept in the store (made on first use): every process on the same SQLite file or
    /// Redis checks what any of them sealed, and a restart keeps pending rounds valid. With
    /// `memory`, `None`: the server draws a key of its own, as nothing outlives it anyway.
    pub(crate) async fn request_state_secret(&self) -> Result<Option<StateSecret>, CliError> {
        let kept = if let Some(store) = &self.sqlite {
            store.shared_secret(REQUEST_STATE_SECRET).await
        } else if let Some(store) = &self.redis {
            store.shared_secret(REQUEST_STATE_SECRET).await
        } else {
            return Ok(None);
        };
        kept.map(|bytes| Some(StateSecret::new(bytes)))
            .map_err(|e| {
                CliError::failed(format!(
                    "store {}: cannot read the request-state key: {}",
                    self.url,
                    chain(&e)
                ))
            })
    }

    /// Appends to the store's audit trail; `None` when the store keeps none (only SQLite
    /// does).
    pub(crate) fn audit_sink(&self) -> Option<Arc<dyn AuditSink>> {
        self.sqlite
            .as_ref()
            .map(milpa_sqlite::SqliteStore::audit_sink)
    }

    /// The store's audit trail, read back; `None` when the store keeps none.
    pub(crate) fn audit_trail(&self) -> Option<Arc<dyn AuditTrail>> {
        self.sqlite
            .as_ref()
            .map(milpa_sqlite::SqliteStore::audit_trail)
    }

    /// Writes whatever the audit trail still buffers; called before the process ends.
    pub(crate) fn flush(&self) {
        if let Some(sink) = self.audit_sink() {
            sink.flush();
        }
    }
}

/// The state file or folder that other users may write, when that is why `error` refused to
/// open the store.
fn unsafe_permissions(error: &milpa::StoreError) -> Option<&PrivateFileError> {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<PrivateFileError>())
        .filter(|refusal| matches!(refusal, PrivateFileError::WritableByOthers { .. }))
}

/// An error and its causes, `: `-separated (a cause its error already quotes is skipped).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        assert_eq!(StoreUrl::parse("memory", None).unwrap(), StoreUrl::Memory);
        assert_eq!(
            StoreUrl::parse("sqlite:state.db", Some(Path::new("/etc/milpa"))).unwrap(),
            StoreUrl::Sqlite(PathBuf::from("/etc/milpa/state.db"))
        );
        assert!(StoreUrl::parse("postgres://x", None).is_err());
    }

    #[test]
    fn home_alone_names_the_xdg_default() {
        let env = |name: &str| (name == "HOME").then(|| OsString::from("/home/ana"));
        assert_eq!(
            default_sqlite_path(&env),
            Some(PathBuf::from("/home/ana/.local/state/milpa/state.db"))
        );
    }

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_flag_beats_the_environment_which_beats_the_manifest_which_beats_the_default() {
        let manifest = Manifest::parse(
            "/srv/m.toml",
            "[store]\nurl = \"sqlite:from-manifest.db\"\n",
        )
        .unwrap();
        let env = env_of(&[(STORE_ENV, "sqlite:/env.db"), ("HOME", "/home/ana")]);
        assert_eq!(
            choose(Some("memory"), &env, &manifest).unwrap(),
            StoreUrl::Memory
        );
        assert_eq!(
            choose(None, &env, &manifest).unwrap(),
            StoreUrl::Sqlite("/env.db".into())
        );
        let no_env = env_of(&[("HOME", "/home/ana")]);
        assert!(matches!(
            choose(None, &no_env, &manifest).unwrap(),
            StoreUrl::Sqlite(p) if p.ends_with("from-manifest.db")
        ));
        assert_eq!(
            choose(None, &no_env, &Manifest::default()).unwrap(),
            StoreUrl::Sqlite("/home/ana/.local/state/milpa/state.db".into())
        );
    }

    #[test]
    fn the_default_file_follows_milpa_home_then_xdg_state_home_then_home() {
        let all = env_of(&[(HOME_ENV, "/m"), ("XDG_STATE_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(default_sqlite_path(&all), Some("/m/state.db".into()));
        let xdg = env_of(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(default_sqlite_path(&xdg), Some("/x/milpa/state.db".into()));
        let relative_xdg = env_of(&[("XDG_STATE_HOME", "x"), ("HOME", "/h")]);
        assert_eq!(
            default_sqlite_path(&relative_xdg),
            Some("/h/.local/state/milpa/state.db".into())
        );
        assert_eq!(default_sqlite_path(&env_of(&[])), None);
        let missing = choose(None, &env_of(&[]), &Manifest::default()).unwrap_err();
        assert_eq!(missing.code, 2);
    }

    #[test]
    fn bad_urls_are_usage_errors_naming_their_source() {
        let env = env_of(&[(STORE_ENV, "mysql://x")]);
        let error = choose(None, &env, &Manifest::default()).unwrap_err();
        assert_eq!(error.code, 2);
        assert!(
            error
                .message
                .starts_with("MILPA_STORE=mysql://x: unknown store")
        );
        let error = choose(Some("sqlite:"), &env, &Manifest::default()).unwrap_err();
        assert!(
            error
                .message
                .starts_with("--store sqlite:: sqlite: needs a file path")
        );
        let manifest = Manifest::parse("m.toml", "\n[store]\nurl = \"nope\"\n").unwrap();
        let error = choose(None, &env_of(&[]), &manifest).unwrap_err();
        assert!(
            error.message.starts_with("m.toml:3: nope: unknown store"),
            "{}",
            error.message
        );
    }

    #[test]
    fn redis_passwords_stay_out_of_messages() {
        let url = StoreUrl::parse("redis://:hunter2@cache:6379/0", None).unwrap();
        assert_eq!(url.to_string(), "redis://:***@cache:6379/0");
        let url = StoreUrl::parse("redis://ops:hunter2@cache", None).unwrap();
        assert_eq!(url.to_string(), "redis://ops:***@cache");
    }
}
