//! The chart server's upload form (`form::read_form`, helm-push's
//! `multipart/form-data` body), without a network: the input's first byte
//! sets the package cap (`max_upload`, 0 to 16,320 bytes), the bytes up
//! to the first newline are the `Content-Type` header (left out when it
//! is not a valid header value), the rest is the body, read from memory
//! on a current-thread runtime. Never a panic; a form that is accepted
//! holds a package within its cap and a provenance file within
//! `MAX_PROV_BYTES`; a refusal is a client error (4xx), never a 5xx.
//!
//! The server's router also sets axum's body limit to the whole form's
//! cap (`DefaultBodyLimit`); here axum's default (2 MB) stands, above
//! any input the fuzzer makes.
#![no_main]

use std::sync::OnceLock;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use libfuzzer_sys::fuzz_target;

use chart_index::form;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&cap, rest)) = data.split_first() else {
        return;
    };
    let max_upload = u64::from(cap) * 64;
    let (content_type, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let mut req = Request::new(Body::from(body.to_vec()));
    if let Ok(v) = HeaderValue::from_bytes(content_type) {
        req.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    // The package kept in memory (the server streams it to a file).
    match runtime().block_on(form::read_form(req, max_upload, Vec::new)) {
        Ok((chart, prov)) => {
            if let Some(c) = &chart {
                assert!(c.len() as u64 <= max_upload, "package over its cap");
            }
            if let Some(p) = &prov {
                assert!(
                    p.len() as u64 <= form::MAX_PROV_BYTES,
                    "provenance over its cap"
                );
            }
        }
        Err(reply) => {
            let status = reply.status();
            assert!(status.is_client_error(), "refused with {status}");
        }
    }
});
