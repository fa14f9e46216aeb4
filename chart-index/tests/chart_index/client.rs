//! A minimal HTTP/1.1 client on `TcpStream`: one request per connection,
//! the target sent byte for byte, the answer parsed (chunked or not); and
//! a connection kept open ([`Conn`]) for keep-alive, interim answers (`100
//! Continue`) and what a server does to a connection.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

use testkit::WAIT;

use crate::server::Server;

pub(crate) fn index_path(tenant: &str) -> String {
    if tenant.is_empty() {
        "/index.yaml".into()
    } else {
        format!("/{tenant}/index.yaml")
    }
}

// ---------------------------------------------------------------------------
// A minimal HTTP/1.1 client

/// Header names and values, as received.
type Headers = Vec<(String, String)>;

pub(crate) struct Resp {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Resp {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of the header `name`, in order.
    pub(crate) fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub(crate) fn seq(&self) -> u64 {
        self.header("X-Index-Seq")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no X-Index-Seq in {:?}", self.headers))
    }
}

pub(crate) enum Body<'a> {
    None,
    Length(&'a [u8]),
    Chunked(&'a [u8]),
}

/// One request on a new connection (`Connection: close`). The target is
/// sent as given, byte for byte. The body is written from another thread
/// while the answer is read, so a server that answers before reading it
/// (413) is seen as it answers.
pub(crate) fn http(addr: &str, method: &str, target: &[u8], body: Body<'_>) -> Resp {
    http_with(addr, method, target, &[], body)
}

/// As [`http`], with extra header lines (`Name: value`).
pub(crate) fn http_with(
    addr: &str,
    method: &str,
    target: &[u8],
    headers: &[&str],
    body: Body<'_>,
) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target);
    write!(out, " HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n").unwrap();
    for h in headers {
        write!(out, "{h}\r\n").unwrap();
    }
    match body {
        Body::None => out.extend_from_slice(b"\r\n"),
        Body::Length(b) => {
            write!(out, "Content-Length: {}\r\n\r\n", b.len()).unwrap();
            out.extend_from_slice(b);
        }
        Body::Chunked(b) => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for c in b.chunks(64 << 10) {
                write!(out, "{:x}\r\n", c.len()).unwrap();
                out.extend_from_slice(c);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        // A server that refuses a body may close before reading it all.
        let _ = w.write_all(&out);
    });
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        assert!(
            !raw.is_empty(),
            "{method} {}: no answer: {e}",
            String::from_utf8_lossy(target)
        );
    }
    let _ = writer.join();
    parse_response(&raw, method == "HEAD").unwrap_or_else(|e| {
        panic!(
            "{method} {}: bad answer ({e}): {:?}",
            String::from_utf8_lossy(target),
            String::from_utf8_lossy(&raw)
        )
    })
}

/// The status and headers of the answer at the start of `raw`, and where
/// its head ends (the index of its blank line).
fn parse_head(raw: &[u8]) -> Result<(u16, Headers, usize), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of head")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|e| e.to_string())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty")?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("bad status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Ok((status, headers, end))
}

pub(crate) fn parse_response(raw: &[u8], head_only: bool) -> Result<Resp, String> {
    let (status, headers, end) = parse_head(raw)?;
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        let mut plain = Vec::new();
        let mut rest = &body[..];
        loop {
            let eol = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or("bad chunk")?;
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap_or(""), 16)
                .map_err(|e| e.to_string())?;
            rest = &rest[eol + 2..];
            if size == 0 {
                break;
            }
            plain.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
        body = plain;
    } else if let Some((_, len)) = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        let len: usize = len.parse().map_err(|_| "bad content-length")?;
        if body.len() != len && !head_only {
            return Err(format!(
                "body of {} bytes, content-length {len}",
                body.len()
            ));
        }
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

/// A connection kept open: requests written as raw bytes, answers read one
/// at a time (with a `Content-Length`, or none: a 1xx, or a HEAD's).
pub(crate) struct Conn {
    s: TcpStream,
    /// Read and not yet taken as an answer.
    buf: Vec<u8>,
    label: String,
}

impl Conn {
    pub(crate) fn open(addr: &str, label: &str) -> Conn {
        let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{label}: connect {addr}: {e}"));
        s.set_read_timeout(Some(WAIT)).unwrap();
        Conn {
            s,
            buf: Vec::new(),
            label: label.to_owned(),
        }
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.s
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("{}: sending: {e}", self.label));
    }

    /// Reads more into the buffer; false at the end of the stream.
    fn fill(&mut self, what: &str) -> bool {
        let mut chunk = [0u8; 64 << 10];
        match self.s.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => false,
            Err(e) => panic!("{}: waiting {WAIT:?} for {what}: {e}", self.label),
        }
    }

    /// The next answer (`head_only`: to a HEAD, no body whatever its
    /// `Content-Length`). Panics if the server closes first.
    pub(crate) fn answer(&mut self, what: &str, head_only: bool) -> Resp {
        loop {
            if let Ok((status, headers, end)) = parse_head(&self.buf) {
                let len = if head_only || status < 200 {
                    0
                } else {
                    headers
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                        .and_then(|(_, v)| v.parse().ok())
                        .unwrap_or_else(|| panic!("{}: {what}: no content-length", self.label))
                };
                while self.buf.len() < end + 4 + len {
                    assert!(self.fill(what), "{}: closed inside {what}", self.label);
                }
                let body = self.buf[end + 4..end + 4 + len].to_vec();
                self.buf.drain(..end + 4 + len);
                return Resp {
                    status,
                    headers,
                    body,
                };
            }
            assert!(
                self.fill(what),
                "{}: closed before {what}; read {:?}",
                self.label,
                String::from_utf8_lossy(&self.buf)
            );
        }
    }

    /// Waits (at most [`WAIT`]) for the server to close the connection,
    /// and returns what it sent meanwhile.
    pub(crate) fn wait_closed(&mut self) -> Vec<u8> {
        while self.fill("the server to close the connection") {}
        std::mem::take(&mut self.buf)
    }
}

/// A request's bytes: `method target`, `Host`, the extra `headers`, then
/// `body` with its `Content-Length` (none for an empty body and no
/// `Content-Length` header given).
pub(crate) fn request(method: &str, target: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: chart-index.test\r\n");
    for h in headers {
        out.push_str(h);
        out.push_str("\r\n");
    }
    if !body.is_empty() {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A form field: its name, file name and bytes.
pub(crate) type Field<'a> = (&'a str, &'a str, &'a [u8]);

/// A `multipart/form-data` body of `fields` (name, file name, bytes) as
/// helm-push sends it, and its Content-Type.
pub(crate) fn form(fields: &[Field<'_>]) -> (Vec<u8>, String) {
    let boundary = "----chart-index-test-7d3f1e";
    let mut body = Vec::new();
    for (name, file, bytes) in fields {
        write!(
            body,
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; \
             filename=\"{file}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .unwrap();
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    write!(body, "--{boundary}--\r\n").unwrap();
    (body, format!("multipart/form-data; boundary={boundary}"))
}

/// `method target` on a new connection to `s`, with the header lines
/// `headers` and no body.
pub(crate) fn ask(s: &Server, method: &str, target: &str, headers: &[&str]) -> Resp {
    http_with(&s.addr, method, target.as_bytes(), headers, Body::None)
}

/// The header `name` of an answer, which must have it.
pub(crate) fn header<'a>(r: &'a Resp, name: &str) -> &'a str {
    r.header(name)
        .unwrap_or_else(|| panic!("no {name} header (status {})", r.status))
}

/// A gzip'd body, unzipped.
pub(crate) fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a gzip body");
    out
}
