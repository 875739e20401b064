//! [`SqlitePinStore`]: pinned tool and prompt definitions in `milpa_pins` (schema version
//! 5).

use std::sync::Arc;

use milpa::approval::pins::{DefinitionKind, PinStore, PinnedDefinition};
use milpa::{Deferred, StoreError};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{store_error, unreadable};
use crate::shared::Shared;
use crate::writer::sql;

/// Pinned definitions in the store's file, shared by every process on it. Pinning runs in
/// the writer's transaction: `pin_first` is one `INSERT … ON CONFLICT DO NOTHING` and, when
/// that inserted nothing, a read of the row in the way, so of two processes pinning one key
/// at once one pins and the other gets its pin back; `repin` is an upsert. Reads go
/// through the read connection. The definition is kept as JSON text.
#[derive(Clone)]
pub struct SqlitePinStore {
    shared: Arc<Shared>,
}

impl SqlitePinStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqlitePinStore { shared }
    }
}

fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The pin of one key, read on `conn` (the read connection, or the writer's inside its
/// transaction).
fn select(
    conn: &Connection,
    scope: &str,
    kind: DefinitionKind,
    name: &str,
) -> Result<Option<PinnedDefinition>, StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT digest, definition, pinned_at_ms FROM milpa_pins
             WHERE scope = ?1 AND kind = ?2 AND name = ?3",
        )
        .and_then(|mut select| {
            select
                .query_row(params![scope, kind.as_str(), name], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })
                .optional()
        })
        .map_err(store_error)?;
    let Some((digest, definition, pinned_at_ms)) = row else {
        return Ok(None);
    };
    let definition = serde_json::from_str(&definition)
        .map_err(|error| unreadable("a pinned definition", error))?;
    let mut pin = PinnedDefinition::new(
        scope,
        kind,
        name,
        definition,
        u64::try_from(pinned_at_ms).unwrap_or(0),
    );
    // The digest taken when it was pinned is the one changes are compared against, even
    // should the JSON not round-trip bit for bit (a float's last digit).
    pin.digest = digest;
    Ok(Some(pin))
}

/// Runs `statement`, an insert of `pin`'s row (`definition` and `pinned_at_ms` as
/// [`to_row`] gives them) that says what a conflict does; the rows it changed.
fn write(
    conn: &Connection,
    statement: &str,
    pin: &PinnedDefinition,
    definition: &str,
    pinned_at_ms: i64,
) -> Result<usize, StoreError> {
    sql(conn.prepare_cached(statement).and_then(|mut insert| {
        insert.execute(params![
            pin.scope,
            pin.kind.as_str(),
            pin.name,
            pin.digest,
            definition,
            pinned_at_ms
        ])
    }))
}

/// `pin`'s row values that are not its key: the definition as JSON text, the time as SQLite
/// stores it.
fn to_row(pin: &PinnedDefinition) -> Result<(String, i64), StoreError> {
    let definition = serde_json::to_string(&pin.definition).map_err(StoreError::backend)?;
    Ok((definition, millis(pin.pinned_at_ms)))
}

impl PinStore for SqlitePinStore {
    fn get<'a>(
        &'a self,
        scope: &'a str,
        kind: DefinitionKind,
        name: &'a str,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>> {
        Deferred::ready(self.shared.read(|conn| select(conn, scope, kind, name)))
    }

    fn pin_first<'a>(
        &'a self,
        pin: PinnedDefinition,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>> {
        let (definition, pinned_at_ms) = match to_row(&pin) {
            Ok(row) => row,
            Err(error) => return Deferred::ready(Err(error)),
        };
        self.shared.writer.call(move |conn| {
            let inserted = write(
                conn,
                "INSERT INTO milpa_pins (scope, kind, name, digest, definition, pinned_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (scope, kind, name) DO NOTHING",
                &pin,
                &definition,
                pinned_at_ms,
            )?;
            if inserted == 1 {
                return Ok(None);
            }
            // Same transaction as the insert, so the row in its way is still there.
            let existing = select(conn, &pin.scope, pin.kind, &pin.name)?;
            existing
                .map(Some)
                .ok_or_else(|| StoreError::backend("a pin's insert conflicted with no row"))
        })
    }

    fn repin<'a>(&'a self, pin: PinnedDefinition) -> Deferred<'a, Result<(), StoreError>> {
        let (definition, pinned_at_ms) = match to_row(&pin) {
            Ok(row) => row,
            Err(error) => return Deferred::ready(Err(error)),
        };
        self.shared.writer.call(move |conn| {
            write(
                conn,
                "INSERT INTO milpa_pins (scope, kind, name, digest, definition, pinned_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (scope, kind, name) DO UPDATE SET
                     digest = excluded.digest,
                     definition = excluded.definition,
                     pinned_at_ms = excluded.pinned_at_ms",
                &pin,
                &definition,
                pinned_at_ms,
            )?;
            Ok(())
        })
    }
}
