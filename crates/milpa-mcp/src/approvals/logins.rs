//! Who is logged in to the page: server-side sessions, each with its own CSRF token.
//!
//! The browser holds only a random 128-bit session id (in an `HttpOnly` cookie); the table
//! keys sessions by the id's SHA-256, so neither the ids nor a timing side channel on their
//! lookup is kept in memory. A session ends after [`LoginLimits::idle_timeout`] without a
//! request or [`LoginLimits::max_age`] after login, whichever comes first, and on logout.
//! The table is bounded: when full, expired sessions are dropped and then the one idle the
//! longest, so logins never fail for lack of room (only holders of a valid token can log in
//! at all). Expiry and eviction are the [`ExpiringTable`]'s, shared with the MCP endpoint's
//! HTTP sessions.

use std::time::{Duration, Instant};

use milpa::confirm::random_hex_128;
use parking_lot::{Mutex, MutexGuard};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::render::Notice;
use crate::auth::Identity;
use crate::listener::expiring_table::{ExpiringTable, Lifetime};

/// How many login sessions may exist and how long they live.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoginLimits {
    /// Sessions at once.
    pub max_sessions: usize,
    /// How long a session lives without a request.
    pub idle_timeout: Duration,
    /// How long a session lives at most, used or not.
    pub max_age: Duration,
}

impl Default for LoginLimits {
    fn default() -> Self {
        LoginLimits {
            max_sessions: 1000,
            idle_timeout: Duration::from_secs(30 * 60),
            max_age: Duration::from_secs(12 * 3600),
        }
    }
}

/// A logged-in person, as a request sees it.
#[derive(Debug, Clone)]
pub(crate) struct Login {
    /// The session id (the cookie's value).
    pub id: String,
    /// Who logged in.
    pub principal: String,
    /// The scopes their token carried at login.
    pub scopes: Vec<String>,
    /// The token every form of this session must carry.
    pub csrf: String,
}

struct Entry {
    principal: String,
    scopes: Vec<String>,
    csrf: String,
    /// What to tell the person on their next page (after a decision's redirect).
    notice: Option<Notice>,
}

/// The session table.
pub(crate) struct LoginSessions {
    limits: LoginLimits,
    table: Mutex<ExpiringTable<[u8; 32], Entry>>,
}

impl LoginSessions {
    /// An empty table with `limits`.
    pub(crate) fn new(limits: LoginLimits) -> LoginSessions {
        LoginSessions {
            limits,
            table: Mutex::new(ExpiringTable::default()),
        }
    }

    /// Every session lives the same: idle and absolute limits from [`LoginLimits`].
    fn lifetime(&self) -> Lifetime {
        Lifetime {
            idle: self.limits.idle_timeout,
            max_age: Some(self.limits.max_age),
        }
    }

    /// Starts a session for `identity`, with a fresh id and CSRF token.
    pub(crate) fn start(&self, identity: Identity) -> Login {
        self.start_at(identity, Instant::now())
    }

    fn start_at(&self, identity: Identity, now: Instant) -> Login {
        let login = Login {
            id: random_hex_128(),
            principal: identity.principal,
            scopes: identity.scopes,
            csrf: random_hex_128(),
        };
        let lifetime = self.lifetime();
        let mut table = self.lock();
        table.make_room(self.limits.max_sessions, |_| Some(lifetime), now);
        table.insert(
            key(&login.id),
            Entry {
                principal: login.principal.clone(),
                scopes: login.scopes.clone(),
                csrf: login.csrf.clone(),
                notice: None,
            },
            now,
        );
        login
    }

    /// The live session with this id (and counts this as a request), or `None` when there
    /// is none or it expired (an expired one is dropped).
    pub(crate) fn find(&self, id: &str) -> Option<Login> {
        self.find_at(id, Instant::now())
    }

    fn find_at(&self, id: &str, now: Instant) -> Option<Login> {
        let lifetime = self.lifetime();
        let mut table = self.lock();
        let entry = table.use_live(&key(id), |_| lifetime, now)?;
        Some(Login {
            id: id.to_owned(),
            principal: entry.principal.clone(),
            scopes: entry.scopes.clone(),
            csrf: entry.csrf.clone(),
        })
    }

    /// The live session with this id without counting this as a request, or `None` when
    /// there is none or it expired (an expired one is dropped): for the queue's timed
    /// refresh, so an open tab nobody looks at still ends after the idle timeout.
    pub(crate) fn find_unattended(&self, id: &str) -> Option<Login> {
        self.find_unattended_at(id, Instant::now())
    }

    fn find_unattended_at(&self, id: &str, now: Instant) -> Option<Login> {
        let lifetime = self.lifetime();
        let mut table = self.lock();
        let entry = table.get_live(&key(id), |_| lifetime, now)?;
        Some(Login {
            id: id.to_owned(),
            principal: entry.principal.clone(),
            scopes: entry.scopes.clone(),
            csrf: entry.csrf.clone(),
        })
    }

    /// Ends the session (logout).
    pub(crate) fn end(&self, id: &str) {
        self.lock().remove(&key(id));
    }

    /// Keeps `notice` for the session's next page.
    pub(crate) fn set_notice(&self, id: &str, notice: Notice) {
        if let Some(entry) = self.lock().peek_mut(&key(id)) {
            entry.notice = Some(notice);
        }
    }

