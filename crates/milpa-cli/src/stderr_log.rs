//! Standard error for the log, shared by every thread without one waiting on another's write.
//!
//! `milpa serve` logs a line per call (the `[ToolAudit]` line). Written through
//! [`std::io::stderr`], each line is a `write` system call made while holding standard
//! error's lock, so when two workers log at once one of them sleeps on the lock until the
//! other's system call returns: under `bench_http` with 16 connections that was about one
//! futex wait and wake for every two calls, and the server answered 45k calls/s against
//! 51k with the lines turned off (`RUST_LOG=warn`, same binary, alternated).
//!
//! [`StderrLog`] combines instead. A thread hands its line over and takes the writer only if
//! nobody holds it; the thread that holds it writes every line handed over meanwhile with
//! its own, in one system call. Nobody waits for a write in progress, no line waits for a
//! later one (the holder looks again after letting go, so a line handed over while it wrote
//! goes out before it returns), and at a calm pace a line is one system call on the thread
//! that logged it, as before: there is no background thread to wake. Lines keep their
//! order per thread and are never split. When the lines handed over reach
//! [`MAX_PENDING_BYTES`] (standard error is a full pipe nobody reads, say), a thread waits
//! for the writer as it would have on the plain handle, so memory stays bounded.

use std::io::{self, Write};

use parking_lot::Mutex;
use tracing_subscriber::fmt::MakeWriter;

/// Past this many bytes handed over and not yet written, a thread waits for the writer.
const MAX_PENDING_BYTES: usize = 1 << 20;

/// The log's standard error (see the module documentation).
pub(crate) struct StderrLog<W = io::Stderr> {
    /// Lines handed over, waiting for whoever holds `out`.
    pending: Mutex<Vec<u8>>,
    /// The writer, held by one thread at a time; the spare buffer is swapped with `pending`.
    out: Mutex<Out<W>>,
}

struct Out<W> {
    writer: W,
    spare: Vec<u8>,
}

impl StderrLog {
    /// Standard error, shared.
    pub(crate) fn stderr() -> StderrLog {
        StderrLog::new(io::stderr())
    }
}

impl<W: Write> StderrLog<W> {
    /// A log writing to `writer`.
    pub(crate) fn new(writer: W) -> StderrLog<W> {
        StderrLog {
            pending: Mutex::new(Vec::new()),
            out: Mutex::new(Out {
                writer,
                spare: Vec::new(),
            }),
        }
    }

    /// Hands `line` over, and writes what is pending unless another thread is writing.
    fn submit(&self, line: &[u8]) -> io::Result<()> {
        let backlog = {
            let mut pending = self.pending.lock();
            pending.extend_from_slice(line);
            pending.len()
        };
        let mut out = if backlog > MAX_PENDING_BYTES {
            self.out.lock()
        } else {
            match self.out.try_lock() {
                Some(out) => out,
                // The holder writes our line: it looks at `pending` after letting go.
                None => return Ok(()),
            }
        };
        loop {
            let Out { writer, spare } = &mut *out;
            std::mem::swap(&mut *self.pending.lock(), spare);
            if !spare.is_empty() {
                let written = writer.write_all(spare).and_then(|()| writer.flush());
                spare.clear();
                written?;
            }
            drop(out);
            // A line handed over after the swap found the writer taken: it is ours to write.
            if self.pending.lock().is_empty() {
                return Ok(());
            }
            out = match self.out.try_lock() {
                Some(out) => out,
                None => return Ok(()),
            };
        }
    }
}

/// One event's writer: `tracing`'s formatter hands each event over in one `write_all`.
pub(crate) struct StderrLine<'a, W>(&'a StderrLog<W>);

impl<W: Write> Write for StderrLine<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.submit(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a, W: Write + 'a> MakeWriter<'a> for StderrLog<W> {
    type Writer = StderrLine<'a, W>;

    fn make_writer(&'a self) -> Self::Writer {
        StderrLine(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer that keeps what it is given, and counts its writes.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Kept {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut kept = self.0.lock();
            kept.0.extend_from_slice(buf);
            kept.1 += 1;
            // Slow enough that other threads hand lines over meanwhile.
            std::thread::yield_now();
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_arrives_whole_and_in_each_threads_order() {
        let kept = Kept::default();
        let log = Arc::new(StderrLog::new(kept.clone()));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        let line = format!("thread {t} line {i} {}\n", "x".repeat(i % 50));
                        log.make_writer().write_all(line.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // Nothing is left behind once every thread has returned.
        assert!(log.pending.lock().is_empty());
        let (bytes, _) = kept.0.lock().clone();
        let text = String::from_utf8(bytes).unwrap();
        let mut next = [0usize; 4];
        for line in text.lines() {
            let words: Vec<&str> = line.split(' ').collect();
            let (t, i): (usize, usize) = (words[1].parse().unwrap(), words[3].parse().unwrap());
            assert_eq!(i, next[t], "thread {t}'s lines out of order: {line}");
            assert_eq!(words.get(4).copied().unwrap_or(""), "x".repeat(i % 50));
            next[t] += 1;
        }
        assert_eq!(next, [2_000; 4]);
    }

    #[test]
    fn a_line_alone_is_written_at_once_in_one_write() {
        let kept = Kept::default();
        let log = StderrLog::new(kept.clone());
        log.make_writer().write_all(b"one\n").unwrap();
        assert_eq!(*kept.0.lock(), (b"one\n".to_vec(), 1));
        log.make_writer().write_all(b"two\n").unwrap();
        assert_eq!(*kept.0.lock(), (b"one\ntwo\n".to_vec(), 2));
    }

    #[test]
    fn a_line_handed_over_while_the_writer_is_held_waits_for_it() {
        let kept = Kept::default();
        let log = StderrLog::new(kept.clone());
        // The writer is held (here by the test, not by a logging thread, which would look
        // again after letting go): the line waits, and goes out with the next write.
        let held = log.out.lock();
        log.make_writer().write_all(b"queued\n").unwrap();
        assert!(kept.0.lock().0.is_empty());
        drop(held);
        log.make_writer().write_all(b"next\n").unwrap();
        assert_eq!(*kept.0.lock(), (b"queued\nnext\n".to_vec(), 1));
    }

    #[test]
    fn a_full_backlog_waits_for_the_writer_instead_of_growing() {
        let kept = Kept::default();
        let log = Arc::new(StderrLog::new(kept.clone()));
        let held = log.out.lock();
        let big = vec![b'y'; MAX_PENDING_BYTES];
        log.make_writer().write_all(&big).unwrap();
        let waiter = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || log.make_writer().write_all(b"z\n").unwrap())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "a thread past the cap must wait for the writer"
        );
        drop(held);
        waiter.join().unwrap();
        assert_eq!(kept.0.lock().0.len(), MAX_PENDING_BYTES + 2);
    }
}
