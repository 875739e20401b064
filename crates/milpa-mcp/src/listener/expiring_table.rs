//! A table of entries that expire: the shape shared by the MCP endpoint's HTTP sessions
//! (`http/sessions.rs`), the approvals page's logins (`approvals/logins.rs`) and its passkey
//! ceremonies under way (`approvals/passkeys.rs`).
//!
//! Each entry remembers when it was created and when it was last used. It expires after
//! its [`Lifetime::idle`] without use or [`Lifetime::max_age`] after creation, whichever
//! comes first. The lifetime is asked of the caller per entry (a closure over the value),
//! because one table may hold classes of entries that live differently (anonymous HTTP
//! sessions expire sooner) and some entries must outlive their idle time (a session with a
//! call still running). Time is passed in, never read here, so the rules are tested
//! without waiting.
//!
//! The table has no lock of its own: its owner keeps it behind one, together with whatever
//! else must change in the same step (the sessions' per-class counts).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How long an entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lifetime {
    /// How long it lives without being used.
    pub idle: Duration,
    /// How long it lives at most, used or not (`None`: no absolute limit).
    pub max_age: Option<Duration>,
}

impl Lifetime {
    /// An entry that ends only when unused for `idle`.
    pub(crate) fn idle(idle: Duration) -> Lifetime {
        Lifetime {
            idle,
            max_age: None,
        }
    }
}

struct Slot<V> {
    value: V,
    created: Instant,
    last_used: Instant,
}

impl<V> Slot<V> {
    fn expired(&self, lifetime: Lifetime, now: Instant) -> bool {
        now.saturating_duration_since(self.last_used) >= lifetime.idle
            || lifetime
                .max_age
                .is_some_and(|max_age| now.saturating_duration_since(self.created) >= max_age)
    }
}

/// Entries keyed by `K` that expire (see the module documentation).
pub(crate) struct ExpiringTable<K, V> {
    slots: HashMap<K, Slot<V>>,
}

impl<K, V> Default for ExpiringTable<K, V> {
    fn default() -> Self {
        ExpiringTable {
            slots: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash + Clone, V> ExpiringTable<K, V> {
    /// How many entries it holds, expired or not (expired ones go when looked up, swept or
    /// crowded out).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Adds `value` under `key`, created and last used `now`; an entry already under `key`
    /// is replaced and returned.
    pub(crate) fn insert(&mut self, key: K, value: V, now: Instant) -> Option<V> {
        self.slots
            .insert(
                key,
                Slot {
                    value,
                    created: now,
                    last_used: now,
                },
            )
            .map(|slot| slot.value)
    }

    // Only the approvals page uses this (an `http`-only build leaves it out).
    #[cfg(any(feature = "approvals-page", test))]
    /// The live entry under `key`, counted as used `now`. An entry that has expired by
    /// `lifetime` is removed and `None` returned, so an expired entry is never used again
    /// even between sweeps.
    pub(crate) fn use_live<Q>(
        &mut self,
        key: &Q,
        lifetime: impl FnOnce(&V) -> Lifetime,
        now: Instant,
    ) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let slot = self.slots.get(key)?;
        if slot.expired(lifetime(&slot.value), now) {
            self.slots.remove(key);
            return None;
        }
        let slot = self.slots.get_mut(key)?;
        slot.last_used = now;
        Some(&mut slot.value)
    }

    // Only the approvals page uses this (an `http`-only build leaves it out).
    #[cfg(any(feature = "approvals-page", test))]
    /// The live entry under `key`, without counting it as used: for a request a person did
    /// not make (the approvals queue's timed refresh), which must not keep an entry alive
    /// past its idle time. An entry that has expired by `lifetime` is removed and `None`
    /// returned, as [`ExpiringTable::use_live`] does.
    pub(crate) fn get_live<Q>(
        &mut self,
        key: &Q,
        lifetime: impl FnOnce(&V) -> Lifetime,
        now: Instant,
    ) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let slot = self.slots.get(key)?;
        if slot.expired(lifetime(&slot.value), now) {
            self.slots.remove(key);
            return None;
        }
        self.slots.get(key).map(|slot| &slot.value)
    }

    // Only the approvals page uses this (an `http`-only build leaves it out).
    #[cfg(any(feature = "approvals-page", test))]
    /// Removes the entry under `key` and returns it if it is live `now` by `lifetime`: for
    /// an entry that serves once (a passkey ceremony's state), so an expired one is dropped
    /// all the same, never returned.
    pub(crate) fn take_live<Q>(
        &mut self,
        key: &Q,
        lifetime: impl FnOnce(&V) -> Lifetime,
        now: Instant,
    ) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let slot = self.slots.remove(key)?;
        (!slot.expired(lifetime(&slot.value), now)).then_some(slot.value)
    }

