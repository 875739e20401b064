//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout.
//!
//! Reading and writing happen on Tokio's reactor: when stdin/stdout are pipes or sockets
//! (as when an MCP client spawns the server) they are registered with the reactor directly,
//! with no thread hand-off per read; otherwise (a terminal, a file) Tokio's stdio handles are
//! used. Nothing but protocol messages is written to stdout; logs belong on stderr.
//!
//! Lines are framed by [`LinesCodec`] with [`ServerOptions::max_message_bytes`] as its
//! limit: a longer line is answered with an error, skipped up to its newline, and serving
//! goes on.
//!
//! Both eras share the connection: a request whose params carry a 2026-07-28 `_meta`
//! (`io.modelcontextprotocol/protocolVersion`) is answered the 2026-07-28 way, from its
//! own declarations and without `initialize`; any other message goes to the session that
//! `initialize` set up.
//!
//! Each `tools/call` runs concurrently with everything else (a slow call never holds up
//! others); other requests are answered in order as they are read. At end of input the
//! calls still running get `DRAIN_TIMEOUT` to finish, then are cancelled (and audited as
//! cancelled) and the server returns.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use milpa::ToolRegistry;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};

use crate::jsonrpc::{
    self, ErrorObject, INVALID_REQUEST, Incoming, PARSE_ERROR, Params, Parsed, RequestId,
};
use crate::protocol::ServerOptions;
use crate::session::{
    CallFuture, Caller, Dispatch, Out, ReadParams, Reply, Route, Session, Shared, Subscription,
    write_batch,
};

/// Serves `registry` over this process's stdin and stdout with default options, until end
/// of input.
///
/// ```no_run
/// use std::sync::Arc;
/// use milpa::ToolRegistry;
///
/// #[tokio::main]
/// async fn main() -> std::io::Result<()> {
///     let registry = Arc::new(ToolRegistry::new());
///     milpa_mcp::serve_stdio(registry).await
/// }
/// ```
pub async fn serve_stdio(registry: Arc<ToolRegistry>) -> io::Result<()> {
    serve_stdio_with(registry, ServerOptions::default()).await
}

/// Serves `registry` over stdin and stdout with `options`.
pub async fn serve_stdio_with(
    registry: Arc<ToolRegistry>,
    options: ServerOptions,
) -> io::Result<()> {
    let (reader, writer) = stdio_streams()?;
    // Run on a worker thread (which also drives I/O) rather than on the thread that
    // awaits us, which for `#[tokio::main]` is outside the worker pool.
    match tokio::spawn(serve_io(registry, options, reader, writer)).await {
        Ok(result) => result,
        Err(error) => Err(io::Error::other(error)),
    }
}

/// When more input waits, how many lines are answered before their answers are written.
/// Writing every few lines lets the client read and send more while the server works
/// (measured at 32 calls in flight: about +30 % over one write per read).
const ANSWER_ROUND: usize = 8;

/// Lines answered per wake-up before the loop looks at its other work again (answers of
/// calls that waited, finished jobs), so a client that never pauses cannot starve them.
const LINES_PER_WAKE: usize = 64 * ANSWER_ROUND;

/// After end of input, how long running calls may finish before they are cancelled.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// Read buffer: a client that sends many messages at once gets them read in one go.
const READ_CAPACITY: usize = 64 * 1024;

mod spin;

use crate::session::{OutTx, out_channel};
pub use spin::STDIO_SPIN_ENV;
use spin::Spin;

