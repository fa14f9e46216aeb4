//! What is served from files: packages streamed with `Range`,
//! `ETag`/`Last-Modified` and conditional requests; and uploads written
//! to a file as they stream in, refused as soon as they pass the size
//! limit, leaving nothing behind.

use crate::charts::{nv, padded_chart, prov, sha256, snapshot};
use crate::client::{Body, Conn, ask, header, http, request};
use crate::server::Server;

/// The temporary upload files under `dir` (none should outlive a request).
fn temporary_files(dir: &std::path::Path) -> Vec<String> {
    snapshot(dir)
        .into_keys()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".upload-"))
        .collect()
}

#[test]
fn packages_are_served_with_ranges_and_conditional_requests() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start("downloads", &storage, &[]);
    let pkg = padded_chart("big", "1.0.0", 300 << 10);
    let len = pkg.len();
    let sig = prov("big", "1.0.0");
    let r = s.post_form(
        "/api/org/charts",
        &[("chart", "big-1.0.0.tgz", &pkg), ("prov", "p", &sig)],
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let target = "/org/charts/big-1.0.0.tgz";

    // The whole package, with its validators.
    let full = ask(&s, "GET", target, &[]);
    assert_eq!(full.status, 200, "{}", full.text());
    assert!(full.body == pkg, "byte for byte");
    assert_eq!(header(&full, "Content-Type"), "application/gzip");
    assert_eq!(header(&full, "Content-Length"), len.to_string());
    assert_eq!(header(&full, "Accept-Ranges"), "bytes");
    let etag = header(&full, "ETag").to_owned();
    let modified = header(&full, "Last-Modified").to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "a strong ETag: {etag}"
    );

    // HEAD: the same head, no body.
    let head = ask(&s, "HEAD", target, &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(header(&head, "Content-Length"), len.to_string());
    assert_eq!(header(&head, "ETag"), etag);
    assert_eq!(header(&head, "Content-Type"), "application/gzip");

    // Ranges: one is a 206 of those bytes; one past the end, a 416;
    // several, the whole package (RFC 9110 lets a server ignore them).
    let range = |spec: &str, extra: &[&str]| {
        let h = format!("Range: {spec}");
        let mut headers = vec![h.as_str()];
        headers.extend_from_slice(extra);
        ask(&s, "GET", target, &headers)
    };
    let r = range("bytes=100-1099", &[]);
    assert_eq!(r.status, 206, "{}", r.text());
    assert!(r.body == pkg[100..1100], "the range's bytes");
    assert_eq!(header(&r, "Content-Range"), format!("bytes 100-1099/{len}"));
    assert_eq!(header(&r, "Content-Type"), "application/gzip");
    let r = range("bytes=-10", &[]);
    assert_eq!(r.status, 206);
    assert!(r.body == pkg[len - 10..], "the last 10 bytes");
    let r = range(&format!("bytes={}-", len - 1), &[]);
    assert!(r.status == 206 && r.body == pkg[len - 1..]);
    let r = range(&format!("bytes={len}-"), &[]);
    assert_eq!(r.status, 416, "a range past the end");
    assert_eq!(header(&r, "Content-Range"), format!("bytes */{len}"));
    let r = range("bytes=0-1,10-11", &[]);
    assert!(
        r.status == 200 && r.body == pkg,
        "several ranges: all of it"
    );
    // If-Range: the range only while the package is the one named.
    let if_range = format!("If-Range: {etag}");
    let r = range("bytes=0-9", &[&if_range]);
    assert!(r.status == 206 && r.body == pkg[..10], "{}", r.status);
    let r = range("bytes=0-9", &["If-Range: \"another\""]);
    assert!(r.status == 200 && r.body == pkg, "{}", r.status);
    let r = range("bytes=0-9", &[&format!("If-Range: {modified}")]);
    assert!(r.status == 206 && r.body == pkg[..10], "{}", r.status);
    let r = range("bytes=0-9", &["If-Range: Thu, 01 Jan 2015 00:00:00 GMT"]);
    assert!(r.status == 200 && r.body == pkg, "{}", r.status);
    let r = range("bytes=0-9", &[&format!("If-Range: W/{etag}")]);
    assert!(r.status == 200 && r.body == pkg, "a weak tag: {}", r.status);

    // Conditional requests.
    let cond = |h: &str| ask(&s, "GET", target, &[h]);
    let r = cond(&format!("If-None-Match: {etag}"));
    assert_eq!(r.status, 304, "its own ETag");
    assert!(r.body.is_empty());
    assert_eq!(header(&r, "ETag"), etag);
    assert_eq!(cond("If-None-Match: *").status, 304);
    let r = cond("If-None-Match: \"another\"");
    assert!(r.status == 200 && r.body == pkg);
    assert_eq!(cond(&format!("If-Modified-Since: {modified}")).status, 304);
    let r = cond("If-Modified-Since: Thu, 01 Jan 2015 00:00:00 GMT");
    assert!(r.status == 200 && r.body == pkg);
    assert_eq!(cond("If-Match: \"another\"").status, 412);
    assert_eq!(cond(&format!("If-Match: {etag}")).status, 200);
    assert_eq!(
        cond("If-Unmodified-Since: Thu, 01 Jan 2015 00:00:00 GMT").status,
        412
    );
    assert_eq!(
        ask(&s, "HEAD", target, &[&format!("If-None-Match: {etag}")]).status,
        304
    );

    // The provenance file, the same way.
    let p = ask(
        &s,
        "GET",
        "/org/charts/big-1.0.0.tgz.prov",
        &["Range: bytes=0-9"],
    );
    assert_eq!(p.status, 206);
    assert!(p.body == sig[..10]);
    assert_eq!(header(&p, "Content-Type"), "application/pgp-signature");

    // Misses still say what is missing, before any file is opened.
    let r = s.get("/org/charts/nope-1.0.0.tgz");
    assert_eq!(r.status, 404);
    assert!(
        r.text().contains("no package nope-1.0.0.tgz in /org"),
        "{}",
        r.text()
    );
    let r = ask(
        &s,
        "GET",
        "/nope/charts/big-1.0.0.tgz",
        &["Range: bytes=0-1"],
    );
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn a_replaced_package_has_another_etag() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().join("charts");
    let s = Server::start("etags", &storage, &["--allow-overwrite"]);
    let old = padded_chart("c", "1.0.0", 64 << 10);
    assert_eq!(s.post("/api/org/charts", &old).status, 201);
    let r = s.get("/org/charts/c-1.0.0.tgz");
    let etag = header(&r, "ETag").to_owned();
    let new = padded_chart("c", "1.0.0", 65 << 10);
    let r = s.post("/api/org/charts?force", &new);
    assert_eq!(r.status, 201, "{}", r.text());
    let r = ask(
        &s,
        "GET",
        "/org/charts/c-1.0.0.tgz",
        &[&format!("If-None-Match: {etag}")],
    );
    assert_eq!(r.status, 200, "the old ETag no longer matches");
    assert!(r.body == new);
    assert_ne!(header(&r, "ETag"), etag);
}

