//! The accept loop: every TCP connection the server holds, and the limits that keep a
//! flood of them from starving the process (issue 17, ADR 0025).
//!
//! axum's own `serve` has no timers and no caps, so this module accepts and serves
//! HTTP/1.1 connections itself with hyper, and keeps a registry of what is open:
//!
//! - **Connection caps.** At most `max_connections` in total and
//!   `max_connections_per_address` from one address (an IPv6 client counts by its /64,
//!   which one host usually owns whole). A connection over the per-address cap is
//!   answered with a canned 429 `RATE_LIMITED` envelope and closed. At the total cap the
//!   oldest connection with no request in flight (idle, or still trickling its request
//!   head) is closed to make room, so idle sockets can never lock out a real request; only
//!   when every open connection is serving a request is the new one refused. Refusals are
//!   logged at most once per [`LOG_EVERY`] per kind, with a count, so the log cannot be
//!   flooded either.
//! - **Timeouts.** A connection with no request in flight whose next request has not
//!   begun is closed after `idle_timeout`; once its first byte has arrived, the request
//!   head must be complete within `header_read_timeout` (the slowloris defence); a
//!   request body must arrive within `idle_timeout` of its head. Nothing interrupts a
//!   request once its handler runs: handlers and SSE streams have their own limits and
//!   heartbeats.
//!
//! What must not live here: routing, authentication, anything a handler decides.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Refusals of one kind are logged at most this often (with how many there were).
pub const LOG_EVERY: Duration = Duration::from_secs(10);
/// How often the allocator is asked to give freed memory back, when connections closed.
const TRIM_EVERY: Duration = Duration::from_secs(5);
/// How many connections must have closed since the last time to ask.
const TRIM_AFTER_CLOSED: u64 = 64;

/// How many connections the server holds and for how long (`[server]` in the
/// configuration; defaults in `docs/security.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time from a request's first byte until its head is complete.
    pub header_read_timeout: Duration,
    /// Time a connection may wait with no request in flight and none begun; also the
    /// time a request body has to arrive in full.
    pub idle_timeout: Duration,
    /// Connections open at once, in total.
    pub max_connections: usize,
    /// Connections open at once from one address (an IPv6 /64).
    pub max_connections_per_address: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_connections_per_address: 256,
        }
    }
}

/// The address a per-address cap counts under: IPv4 whole, IPv6 by its /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AddressKey(pub(crate) IpAddr);

impl AddressKey {
    /// The key `addr` counts under.
    pub(crate) fn of(addr: SocketAddr) -> Self {
        match addr.ip() {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let bits = u128::from(v6) & !((1u128 << 64) - 1);
                    Self(IpAddr::V6(bits.into()))
                }
            },
            ip => Self(ip),
        }
    }
}

/// What one connection is doing, for its timeouts and for eviction.
#[derive(Debug)]
struct Activity {
    /// Requests whose response (body included) is not finished.
    in_flight: usize,
    /// When the connection last became idle (opened, or finished a response).
    idle_since: Instant,
    /// When the first byte of the next request arrived, while idle.
    heard_at: Option<Instant>,
}

/// One open connection.
#[derive(Debug)]
struct Connection {
    id: u64,
    key: AddressKey,
    activity: Mutex<Activity>,
    /// Cancelled to close the connection to admit another (only while idle).
    evicted: CancellationToken,
}

impl Connection {
    fn activity(&self) -> MutexGuard<'_, Activity> {
        self.activity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn heard(&self) {
        let mut activity = self.activity();
        if activity.in_flight == 0 && activity.heard_at.is_none() {
            activity.heard_at = Some(Instant::now());
        }
    }

    fn begin_request(self: &Arc<Self>) -> RequestGuard {
        let mut activity = self.activity();
        activity.in_flight += 1;
        activity.heard_at = None;
        RequestGuard(self.clone())
    }

    fn idle(&self) -> bool {
        self.activity().in_flight == 0
    }

    /// When to look again, or why the connection must close now.
    fn check(&self, now: Instant, limits: &ConnectionLimits) -> Result<Instant, &'static str> {
        let activity = self.activity();
        if activity.in_flight > 0 {
            return Ok(now + limits.header_read_timeout.min(limits.idle_timeout));
        }
        let (deadline, reason) = match activity.heard_at {
            Some(heard) => (
                heard + limits.header_read_timeout,
                "the request head was not complete within server.header_read_timeout_secs",
            ),
            None => (
                activity.idle_since + limits.idle_timeout,
                "idle for server.idle_timeout_secs",
            ),
        };
        if now >= deadline {
            Err(reason)
        } else {
            Ok(deadline)
        }
    }
}

