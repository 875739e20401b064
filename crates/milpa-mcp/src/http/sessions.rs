//! The session table: which sessions exist, whom each belongs to, and how many each class
//! of caller may hold.
//!
//! Anonymous sessions and authenticated ones are counted apart: anonymous callers share a
//! small pool (and expire sooner), each principal has its own cap, and the overall cap
//! counts authenticated sessions only, so anonymous callers filling their pool never lock
//! out a principal.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Semaphore;

use super::rejection::HttpRejection;
use super::resume::CallStreams;
use crate::jsonrpc::RequestId;
use crate::listener::expiring_table::{ExpiringTable, Lifetime};
use crate::session::{Caller, Session};

/// How many sessions may exist and how long unused ones live.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionLimits {
    /// Authenticated sessions in all (anonymous ones are also never more than this).
    pub max_sessions: usize,
    /// Sessions one principal may hold.
    pub max_per_principal: usize,
    /// Sessions all anonymous callers together may hold.
    pub max_anonymous: usize,
    /// How long an unused authenticated session lives.
    pub idle_timeout: Duration,
    /// How long an unused anonymous session lives (never longer than `idle_timeout`).
    pub anonymous_idle_timeout: Duration,
}

impl SessionLimits {
    /// How long a session of `principal`'s class lives unused (no absolute limit: a client
    /// in use keeps its session).
    fn lifetime(&self, principal: Option<&str>) -> Lifetime {
        Lifetime::idle(match principal {
            None => self.anonymous_idle_timeout.min(self.idle_timeout),
            Some(_) => self.idle_timeout,
        })
    }

    /// How often expired sessions are looked for.
    pub(crate) fn sweep_every(&self) -> Duration {
        (self.idle_timeout.min(self.anonymous_idle_timeout) / 2).max(Duration::from_secs(1))
    }
}

/// One HTTP session.
pub(crate) struct HttpSession {
    /// The protocol state.
    pub core: Arc<Session>,
    /// Who created it (only they may use it).
    pub principal: Option<String>,
    /// Calls this session may run at once.
    pub call_slots: Arc<Semaphore>,
    /// Its calls' response streams, for a client resuming one (2025-11-25).
    pub streams: CallStreams,
}

/// What a request's `Mcp-Session-Id` led to.
pub(crate) enum Lookup {
    /// No header.
    Missing,
    /// The caller's session.
    Found(Arc<HttpSession>),
    /// No such session for this caller.
    Unknown,
}

#[derive(Default)]
struct Table {
    by_id: ExpiringTable<String, Arc<HttpSession>>,
    anonymous: usize,
    authenticated: usize,
    per_principal: HashMap<String, usize>,
}

impl Table {
    fn remove(&mut self, id: &str) -> Option<Arc<HttpSession>> {
        let session = self.by_id.remove(id)?;
        self.count_out(&session);
        Some(session)
    }

    /// Takes a session that left the table out of its class's count.
    fn count_out(&mut self, session: &HttpSession) {
        match &session.principal {
            None => self.anonymous -= 1,
            Some(principal) => {
                self.authenticated -= 1;
                if let Some(count) = self.per_principal.get_mut(principal) {
                    *count -= 1;
                    if *count == 0 {
                        self.per_principal.remove(principal);
                    }
                }
            }
        }
    }
}

/// The sessions of one server.
pub(crate) struct Sessions {
    limits: SessionLimits,
    /// Calls one session may run at once.
    calls_per_session: usize,
    table: Mutex<Table>,
}

impl Sessions {
    pub(crate) fn new(limits: SessionLimits, calls_per_session: usize) -> Sessions {
        Sessions {
            limits,
            calls_per_session: calls_per_session.max(1),
            table: Mutex::new(Table::default()),
        }
    }

    pub(crate) fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock()
    }

    /// Adds an initialized session for `caller`, unless the caller's class is full.
    pub(crate) fn insert(
        &self,
        session_id: String,
        core: Arc<Session>,
        caller: &Caller,
        request: &RequestId,
    ) -> Result<(), HttpRejection> {
        let limits = &self.limits;
        let mut table = self.table();
        match &caller.principal {
            None => {
                if table.anonymous >= limits.max_anonymous.min(limits.max_sessions) {
                    return Err(HttpRejection::TooManyAnonymousSessions {
                        id: request.clone(),
                    });
                }
                table.anonymous += 1;
            }
            Some(principal) => {
                if table.per_principal.get(principal).copied().unwrap_or(0)
                    >= limits.max_per_principal
                {
                    return Err(HttpRejection::TooManySessionsForPrincipal {
                        id: request.clone(),
                    });
                }
                if table.authenticated >= limits.max_sessions {
                    return Err(HttpRejection::TooManySessions {
                        id: request.clone(),
                    });
                }
                table.authenticated += 1;
                *table.per_principal.entry(principal.clone()).or_default() += 1;
            }
        }
        let replaced = table.by_id.insert(
            session_id,
            Arc::new(HttpSession {
                core,
                principal: caller.principal.clone(),
                call_slots: Arc::new(Semaphore::new(self.calls_per_session)),
                streams: CallStreams::default(),
            }),
            Instant::now(),
        );
        debug_assert!(
            replaced.is_none(),
            "session ids are random and never reused"
        );
        Ok(())
    }

    /// The session `id` names, if it exists and belongs to `caller` (then it counts as used).
    pub(crate) fn lookup(&self, id: Option<&str>, caller: &Caller) -> Lookup {
        let Some(id) = id else {
            return Lookup::Missing;
        };
        let mut table = self.table();
        // Only the owner's request counts as use: another caller probing an id must not
        // keep the session alive. Expiry is the sweep's (it also spares running calls).
        let owned = table
            .by_id
            .peek_mut(id)
            .is_some_and(|session| caller.principal == session.principal);
        if !owned {
            return Lookup::Unknown;
        }
        match table.by_id.touch(id, Instant::now()) {
            Some(session) => Lookup::Found(session.clone()),
            None => Lookup::Unknown,
        }
    }

    /// Removes and ends a session.
    pub(crate) fn end(&self, id: &str) {
        let removed = self.table().remove(id);
        if let Some(session) = removed {
            session.core.shutdown();
        }
    }

    /// Ends sessions idle past their class's timeout with nothing running.
    pub(crate) fn sweep(&self) {
        let limits = &self.limits;
        let expired: Vec<Arc<HttpSession>> = {
            let mut table = self.table();
            // A session with a call running is never idle, whatever its last request.
            let removed = table.by_id.remove_expired(
                |s| {
                    (s.core.calls_in_flight() == 0).then(|| limits.lifetime(s.principal.as_deref()))
                },
                Instant::now(),
            );
            for session in &removed {
                table.count_out(session);
            }
            removed
        };
        for session in expired {
            session.core.shutdown();
        }
    }

    /// Sessions open now: anonymous ones, authenticated ones.
    pub(crate) fn open(&self) -> (usize, usize) {
        let table = self.table();
        (table.anonymous, table.authenticated)
    }

    /// Ends every session (the server is stopping).
    pub(crate) fn end_all(&self) {
        let all = std::mem::take(&mut *self.table()).by_id.drain();
        for session in all {
            session.core.shutdown();
        }
    }
}