/// Serves `registry` over any byte streams (stdio, a socket, an in-process duplex), one
/// JSON-RPC message per line, until `reader` ends or `writer` fails.
///
/// One task reads, answers what can be answered at once (most calls finish at their first
/// poll) and writes; calls that must wait run in their own tasks and send their responses
/// back through a channel. Input that arrives together is answered with one write per
/// `ANSWER_ROUND` lines.
pub async fn serve_io<R, W>(
    registry: Arc<ToolRegistry>,
    options: ServerOptions,
    reader: R,
    mut writer: W,
) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let max_in_flight = options.max_in_flight.max(1);
    let mut spin = Spin::new(options.spin_before_park && !spin::disabled_by_env());
    // Calls running in their own tasks at the last look: fewer now means one finished
    // (its answer is on its way), which counts as activity for the spin.
    let mut running_seen = 0;
    let mut answered = false;
    let max_message_bytes = options.max_message_bytes;
    let mut lines =
        FramedRead::with_capacity(reader, MessageLines::new(max_message_bytes), READ_CAPACITY);
    let shared = Shared::new(registry, options);
    let session = Session::new(shared.clone(), None);
    let modern = Session::modern(shared);
    let (tx, mut rx) = out_channel();
    session.forward_server_messages(Route::Channel(tx.clone()));
    let conn = Conn {
        session: session.clone(),
        modern: modern.clone(),
        tx: tx.clone(),
        route: Route::Channel(tx.clone()),
        permits: Arc::new(Semaphore::new(max_in_flight)),
        finished: Arc::new(Notify::new()),
        caller: Caller::local_process(),
        listens: Mutex::new(HashMap::new()),
    };
    let mut out: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut batch = Vec::with_capacity(64);
    let mut read_error = None;
    let mut write_error = None;
    let mut jobs: VecDeque<Job> = VecDeque::new();
    let queue_limit = max_in_flight.saturating_mul(4);
    loop {
        conn.start_jobs(&mut jobs);
        let running = max_in_flight - conn.permits.available_permits();
        if running < running_seen {
            spin.event(Instant::now());
            answered = true;
        }
        running_seen = running;
        if !out.is_empty()
            && let Err(error) = write_out(&mut writer, &mut out).await
        {
            write_error = Some(error);
            break;
        }
        if std::mem::take(&mut answered) {
            spin.answered(Instant::now());
        }
        let polling = spin.polling(Instant::now(), running > 0);
        tokio::select! {
            biased;
            _ = rx.recv_many(&mut batch, 256) => append(&mut out, &mut batch),
            () = conn.finished.notified(), if !jobs.is_empty() => {}
            // At the limit, calls queue, and input is still read: the answers the running
            // calls wait for (sampling, elicitation) arrive there. Only a long queue stops
            // reading.
            first = lines.next(), if jobs.len() < queue_limit => {
                spin.event(Instant::now());
                answered = true;
                // Lines already there are answered too, in rounds of `ANSWER_ROUND`, each
                // round written at once: the client reads (and sends more) while the next
                // round is worked on.
                let mut next = Some(first);
                let mut handled = 0;
                let mut end = None;
                'rounds: while let Some(item) = next.take() {
                    match item {
                        Some(Ok(Line::Message(line))) => {
                            // Blank lines are skipped.
                            if !line.bytes().all(|b| b.is_ascii_whitespace()) {
                                conn.handle_line(&line, &mut out, &mut jobs);
                            }
                        }
                        Some(Ok(refused)) => {
                            if let Some(reply) = refusal_of(&refused, max_message_bytes) {
                                push_line(&mut out, &reply);
                            }
                        }
                        Some(Err(error)) => {
                            end = Some(Some(error));
                            break 'rounds;
                        }
                        None => {
                            end = Some(None);
                            break 'rounds;
                        }
                    }
                    handled += 1;
                    if handled % ANSWER_ROUND == 0 && !out.is_empty()
                        && let Err(error) = write_out(&mut writer, &mut out).await {
                            write_error = Some(error);
                            break 'rounds;
                        }
                    if handled < LINES_PER_WAKE && jobs.len() < queue_limit {
                        next = lines.next().now_or_never();
                    }
                }
                match end {
                    Some(None) => break,
                    Some(Some(error)) => {
                        read_error = Some(error);
                        break;
                    }
                    None if write_error.is_some() => break,
                    None => {}
                }
            },
            // Nothing ready yet, shortly after an answer, while spinning pays (`spin`):
            // yield instead of parking. Tokio then polls the reactor without sleeping and
            // runs us again, so input that arrives now is read without a thread wake-up.
            () = tokio::task::yield_now(), if polling => {}
        }
    }
    // Nobody can answer requests to the client any more.
    session.fail_pending();
    if write_error.is_some() {
        session.shutdown();
        modern.shutdown();
    } else {
        // Running calls get `DRAIN_TIMEOUT` to finish, then are cancelled (and audited so).
        let mut cancel_at = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        let mut cancelled = false;
        loop {
            conn.start_jobs(&mut jobs);
            if jobs.is_empty() && conn.permits.available_permits() == max_in_flight {
                break;
            }
            if !out.is_empty()
                && let Err(error) = write_out(&mut writer, &mut out).await
            {
                // Shut down below, after the loop.
                write_error = Some(error);
                break;
            }
            tokio::select! {
                biased;
                _ = rx.recv_many(&mut batch, 256) => append(&mut out, &mut batch),
                () = conn.finished.notified() => {}
                () = tokio::time::sleep_until(cancel_at) => {
                    if cancelled {
                        break;
                    }
                    session.shutdown();
                    modern.shutdown();
                    // Queued calls were never started: they end as cancelled, unanswered.
                    jobs.clear();
                    cancelled = true;
                    cancel_at = tokio::time::Instant::now() + Duration::from_secs(5);
                }
            }
        }
        session.shutdown();
        modern.shutdown();
        while let Ok(message) = rx.try_recv() {
            batch.push(message);
        }
        append(&mut out, &mut batch);
        if write_error.is_none()
            && !out.is_empty()
            && let Err(error) = write_out(&mut writer, &mut out).await
        {
            write_error = Some(error);
        }
    }
    drop(tx);
    match (read_error, write_error) {
        (Some(error), _) => Err(error),
        (None, Some(error)) if error.kind() != io::ErrorKind::BrokenPipe => Err(error),
        _ => {
            let _ = writer.shutdown().await;
            Ok(())
        }
    }
}

