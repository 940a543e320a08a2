//! Accepting HTTP/1.1 connections with limits, so one client cannot hold the server: a cap on open
//! connections below the process's file limit, a deadline for a request's head, a bound on its
//! header count and size, an idle timeout, and problem+json bodies for the errors hyper answers
//! by itself before any handler runs (a malformed request line, too many or too large headers).
//!
//! A connection closes lingeringly: its write side is shut first, then what the client still
//! sends is read and dropped (bounded in bytes and time) until it closes its side. A request
//! refused before its body was read (413 from `Content-Length`) leaves the body coming; closing
//! with it unread would reset the connection, and a client that sends its whole body before
//! reading (Python's `urllib`, `requests`) would see a broken pipe instead of the answer.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::server::conn::http1::Builder;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::config::ConnectionConfig;
use crate::error::{ApiError, ErrorCode};

/// How long in-flight requests may take to finish after a shutdown signal.
const DRAIN_SECS: u64 = 30;

/// At a close, the most a client's leftover bytes are read for, in all.
const LINGER_MAX_BYTES: usize = 8 * 1024 * 1024;
/// At a close, the longest the leftover is read for.
const LINGER_MAX_TIME: Duration = Duration::from_secs(5);
/// At a close, the longest the client may send nothing before it is closed on.
const LINGER_QUIET: Duration = Duration::from_millis(500);

/// The connection limits in force, resolved from configuration and the process's file limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_headers: usize,
    pub max_header_bytes: usize,
    pub max_connections: usize,
}

impl Limits {
    /// `max_connections` 0 means "derived from the file limit": three quarters of the soft
    /// `RLIMIT_NOFILE` (the rest is for the database, outbound calls and logs), at most 10,000.
    /// A configured value is also held below the file limit.
    pub fn resolve(config: &ConnectionConfig, request_timeout: Duration) -> Self {
        let file_limit = open_file_limit();
        let ceiling = file_limit.map_or(10_000, |limit| (limit / 4 * 3).max(16));
        let max_connections = match config.max_connections {
            0 => ceiling.min(10_000),
            wanted => wanted.min(ceiling),
        };
        // An idle connection is one with no bytes moving; a request may run for its whole
        // timeout without any, so the idle timeout is never shorter than that.
        let idle_timeout = Duration::from_secs(config.idle_timeout_secs)
            .max(request_timeout + Duration::from_secs(5));
        Self {
            header_read_timeout: Duration::from_secs(config.header_read_timeout_secs.max(1)),
            idle_timeout,
            max_headers: config.max_headers.max(8),
            max_header_bytes: config.max_header_bytes.max(8 * 1024),
            max_connections,
        }
    }
}

/// The soft limit on open files, where the platform tells it.
fn open_file_limit() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        limit.current.and_then(|n| usize::try_from(n).ok())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Serve the current router of `routers` on `listener` within `limits` until `shutdown`
/// completes, then let in-flight requests finish (up to 30 s).
pub async fn serve(
    listener: TcpListener,
    routers: tokio::sync::watch::Receiver<Router>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut builder = Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_headers(limits.max_headers)
        .max_header_size(limits.max_header_bytes)
        .max_buf_size(limits.max_header_bytes.max(8 * 1024) + 1024);
    let builder = Arc::new(builder);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // Wait for a free slot before accepting: excess clients queue in the kernel's backlog
        // instead of taking file descriptors.
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors or a connection reset before accept: wait, retry.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // Each request goes to the router current when it arrives: a connection opened while
        // the server was starting sees the whole API once it is up.
        let routers = routers.clone();
        let service = TowerToHyperService::new(tower::service_fn(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request
                    .extensions_mut()
                    .insert(ConnectInfo::<SocketAddr>(peer));
                let router = routers.borrow().clone();
                router.oneshot(request.map(axum::body::Body::new))
            },
        ));
        let io = TokioIo::new(GuardedIo::new(
            stream,
            limits.idle_timeout,
            limits.max_header_bytes,
        ));
        let connection = builder.serve_connection(io, service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, %peer, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(DRAIN_SECS), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish within {DRAIN_SECS} s");
    }
    Ok(())
}

/// A connection's byte stream with an idle deadline (no bytes read or written for that long
/// closes it) and problem+json bodies in place of hyper's empty automatic error answers.
struct GuardedIo<T> {
    inner: T,
    idle_timeout: Duration,
    idle: Pin<Box<Sleep>>,
    /// A replacement answer still to be written, and how far it is.
    pending: Option<(Vec<u8>, usize)>,
    /// How long the request line of the request being read is so far, and whether it ended:
    /// hyper answers 431 when the head outgrows its limit, which is a 414 when the request line
    /// alone did.
    line_bytes: usize,
    line_done: bool,
    /// The head's size limit.
    max_head: usize,
    /// Set once the write side is shut: the close lingers (`LINGER_*`).
    linger: Option<Linger>,
}

