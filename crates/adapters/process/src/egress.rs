//! The egress proxy: the one way out of a confined tree's network namespace.
//!
//! Inside the namespace the program finds an HTTP proxy on `127.0.0.1:3128`
//! (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` say so). That listener belongs to the
//! reaper, which passes every connection it accepts to the server over a UNIX socket
//! (`SCM_RIGHTS`); [`serve`] takes them here, outside the namespace, one task per
//! connection. Each connection asks for one destination — `CONNECT host:port` (HTTPS
//! and anything else tunnelled) or a plain `GET http://host/…` — which the caller's
//! [`EgressPolicy`] admits or refuses (hosts by the agent's data scope, private and
//! loopback addresses, agentplane's own ports). An admitted destination is connected
//! to the addresses the policy resolved, never resolved again, so a DNS answer cannot
//! change between the decision and the connection. Every decision is kept as an
//! [`Egress`] for the call's record.
//!
//! What cannot go through an HTTP proxy — raw TCP to an address, UDP, ssh — has no
//! route out of the namespace at all.
//!
//! What must not live here: which hosts are allowed (the caller's policy).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// The longest request head a client may send before its destination is known.
const MAX_HEAD: usize = 16 * 1024;

/// How long a client has to say where it goes, and a destination to answer.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections kept per call; beyond this the proxy stops recording (still deciding).
const MAX_RECORDS: usize = 256;

/// Connections one call may have open through the proxy at once: every one is a
/// descriptor of the server's, so a program that opens thousands gets the rest closed
/// at once (recorded), not the server's file table.
const MAX_OPEN: usize = 64;

/// What an [`EgressPolicy`] answers: the addresses to connect to, or why not.
pub type Decision = Result<Vec<SocketAddr>, String>;

/// Decides each destination a confined program asks the proxy for.
pub trait EgressPolicy: Send + Sync + std::fmt::Debug {
    /// `host` as the client named it (a name or an IP literal, IPv6 without
    /// brackets), `port` its port.
    fn admit(&self, host: String, port: u16) -> Pin<Box<dyn Future<Output = Decision> + Send>>;
}

/// One connection the proxy decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// The destination, as asked (`host:port`).
    pub destination: String,
    /// Whether it was connected.
    pub allowed: bool,
    /// Why not, or where to (the addresses).
    pub detail: String,
}

/// The proxy of one call: collects its decisions until [`Proxy::finish`].
pub struct Proxy {
    task: tokio::task::JoinHandle<()>,
    records: Arc<Mutex<Vec<Egress>>>,
}

impl Proxy {
    /// Stops the proxy and every connection it carries; returns what it decided.
    pub fn finish(self) -> Vec<Egress> {
        self.task.abort();
        let mut records = match self.records.lock() {
            Ok(records) => records,
            Err(poisoned) => poisoned.into_inner(),
        };
        std::mem::take(&mut *records)
    }
}

/// Serves the connections handed over on `handoff` (the server's end of the reaper's
/// socket pair) under `policy`.
pub fn serve(handoff: OwnedFd, policy: Arc<dyn EgressPolicy>) -> io::Result<Proxy> {
    let socket = std::os::unix::net::UnixDatagram::from(handoff);
    socket.set_nonblocking(true)?;
    let socket = tokio::net::UnixDatagram::from_std(socket)?;
    let records = Arc::new(Mutex::new(Vec::new()));
    let kept = records.clone();
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                received = receive(&socket) => match received {
                    Ok(Some(fd)) if connections.len() >= MAX_OPEN => {
                        drop(fd);
                        record(&kept, "(any)", false, &format!(
                            "more than {MAX_OPEN} connections open at once; closed"
                        ));
                    }
                    Ok(Some(fd)) => {
                        connections.spawn(connection(fd, policy.clone(), kept.clone()));
                    }
                    // The reaper is gone: no new connections; finish the open ones.
                    Ok(None) | Err(_) => break,
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        while connections.join_next().await.is_some() {}
    });
    Ok(Proxy { task, records })
}