/// Held while a request is in flight: from its head to the end of its response body.
struct RequestGuard(Arc<Connection>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let mut activity = self.0.activity();
        activity.in_flight = activity.in_flight.saturating_sub(1);
        if activity.in_flight == 0 {
            activity.idle_since = Instant::now();
            activity.heard_at = None;
        }
    }
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Total,
    PerAddress,
}

/// Counts refusals and evictions between log lines.
#[derive(Debug, Default)]
struct Quiet {
    last: Option<Instant>,
    suppressed: u64,
}

impl Quiet {
    /// `Some(count)` when a line is due: how many happened since the last one.
    fn tick(&mut self, now: Instant) -> Option<u64> {
        self.suppressed += 1;
        if self.last.is_some_and(|last| now < last + LOG_EVERY) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    /// By id, which is also by age.
    connections: BTreeMap<u64, Arc<Connection>>,
    per_address: HashMap<AddressKey, usize>,
    refused_total: Quiet,
    refused_address: Quiet,
    evictions: Quiet,
}

impl Open {
    fn forget(&mut self, connection: &Connection) -> bool {
        if self.connections.remove(&connection.id).is_none() {
            return false;
        }
        if let Some(count) = self.per_address.get_mut(&connection.key) {
            *count -= 1;
            if *count == 0 {
                self.per_address.remove(&connection.key);
            }
        }
        true
    }
}

/// Every open connection, and the caps.
#[derive(Debug)]
struct Registry {
    limits: ConnectionLimits,
    open: Mutex<Open>,
    /// Connections closed since the allocator last gave memory back.
    closed: std::sync::atomic::AtomicU64,
}

/// A connection's place in the registry, given up when dropped.
struct Registration {
    registry: Arc<Registry>,
    connection: Arc<Connection>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.lock().forget(&self.connection);
        self.registry
            .closed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a connection from `addr`, closing the oldest idle one at the total cap.
    fn admit(self: &Arc<Self>, addr: SocketAddr) -> Result<Registration, Refusal> {
        let key = AddressKey::of(addr);
        let now = Instant::now();
        let mut open = self.lock();
        let from_address = open.per_address.get(&key).copied().unwrap_or(0);
        if from_address >= self.limits.max_connections_per_address {
            if let Some(count) = open.refused_address.tick(now) {
                tracing::warn!(
                    address = %key.0,
                    open = from_address,
                    refused = count,
                    "connection refused: this address has server.max_connections_per_address \
                     connections open ({} refusals since the last such line)",
                    count
                );
            }
            return Err(Refusal::PerAddress);
        }
        if open.connections.len() >= self.limits.max_connections {
            let oldest_idle = open
                .connections
                .values()
                .find(|c| !c.evicted.is_cancelled() && c.idle())
                .cloned();
            let Some(victim) = oldest_idle else {
                if let Some(count) = open.refused_total.tick(now) {
                    tracing::warn!(
                        open = open.connections.len(),
                        refused = count,
                        "connection refused: server.max_connections connections are open and \
                         every one is serving a request ({} refusals since the last such line)",
                        count
                    );
                }
                return Err(Refusal::Total);
            };
            victim.evicted.cancel();
            open.forget(&victim);
            if let Some(count) = open.evictions.tick(now) {
                tracing::warn!(
                    open = open.connections.len() + 1,
                    closed = count,
                    "server.max_connections reached: closing the oldest idle connections to \
                     admit new ones ({} closed since the last such line)",
                    count
                );
            }
        }
        open.next_id += 1;
        let connection = Arc::new(Connection {
            id: open.next_id,
            key,
            activity: Mutex::new(Activity {
                in_flight: 0,
                idle_since: now,
                heard_at: None,
            }),
            evicted: CancellationToken::new(),
        });
        open.connections.insert(connection.id, connection.clone());
        *open.per_address.entry(key).or_insert(0) += 1;
        Ok(Registration {
            registry: self.clone(),
            connection,
        })
    }
}

/// The canned answer to a refused connection: written if the socket takes it at once.
const REFUSED: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\n\
    content-type: application/json\r\nretry-after: 1\r\nconnection: close\r\n\
    content-length: 99\r\n\r\n\
    {\"error\":{\"code\":\"RATE_LIMITED\",\"message\":\"too many connections\",\"details\":{\"retry_after_secs\":1}}}";

/// Accepts and serves connections on `listener` until `stop` is cancelled, then lets
/// each open one finish its request (hyper's graceful shutdown) and returns once all
/// have closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) -> io::Result<()> {
    let registry = Arc::new(Registry {
        limits,
        open: Mutex::new(Open::default()),
        closed: std::sync::atomic::AtomicU64::new(0),
    });
    let tracker = TaskTracker::new();
    let trimming = tokio::spawn(give_memory_back(registry.clone()));
    let mut accept_errors = Quiet::default();
    loop {
        let (tcp, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, mostly: the kernel keeps the connection in
                    // the backlog; wait a little rather than spin.
                    if let Some(count) = accept_errors.tick(Instant::now()) {
                        tracing::warn!(error = %e, failures = count, "accepting a connection failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let registration = match registry.admit(addr) {
            Ok(registration) => registration,
            Err(_) => {
                // Best effort, never waiting: the socket's buffer is empty.
                let _ = tcp.try_write(REFUSED);
                drop(tcp);
                continue;
            }
        };
        // Without TCP_NODELAY, small SSE frames on a reused connection wait ~40 ms for
        // Nagle's algorithm (measured in docs/performance.md).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        tracker.spawn(serve_connection(
            tcp,
            registration,
            app.clone(),
            limits,
            stop.clone(),
        ));
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
    trimming.abort();
    Ok(())
}

/// After a burst of connections (or event streams) has closed, asks the allocator to
/// return the freed memory to the system: glibc keeps freed heap in its arenas, so a
/// flood would otherwise leave the process at its peak size for good (issue 17).
async fn give_memory_back(registry: Arc<Registry>) {
    let mut every = tokio::time::interval(TRIM_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let closed = registry.closed.load(std::sync::atomic::Ordering::Relaxed);
        if closed < TRIM_AFTER_CLOSED {
            continue;
        }
        registry
            .closed
            .fetch_sub(closed, std::sync::atomic::Ordering::Relaxed);
        let _ = tokio::task::spawn_blocking(trim).await;
    }
}

/// Returns free heap pages to the system (glibc); nothing elsewhere.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; 0 keeps no pad.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Serves one connection until it closes, times out, is evicted or shuts down.
async fn serve_connection(
    tcp: TcpStream,
    registration: Registration,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let connection = registration.connection.clone();
    // Handlers that count per address (event-stream followers) read it from here.
    let peer = tcp.peer_addr().ok();
    let io = TokioIo::new(Watched {
        inner: tcp,
        connection: connection.clone(),
    });
    let for_service = connection.clone();
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let guard = for_service.begin_request();
        let app = app.clone();
        if let Some(peer) = peer {
            request.extensions_mut().insert(ConnectInfo(peer));
        }
        async move {
            let request = request.map(|body| {
                Body::new(Deadline {
                    inner: body,
                    sleep: Box::pin(tokio::time::sleep(limits.idle_timeout)),
                })
            });
            let response = app.oneshot(request).await?;
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(Guarded {
                    body,
                    _guard: guard,
                })
            }))
        }
    });
    let mut conn = pin!(
        hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .serve_connection(io, service)
    );
    let mut check_at = Instant::now() + limits.header_read_timeout.min(limits.idle_timeout);
    let mut shutting_down = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!(error = %e, "connection ended with an error");
                }
                break;
            }
            () = connection.evicted.cancelled() => break,
            () = stop.cancelled(), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep_until(check_at) => {
                match connection.check(Instant::now(), &limits) {
                    Ok(next) => check_at = next,
                    Err(reason) => {
                        tracing::debug!(reason, "closing a connection");
                        break;
                    }
                }
            }
        }
    }
    drop(registration);
}