/// The size limit is counted as the body streams in: a chunked upload
/// that passes it is answered 413 while the client is still sending (it
/// has not sent the end of its body, so only counting can have refused
/// it), and the temporary file it was written to is gone by then. An
/// upload within the limit, sent in pieces, is stored whole with the
/// digest of its bytes.
#[test]
fn an_upload_is_refused_as_soon_as_it_passes_the_limit() {
    let d = tempfile::tempdir().unwrap();
    let storage = d.path().canonicalize().unwrap().join("charts");
    let s = Server::start("streamed-limit", &storage, &["--max-upload-mb", "1"]);
    std::fs::create_dir_all(storage.join("org")).unwrap();
    let before = snapshot(&storage);

    let mut conn = Conn::open(&s.addr, "chunked upload");
    conn.send(b"POST /api/org/charts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    let chunk = vec![0x1fu8; 64 << 10];
    // 17 chunks of 64 KiB: 64 KiB past the 1 MiB limit; no last chunk.
    for _ in 0..17 {
        conn.send(format!("{:x}\r\n", chunk.len()).as_bytes());
        conn.send(&chunk);
        conn.send(b"\r\n");
    }
    let r = conn.answer("the 413 while the body is still open", false);
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(
        r.text()
            .contains("the package is larger than 1048576 bytes"),
        "{}",
        r.text()
    );
    assert_eq!(
        temporary_files(&storage),
        Vec::<String>::new(),
        "the temporary file went before the answer"
    );
    assert_eq!(snapshot(&storage), before, "nothing stored");

    // Within the limit, in pieces: stored whole.
    let pkg = padded_chart("pieces", "1.0.0", 900 << 10);
    assert!(pkg.len() < 1 << 20);
    let r = http(&s.addr, "POST", b"/api/org/charts", Body::Chunked(&pkg));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        std::fs::read(storage.join("org/pieces-1.0.0.tgz")).unwrap(),
        pkg
    );
    let digest = sha256(&pkg);
    let (_, l) = s.index("org");
    assert_eq!(l.unwrap()[&nv("pieces", "1.0.0")].digest, digest);
    s.wait_log("the upload line with the digest hashed on the way", |l| {
        l.starts_with("upload: /org/pieces-1.0.0.tgz") && l.contains(&digest)
    });
    assert_eq!(temporary_files(&storage), Vec::<String>::new());

    // Refused while streaming to a tenant that does not exist yet: no
    // tenant directory is made.
    let big = padded_chart("big", "1.0.0", 2 << 20);
    let r = http(&s.addr, "POST", b"/api/newt/charts", Body::Chunked(&big));
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(!storage.join("newt").exists());
    assert_eq!(temporary_files(&storage), Vec::<String>::new());

    // The connection that was refused still works for the next request
    // once the refused body has been sent (it is read and dropped).
    conn.send(b"0\r\n\r\n");
    conn.send(&request("GET", "/org/index.yaml", &[], b""));
    let r = conn.answer("the index after the refused upload", false);
    assert_eq!(r.status, 200, "{}", r.text());
}