/// One line of input as the connection sees it.
#[derive(Debug)]
enum Line {
    /// A message to parse and handle.
    Message(String),
    /// Longer than the limit: refused (the codec skips it up to its newline).
    TooLong,
    /// Not UTF-8: refused as a parse error.
    NotUtf8,
}

/// [`LinesCodec`] with refused lines as items instead of decoder errors.
///
/// `FramedRead` treats a decoder error as the end of a frame run: it yields the error, then
/// one `None`, and when that happens while it drains the input left at end of input, the
/// lines still buffered behind a second refused line are dropped unread. Refusals as items
/// keep the stream going; its only errors are read errors.
struct MessageLines {
    codec: LinesCodec,
}

impl MessageLines {
    fn new(max: usize) -> Self {
        MessageLines {
            codec: LinesCodec::new_with_max_length(max),
        }
    }

    fn line(decoded: Result<Option<String>, LinesCodecError>) -> io::Result<Option<Line>> {
        match decoded {
            Ok(line) => Ok(line.map(Line::Message)),
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
            // The only `InvalidData` the codec makes: a line that is not UTF-8 (it has been
            // consumed).
            Err(LinesCodecError::Io(error)) if error.kind() == io::ErrorKind::InvalidData => {
                Ok(Some(Line::NotUtf8))
            }
            Err(LinesCodecError::Io(error)) => Err(error),
        }
    }
}

impl Decoder for MessageLines {
    type Item = Line;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        Self::line(self.codec.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        Self::line(self.codec.decode_eof(buf))
    }
}

/// The answer to a refused line.
fn refusal_of(line: &Line, max: usize) -> Option<String> {
    match line {
        Line::Message(_) => None,
        Line::TooLong => Some(refusal(
            INVALID_REQUEST,
            &format!("Invalid Request: message larger than {max} bytes"),
        )),
        Line::NotUtf8 => Some(refusal(
            PARSE_ERROR,
            "Parse error: the message is not UTF-8",
        )),
    }
}

fn refusal(code: jsonrpc::ErrorCode, message: &str) -> String {
    jsonrpc::error_response(None, &ErrorObject::new(code, message))
}

/// Writes a reply straight into the output buffer, and a newline.
fn push_reply(out: &mut Vec<u8>, reply: &Reply) {
    reply.write_to(out);
    out.push(b'\n');
}

