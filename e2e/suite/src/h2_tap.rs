//! A loopback TCP relay in front of an HTTP/2 (gRPC) server that notes when
//! each request was complete and when each response ended, by reading the
//! frame headers going by. The overhead benchmark puts it between `tarsy`
//! and the LLM service, so that time spent in each process can be told
//! apart from outside both.
//!
//! The relay forwards bytes as they arrive (`TCP_NODELAY` on both sides); the
//! time noted is when a frame header was read, before it is forwarded. One
//! relay hop costs some tens of microseconds on loopback; the benchmark
//! counts them in the client's share.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// HTTP/2 client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_DATA: u8 = 0x0;
const FRAME_HEADERS: u8 = 0x1;
const FLAG_END_STREAM: u8 = 0x1;

/// One HTTP/2 request (gRPC call) seen by the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTiming {
    /// The client's first frame of the stream (its HEADERS).
    pub opened: Instant,
    /// The client's latest DATA frame with content: once the request is
    /// sent, the one that completed its message. (The frame that ends the
    /// stream may follow later, empty.)
    pub request_sent: Option<Instant>,
    /// The client ended its side of the stream.
    pub request_complete: Option<Instant>,
    /// The server's first DATA frame (the first response message).
    pub first_response: Option<Instant>,
    /// The server's latest DATA frame: once the call is over, the one that
    /// carried its last message. (A gRPC client that stops reading at a
    /// final message may reset the stream before the trailers arrive.)
    pub last_response: Option<Instant>,
    /// The server ended the stream (trailers), if that was seen.
    pub response_complete: Option<Instant>,
}

type Streams = Arc<Mutex<Vec<((usize, u32), StreamTiming)>>>;

/// A running relay. Dropping it stops accepting; open connections end with
/// their peers.
pub struct H2Tap {
    addr: SocketAddr,
    streams: Streams,
    task: JoinHandle<()>,
}

impl H2Tap {
    /// Listens on `127.0.0.1:0` and relays every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let streams: Streams = Arc::default();
        let shared = streams.clone();
        let task = tokio::spawn(async move {
            let mut next_conn = 0usize;
            while let Ok((client, _)) = listener.accept().await {
                let conn = next_conn;
                next_conn += 1;
                let streams = shared.clone();
                tokio::spawn(async move {
                    if let Err(e) = relay(conn, client, upstream, streams).await {
                        eprintln!("h2 tap: connection {conn}: {e}");
                    }
                });
            }
        });
        Ok(Self {
            addr,
            streams,
            task,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every stream seen so far, in the order they were opened.
    pub fn streams(&self) -> Vec<StreamTiming> {
        let mut all = lock(&self.streams).clone();
        all.sort_by_key(|(_, t)| t.opened);
        all.into_iter().map(|(_, t)| t).collect()
    }

    /// Forgets the streams seen so far.
    pub fn clear(&self) {
        lock(&self.streams).clear();
    }
}

impl Drop for H2Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which side of the connection bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// Incremental HTTP/2 frame-header reader: calls back with (type, flags,
/// stream id) for every frame as its 9-byte header completes.
#[derive(Debug, Default)]
struct FrameReader {
    preface_left: usize,
    header: Vec<u8>,
    payload_left: usize,
}

impl FrameReader {
    fn new(side: Side) -> Self {
        Self {
            preface_left: if side == Side::Client {
                PREFACE.len()
            } else {
                0
            },
            header: Vec::with_capacity(9),
            payload_left: 0,
        }
    }

    fn feed(&mut self, mut bytes: &[u8], mut on_frame: impl FnMut(u8, u8, u32, usize)) {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
            } else if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
            } else {
                let n = (9 - self.header.len()).min(bytes.len());
                self.header.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
                if self.header.len() == 9 {
                    let h = std::mem::take(&mut self.header);
                    self.payload_left =
                        (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
                    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                    on_frame(h[3], h[4], stream, self.payload_left);
                }
            }
        }
    }
}

fn note(streams: &Streams, conn: usize, side: Side, kind: u8, flags: u8, stream: u32, len: usize) {
    if stream == 0 || !(kind == FRAME_DATA || kind == FRAME_HEADERS) {
        return;
    }
    let now = Instant::now();
    let mut all = lock(streams);
    let key = (conn, stream);
    let index = match all.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None if side == Side::Client => {
            all.push((
                key,
                StreamTiming {
                    opened: now,
                    request_sent: None,
                    request_complete: None,
                    first_response: None,
                    last_response: None,
                    response_complete: None,
                },
            ));
            all.len() - 1
        }
        None => return,
    };
    let t = &mut all[index].1;
    let end = flags & FLAG_END_STREAM != 0;
    if side == Side::Client && kind == FRAME_DATA && len > 0 {
        t.request_sent = Some(now);
    }
    match side {
        Side::Client if end => {
            t.request_complete.get_or_insert(now);
        }
        Side::Server if kind == FRAME_DATA => {
            t.first_response.get_or_insert(now);
            t.last_response = Some(now);
            if end {
                t.response_complete.get_or_insert(now);
            }
        }
        Side::Server if end => {
            t.response_complete.get_or_insert(now);
        }
        _ => {}
    }
}

async fn pump(
    conn: usize,
    side: Side,
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    streams: Streams,
) -> std::io::Result<()> {
    let mut reader = FrameReader::new(side);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        reader.feed(&buf[..n], |kind, flags, stream, len| {
            note(&streams, conn, side, kind, flags, stream, len);
        });
        to.write_all(&buf[..n]).await?;
    }
}

async fn relay(
    conn: usize,
    client: TcpStream,
    upstream: SocketAddr,
    streams: Streams,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(
        conn,
        Side::Client,
        client_read,
        server_write,
        streams.clone(),
    );
    let down = pump(conn, Side::Server, server_read, client_write, streams);
    let (a, b) = tokio::join!(up, down);
    // A peer resetting the connection at the end is normal.
    for r in [a, b] {
        if let Err(e) = r
            && e.kind() != std::io::ErrorKind::ConnectionReset
            && e.kind() != std::io::ErrorKind::NotConnected
        {
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn frames_are_found_across_arbitrary_splits() {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(0x4, 0, 0, &[0; 6]));
        bytes.extend(frame(FRAME_HEADERS, 0x4, 1, &[7; 20]));
        bytes.extend(frame(FRAME_DATA, FLAG_END_STREAM, 1, &[1; 300]));
        for split in [1, 2, 5, 9, 10, 64, bytes.len()] {
            let mut reader = FrameReader::new(Side::Client);
            let mut seen = Vec::new();
            for piece in bytes.chunks(split) {
                reader.feed(piece, |k, f, s, _| seen.push((k, f, s)));
            }
            assert_eq!(
                seen,
                vec![
                    (0x4, 0, 0),
                    (FRAME_HEADERS, 0x4, 1),
                    (FRAME_DATA, FLAG_END_STREAM, 1)
                ],
                "split {split}"
            );
        }
    }
}
