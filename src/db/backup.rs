//! Backups with SQLite's online backup API, so committed pages still in the `-wal`
//! are included (copying the file alone would lose them).
//!
//! The copy is written to `<dest>.tmp`, synced, then renamed to `dest`, so a `dest`
//! that exists is always complete.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::Backup;
use rusqlite::{Connection, OpenFlags};

use super::DbError;

/// `runtime.sqlite.wsledger-YYYYMMDDTHHMMSSZ.bak` beside `db` for a UTC time in ms.
/// `-2`, `-3`, … is added before `.bak` while a file of that name exists.
pub fn backup_path(db: &Path, dir: Option<&Path>, now_ms: i64) -> PathBuf {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "runtime.sqlite".into());
    let dir = dir
        .map(Path::to_path_buf)
        .or_else(|| db.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let stamp = utc_stamp(now_ms);
    let mut n = 1;
    loop {
        let file = if n == 1 {
            format!("{name}.wsledger-{stamp}.bak")
        } else {
            format!("{name}.wsledger-{stamp}-{n}.bak")
        };
        let p = dir.join(file);
        if !p.exists() {
            return p;
        }
        n += 1;
    }
}

/// `YYYYMMDDTHHMMSSZ` for a Unix time in ms (proleptic Gregorian, UTC).
pub fn utc_stamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}{mo:02}{d:02}T{h:02}{m:02}{s:02}Z")
}

fn tmp_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Copies the database behind `src` (the file `db`) to `dest`, which must not exist.
pub fn backup_connection(src: &Connection, db: &Path, dest: &Path) -> Result<(), DbError> {
    let io = |path: &Path, e: std::io::Error| DbError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let tmp = tmp_path(dest);
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut dst = Connection::open_with_flags(
            &tmp,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| DbError::from_sqlite(&tmp, &e))?;
        {
            let backup = Backup::new(src, &mut dst).map_err(|e| DbError::from_sqlite(db, &e))?;
            backup
                .run_to_completion(256, Duration::from_millis(5), None)
                .map_err(|e| DbError::from_sqlite(&tmp, &e))?;
        }
        // The copy keeps the source's WAL flag; fold it into one file before closing.
        dst.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(|e| DbError::from_sqlite(&tmp, &e))?;
        dst.close()
            .map_err(|(_, e)| DbError::from_sqlite(&tmp, &e))?;
        let f = std::fs::File::open(&tmp).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, dest).map_err(|e| io(dest, e))?;
        if let Some(dir) = dest.parent() {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        for ext in ["-wal", "-shm", "-journal"] {
            let mut s = tmp.as_os_str().to_owned();
            s.push(ext);
            let _ = std::fs::remove_file(PathBuf::from(s));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::utc_stamp;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_767_708_606_172), "20260106T141006Z");
        assert_eq!(utc_stamp(951_782_400_000), "20000229T000000Z");
    }
}