fn push_line(out: &mut Vec<u8>, message: &str) {
    out.extend_from_slice(message.as_bytes());
    out.push(b'\n');
}

fn append(out: &mut Vec<u8>, batch: &mut Vec<Out>) {
    for message in batch.drain(..) {
        if let Out::Msg(message) = message {
            push_line(out, &message);
        }
    }
}

async fn write_out<W: AsyncWrite + Unpin>(writer: &mut W, out: &mut Vec<u8>) -> io::Result<()> {
    let result = async {
        writer.write_all(out).await?;
        writer.flush().await
    }
    .await;
    out.clear();
    if let Err(error) = &result {
        tracing::debug!(target: "milpa_mcp", %error, "output closed");
    }
    result
}

/// Work that waits for a free slot (see [`ServerOptions::max_in_flight`]).
enum Job {
    Single(CallFuture),
    Batch(Vec<Reply>, Vec<CallFuture>),
}

/// One stdio connection's dispatching state.
struct Conn {
    session: Arc<Session>,
    /// Serves 2026-07-28 requests (those with a `_meta` protocol version): each declares
    /// itself, so they share no state with the `initialize`d session.
    modern: Arc<Session>,
    tx: OutTx,
    /// Where a request's messages go: `tx`, the writer's channel.
    route: Route,
    permits: Arc<Semaphore>,
    finished: Arc<Notify>,
    caller: Caller,
    /// Open 2026-07-28 subscriptions, by request id: sending ends one (the client's
    /// `notifications/cancelled` naming it); the connection closing ends them all.
    listens: Mutex<HashMap<RequestId, oneshot::Sender<()>>>,
}

impl Conn {
    /// Handles one line.
    fn handle_line(&self, line: &str, out: &mut Vec<u8>, jobs: &mut VecDeque<Job>) {
        let max_batch = self.session.shared.options.max_batch_len;
        self.handle(
            jsonrpc::parse_limited(line.as_bytes(), max_batch),
            out,
            jobs,
        );
    }

    /// Answers what can be answered now; queues calls that must wait.
    fn handle(&self, parsed: Parsed, out: &mut Vec<u8>, jobs: &mut VecDeque<Job>) {
        match parsed {
            Parsed::Single(message) => {
                let dispatch = match message {
                    // Read once: what tells the revision apart is what the dispatch reads.
                    Ok(Incoming::Request { id, method, params }) => {
                        let params = ReadParams::for_era(&method, params);
                        let (session, stateless) = if params.is_stateless() {
                            (&self.modern, true)
                        } else {
                            (&self.session, false)
                        };
                        let route = self.route.clone();
                        let dispatch = if stateless {
                            session.dispatch_stateless(
                                id.clone(),
                                &method,
                                params,
                                &self.caller,
                                route,
                                None,
                            )
                        } else {
                            session.dispatch(id.clone(), &method, params, &self.caller, route)
                        };
                        if let Dispatch::Listen(subscription) = dispatch {
                            self.listen(id, subscription, out);
                            return;
                        }
                        Some(dispatch)
                    }
                    Ok(Incoming::Notification { method, params }) => {
                        if method == "notifications/cancelled" {
                            self.end_listen(params.as_ref());
                        }
                        // `notifications/cancelled` may name a call of either era.
                        self.modern.notify(&method, params.clone());
                        self.session.notify(&method, params);
                        None
                    }
                    message => self.session.handle(message, &self.caller, &self.route),
                };
                match dispatch {
                    // The session revisions have no subscriptions: their dispatcher
                    // never opens one.
                    None | Some(Dispatch::Listen(_)) => {}
                    Some(Dispatch::Reply(reply)) => push_reply(out, &reply),
                    Some(Dispatch::Call(call, _)) if !jobs.is_empty() => {
                        jobs.push_back(Job::Single(call))
                    }
                    Some(Dispatch::Call(mut call, _)) => {
                        // Most calls (sync tools, quick async ones) finish at their first poll:
                        // answer them inline, spawn only those that must wait.
                        if let Some(done) = (&mut call).now_or_never() {
                            if let Some(reply) = done {
                                push_reply(out, &reply);
                            }
                            return;
                        }
                        jobs.push_back(Job::Single(call));
                    }
                }
            }
            Parsed::Batch(items) => {
                let mut replies = Vec::new();
                let mut calls = Vec::new();
                for item in items {
                    match self.session.handle(item, &self.caller, &self.route) {
                        Some(Dispatch::Reply(reply)) => replies.push(reply),
                        Some(Dispatch::Call(call, _)) => calls.push(call),
                        None | Some(Dispatch::Listen(_)) => {}
                    }
                }
                if calls.is_empty() {
                    if !replies.is_empty() {
                        write_batch(out, &replies);
                        out.push(b'\n');
                    }
                    return;
                }
                jobs.push_back(Job::Batch(replies, calls));
            }
        }
    }