/// The TCP stream, noting when a byte of a new request arrives.
struct Watched {
    inner: TcpStream,
    connection: Arc<Connection>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.connection.heard();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A response body that keeps its request in flight until it is finished or dropped.
struct Guarded {
    body: Body,
    _guard: RequestGuard,
}

impl HttpBody for Guarded {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that must arrive in full before its deadline.
struct Deadline {
    inner: Incoming,
    sleep: Pin<Box<Sleep>>,
}

/// The error a request body that came too slowly ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within server.idle_timeout_secs")]
struct BodyTooSlow;

impl HttpBody for Deadline {
    type Data = axum::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyTooSlow.into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(total: usize, per_address: usize) -> Arc<Registry> {
        Arc::new(Registry {
            limits: ConnectionLimits {
                max_connections: total,
                max_connections_per_address: per_address,
                ..ConnectionLimits::default()
            },
            open: Mutex::new(Open::default()),
            closed: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("address")
    }

    #[test]
    fn the_canned_refusal_is_a_well_formed_response() {
        let text = std::str::from_utf8(REFUSED).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let envelope: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(envelope["error"]["code"], "RATE_LIMITED");
    }

    #[test]
    fn ipv6_clients_count_by_their_64() {
        assert_eq!(
            AddressKey::of(addr("[2001:db8:1:2:aaaa::1]:1")),
            AddressKey::of(addr("[2001:db8:1:2:bbbb::9]:2"))
        );
        assert_ne!(
            AddressKey::of(addr("[2001:db8:1:2::1]:1")),
            AddressKey::of(addr("[2001:db8:1:3::1]:1"))
        );
        assert_eq!(
            AddressKey::of(addr("[::ffff:10.0.0.1]:1")),
            AddressKey::of(addr("10.0.0.1:2"))
        );
    }

    #[tokio::test]
    async fn one_address_is_refused_past_its_cap_and_others_still_come_in() {
        let registry = registry(10, 2);
        let _a = registry.admit(addr("10.0.0.1:1")).expect("first");
        let b = registry.admit(addr("10.0.0.1:2")).expect("second");
        assert_eq!(
            registry.admit(addr("10.0.0.1:3")).err(),
            Some(Refusal::PerAddress)
        );
        let _c = registry.admit(addr("10.0.0.2:1")).expect("another address");
        drop(b);
        let _d = registry
            .admit(addr("10.0.0.1:4"))
            .expect("a place was freed");
    }

    #[tokio::test]
    async fn at_the_total_cap_the_oldest_idle_connection_makes_room() {
        let registry = registry(2, 10);
        let busy = registry.admit(addr("10.0.0.1:1")).expect("first");
        let _request = busy.connection.begin_request();
        let idle = registry.admit(addr("10.0.0.2:1")).expect("second");
        let _third = registry.admit(addr("10.0.0.3:1")).expect("third evicts");
        assert!(idle.connection.evicted.is_cancelled());
        assert!(!busy.connection.evicted.is_cancelled());
        // Only busy connections left besides the newest, which is idle: it goes next.
        let _fourth = registry.admit(addr("10.0.0.4:1")).expect("fourth evicts");
        assert_eq!(registry.lock().connections.len(), 2);
        drop(idle);
        assert_eq!(
            registry.lock().connections.len(),
            2,
            "evicted ones are not counted twice"
        );
    }

    #[tokio::test]
    async fn when_every_connection_serves_a_request_new_ones_are_refused() {
        let registry = registry(1, 10);
        let busy = registry.admit(addr("10.0.0.1:1")).expect("first");
        let _request = busy.connection.begin_request();
        assert_eq!(
            registry.admit(addr("10.0.0.2:1")).err(),
            Some(Refusal::Total)
        );
    }

    #[tokio::test]
    async fn idle_and_slow_heads_time_out_requests_in_flight_do_not() {
        let limits = ConnectionLimits::default();
        let registry = registry(10, 10);
        let admitted = Instant::now();
        let c = registry
            .admit(addr("10.0.0.1:1"))
            .expect("admitted")
            .connection
            .clone();
        // Idle and silent: the idle timeout applies.
        let deadline = c.check(admitted, &limits).expect("open");
        assert!(deadline >= admitted + limits.idle_timeout - Duration::from_secs(1));
        assert!(
            c.check(
                admitted + limits.idle_timeout + Duration::from_secs(1),
                &limits
            )
            .is_err()
        );
        // A byte arrived: the (shorter) header timeout applies from then.
        c.heard();
        let heard = Instant::now();
        let deadline = c.check(heard, &limits).expect("open");
        assert!(deadline <= heard + limits.header_read_timeout);
        assert!(
            c.check(heard + limits.header_read_timeout, &limits)
                .is_err()
        );
        // A request in flight is never timed out here.
        let request = c.begin_request();
        assert!(c.check(heard + Duration::from_secs(3600), &limits).is_ok());
        drop(request);
        // Idle again, the next request not begun: the idle timeout, from now.
        let idle = Instant::now();
        assert!(c.check(idle + limits.header_read_timeout, &limits).is_ok());
        assert!(
            c.check(idle + limits.idle_timeout + Duration::from_secs(1), &limits)
                .is_err()
        );
    }
}
