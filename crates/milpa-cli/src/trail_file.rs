//! A `serve --audit` file as `milpa audit verify FILE` reads it: line by line, each line
//! bounded, so a trail of any length is checked in constant memory and a file that is not a
//! trail (one endless line) is refused instead of buffered whole.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// The longest line taken as a record. The records a trail holds are far smaller (their
/// arguments and results are capped by the audit limits); a longer line is not one of them.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How many lines `path` holds (a last line without its newline counts, as with
/// `str::lines`), read in fixed chunks: the length of the progress bar.
pub(crate) fn count_lines(path: &Path) -> io::Result<u64> {
    let mut file = File::open(path)?;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut lines = 0u64;
    let mut last = b'\n';
    loop {
        let read = file.read(&mut chunk)?;
        if read == 0 {
            return Ok(lines + u64::from(last != b'\n'));
        }
        lines += chunk[..read].iter().filter(|&&b| b == b'\n').count() as u64;
        last = chunk[read - 1];
    }
}

/// The lines of a file without their line endings (`\n` or `\r\n`), as `str::lines` gives
/// them, each at most [`MAX_LINE_BYTES`].
pub(crate) struct TrailLines {
    reader: BufReader<File>,
    line: Vec<u8>,
}

impl TrailLines {
    pub(crate) fn open(path: &Path) -> io::Result<TrailLines> {
        Ok(TrailLines {
            reader: BufReader::new(File::open(path)?),
            line: Vec::new(),
        })
    }

    /// The next line, `None` at the end; a line over [`MAX_LINE_BYTES`] or not UTF-8 is an
    /// error.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<&str>> {
        self.line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        if (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.line)?
            == 0
        {
            return Ok(None);
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
        } else if self.line.len() > MAX_LINE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a line longer than {MAX_LINE_BYTES} bytes: not an audit trail"),
            ));
        }
        std::str::from_utf8(&self.line)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(bytes: &[u8]) -> (u64, io::Result<Vec<String>>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trail.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let count = count_lines(&path).unwrap();
        let mut reader = TrailLines::open(&path).unwrap();
        let mut lines = Vec::new();
        let read = loop {
            match reader.next_line() {
                Ok(Some(line)) => lines.push(line.to_owned()),
                Ok(None) => break Ok(lines),
                Err(error) => break Err(error),
            }
        };
        (count, read)
    }

    #[test]
    fn lines_and_their_count_are_those_of_str_lines() {
        for text in ["", "a", "a\n", "a\nb", "a\r\nb\r\n", "\n\na\n", "a\n\nb"] {
            let (count, lines) = lines_of(text.as_bytes());
            let expected: Vec<String> = text.lines().map(str::to_owned).collect();
            assert_eq!(count, expected.len() as u64, "{text:?}");
            assert_eq!(lines.unwrap(), expected, "{text:?}");
        }
    }

    #[test]
    fn an_over_long_line_is_refused_not_buffered() {
        let mut bytes = vec![b'x'; MAX_LINE_BYTES];
        bytes.extend_from_slice(b"\n");
        let (_, fits) = lines_of(&bytes);
        assert_eq!(fits.unwrap()[0].len(), MAX_LINE_BYTES);
        bytes.insert(0, b'x');
        let (_, too_long) = lines_of(&bytes);
        let error = too_long.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("not an audit trail"), "{error}");
    }
}