    /// Opens an admitted `subscriptions/listen` subscription: the acknowledgement now,
    /// then its notifications through the writer until the client cancels the request.
    fn listen(&self, id: RequestId, subscription: Subscription, out: &mut Vec<u8>) {
        // Watched before the acknowledgement can reach the client (see `Subscription::watch`).
        let listening = subscription.watch(&self.modern.shared.registry);
        push_line(out, &listening.acknowledgement());
        let (stop, stopped) = oneshot::channel::<()>();
        {
            let mut listens = self.listens.lock();
            // Ended ones (their receiver gone) are dropped as new ones come.
            listens.retain(|_, stop| !stop.is_closed());
            listens.insert(id, stop);
        }
        let tx = self.tx.clone();
        tokio::spawn(listening.forward(tx, async {
            let _ = stopped.await;
        }));
    }

    /// Ends the subscription a `notifications/cancelled` names, if it is one.
    fn end_listen(&self, params: Option<&Params>) {
        let Some(id) = params
            .map(Params::to_value)
            .and_then(|p| p.get("requestId").and_then(RequestId::from_value))
        else {
            return;
        };
        let mut listens = self.listens.lock();
        if let Some(stop) = listens.remove(&id) {
            let _ = stop.send(());
        }
    }

    /// Spawns queued jobs while permits are free.
    fn start_jobs(&self, jobs: &mut VecDeque<Job>) {
        while !jobs.is_empty() {
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                return;
            };
            if let Some(job) = jobs.pop_front() {
                self.spawn(job, permit);
            }
        }
    }

    fn spawn(&self, job: Job, permit: OwnedSemaphorePermit) {
        let tx = self.tx.clone();
        let finished = self.finished.clone();
        tokio::spawn(async move {
            match job {
                Job::Single(call) => {
                    if let Some(reply) = call.await {
                        let _ = tx.send(Out::Msg(reply.to_json()));
                    }
                }
                Job::Batch(mut replies, calls) => {
                    replies.extend(
                        futures_util::future::join_all(calls)
                            .await
                            .into_iter()
                            .flatten(),
                    );
                    if !replies.is_empty() {
                        let _ = tx.send(Out::Msg(crate::session::batch_json(&replies)));
                    }
                }
            }
            drop(permit);
            finished.notify_one();
        });
    }
}

