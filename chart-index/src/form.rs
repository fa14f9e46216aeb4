//! helm-push's upload form: a `multipart/form-data` body read field by
//! field (axum's `Multipart`), each field and the whole form capped. Its
//! own file so that the fuzz target `read_form` and the unit tests reach
//! it without the rest of the server.

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{HeaderMap, header};

use crate::http::{READ_TIMEOUT, Reply, declared_length, drain, error, timed_out, too_large};

/// A provenance file (a PGP-signed text of a few KiB) may be this large.
pub const MAX_PROV_BYTES: u64 = 1 << 20;
/// A multipart form's own bytes (boundaries, part headers, other fields)
/// beside its chart and provenance file.
pub const MAX_FORM_OVERHEAD: u64 = 64 << 10;

/// Whether the body is a multipart form (helm-push's upload).
pub fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .get(..19)
                .is_some_and(|t| t.eq_ignore_ascii_case("multipart/form-data"))
        })
}

/// The fields `chart` and `prov` of a form, each if there.
pub type Form = (Option<Vec<u8>>, Option<Vec<u8>>);

/// helm-push's form: the package in field `chart`, its provenance file in
/// `prov` (either may be missing); other fields are read and ignored, as
/// chartmuseum does. Each field is capped, and so is the whole form (413).
pub async fn read_form(req: Request, max_upload: u64) -> Result<Form, Reply> {
    let limit = max_upload + MAX_PROV_BYTES + MAX_FORM_OVERHEAD;
    if declared_length(req.headers()).is_some_and(|n| n > limit) {
        let (parts, body) = req.into_parts();
        drain(body, &parts.headers);
        return Err(too_large("the form", limit));
    }
    let form_error = |e: axum::extract::multipart::MultipartError| {
        if e.status().as_u16() == 413 {
            too_large("the form", limit)
        } else {
            error(
                e.status().as_u16(),
                &format!("reading the multipart form: {}", e.body_text()),
            )
        }
    };
    let mut form = Multipart::from_request(req, &())
        .await
        .map_err(|e| error(400, &format!("multipart form: {}", e.body_text())))?;
    let (mut chart, mut prov) = (None, None);
    loop {
        let field = tokio::time::timeout(READ_TIMEOUT, form.next_field())
            .await
            .map_err(|_| timed_out())?
            .map_err(form_error)?;
        let Some(mut field) = field else { break };
        let name = field.name().unwrap_or("").to_owned();
        let mut other = None;
        let (slot, what, cap) = match name.as_str() {
            "chart" => (&mut chart, "the package", max_upload),
            "prov" => (&mut prov, "the provenance file", MAX_PROV_BYTES),
            _ => (&mut other, "a form field", limit),
        };
        if slot.is_some() {
            return Err(error(400, &format!("the form has two {name:?} fields")));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = tokio::time::timeout(READ_TIMEOUT, field.chunk())
            .await
            .map_err(|_| timed_out())?
            .map_err(form_error)?
        {
            if (bytes.len() + chunk.len()) as u64 > cap {
                return Err(too_large(what, cap));
            }
            bytes.extend_from_slice(&chunk);
        }
        *slot = Some(bytes);
    }
    Ok((chart, prov))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::extract::Request;
    use axum::http::{HeaderValue, header};

    use super::{Form, read_form};

    /// `read_form` on a request with `content_type` and `body`: the form,
    /// or the refusal's status.
    fn read(content_type: &str, body: &[u8], max_upload: u64) -> Result<Form, u16> {
        let mut req = Request::new(Body::from(body.to_vec()));
        req.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).expect("a header value"),
        );
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
            .block_on(read_form(req, max_upload))
            .map_err(|r| r.status().as_u16())
    }

    fn part(name: &str, data: &str) -> String {
        format!("--b\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{data}\r\n")
    }

    const FORM: &str = "multipart/form-data; boundary=b";

    #[test]
    fn a_form_gives_its_chart_and_prov_fields() {
        let body = format!(
            "{}{}{}--b--\r\n",
            part("x", "1"),
            part("chart", "P"),
            part("prov", "S")
        );
        let (chart, prov) = read(FORM, body.as_bytes(), 10).expect("read");
        assert_eq!(chart.as_deref(), Some(&b"P"[..]));
        assert_eq!(prov.as_deref(), Some(&b"S"[..]));
        let body = format!("{}--b--\r\n", part("prov", "S"));
        assert_eq!(
            read(FORM, body.as_bytes(), 10),
            Ok((None, Some(b"S".to_vec())))
        );
    }

    #[test]
    fn a_bad_form_is_a_client_error() {
        let two = format!("{}{}--b--\r\n", part("chart", "P"), part("chart", "Q"));
        assert_eq!(read(FORM, two.as_bytes(), 10), Err(400));
        let big = format!("{}--b--\r\n", part("chart", "0123456789A"));
        assert_eq!(read(FORM, big.as_bytes(), 10), Err(413));
        assert_eq!(read("multipart/form-data", b"--b\r\n\r\n", 10), Err(400));
        assert_eq!(read(FORM, b"--b\r\nno end", 10), Err(400));
    }
}
