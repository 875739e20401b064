//! The store's files are private to their owner: they hold parked calls' arguments, pending
//! confirmation tokens and the key that seals MCP `requestState`.
//!
//! [`prepare`] runs before SQLite opens the file. A missing folder is created `0700` and a
//! missing file `0600`, whatever the umask; SQLite then creates the `-wal` and `-shm` files
//! with the database file's mode, so they are `0600` too. A file or folder another user could
//! write (group or others write bit) is refused: whoever can write it can forge approvals,
//! grants and tokens. A folder with the sticky bit (`/tmp`) is accepted, since others cannot
//! replace a file in it.

use std::fmt;
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of a folder the store creates.
pub const FOLDER_MODE: u32 = 0o700;
/// The mode of a file the store creates.
pub const FILE_MODE: u32 = 0o600;

/// Group and others write bits.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// The sticky bit: in such a folder only a file's owner may rename or delete it.
const STICKY: u32 = 0o1000;

/// A state file or folder whose permissions let other users change it, or that could not be
/// created or read; nothing was opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum PrivateFileError {
    /// The file or folder is writable by its group or by others.
    WritableByOthers {
        /// The file or folder.
        path: PathBuf,
        /// Its permission bits (`0o666`).
        mode: u32,
        /// Whether it is the folder.
        folder: bool,
    },
    /// The file or folder could not be created or inspected.
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for PrivateFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrivateFileError::WritableByOthers { path, mode, folder } => {
                let (what, fix) = if *folder {
                    ("state folder", "chmod 700")
                } else {
                    ("state file", "chmod 600")
                };
                write!(
                    f,
                    "the {what} {} is writable by other users (mode {mode:04o}): anyone who can \
                     write it can forge approvals and tokens; run `{fix} {}` if it is yours",
                    path.display(),
                    path.display()
                )
            }
            PrivateFileError::Io { path, source } => {
                write!(f, "{}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for PrivateFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PrivateFileError::Io { source, .. } => Some(source),
            PrivateFileError::WritableByOthers { .. } => None,
        }
    }
}

/// Makes `db`'s folder and `db` exist, private when this creates them, and refuses them
/// (and an existing `-wal` or `-shm` beside `db`) when other users may write them.
pub fn prepare(db: &Path) -> Result<(), PrivateFileError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PrivateFileError::Io { path, source }
    };
    if let Some(folder) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !folder.exists() {
            DirBuilder::new()
                .recursive(true)
                .mode(FOLDER_MODE)
                .create(folder)
                .map_err(io(folder))?;
            // The umask may have removed bits; the mode is exactly 0700.
            std::fs::set_permissions(folder, Permissions::from_mode(FOLDER_MODE))
                .map_err(io(folder))?;
        }
        let mode = std::fs::metadata(folder).map_err(io(folder))?.mode();
        if mode & WRITABLE_BY_OTHERS != 0 && mode & STICKY == 0 {
            return Err(PrivateFileError::WritableByOthers {
                path: folder.to_path_buf(),
                mode: mode & 0o7777,
                folder: true,
            });
        }
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(db)
    {
        Ok(file) => file
            .set_permissions(Permissions::from_mode(FILE_MODE))
            .map_err(io(db))?,
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
        Err(error) => return Err(io(db)(error)),
    }
    for path in [db.to_path_buf(), sibling(db, "-wal"), sibling(db, "-shm")] {
        let mode = match std::fs::metadata(&path) {
            Ok(metadata) => metadata.mode(),
            Err(error) if error.kind() == ErrorKind::NotFound && path != db => continue,
            Err(error) => return Err(io(&path)(error)),
        };
        if mode & WRITABLE_BY_OTHERS != 0 {
            return Err(PrivateFileError::WritableByOthers {
                path,
                mode: mode & 0o7777,
                folder: false,
            });
        }
    }
    Ok(())
}

/// `db` with `suffix` appended to its file name (`state.db-wal`).
fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn missing_folders_and_file_are_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a/b/state.db");
        prepare(&db).unwrap();
        assert_eq!(mode(&dir.path().join("a/b")), FOLDER_MODE);
        assert_eq!(mode(&dir.path().join("a")), FOLDER_MODE);
        assert_eq!(mode(&db), FILE_MODE);
        // Again: the file is kept as it is.
        std::fs::write(&db, b"kept").unwrap();
        prepare(&db).unwrap();
        assert_eq!(std::fs::read(&db).unwrap(), b"kept");
    }

    #[test]
    fn files_and_folders_others_can_write_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        prepare(&db).unwrap();
        std::fs::set_permissions(&db, Permissions::from_mode(0o666)).unwrap();
        let error = prepare(&db).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
        std::fs::set_permissions(&db, Permissions::from_mode(0o644)).unwrap();
        prepare(&db).unwrap();

        let wal = sibling(&db, "-wal");
        std::fs::write(&wal, b"").unwrap();
        std::fs::set_permissions(&wal, Permissions::from_mode(0o620)).unwrap();
        let error = prepare(&db).unwrap_err().to_string();
        assert!(error.contains("state.db-wal"), "{error}");
        std::fs::remove_file(&wal).unwrap();

        std::fs::set_permissions(dir.path(), Permissions::from_mode(0o777)).unwrap();
        let error = prepare(&db).unwrap_err().to_string();
        assert!(error.contains("chmod 700"), "{error}");
        // A sticky folder (as /tmp) is fine.
        std::fs::set_permissions(dir.path(), Permissions::from_mode(0o1777)).unwrap();
        prepare(&db).unwrap();
    }
}