type BoxRead = Box<dyn AsyncRead + Unpin + Send>;
type BoxWrite = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin and stdout as async streams on the reactor when they are pipes or sockets.
fn stdio_streams() -> io::Result<(BoxRead, BoxWrite)> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let reader: BoxRead = match std::io::stdin().as_fd().try_clone_to_owned() {
            Ok(fd) => unix::reader(fd).unwrap_or_else(|| Box::new(tokio::io::stdin())),
            Err(_) => Box::new(tokio::io::stdin()),
        };
        let writer: BoxWrite = match std::io::stdout().as_fd().try_clone_to_owned() {
            Ok(fd) => unix::writer(fd).unwrap_or_else(|| Box::new(tokio::io::stdout())),
            Err(_) => Box::new(tokio::io::stdout()),
        };
        Ok((reader, writer))
    }
    #[cfg(not(unix))]
    {
        Ok((Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout())))
    }
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::io::{self, Read};
    use std::os::fd::OwnedFd;
    use std::os::unix::fs::FileTypeExt;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, ReadBuf};
    use tokio::net::unix::pipe;

    use super::{BoxRead, BoxWrite};

    enum Kind {
        Fifo,
        Socket,
        Other,
    }

    fn kind(file: &File) -> Kind {
        match file.metadata() {
            Ok(meta) if meta.file_type().is_fifo() => Kind::Fifo,
            Ok(meta) if meta.file_type().is_socket() => Kind::Socket,
            _ => Kind::Other,
        }
    }

    fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true).ok()?;
        tokio::net::UnixStream::from_std(stream).ok()
    }

    pub(super) fn reader(fd: OwnedFd) -> Option<BoxRead> {
        let file = File::from(fd);
        // A second descriptor for the same open pipe or socket (so also non-blocking).
        let direct = file.try_clone().ok()?;
        let registered = match kind(&file) {
            Kind::Fifo => Registered::Pipe(pipe::Receiver::from_file(file).ok()?),
            Kind::Socket => Registered::Socket(socket(OwnedFd::from(file))?),
            Kind::Other => return None,
        };
        Some(Box::new(EagerReader {
            registered,
            direct,
            scratch: vec![0; READ_WINDOW].into_boxed_slice(),
        }))
    }

    /// Input registered with the reactor.
    enum Registered {
        Pipe(pipe::Receiver),
        Socket(tokio::net::UnixStream),
    }

    impl Registered {
        fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match self {
                Registered::Pipe(pipe) => pipe.poll_read_ready(cx),
                Registered::Socket(socket) => socket.poll_read_ready(cx),
            }
        }

        fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
            match self {
                Registered::Pipe(pipe) => pipe.try_read(buf),
                Registered::Socket(socket) => socket.try_read(buf),
            }
        }
    }

    /// The most one read takes in. `FramedRead` hands each poll the whole spare capacity
    /// of its buffer (up to `READ_CAPACITY`), uninitialized, and `read(2)` on a safe slice
    /// needs it initialized: zeroing it on every poll, the idle poll's empty reads
    /// included, was `memset` at about 10 % of `milpa proxy`'s CPU time in `perf` at one
    /// call in flight, and still 8.7 % when only this window was zeroed. So the reader
    /// reads into its own scratch buffer, zeroed once, and copies what came (a message is
    /// a few hundred bytes; an empty poll copies nothing). A 16 KiB window still takes in
    /// many messages per read.
    const READ_WINDOW: usize = 16 * 1024;

    /// Non-blocking input on the reactor that tries `read(2)` before it asks the reactor
    /// for readiness.
    ///
    /// Tokio reads only once the reactor has reported readiness, and with several worker
    /// threads the reactor may be parked on another thread: a connection that polls its
    /// input for a moment before parking (`IDLE_POLL`) would then spin
    /// without seeing data that is already there. Reading first makes each poll a real
    /// look at the pipe.
    struct EagerReader {
        registered: Registered,
        direct: File,
        /// `READ_WINDOW` bytes, initialized once: what each read fills.
        scratch: Box<[u8]>,
    }

    impl AsyncRead for EagerReader {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            let window = buf.remaining().min(READ_WINDOW);
            let scratch = &mut this.scratch[..window];
            loop {
                match (&this.direct).read(scratch) {
                    Ok(n) => {
                        buf.put_slice(&scratch[..n]);
                        return Poll::Ready(Ok(()));
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) if error.kind() != io::ErrorKind::WouldBlock => {
                        return Poll::Ready(Err(error));
                    }
                    Err(_) => {}
                }
                std::task::ready!(this.registered.poll_read_ready(cx))?;
                // Clears the reactor's readiness when there is nothing after all, so the
                // next `poll_read_ready` waits for a new event.
                match this.registered.try_read(scratch) {
                    Ok(n) => {
                        buf.put_slice(&scratch[..n]);
                        return Poll::Ready(Ok(()));
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(error) => return Poll::Ready(Err(error)),
                }
            }
        }
    }

    pub(super) fn writer(fd: OwnedFd) -> Option<BoxWrite> {
        let file = File::from(fd);
        match kind(&file) {
            Kind::Fifo => pipe::Sender::from_file(file)
                .ok()
                .map(|w| Box::new(w) as BoxWrite),
            Kind::Socket => socket(OwnedFd::from(file)).map(|s| Box::new(s) as BoxWrite),
            Kind::Other => None,
        }
    }

    #[cfg(test)]
    mod tests {
        use std::io::Write;
        use std::os::fd::OwnedFd;
        use std::time::Duration;

        use tokio::io::AsyncReadExt;

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn reads_what_is_there_waits_for_more_and_sees_the_end() {
            let (read_end, mut write_end) = std::io::pipe().unwrap();
            let mut reader = super::reader(OwnedFd::from(read_end)).expect("a pipe is async");
            let mut buf = [0u8; 64];

            write_end.write_all(b"one\n").unwrap();
            let n = reader.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"one\n");

            // Nothing there yet: the read waits on the reactor until the writer sends.
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                write_end.write_all(b"two\n").unwrap();
                // Dropping the write end is the end of input.
            });
            let n = reader.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"two\n");
            writer.join().unwrap();
            assert_eq!(reader.read(&mut buf).await.unwrap(), 0);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_message_larger_than_a_read_window_arrives_whole_and_in_order() {
            let (read_end, mut write_end) = std::io::pipe().unwrap();
            let reader = super::reader(OwnedFd::from(read_end)).expect("a pipe is async");
            let big = format!("{{\"data\":\"{}\"}}", "x".repeat(3 * super::READ_WINDOW));
            let sent = format!("{big}\n{{\"after\":1}}\n");
            let writer = std::thread::spawn(move || write_end.write_all(sent.as_bytes()));
            let mut lines = tokio_util::codec::FramedRead::with_capacity(
                reader,
                super::super::MessageLines::new(1 << 20),
                super::super::READ_CAPACITY,
            );
            let mut seen = Vec::new();
            while let Some(line) = futures_util::StreamExt::next(&mut lines).await {
                match line.unwrap() {
                    super::super::Line::Message(message) => seen.push(message),
                    other => panic!("refused: {other:?}"),
                }
            }
            writer.join().unwrap().unwrap();
            assert_eq!(seen, [big, "{\"after\":1}".to_owned()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use tokio_util::codec::FramedRead;

    use super::{Line, MessageLines, refusal_of};

    /// What the connection sees of `input`: messages, refusals (by code) and the end.
    async fn items(input: &[u8], max: usize, capacity: usize) -> Vec<String> {
        let mut lines = FramedRead::with_capacity(input, MessageLines::new(max), capacity);
        let mut seen = Vec::new();
        while let Some(line) = lines.next().await {
            let line = line.expect("no read error");
            if let Some(reply) = refusal_of(&line, max) {
                let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
                seen.push(format!("refused {}", reply["error"]["code"]));
            } else if let Line::Message(message) = line {
                seen.push(message);
            }
        }
        seen.push("end".into());
        seen
    }

    #[tokio::test]
    async fn over_long_and_non_utf8_lines_are_refused_once_and_reading_goes_on() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"a\":1}\r\n\n  \n");
        input.extend_from_slice(&[b'x'; 100]);
        input.extend_from_slice(b"\n{\"b\":2}\n\xff\xfe\n");
        input.extend_from_slice(&[b'y'; 50]);
        input.extend_from_slice(b"\n{\"c\":3}");
        // A small read buffer: the long lines arrive over several reads.
        for capacity in [8, 64, 4096] {
            assert_eq!(
                items(&input, 16, capacity).await,
                [
                    "{\"a\":1}",
                    "",
                    "  ",
                    "refused -32600",
                    "{\"b\":2}",
                    "refused -32700",
                    "refused -32600",
                    "{\"c\":3}",
                    "end"
                ],
                "read buffer {capacity}"
            );
        }
        // Exactly at the limit is fine; an over-long last line without a newline is
        // refused and then the input ends.
        let at_limit = format!("{}\n{}", "z".repeat(16), "w".repeat(40));
        assert_eq!(
            items(at_limit.as_bytes(), 16, 8).await,
            ["z".repeat(16).as_str(), "refused -32600", "end"]
        );
    }
}
