//! The writer thread: the one connection that writes, fed by a queue, committing in
//! groups.
//!
//! Every write of every store (and every audit record) is sent here. The thread takes
//! what is queued (up to [`MAX_BATCH`]) and runs all of it in one `BEGIN IMMEDIATE`
//! transaction, then answers each caller after `COMMIT`. One commit (one WAL append) is
//! shared by every call in flight, which is what keeps a call at a few microseconds when
//! many are in flight; and the async runtime never blocks on SQLite. Audit records alone
//! linger a little before their commit, so that at a slow pace several share one wake-up
//! and one commit (see [`write_queue`](crate::write_queue)).
//!
//! Audit records are sealed here, inside the transaction, from the chain head read from
//! the table's last row: two processes appending to one file keep one chain, because
//! `BEGIN IMMEDIATE` serializes their batches.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use milpa::StoreError;
use milpa::audit::chain::{ChainHead, seal};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use crate::error::{shared_store_error, sqlite_failure, store_error, writer_stopped};
use crate::write_queue::{Urgency, WriteQueue};

/// The most jobs one transaction runs, so one commit never holds the file's write lock
/// for long while others queue.
const MAX_BATCH: usize = 1024;

/// A write, run inside a batch's transaction.
pub(crate) type Job = Box<dyn FnOnce(&mut Batch<'_>) + Send>;

enum Message {
    Job(Job),
    /// An audit record: no reply, and no boxed closure (it is sent on every call).
    Audit(AuditEntry),
    /// Answered once everything sent before it is committed.
    Flush(mpsc::Sender<()>),
}

impl Urgency for Message {
    fn is_urgent(&self) -> bool {
        !matches!(self, Message::Audit(_))
    }
}

/// The sending side, shared by every handle of one store. Dropping it (with the last
/// handle) closes the queue: the thread commits what is queued and exits, and the drop
/// waits for it.
pub(crate) struct Writer {
    queue: Arc<WriteQueue<Message>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread, which owns `conn` from now on; audit records alone wait up to
    /// `audit_linger` for company before their commit.
    pub(crate) fn start(conn: Connection, audit_linger: Duration) -> Result<Writer, StoreError> {
        let queue = Arc::new(WriteQueue::new(audit_linger));
        let thread = {
            let queue = Arc::clone(&queue);
            std::thread::Builder::new()
                .name("milpa-sqlite-writer".to_owned())
                .spawn(move || run(conn, &queue))
                .map_err(StoreError::unavailable)?
        };
        Ok(Writer {
            queue,
            thread: Some(thread),
        })
    }

    /// Queues `job`; false when the thread is gone.
    fn enqueue(&self, job: Job) -> bool {
        self.queue.push(Message::Job(job))
    }

    /// Queues an audit record for sealing; false when the thread is gone.
    pub(crate) fn append_audit(&self, entry: AuditEntry) -> bool {
        self.queue.push(Message::Audit(entry))
    }

    /// Runs `op` in the writer's transaction and answers with its result once committed.
    pub(crate) fn call<T, E>(
        &self,
        op: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> milpa::Deferred<'static, Result<T, E>>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        if !self.enqueue(Box::new(move |batch: &mut Batch<'_>| batch.run(reply, op))) {
            return milpa::Deferred::ready(Err(E::from(writer_stopped())));
        }
        milpa::Deferred::pending(async move {
            answer
                .await
                .unwrap_or_else(|_| Err(E::from(writer_stopped())))
        })
    }

    /// Blocks until everything queued before this call is committed (or failed).
    pub(crate) fn flush(&self) {
        let (done, wait) = mpsc::channel();
        if self.queue.push(Message::Flush(done)) {
            // An error means the thread exited, which it only does after its last commit.
            let _ = wait.recv();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.queue.close();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!(target: "milpa::store", "the SQLite writer thread panicked");
        }
    }
}

/// Abandons the queue when the writer thread ends, however it ends (a panic included),
/// so that senders learn it is gone instead of waiting forever. After a normal end the
/// queue is closed and empty already.
struct AbandonOnExit<'q>(&'q WriteQueue<Message>);