    /// The entry under `key`, live or not, counted as used `now`: for an owner that leaves
    /// expiry to its sweeps ([`ExpiringTable::remove_expired`]).
    pub(crate) fn touch<Q>(&mut self, key: &Q, now: Instant) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let slot = self.slots.get_mut(key)?;
        slot.last_used = now;
        Some(&mut slot.value)
    }

    /// The entry under `key`, live or not, without counting it as used.
    pub(crate) fn peek_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.slots.get_mut(key).map(|slot| &mut slot.value)
    }

    /// Removes the entry under `key`.
    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.slots.remove(key).map(|slot| slot.value)
    }

    /// Removes and returns the entries expired `now`; `lifetime` gives each entry's, or
    /// `None` for one that must stay whatever its age (it is busy).
    pub(crate) fn remove_expired(
        &mut self,
        lifetime: impl Fn(&V) -> Option<Lifetime>,
        now: Instant,
    ) -> Vec<V> {
        let expired: Vec<K> = self
            .slots
            .iter()
            .filter(|(_, slot)| lifetime(&slot.value).is_some_and(|l| slot.expired(l, now)))
            .map(|(key, _)| key.clone())
            .collect();
        expired.iter().filter_map(|key| self.remove(key)).collect()
    }

    // Only the approvals page uses this (an `http`-only build leaves it out).
    #[cfg(any(feature = "approvals-page", test))]
    /// Makes room for one more entry when the table holds `capacity` (at least 1) or more:
    /// expired entries go first, then the ones unused the longest. Returns what was removed.
    pub(crate) fn make_room(
        &mut self,
        capacity: usize,
        lifetime: impl Fn(&V) -> Option<Lifetime>,
        now: Instant,
    ) -> Vec<V> {
        let capacity = capacity.max(1);
        if self.slots.len() < capacity {
            return Vec::new();
        }
        let mut removed = self.remove_expired(lifetime, now);
        while self.slots.len() >= capacity {
            let idlest = self
                .slots
                .iter()
                .min_by_key(|(_, slot)| slot.last_used)
                .map(|(key, _)| key.clone());
            match idlest.and_then(|key| self.remove(&key)) {
                Some(value) => removed.push(value),
                None => break,
            }
        }
        removed
    }

    /// Removes and returns every entry.
    pub(crate) fn drain(&mut self) -> Vec<V> {
        self.slots.drain().map(|(_, slot)| slot.value).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    const MINUTE: Lifetime = Lifetime {
        idle: Duration::from_secs(60),
        max_age: Some(Duration::from_secs(600)),
    };

    #[test]
    fn use_restarts_the_idle_clock_but_not_the_absolute_one() {
        let mut table = ExpiringTable::default();
        let t0 = Instant::now();
        table.insert("a", 1, t0);
        assert_eq!(table.use_live("a", |_| MINUTE, t0 + secs(59)), Some(&mut 1));
        assert_eq!(
            table.use_live("a", |_| MINUTE, t0 + secs(118)),
            Some(&mut 1)
        );
        assert_eq!(table.use_live("a", |_| MINUTE, t0 + secs(178)), None);
        assert_eq!(table.len(), 0, "an expired entry is dropped when looked up");

        table.insert("busy", 2, t0);
        for minute in 1..10 {
            assert!(
                table
                    .use_live("busy", |_| MINUTE, t0 + secs(minute * 55))
                    .is_some()
            );
        }
        assert_eq!(table.use_live("busy", |_| MINUTE, t0 + secs(600)), None);
    }

    #[test]
    fn without_a_max_age_only_idleness_ends_an_entry() {
        let mut table = ExpiringTable::default();
        let t0 = Instant::now();
        table.insert("a", (), t0);
        let lifetime = Lifetime::idle(secs(60));
        for minute in 1..100 {
            assert!(
                table
                    .use_live("a", |_| lifetime, t0 + secs(minute * 59))
                    .is_some()
            );
        }
    }

    #[test]
    fn sweeping_keeps_live_and_busy_entries() {
        let mut table = ExpiringTable::default();
        let t0 = Instant::now();
        table.insert("old", "idle", t0);
        table.insert("busy", "running", t0);
        table.insert("new", "idle", t0 + secs(50));
        let removed = table.remove_expired(
            |value| (*value != "running").then_some(Lifetime::idle(secs(60))),
            t0 + secs(70),
        );
        assert_eq!(removed, vec!["idle"]);
        assert!(table.peek_mut("busy").is_some());
        assert!(table.peek_mut("new").is_some());
        assert!(table.peek_mut("old").is_none());
    }

    #[test]
    fn a_full_table_drops_expired_entries_then_the_idlest() {
        let mut table = ExpiringTable::default();
        let t0 = Instant::now();
        table.insert(1, "first", t0);
        table.insert(2, "second", t0 + secs(1));
        table.insert(3, "third", t0 + secs(2));
        table.use_live(&1, |_| MINUTE, t0 + secs(3));
        assert!(
            table
                .make_room(4, |_| Some(MINUTE), t0 + secs(4))
                .is_empty(),
            "room left"
        );
        assert_eq!(
            table.make_room(3, |_| Some(MINUTE), t0 + secs(4)),
            vec!["second"]
        );
        assert_eq!(table.len(), 2);
        // Expired entries go before live ones, however idle.
        table.insert(4, "fourth", t0 + secs(100));
        assert_eq!(
            table.make_room(3, |_| Some(MINUTE), t0 + secs(100)).len(),
            2,
            "both older entries were idle past a minute"
        );
        assert!(table.peek_mut(&4).is_some());
    }

    #[test]
    fn a_zero_capacity_still_holds_one() {
        let mut table = ExpiringTable::default();
        let t0 = Instant::now();
        table.insert(1, (), t0);
        assert_eq!(table.make_room(0, |_| None, t0).len(), 1);
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn taking_removes_the_entry_and_returns_it_only_while_live() {
        let mut table = ExpiringTable::default();
        let t0 = Instant::now();
        let ttl = Lifetime::idle(secs(120));
        table.insert("a", 1, t0);
        table.insert("b", 2, t0);
        assert_eq!(table.take_live("a", |_| ttl, t0 + secs(119)), Some(1));
        assert_eq!(
            table.take_live("a", |_| ttl, t0 + secs(119)),
            None,
            "served once"
        );
        assert_eq!(
            table.take_live("b", |_| ttl, t0 + secs(120)),
            None,
            "expired"
        );
        assert_eq!(table.len(), 0, "an expired entry is dropped too");
        assert_eq!(table.take_live("missing", |_| ttl, t0), None);
    }

    #[test]
    fn replacing_and_draining() {
        let mut table = ExpiringTable::default();
        let t0 = Instant::now();
        assert_eq!(table.insert("a", 1, t0), None);
        assert_eq!(table.insert("a", 2, t0), Some(1));
        assert_eq!(table.remove("a"), Some(2));
        table.insert("b", 3, t0);
        assert_eq!(table.drain(), vec![3]);
        assert_eq!(table.len(), 0);
    }
}
