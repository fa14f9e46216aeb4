//! A minimal HTTP/1.1 client on `TcpStream`: one request per connection,
//! the target sent byte for byte, the answer parsed (chunked or not).

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::common::WAIT;

pub(crate) fn index_path(tenant: &str) -> String {
    if tenant.is_empty() {
        "/index.yaml".into()
    } else {
        format!("/{tenant}/index.yaml")
    }
}

// ---------------------------------------------------------------------------
// A minimal HTTP/1.1 client

pub(crate) struct Resp {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
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
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target);
    write!(out, " HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n").unwrap();
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

fn parse_response(raw: &[u8], head_only: bool) -> Result<Resp, String> {
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