/// A lingering close under way.
struct Linger {
    deadline: Pin<Box<Sleep>>,
    discarded: usize,
}

impl<T> GuardedIo<T> {
    fn new(inner: T, idle_timeout: Duration, max_head: usize) -> Self {
        Self {
            inner,
            idle_timeout,
            idle: Box::pin(tokio::time::sleep(idle_timeout)),
            pending: None,
            line_bytes: 0,
            line_done: false,
            max_head,
            linger: None,
        }
    }

    fn touch(&mut self) {
        let deadline = Instant::now() + self.idle_timeout;
        self.idle.as_mut().reset(deadline);
    }

    /// An answer is being written: what is read next starts a new request.
    fn next_request(&mut self) {
        self.line_bytes = 0;
        self.line_done = false;
    }

    /// Whether the request line alone is as long as the whole head may be.
    fn target_too_long(&self) -> bool {
        self.line_bytes >= self.max_head
    }
}

impl<T: AsyncRead + Unpin> GuardedIo<T> {
    /// Read and drop what the client still sends, until it closes its side, fails, has sent
    /// `LINGER_MAX_BYTES`, or `LINGER_MAX_TIME` has passed or `LINGER_QUIET` without a byte.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Self {
            inner,
            idle,
            linger,
            ..
        } = self;
        let Some(linger) = linger else {
            return Poll::Ready(());
        };
        let mut scratch = [0u8; 8 * 1024];
        loop {
            if linger.deadline.as_mut().poll(cx).is_ready() || idle.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut *inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    linger.discarded += buf.filled().len();
                    if linger.discarded >= LINGER_MAX_BYTES {
                        return Poll::Ready(());
                    }
                    idle.as_mut().reset(Instant::now() + LINGER_QUIET);
                }
                // The client closed its side, or the connection failed: nothing more to wait for.
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> GuardedIo<T> {
    /// Write what is left of a replacement answer.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.pending {
            if *written >= bytes.len() {
                self.pending = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Owe `answer` in place of a write of `taken` bytes: report those as written, and write
    /// the answer now or on the next flush.
    fn answer_instead(
        &mut self,
        cx: &mut Context<'_>,
        answer: Vec<u8>,
        taken: usize,
    ) -> Poll<io::Result<usize>> {
        self.pending = Some((answer, 0));
        self.touch();
        if let Poll::Ready(Err(err)) = self.drain(cx) {
            return Poll::Ready(Err(err));
        }
        Poll::Ready(Ok(taken))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for GuardedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.touch();
                if !this.line_done {
                    let read = &buf.filled()[before..];
                    match read.iter().position(|byte| *byte == b'\n') {
                        Some(end) => {
                            this.line_bytes += end;
                            this.line_done = true;
                        }
                        None => this.line_bytes += read.len(),
                    }
                }
                Poll::Ready(result)
            }
            Poll::Pending => match this.idle.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle for too long",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for GuardedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.drain(cx))?;
        if let Some(answer) = automatic_error_answer(buf, this.target_too_long()) {
            return this.answer_instead(cx, answer, buf.len());
        }
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.touch();
        this.next_request();
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.drain(cx))?;
        let non_empty: Vec<&io::IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).collect();
        if let [only] = non_empty.as_slice()
            && let Some(answer) = automatic_error_answer(only, this.target_too_long())
        {
            return this.answer_instead(cx, answer, only.len());
        }
        let n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        this.touch();
        this.next_request();
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Shut the write side (the client reads the answer to its end), then linger.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.linger.is_none() {
            ready!(this.drain(cx))?;
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            this.idle.as_mut().reset(Instant::now() + LINGER_QUIET);
            this.linger = Some(Linger {
                deadline: Box::pin(tokio::time::sleep(LINGER_MAX_TIME)),
                discarded: 0,
            });
        }
        ready!(this.poll_linger(cx));
        Poll::Ready(Ok(()))
    }
}