impl Drop for AbandonOnExit<'_> {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// The thread's loop: one batch per wake-up, until the queue is closed and empty.
fn run(conn: Connection, queue: &WriteQueue<Message>) {
    let _abandon = AbandonOnExit(queue);
    let mut line = Vec::with_capacity(1024);
    let mut messages = Vec::new();
    while queue.take(&mut messages, MAX_BATCH).is_ok() {
        run_batch(&conn, messages.drain(..), &mut line);
    }
}

/// A reply to send once the batch's fate is known: `None` when it committed, else why not.
type Reply = Box<dyn FnOnce(Option<&Arc<rusqlite::Error>>) + Send>;

/// One transaction's worth of jobs.
pub(crate) struct Batch<'c> {
    conn: &'c Connection,
    /// Set once the transaction cannot commit: later jobs are answered with it unrun.
    failure: Option<Arc<rusqlite::Error>>,
    /// The audit chain's head, read from the table at the batch's first record.
    audit_head: Option<ChainHead>,
    /// Audit records appended in this batch (reported if the batch fails).
    audit_appended: usize,
    replies: Vec<Reply>,
    line: &'c mut Vec<u8>,
}

impl Batch<'_> {
    /// Runs `op` (unless the batch already failed) and queues its answer for after the
    /// commit: a caller never hears "done" for a write that was rolled back.
    pub(crate) fn run<T, E>(
        &mut self,
        reply: oneshot::Sender<Result<T, E>>,
        op: impl FnOnce(&Connection) -> Result<T, E>,
    ) where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let result = match &self.failure {
            Some(failure) => Err(E::from(shared_store_error(failure))),
            None => {
                let result = op(self.conn);
                self.note_rollback();
                result
            }
        };
        self.replies.push(Box::new(move |failure| {
            let answer = match failure {
                None => result,
                Some(failure) => Err(E::from(shared_store_error(failure))),
            };
            // The caller may have gone away (a cancelled call): nothing to tell.
            let _ = reply.send(answer);
        }));
    }

    /// Seals the record onto the audit chain and appends it.
    /// A record that cannot be stored is logged as a [`StoreError`], so it is counted with
    /// every other store failure ([`StoreError::made`]).
    fn append_audit(&mut self, entry: AuditEntry) {
        if let Some(failure) = &self.failure {
            let error = shared_store_error(failure);
            tracing::error!(target: "milpa::audit", %error, "an audit record could not be stored");
            return;
        }
        if let Err(error) = self.try_append_audit(&entry) {
            let error = store_error(error);
            tracing::error!(target: "milpa::audit", %error, "an audit record could not be stored");
            self.note_rollback();
        }
    }

    fn try_append_audit(&mut self, entry: &AuditEntry) -> rusqlite::Result<()> {
        let head = match self.audit_head.take() {
            Some(head) => head,
            None => self
                .conn
                .prepare_cached("SELECT seq, hash FROM milpa_audit ORDER BY seq DESC LIMIT 1")?
                .query_row([], |row| {
                    Ok(ChainHead {
                        seq: row.get::<_, i64>(0)? as u64,
                        hash: row.get(1)?,
                    })
                })
                .optional()?
                .unwrap_or_else(ChainHead::genesis),
        };
        self.line.clear();
        let next = seal(entry.json(), &head, self.line);
        let text = std::str::from_utf8(self.line).map_err(|error| {
            sqlite_failure(
                rusqlite::ffi::SQLITE_MISMATCH,
                format!("audit record is not UTF-8: {error}"),
            )
        })?;
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO milpa_audit (seq, line, hash, ts_ms, tool, principal, outcome)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                next.seq as i64,
                text,
                next.hash,
                entry.ts_ms as i64,
                entry.tool(),
                entry.principal(),
                entry.outcome,
            ]);
        match inserted {
            Ok(_) => {
                self.audit_appended += 1;
                self.audit_head = Some(next);
                Ok(())
            }
            Err(error) => {
                self.audit_head = Some(head);
                Err(error)
            }
        }
    }

    /// An error that rolls back the whole transaction (disk full, I/O) leaves the
    /// connection in autocommit mode: everything before it in the batch is lost, so the
    /// batch is failed.
    fn note_rollback(&mut self) {
        if self.failure.is_none() && self.conn.is_autocommit() {
            self.failure = Some(Arc::new(sqlite_failure(
                rusqlite::ffi::SQLITE_ABORT,
                "the transaction was rolled back by an error".to_owned(),
            )));
        }
    }
}