    /// The notice kept for this page, once.
    pub(crate) fn take_notice(&self, id: &str) -> Option<Notice> {
        self.lock().peek_mut(&key(id))?.notice.take()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, ExpiringTable<[u8; 32], Entry>> {
        self.table.lock()
    }
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// Whether a form's CSRF token is the expected one, compared in constant time.
pub(crate) fn csrf_matches(expected: &str, given: &str) -> bool {
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Identity {
        Identity {
            principal: "alice".into(),
            scopes: vec!["approvals:grant".into()],
        }
    }

    fn limits() -> LoginLimits {
        LoginLimits {
            max_sessions: 3,
            idle_timeout: Duration::from_secs(60),
            max_age: Duration::from_secs(600),
        }
    }

    #[test]
    fn sessions_have_random_ids_and_csrf_tokens() {
        let sessions = LoginSessions::new(limits());
        let a = sessions.start(alice());
        let b = sessions.start(alice());
        assert_eq!(a.id.len(), 32);
        assert_ne!(a.id, b.id);
        assert_ne!(a.csrf, b.csrf);
        assert_ne!(a.id, a.csrf);
        let found = sessions.find(&a.id).unwrap();
        assert_eq!(
            (found.principal.as_str(), found.csrf.as_str()),
            ("alice", a.csrf.as_str())
        );
        assert!(sessions.find("0123").is_none());
        sessions.end(&a.id);
        assert!(sessions.find(&a.id).is_none());
        assert!(sessions.find(&b.id).is_some());
    }

    #[test]
    fn idle_and_old_sessions_expire() {
        let sessions = LoginSessions::new(limits());
        let t0 = Instant::now();
        let idle = sessions.start_at(alice(), t0);
        assert!(
            sessions
                .find_at(&idle.id, t0 + Duration::from_secs(59))
                .is_some()
        );
        // Each request restarts the idle clock...
        assert!(
            sessions
                .find_at(&idle.id, t0 + Duration::from_secs(118))
                .is_some()
        );
        assert!(
            sessions
                .find_at(&idle.id, t0 + Duration::from_secs(178))
                .is_none()
        );
        // ...but not the absolute one.
        let busy = sessions.start_at(alice(), t0);
        for minute in 1..10 {
            assert!(
                sessions
                    .find_at(&busy.id, t0 + Duration::from_secs(minute * 55))
                    .is_some()
            );
        }
        assert!(
            sessions
                .find_at(&busy.id, t0 + Duration::from_secs(600))
                .is_none()
        );
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn an_unattended_lookup_finds_the_session_without_keeping_it_alive() {
        let sessions = LoginSessions::new(limits());
        let t0 = Instant::now();
        let login = sessions.start_at(alice(), t0);
        // A refresh every 15 s for the whole idle time: found each time, never kept alive.
        for tick in 1..4 {
            let found = sessions
                .find_unattended_at(&login.id, t0 + Duration::from_secs(tick * 15))
                .unwrap();
            assert_eq!(
                (found.principal.as_str(), found.csrf.as_str()),
                ("alice", login.csrf.as_str())
            );
        }
        assert!(
            sessions
                .find_unattended_at(&login.id, t0 + Duration::from_secs(60))
                .is_none()
        );
        // Expired, it is gone for every kind of request.
        assert!(
            sessions
                .find_at(&login.id, t0 + Duration::from_secs(61))
                .is_none()
        );
        assert_eq!(sessions.len(), 0);
        assert!(sessions.find_unattended("0123").is_none());

        // A request the person makes does restart the clock the refresh then reads.
        let used = sessions.start_at(alice(), t0);
        assert!(
            sessions
                .find_at(&used.id, t0 + Duration::from_secs(50))
                .is_some()
        );
        assert!(
            sessions
                .find_unattended_at(&used.id, t0 + Duration::from_secs(100))
                .is_some()
        );
    }

    #[test]
    fn a_full_table_drops_the_idlest_session() {
        let sessions = LoginSessions::new(limits());
        let t0 = Instant::now();
        let first = sessions.start_at(alice(), t0);
        let second = sessions.start_at(alice(), t0 + Duration::from_secs(1));
        let third = sessions.start_at(alice(), t0 + Duration::from_secs(2));
        // The first is used again, so the second is now the idlest.
        sessions.find_at(&first.id, t0 + Duration::from_secs(3));
        let fourth = sessions.start_at(alice(), t0 + Duration::from_secs(4));
        assert_eq!(sessions.len(), 3);
        let at = t0 + Duration::from_secs(5);
        assert!(sessions.find_at(&second.id, at).is_none());
        for live in [&first, &third, &fourth] {
            assert!(sessions.find_at(&live.id, at).is_some());
        }
    }

    #[test]
    fn notices_are_shown_once() {
        let sessions = LoginSessions::new(limits());
        let login = sessions.start(alice());
        sessions.set_notice(&login.id, Notice::Done("granted".into()));
        assert!(matches!(sessions.take_notice(&login.id), Some(Notice::Done(t)) if t == "granted"));
        assert!(sessions.take_notice(&login.id).is_none());
    }

    #[test]
    fn csrf_tokens_must_match_exactly() {
        assert!(csrf_matches("abc123", "abc123"));
        assert!(!csrf_matches("abc123", "abc124"));
        assert!(!csrf_matches("abc123", "abc12"));
        assert!(!csrf_matches("abc123", ""));
        assert!(!csrf_matches("", ""));
    }
}
