//! Passkeys (WebAuthn) on the page: enrolment and the assertion every decision of an
//! enrolled approver needs.
//!
//! The relying party is `webauthn-rs`; its ids are [`PasskeyOptions::rp_id`] (`localhost`
//! by default: a browser offers the passkey only on a page whose host is the RP id or under
//! it, so open the page as `http://localhost:PORT`, not `127.0.0.1`) and the page's origin
//! ([`PasskeyOptions::origin`] for a real host name behind TLS; by default
//! `http://<rp id>` on any port).
//!
//! **Binding a decision to its approval.** `webauthn-rs` draws each challenge itself, so
//! the binding is kept on the server: the state of a started assertion is stored under
//! (the login session, the approval id, the verdict), used once and dropped after
//! [`CEREMONY_TTL`]. A decision takes the state under its own session, id and verdict; an
//! assertion made for another approval (or the other verdict, or in another session) was
//! signed over another challenge, so it fails verification, and a decision with no started
//! state is refused outright. Every assertion must carry the user-verified flag.
//!
//! Only public material is stored (see [`milpa::approval::passkeys`]); the ceremony states
//! live in this process's memory, bounded by [`MAX_CEREMONIES`].

use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use milpa::StoreError;
use milpa::approval::Verdict;
use milpa::approval::passkeys::{
    InMemoryPasskeyStore, PasskeyRecord, PasskeyStore, enrolment_token_hash,
};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use webauthn_rs::prelude::{
    CreationChallengeResponse, Passkey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, RequestChallengeResponse, Url, Uuid,
    Webauthn, WebauthnBuilder, WebauthnError,
};

use crate::listener::expiring_table::{ExpiringTable, Lifetime};

/// How long a started enrolment or assertion may take to finish.
pub const CEREMONY_TTL: Duration = Duration::from_secs(120);

/// How many started ceremonies are kept at once (the oldest is dropped past that).
pub const MAX_CEREMONIES: usize = 4096;

/// Where the page's relying party is and where approvers' passkeys are kept.
#[derive(Clone)]
#[non_exhaustive]
pub struct PasskeyOptions {
    /// The WebAuthn relying party id: the page's host name or a parent of it.
    pub rp_id: String,
    /// The page's origin (`https://tools.example.com`) when it is not `http://<rp id>`.
    pub origin: Option<String>,
    /// Where passkeys and enrolment tokens live (shared with `milpa approvals enroll`).
    pub store: Arc<dyn PasskeyStore>,
}

impl std::fmt::Debug for PasskeyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasskeyOptions")
            .field("rp_id", &self.rp_id)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Default for PasskeyOptions {
    fn default() -> Self {
        PasskeyOptions::new(Arc::new(InMemoryPasskeyStore::new()))
    }
}

impl PasskeyOptions {
    /// Whether the relying party these options describe can be set up (the RP id is the
    /// origin's host or a parent of it; the origin is a URL).
    pub fn check(&self) -> Result<(), PasskeyConfigError> {
        Passkeys::new(self.clone()).map(|_| ())
    }

    /// RP id `localhost`, any port, passkeys kept in `store`.
    pub fn new(store: Arc<dyn PasskeyStore>) -> PasskeyOptions {
        PasskeyOptions {
            rp_id: "localhost".into(),
            origin: None,
            store,
        }
    }

    /// The relying party id (the host name people open the page at, or a parent of it).
    pub fn rp_id(mut self, rp_id: impl Into<String>) -> Self {
        self.rp_id = rp_id.into();
        self
    }

    /// The page's exact origin, `scheme://host[:port]` (behind TLS: `https://…`).
    pub fn origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into().trim_end_matches('/').to_owned());
        self
    }
}

/// Why the relying party could not be set up from [`PasskeyOptions`].
#[derive(Debug, thiserror::Error)]
#[error("approvals passkeys: {message}")]
pub struct PasskeyConfigError {
    message: String,
    #[source]
    cause: Option<WebauthnError>,
}