/// hyper answers a request it cannot parse by itself, with an empty body: `HTTP/1.1 400`, `414`
/// or `431` and `content-length: 0`, the whole answer in one write. The handlers never answer
/// these statuses without a body, so such a write is hyper's; it becomes the same status with a
/// problem+json body (and the connection closes, as hyper closes it). A 431 for a head whose
/// request line alone filled the limit (`target_too_long`) is the request target's: 414.
fn automatic_error_answer(buf: &[u8], target_too_long: bool) -> Option<Vec<u8>> {
    if buf.len() > 256 || !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head = std::str::from_utf8(buf).ok()?;
    let status_line = head.strip_prefix("HTTP/1.1 ")?;
    let empty = head
        .to_ascii_lowercase()
        .contains("\r\ncontent-length: 0\r\n");
    if !empty {
        return None;
    }
    let error = match status_line.get(..4)? {
        "400 " => ApiError::new(
            ErrorCode::MalformedRequest,
            "the request is not valid HTTP/1.1 (request line or a header is malformed)",
        ),
        "414 " => ApiError::new(ErrorCode::UriTooLong, "the request target is too long"),
        "431 " if target_too_long => {
            ApiError::new(ErrorCode::UriTooLong, "the request target is too long")
        }
        "431 " => ApiError::new(
            ErrorCode::HeadersTooLarge,
            "the request has too many header fields, or they are too large",
        ),
        _ => return None,
    };
    let status = error.code.status();
    let body = serde_json::to_vec(&error.body()).ok()?;
    let mut answer = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error"),
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_empty_error_answers_get_problem_bodies() {
        let too_large =
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        for (head, line_open, status, code) in [
            (
                "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Tue, 24 Nov 2026 05:00:00 GMT\r\n\r\n",
                false,
                "400",
                "malformed_request",
            ),
            (
                "HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: x\r\n\r\n",
                false,
                "414",
                "uri_too_long",
            ),
            (too_large, false, "431", "headers_too_large"),
            // The head outgrew the buffer before its request line ended: the target did.
            (too_large, true, "414", "uri_too_long"),
        ] {
            let answer = automatic_error_answer(head.as_bytes(), line_open).expect("replaced");
            let text = String::from_utf8(answer).expect("utf-8");
            assert!(text.starts_with(&format!("HTTP/1.1 {status} ")), "{text}");
            assert!(text.contains("content-type: application/problem+json\r\n"));
            let (_, body) = text.split_once("\r\n\r\n").expect("a body");
            let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
            assert_eq!(body["code"], code);
            assert_eq!(body["status"].to_string(), status);
        }
    }

    #[test]
    fn answers_with_bodies_and_other_statuses_pass_through() {
        for head in [
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\ncontent-length: 90\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            "{\"a\": \"HTTP/1.1 400 \"}",
        ] {
            assert!(
                automatic_error_answer(head.as_bytes(), true).is_none(),
                "{head}"
            );
        }
    }

    #[tokio::test]
    async fn a_close_reads_what_the_client_still_sends_within_bounds() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let guarded = |stream| GuardedIo::new(stream, Duration::from_secs(60), 1024);

        // The client sends the rest of its body, then reads the answer to its end and closes.
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut server = guarded(server);
        server.write_all(b"answer").await.expect("write");
        let client = tokio::spawn(async move {
            client
                .write_all(&[b'x'; 300_000])
                .await
                .expect("all of it is read");
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.expect("read");
            answer
        });
        server.shutdown().await.expect("shutdown");
        assert_eq!(client.await.expect("client"), b"answer");
        assert_eq!(server.linger.as_ref().map(|l| l.discarded), Some(300_000));

        // A client that sends without end is read up to the byte bound.
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut server = guarded(server);
        let flood =
            tokio::spawn(async move { while client.write_all(&[b'x'; 8192]).await.is_ok() {} });
        server.shutdown().await.expect("shutdown");
        let discarded = server.linger.as_ref().map_or(0, |l| l.discarded);
        assert!((LINGER_MAX_BYTES..LINGER_MAX_BYTES + 8192).contains(&discarded));
        drop(server);
        flood.await.expect("the flood ends with the connection");

        // One that sends nothing is closed on after the quiet time; one that trickles, after
        // the time bound.
        let (server, _client) = tokio::io::duplex(1024);
        let started = Instant::now();
        guarded(server).shutdown().await.expect("shutdown");
        let waited = started.elapsed();
        assert!(
            waited >= LINGER_QUIET && waited < LINGER_MAX_TIME,
            "{waited:?}"
        );
        let (server, mut client) = tokio::io::duplex(1024);
        let trickle = tokio::spawn(async move {
            while client.write_all(b"x").await.is_ok() {
                tokio::time::sleep(LINGER_QUIET / 2).await;
            }
        });
        let started = Instant::now();
        let mut server = guarded(server);
        server.shutdown().await.expect("shutdown");
        let waited = started.elapsed();
        assert!(
            waited >= LINGER_MAX_TIME && waited < LINGER_MAX_TIME + LINGER_QUIET,
            "{waited:?}"
        );
        drop(server);
        trickle.await.expect("the trickle ends with the connection");
    }

    #[test]
    fn the_connection_cap_stays_below_the_file_limit() {
        let config = ConnectionConfig {
            header_read_timeout_secs: 15,
            idle_timeout_secs: 10,
            max_headers: 100,
            max_header_bytes: 65_536,
            max_connections: usize::MAX,
        };
        let limits = Limits::resolve(&config, Duration::from_secs(60));
        if let Some(files) = open_file_limit() {
            assert!(limits.max_connections < files, "{limits:?}");
        }
        assert_eq!(
            limits.idle_timeout,
            Duration::from_secs(65),
            "never below a request's own timeout"
        );
    }
}
