//! helm-push's upload form: a `multipart/form-data` body read field by
//! field (axum's `Multipart`), each field and the whole form capped. Its
//! own file so that the fuzz target `read_form` and the unit tests reach
//! it without the rest of the server.

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{HeaderMap, header};

use crate::http::{READ_TIMEOUT, Reply, Sink, declared_length, drain, error, timed_out, too_large};

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

/// The fields `chart` (where `read_form`'s sink put it) and `prov` of a
/// form, each if there.
pub type Form<S> = (Option<S>, Option<Vec<u8>>);

/// helm-push's form: the package in field `chart`, passed as it arrives
/// to the sink `chart_sink` makes for it (never held here), its
/// provenance file in `prov`, kept (either may be missing); other fields
/// are read and dropped, as chartmuseum ignores them. Each field is
/// capped, and so is the whole form (413), as bytes arrive.
pub async fn read_form<S: Sink>(
    req: Request,
    max_upload: u64,
    chart_sink: impl FnOnce() -> S,
) -> Result<Form<S>, Reply> {
    let limit = max_upload + MAX_PROV_BYTES + MAX_FORM_OVERHEAD;
    if declared_length(req.headers()).is_some_and(|n| n > limit) {
        let (parts, body) = req.into_parts();
        drain(body, &parts.headers);
        return Err(too_large("the form", limit));
    }
    let mut form = Multipart::from_request(req, &())
        .await
        .map_err(|e| error(400, &format!("multipart form: {}", e.body_text())))?;
    let (mut chart, mut prov): (Option<S>, Option<Vec<u8>>) = (None, None);
    let read = read_fields(&mut form, max_upload, chart_sink, &mut chart, &mut prov).await;
    if let Err(refused) = read {
        if let Some(sink) = &mut chart {
            sink.discard().await;
        }
        return Err(refused);
    }
    Ok((chart, prov))
}

/// Reads the form's fields into `chart` (a sink `chart_sink` makes) and
/// `prov`, each capped.
async fn read_fields<S: Sink>(
    form: &mut Multipart,
    max_upload: u64,
    chart_sink: impl FnOnce() -> S,
    chart: &mut Option<S>,
    prov: &mut Option<Vec<u8>>,
) -> Result<(), Reply> {
    let limit = max_upload + MAX_PROV_BYTES + MAX_FORM_OVERHEAD;
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
    let mut chart_sink = Some(chart_sink);
    loop {
        let field = tokio::time::timeout(READ_TIMEOUT, form.next_field())
            .await
            .map_err(|_| timed_out())?
            .map_err(form_error)?;
        let Some(mut field) = field else { break };
        let name = field.name().unwrap_or("").to_owned();
        let twice = || error(400, &format!("the form has two {name:?} fields"));
        // Where this field's bytes go, and its cap.
        let (mut target, what, cap) = match name.as_str() {
            "chart" => {
                let make = chart_sink.take().ok_or_else(twice)?;
                (
                    Target::Sink(chart.insert(make())),
                    "the package",
                    max_upload,
                )
            }
            "prov" if prov.is_some() => return Err(twice()),
            "prov" => (
                Target::Kept(prov.insert(Vec::new())),
                "the provenance file",
                MAX_PROV_BYTES,
            ),
            _ => (Target::Dropped, "a form field", limit),
        };
        let mut received = 0u64;
        while let Some(chunk) = tokio::time::timeout(READ_TIMEOUT, field.chunk())
            .await
            .map_err(|_| timed_out())?
            .map_err(form_error)?
        {
            received += chunk.len() as u64;
            if received > cap {
                return Err(too_large(what, cap));
            }
            match &mut target {
                Target::Sink(sink) => sink.take(chunk).await?,
                Target::Kept(bytes) => bytes.extend_from_slice(&chunk),
                Target::Dropped => {}
            }
        }
    }
    Ok(())
}

/// Where a form field's bytes go.
enum Target<'a, S> {
    /// The package's sink.
    Sink(&'a mut S),
    /// Kept in memory (the provenance file, at most [`MAX_PROV_BYTES`]).
    Kept(&'a mut Vec<u8>),
    /// Another field: read and dropped.
    Dropped,
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::extract::Request;
    use axum::http::{HeaderValue, header};

    use super::{Form, read_form};

    /// `read_form` on a request with `content_type` and `body`: the form
    /// (its package kept in memory), or the refusal's status.
    fn read(content_type: &str, body: &[u8], max_upload: u64) -> Result<Form<Vec<u8>>, u16> {
        let mut req = Request::new(Body::from(body.to_vec()));
        req.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).expect("a header value"),
        );
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
            .block_on(read_form(req, max_upload, Vec::new))
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