/// The next descriptor on the handoff socket; `None` when the reaper closed it.
async fn receive(socket: &tokio::net::UnixDatagram) -> io::Result<Option<OwnedFd>> {
    loop {
        socket.readable().await?;
        match socket.try_io(tokio::io::Interest::READABLE, || {
            receive_fd(socket.as_raw_fd())
        }) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

/// `recvmsg` of one message with at most one descriptor (`SCM_RIGHTS`).
fn receive_fd(socket: RawFd) -> io::Result<Option<OwnedFd>> {
    const SPACE: usize = 64;
    #[repr(C, align(8))]
    struct Control([u8; SPACE]);
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = Control([0; SPACE]);
    // SAFETY: msghdr is a plain C struct; zero is a valid start.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast();
    message.msg_controllen = SPACE;
    // SAFETY: every pointer in `message` points at buffers on our stack that outlive
    // the call; MSG_CMSG_CLOEXEC marks a received descriptor close-on-exec.
    let n = unsafe { libc::recvmsg(socket, &mut message, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: the kernel filled `message`; the CMSG macros walk its control buffer.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        let mut received = None;
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let fd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<RawFd>());
                if fd >= 0 {
                    // Owned from here: closed when dropped, whatever follows.
                    let owned = OwnedFd::from_raw_fd(fd);
                    if received.is_none() {
                        received = Some(owned);
                    }
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
        // A message without a descriptor is no connection; wait for the next.
        match received {
            Some(fd) => Ok(Some(fd)),
            None => Err(io::Error::from(io::ErrorKind::WouldBlock)),
        }
    }
}

/// One proxied connection: read where it goes, decide, connect, relay.
async fn connection(fd: OwnedFd, policy: Arc<dyn EgressPolicy>, records: Arc<Mutex<Vec<Egress>>>) {
    let std = std::net::TcpStream::from(fd);
    if std.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut client) = TcpStream::from_std(std) else {
        return;
    };
    let Ok(Ok((request, rest))) = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await
    else {
        let _ = client
            .write_all(&refusal(400, "a proxy request head was expected"))
            .await;
        return;
    };
    let request = match request {
        Ok(request) => request,
        Err(why) => {
            let _ = client.write_all(&refusal(400, &why)).await;
            return;
        }
    };
    let destination = format!("{}:{}", bracket(&request.host), request.port);
    let decision = tokio::time::timeout(
        HEAD_TIMEOUT,
        policy.admit(request.host.clone(), request.port),
    )
    .await
    .unwrap_or_else(|_| Err("the destination could not be decided in time".to_owned()));
    let addrs = match decision {
        Ok(addrs) => addrs,
        Err(why) => {
            record(&records, &destination, false, &why);
            let _ = client.write_all(&refusal(403, &why)).await;
            return;
        }
    };
    if addrs.is_empty() {
        record(
            &records,
            &destination,
            false,
            "the destination has no address",
        );
        let _ = client
            .write_all(&refusal(502, "the destination has no address"))
            .await;
        return;
    }
    let upstream = tokio::time::timeout(HEAD_TIMEOUT, TcpStream::connect(&addrs[..])).await;
    let mut upstream = match upstream {
        Ok(Ok(upstream)) => upstream,
        Ok(Err(e)) => {
            record(
                &records,
                &destination,
                true,
                &format!("connect failed: {e}"),
            );
            let _ = client
                .write_all(&refusal(502, &format!("could not connect: {e}")))
                .await;
            return;
        }
        Err(_) => {
            record(&records, &destination, true, "connect timed out");
            let _ = client
                .write_all(&refusal(504, "the destination did not answer"))
                .await;
            return;
        }
    };
    let to = addrs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    record(&records, &destination, true, &format!("connected to {to}"));
    let sent = if request.tunnel {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
    } else {
        upstream.write_all(&request.forward).await
    };
    if sent.is_err() || upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

fn record(records: &Mutex<Vec<Egress>>, destination: &str, allowed: bool, detail: &str) {
    let mut records = match records.lock() {
        Ok(records) => records,
        Err(poisoned) => poisoned.into_inner(),
    };
    if records.len() < MAX_RECORDS {
        records.push(Egress {
            destination: destination.to_owned(),
            allowed,
            detail: detail.to_owned(),
        });
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

fn refusal(status: u16, why: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Gateway Timeout",
    };
    let body = format!("agentplane egress proxy: {why}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Where one proxy request goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// `CONNECT`: answer 200 and relay bytes.
    pub(crate) tunnel: bool,
    /// For a plain request: its head rewritten for the origin (origin-form target,
    /// no `Proxy-*` headers, `Connection: close`).
    pub(crate) forward: Vec<u8>,
}

/// Reads the request head; returns it parsed (or why it is refused) and the bytes
/// already read past it.
async fn read_head(client: &mut TcpStream) -> io::Result<(Result<Request, String>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        buf.extend_from_slice(&chunk[..n]);
        match parse(&buf) {
            Parsed::Done(request, used) => return Ok((request, buf.split_off(used))),
            Parsed::Partial if buf.len() < MAX_HEAD => continue,
            Parsed::Partial => {
                return Ok((Err("the request head is too long".to_owned()), Vec::new()));
            }
        }
    }
}

pub(crate) enum Parsed {
    Done(Result<Request, String>, usize),
    Partial,
}

/// Parses a proxy request head (`httparse`).
pub(crate) fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let used = match request.parse(buf) {
        Ok(httparse::Status::Complete(used)) => used,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(e) => return Parsed::Done(Err(format!("not an HTTP request: {e}")), buf.len()),
    };
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return Parsed::Done(Err("not an HTTP request".to_owned()), used);
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let parsed = authority(target).map(|(host, port)| Request {
            host,
            port,
            tunnel: true,
            forward: Vec::new(),
        });
        return Parsed::Done(parsed, used);
    }
    let Some(rest) = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("HTTP://"))
    else {
        return Parsed::Done(
            Err(format!(
                "{method} {target:?}: a proxy request names an absolute http:// URL, or uses \
                 CONNECT host:port (https)"
            )),
            used,
        );
    };
    let (authority_part, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority_with_default(authority_part, 80) {
        Ok(found) => found,
        Err(why) => return Parsed::Done(Err(why), used),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let mut forward = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
            continue;
        }
        forward.extend_from_slice(header.name.as_bytes());
        forward.extend_from_slice(b": ");
        forward.extend_from_slice(header.value);
        forward.extend_from_slice(b"\r\n");
    }
    forward.extend_from_slice(b"Connection: close\r\n\r\n");
    Parsed::Done(
        Ok(Request {
            host,
            port,
            tunnel: false,
            forward,
        }),
        used,
    )
}

/// `host:port` of a CONNECT (the port is required).
fn authority(target: &str) -> Result<(String, u16), String> {
    authority_with_default(target, 0).and_then(|(host, port)| {
        if port == 0 {
            Err(format!("CONNECT {target:?} names no port"))
        } else {
            Ok((host, port))
        }
    })
}

/// `host[:port]`, IPv6 in brackets; no user information.
fn authority_with_default(text: &str, default: u16) -> Result<(String, u16), String> {
    let bad = || format!("{text:?} is not a host and port");
    if text.is_empty() || text.contains('@') || text.len() > 300 {
        return Err(bad());
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':').ok_or_else(bad)?),
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad());
        }
        (host, port)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(port) => port.parse::<u16>().map_err(|_| bad())?,
        None => default,
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    if host.is_empty() || !host.chars().all(valid) {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(head: &str) -> Result<Request, String> {
        match parse(head.as_bytes()) {
            Parsed::Done(request, _) => request,
            Parsed::Partial => Err("partial".to_owned()),
        }
    }

    #[test]
    fn connect_and_absolute_requests_name_their_destination() {
        let connect = done("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
            .expect("connect");
        assert_eq!(
            (connect.host.as_str(), connect.port, connect.tunnel),
            ("example.com", 443, true)
        );
        let v6 = done("CONNECT [::1]:8686 HTTP/1.1\r\n\r\n").expect("v6");
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 8686));
        let get = done(
            "GET http://Example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com\r\n\
             Proxy-Authorization: x\r\nConnection: keep-alive\r\n\r\n",
        )
        .expect("get");
        assert_eq!(
            (get.host.as_str(), get.port, get.tunnel),
            ("example.com", 8080, false)
        );
        let forward = String::from_utf8(get.forward).expect("text");
        assert!(forward.starts_with("GET /a?b=1 HTTP/1.1\r\n"), "{forward}");
        assert!(
            !forward.to_ascii_lowercase().contains("proxy-"),
            "{forward}"
        );
        assert!(forward.ends_with("Connection: close\r\n\r\n"), "{forward}");
        assert_eq!(
            done("GET http://h HTTP/1.1\r\n\r\n").expect("bare").port,
            80
        );
    }

    #[test]
    fn hostile_heads_are_refused() {
        for head in [
            "GET /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            "GET https://example.com/ HTTP/1.1\r\n\r\n",
            "GET ftp://example.com/ HTTP/1.1\r\n\r\n",
            "CONNECT example.com HTTP/1.1\r\n\r\n",
            "CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
            "CONNECT [not-v6]:443 HTTP/1.1\r\n\r\n",
            "CONNECT exa mple.com:443 HTTP/1.1\r\n\r\n",
            "CONNECT example.com:99999 HTTP/1.1\r\n\r\n",
            "CONNECT :443 HTTP/1.1\r\n\r\n",
            "GET http://a@b/ HTTP/1.1\r\n\r\n",
            "\u{0}\u{1}garbage\r\n\r\n",
        ] {
            assert!(done(head).is_err(), "{head:?} was accepted");
        }
        assert!(matches!(
            parse(b"CONNECT example.com:443 HTTP/1.1\r\n"),
            Parsed::Partial
        ));
    }
}
