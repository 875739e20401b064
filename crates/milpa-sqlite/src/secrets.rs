//! Named secrets in the `milpa_secrets` table: made once, then the same for every process
//! that opens the file.

use rusqlite::params;

use milpa::StoreError;

use crate::error::unreadable;
use crate::store::SqliteStore;
use crate::writer::sql;

/// How many random bytes a new secret has.
pub(crate) const SECRET_LEN: usize = 32;

impl SqliteStore {
    /// The secret called `name`: 32 random bytes made on first use and kept in the file,
    /// so every process on this file (and this one after a restart) gets the same bytes.
    ///
    /// Of two processes asking for a new name at once, the first insert wins and both
    /// read its bytes (`INSERT OR IGNORE`, then a read, in one writer transaction).
    ///
    /// ```
    /// use milpa_sqlite::SqliteStore;
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let path = dir.path().join("state.db");
    /// let key = SqliteStore::open(&path)?.shared_secret("state").await?;
    /// assert_eq!(key.len(), 32);
    /// assert_eq!(SqliteStore::open(&path)?.shared_secret("state").await?, key);
    /// # Ok::<(), milpa::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn shared_secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let name = name.to_owned();
        let fresh: [u8; SECRET_LEN] = rand::random();
        self.shared
            .writer
            .call(move |conn| {
                sql(conn
                    .prepare_cached(
                        "INSERT OR IGNORE INTO milpa_secrets (name, value) VALUES (?1, ?2)",
                    )
                    .and_then(|mut insert| insert.execute(params![name, &fresh[..]])))?;
                let value: Vec<u8> = sql(conn
                    .prepare_cached("SELECT value FROM milpa_secrets WHERE name = ?1")
                    .and_then(|mut select| select.query_row([&name], |row| row.get(0))))?;
                if value.len() < SECRET_LEN {
                    return Err(unreadable(
                        "a secret",
                        format!("{name} has {} bytes, fewer than {SECRET_LEN}", value.len()),
                    ));
                }
                Ok(value)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn a_secret_is_made_once_and_kept_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let first = SqliteStore::open(&path).unwrap();
        let key = block_on(first.shared_secret("state")).unwrap();
        assert_eq!(key.len(), SECRET_LEN);
        let other = block_on(first.shared_secret("other")).unwrap();
        assert_ne!(key, other, "names have their own secrets");
        drop(first);
        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(block_on(reopened.shared_secret("state")).unwrap(), key);
    }

    #[test]
    fn two_stores_on_one_file_agree_on_a_new_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let (a, b) = (
            SqliteStore::open(&path).unwrap(),
            SqliteStore::open(&path).unwrap(),
        );
        let keys = block_on(async {
            futures_util::future::join(a.shared_secret("state"), b.shared_secret("state")).await
        });
        assert_eq!(keys.0.unwrap(), keys.1.unwrap());
    }
}