/// An audit record waiting for its seal: its JSON (as `AuditRecord::write_json` wrote it)
/// and the columns `AuditTrail::query` filters on.
///
/// One buffer holds the JSON, then the tool, then the principal: the entry is allocated
/// on the caller's thread and freed on the writer's, and with one allocation instead of
/// three the two threads contend less on the allocator (measured: cross-thread frees were
/// 7 % of the writer's time with 32 callers in flight).
pub(crate) struct AuditEntry {
    text: Vec<u8>,
    json_len: usize,
    tool_len: usize,
    has_principal: bool,
    ts_ms: u64,
    outcome: &'static str,
}

impl AuditEntry {
    /// The entry for `record`, written at `ts_ms`.
    pub(crate) fn new(record: &milpa::audit::AuditRecord<'_>, ts_ms: u64) -> AuditEntry {
        let principal = record.principal.unwrap_or("");
        let mut text = Vec::with_capacity(320 + record.tool.len() + principal.len());
        record.write_json(&mut text);
        let json_len = text.len();
        text.extend_from_slice(record.tool.as_bytes());
        text.extend_from_slice(principal.as_bytes());
        AuditEntry {
            text,
            json_len,
            tool_len: record.tool.len(),
            has_principal: record.principal.is_some(),
            ts_ms,
            outcome: record.outcome.as_str(),
        }
    }

    fn json(&self) -> &[u8] {
        &self.text[..self.json_len]
    }

    fn tool(&self) -> &str {
        // Copied from `&str`s, so the slices are UTF-8.
        std::str::from_utf8(&self.text[self.json_len..self.json_len + self.tool_len])
            .unwrap_or_default()
    }

    fn principal(&self) -> Option<&str> {
        self.has_principal.then(|| {
            std::str::from_utf8(&self.text[self.json_len + self.tool_len..]).unwrap_or_default()
        })
    }
}

fn run_batch(
    conn: &Connection,
    messages: impl ExactSizeIterator<Item = Message>,
    line: &mut Vec<u8>,
) {
    let mut batch = Batch {
        conn,
        failure: None,
        audit_head: None,
        audit_appended: 0,
        replies: Vec::with_capacity(messages.len()),
        line,
    };
    if let Err(error) = run_cached(conn, "BEGIN IMMEDIATE") {
        batch.failure = Some(Arc::new(error));
    }
    let mut flushes = Vec::new();
    for message in messages {
        match message {
            Message::Job(job) => job(&mut batch),
            Message::Audit(entry) => batch.append_audit(entry),
            Message::Flush(done) => flushes.push(done),
        }
    }
    if batch.failure.is_none()
        && let Err(error) = run_cached(conn, "COMMIT")
    {
        batch.failure = Some(Arc::new(error));
    }
    if let Some(failure) = &batch.failure {
        if !conn.is_autocommit()
            && let Err(error) = conn.execute_batch("ROLLBACK")
        {
            tracing::error!(target: "milpa::store", %error, "rollback failed");
        }
        if batch.audit_appended > 0 {
            tracing::error!(
                target: "milpa::audit",
                error = %failure,
                lost = batch.audit_appended,
                "audit records could not be committed"
            );
        }
    }
    let failure = batch.failure.take();
    for reply in batch.replies.drain(..) {
        reply(failure.as_ref());
    }
    for done in flushes {
        let _ = done.send(());
    }
}

/// Runs a statement without parameters through the connection's statement cache: `BEGIN`
/// and `COMMIT` run once per batch, and parsing them anew each time was about a twentieth
/// of the writer thread's CPU at 100 calls a second (perf, `bench_paced`).
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Maps a rusqlite result for [`Writer::call`]'s ops.
pub(crate) fn sql<T>(result: rusqlite::Result<T>) -> Result<T, StoreError> {
    result.map_err(store_error)
}