/// Why a passkey step was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PasskeyRefusal {
    /// No ceremony was started for this (session, approval, verdict), or it expired.
    #[error(
        "this decision needs a passkey check started for this approval and verdict in this \
         session (none is, or it took longer than 2 minutes); nothing was decided"
    )]
    NotStarted,
    /// The browser's answer could not be read.
    #[error("the passkey answer could not be read; nothing was changed")]
    Malformed(#[source] serde_json::Error),
    /// WebAuthn verification failed (wrong challenge, origin, signature, credential).
    #[error("the passkey check failed ({0}); nothing was changed")]
    Failed(#[source] WebauthnError),
    /// The authenticator did not verify the person (PIN, biometrics).
    #[error("the passkey did not verify you (user verification is required); nothing was decided")]
    NotVerified,
    /// This credential is enrolled already.
    #[error("this passkey is enrolled already")]
    Duplicate,
    /// The enrolment link was used or expired meanwhile.
    #[error("the enrolment link was used already or expired; ask for a new one")]
    EnrolmentGone,
    /// A stored credential could not be read.
    #[error("a stored passkey is unreadable")]
    Corrupt(#[source] serde_json::Error),
    /// The store failed.
    #[error("the passkey store failed")]
    Store(#[from] StoreError),
}

impl PasskeyRefusal {
    /// Whether the refusal is the server's fault (a 503) rather than the request's.
    pub(crate) fn is_server_side(&self) -> bool {
        matches!(self, PasskeyRefusal::Store(_) | PasskeyRefusal::Corrupt(_))
    }
}

/// How long a started ceremony's state lives: it is never used before it is taken, so
/// its idle time is its age.
const CEREMONY_LIFETIME: Lifetime = Lifetime {
    idle: CEREMONY_TTL,
    max_age: None,
};

/// A started enrolment: the SHA-256 of its link's token, and the ceremony state.
type Registration = (String, PasskeyRegistration);

#[derive(Hash, PartialEq, Eq, Clone)]
struct AssertionKey {
    session: [u8; 32],
    approval: String,
    verdict: &'static str,
}

/// The page's relying party, its store and the ceremonies under way.
pub(crate) struct Passkeys {
    webauthn: Webauthn,
    rp_id: String,
    store: Arc<dyn PasskeyStore>,
    registrations: Mutex<ExpiringTable<[u8; 32], Registration>>,
    assertions: Mutex<ExpiringTable<AssertionKey, PasskeyAuthentication>>,
}

impl Passkeys {
    /// The relying party `options` describe.
    pub(crate) fn new(options: PasskeyOptions) -> Result<Passkeys, PasskeyConfigError> {
        let origin_text = options
            .origin
            .clone()
            .unwrap_or_else(|| format!("http://{}", options.rp_id));
        let origin = Url::parse(&origin_text).map_err(|e| PasskeyConfigError {
            message: format!("origin {origin_text:?} is not a URL: {e}"),
            cause: None,
        })?;
        let webauthn = WebauthnBuilder::new(&options.rp_id, &origin)
            .and_then(|builder| {
                builder
                    .rp_name("milpa approvals")
                    .allow_any_port(options.origin.is_none())
                    .timeout(CEREMONY_TTL)
                    .build()
            })
            .map_err(|cause| PasskeyConfigError {
                message: format!(
                    "rp_id {:?} must be the host of origin {origin_text:?} or a parent of it",
                    options.rp_id
                ),
                cause: Some(cause),
            })?;
        Ok(Passkeys {
            webauthn,
            rp_id: options.rp_id,
            store: options.store,
            registrations: Mutex::new(ExpiringTable::default()),
            assertions: Mutex::new(ExpiringTable::default()),
        })
    }

    /// The relying party id.
    pub(crate) fn rp_id(&self) -> &str {
        &self.rp_id
    }

    /// Whether a page whose `Host` is `host` can use this RP's passkeys: the host name is
    /// the RP id or under it.
    pub(crate) fn serves_host(&self, host: &str) -> bool {
        let name = host_name(host);
        name == self.rp_id || name.ends_with(&format!(".{}", self.rp_id))
    }

    /// The passkeys of `actor` (empty: the actor decides without one).
    pub(crate) async fn enrolled(&self, actor: &str) -> Result<Vec<Passkey>, PasskeyRefusal> {
        self.store
            .for_actor(actor)
            .await?
            .iter()
            .map(|record| {
                serde_json::from_str(&record.public_credential).map_err(PasskeyRefusal::Corrupt)
            })
            .collect()
    }

    /// The actor an enrolment link enrols, if the link is live.
    pub(crate) async fn enrolment_actor(
        &self,
        token: &str,
        now_ms: u64,
    ) -> Result<Option<String>, PasskeyRefusal> {
        Ok(self
            .store
            .peek_enrolment(&enrolment_token_hash(token), now_ms)
            .await?)
    }

    /// Starts enrolling a passkey for `actor` in `session` (replacing one it started).
    pub(crate) async fn start_enrolment(
        &self,
        session: &str,
        token: &str,
        actor: &str,
    ) -> Result<CreationChallengeResponse, PasskeyRefusal> {
        let existing = self.enrolled(actor).await?;
        let exclude = existing.iter().map(|p| p.cred_id().clone()).collect();
        let (options, state) = self
            .webauthn
            .start_passkey_registration(user_id(actor), actor, actor, Some(exclude))
            .map_err(PasskeyRefusal::Failed)?;
        keep(
            &mut self.registrations.lock(),
            session_key(session),
            (enrolment_token_hash(token), state),
            Instant::now(),
        );
        Ok(options)
    }

    /// Finishes the enrolment this session started for `token`: checks the attestation,
    /// uses the token up and stores the public key for `actor`.
    pub(crate) async fn finish_enrolment(
        &self,
        session: &str,
        token: &str,
        actor: &str,
        credential_json: &str,
        now_ms: u64,
    ) -> Result<(), PasskeyRefusal> {
        let hash = enrolment_token_hash(token);
        let started = take_live(
            &mut self.registrations.lock(),
            &session_key(session),
            Instant::now(),
        )
        .filter(|(for_token, _)| *for_token == hash)
        .ok_or(PasskeyRefusal::NotStarted)?;
        let credential: RegisterPublicKeyCredential =
            serde_json::from_str(credential_json).map_err(PasskeyRefusal::Malformed)?;
        let passkey = self
            .webauthn
            .finish_passkey_registration(&credential, &started.1)
            .map_err(PasskeyRefusal::Failed)?;
        match self.store.take_enrolment(&hash, now_ms).await? {
            Some(enrols) if enrols == actor => {}
            _ => return Err(PasskeyRefusal::EnrolmentGone),
        }
        let public = serde_json::to_string(&passkey).map_err(PasskeyRefusal::Corrupt)?;
        let record = PasskeyRecord::new(
            actor,
            URL_SAFE_NO_PAD.encode(passkey.cred_id().as_ref()),
            public,
            now_ms,
        );
        if !self.store.add(record).await? {
            return Err(PasskeyRefusal::Duplicate);
        }
        Ok(())
    }

    /// Starts the assertion for `verdict` on `approval` by this session's approver, who
    /// holds `passkeys`.
    pub(crate) fn start_assertion(
        &self,
        session: &str,
        approval: &str,
        verdict: Verdict,
        passkeys: &[Passkey],
    ) -> Result<RequestChallengeResponse, PasskeyRefusal> {
        let (options, state) = self
            .webauthn
            .start_passkey_authentication(passkeys)
            .map_err(PasskeyRefusal::Failed)?;
        keep(
            &mut self.assertions.lock(),
            assertion_key(session, approval, verdict),
            state,
            Instant::now(),
        );
        Ok(options)
    }

    /// Checks the assertion posted with a decision: the state started for this session,
    /// approval and verdict (taken, so it serves once), the signature over its challenge
    /// by one of `actor`'s credentials, user verification; then the credential's counter
    /// is stored.
    pub(crate) async fn finish_assertion(
        &self,
        session: &str,
        approval: &str,
        verdict: Verdict,
        actor: &str,
        assertion_json: &str,
    ) -> Result<(), PasskeyRefusal> {
        let key = assertion_key(session, approval, verdict);
        let state = take_live(&mut self.assertions.lock(), &key, Instant::now())
            .ok_or(PasskeyRefusal::NotStarted)?;
        let assertion: PublicKeyCredential =
            serde_json::from_str(assertion_json).map_err(PasskeyRefusal::Malformed)?;
        let result = self
            .webauthn
            .finish_passkey_authentication(&assertion, &state)
            .map_err(PasskeyRefusal::Failed)?;
        if !result.user_verified() {
            return Err(PasskeyRefusal::NotVerified);
        }
        for mut passkey in self.enrolled(actor).await? {
            if passkey.update_credential(&result) == Some(true) {
                let id = URL_SAFE_NO_PAD.encode(passkey.cred_id().as_ref());
                let public = serde_json::to_string(&passkey).map_err(PasskeyRefusal::Corrupt)?;
                self.store.update(actor, &id, &public).await?;
            }
        }
        Ok(())
    }
}

/// The WebAuthn user handle of `actor`: derived from the name, so it is the same in every
/// process and enrolment.
fn user_id(actor: &str) -> Uuid {
    let digest = Sha256::digest(format!("milpa approver\0{actor}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::from_bytes(bytes)
}

fn session_key(session: &str) -> [u8; 32] {
    Sha256::digest(session.as_bytes()).into()
}

fn assertion_key(session: &str, approval: &str, verdict: Verdict) -> AssertionKey {
    AssertionKey {
        session: session_key(session),
        approval: approval.to_owned(),
        verdict: verdict.as_str(),
    }
}

/// Keeps `state` under `key` (replacing a state started under it), started `now`: expired
/// states go first, and the oldest when [`MAX_CEREMONIES`] are kept.
fn keep<K: Hash + Eq + Clone, T>(table: &mut ExpiringTable<K, T>, key: K, state: T, now: Instant) {
    table.remove_expired(|_| Some(CEREMONY_LIFETIME), now);
    table.make_room(MAX_CEREMONIES, |_| Some(CEREMONY_LIFETIME), now);
    table.insert(key, state, now);
}

/// Takes the state under `key` if it has not expired by `now` (it serves once either way).
fn take_live<K: Hash + Eq + Clone, T>(
    table: &mut ExpiringTable<K, T>,
    key: &K,
    now: Instant,
) -> Option<T> {
    table.take_live(key, |_| CEREMONY_LIFETIME, now)
}

/// The host name of a `Host` header value, lowercase, without port.
fn host_name(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    if host.starts_with('[') {
        return host
            .split(']')
            .next()
            .map(|h| format!("{h}]"))
            .unwrap_or(host);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name.to_owned(),
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rp_id_must_be_the_origins_host_or_a_parent() {
        let store: Arc<dyn PasskeyStore> = Arc::new(InMemoryPasskeyStore::new());
        assert!(Passkeys::new(PasskeyOptions::new(store.clone())).is_ok());
        let real = PasskeyOptions::new(store.clone())
            .rp_id("example.com")
            .origin("https://tools.example.com");
        assert!(Passkeys::new(real).is_ok());
        let wrong = PasskeyOptions::new(store)
            .rp_id("example.org")
            .origin("https://tools.example.com");
        let error = Passkeys::new(wrong).err().unwrap().to_string();
        assert!(error.contains("example.org"), "{error}");
    }

    #[test]
    fn hosts_are_matched_by_name_and_parent() {
        let passkeys = Passkeys::new(PasskeyOptions::default()).unwrap();
        assert!(passkeys.serves_host("localhost:8080"));
        assert!(passkeys.serves_host("LOCALHOST"));
        assert!(!passkeys.serves_host("127.0.0.1:8080"));
        assert!(!passkeys.serves_host("[::1]:8080"));
        assert!(!passkeys.serves_host("evillocalhost:1"));
    }

    #[test]
    fn an_assertion_state_is_bound_to_its_session_approval_and_verdict_and_used_once() {
        let mut table: ExpiringTable<AssertionKey, u8> = ExpiringTable::default();
        let now = Instant::now();
        keep(&mut table, assertion_key("s1", "a", Verdict::Grant), 1, now);
        assert!(take_live(&mut table, &assertion_key("s1", "b", Verdict::Grant), now).is_none());
        assert!(take_live(&mut table, &assertion_key("s1", "a", Verdict::Reject), now).is_none());
        assert!(take_live(&mut table, &assertion_key("s2", "a", Verdict::Grant), now).is_none());
        assert_eq!(
            take_live(&mut table, &assertion_key("s1", "a", Verdict::Grant), now),
            Some(1)
        );
        assert!(take_live(&mut table, &assertion_key("s1", "a", Verdict::Grant), now).is_none());
    }

    #[test]
    fn a_ceremony_state_lives_for_the_ceremony_ttl_only() {
        let mut table: ExpiringTable<[u8; 32], u8> = ExpiringTable::default();
        let t0 = Instant::now();
        keep(&mut table, session_key("s1"), 1, t0);
        keep(&mut table, session_key("s2"), 2, t0);
        assert_eq!(
            take_live(
                &mut table,
                &session_key("s1"),
                t0 + CEREMONY_TTL - Duration::from_secs(1)
            ),
            Some(1)
        );
        assert_eq!(
            take_live(&mut table, &session_key("s2"), t0 + CEREMONY_TTL),
            None
        );
        // Starting a ceremony sweeps the expired ones.
        keep(&mut table, session_key("s3"), 3, t0);
        keep(&mut table, session_key("s4"), 4, t0 + CEREMONY_TTL);
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn at_most_max_ceremonies_are_kept_the_oldest_going_first() {
        let mut table: ExpiringTable<usize, usize> = ExpiringTable::default();
        let t0 = Instant::now();
        for n in 0..=MAX_CEREMONIES {
            keep(&mut table, n, n, t0 + Duration::from_millis(n as u64));
        }
        assert_eq!(table.len(), MAX_CEREMONIES);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(take_live(&mut table, &0, later), None, "the oldest went");
        assert_eq!(take_live(&mut table, &1, later), Some(1));
    }

    #[test]
    fn user_handles_are_stable_per_actor() {
        assert_eq!(user_id("alice"), user_id("alice"));
        assert_ne!(user_id("alice"), user_id("bob"));
    }
}
