//! Downloads: a package (or its provenance file) streamed from its file,
//! never read whole.
//!
//! The file is opened as every read of the storage is (`storage`'s
//! [`open_in_storage`]: plain names, no symbolic link on the way, the
//! opened file checked), on tokio's blocking pool; then tower-http's
//! `ServeDir` answers from that open file: `Range` (one range: 206 with
//! `Content-Range`; one that cannot be met: 416; several: the whole file,
//! as RFC 9110 allows), `ETag` and `Last-Modified` from the opened file's
//! size and modification time, the conditional requests of RFC 9110
//! (`If-None-Match` and `If-Modified-Since`: 304; `If-Match` and
//! `If-Unmodified-Since`: 412; `If-Range`, read here), and `HEAD` from the file's
//! metadata without reading it. The body is read in 64 KiB chunks by
//! `tokio::fs` (the blocking pool, never a runtime worker), so a download
//! holds a chunk at a time, whatever the file's size.
//!
//! `ServeDir` is given a backend that hands it the file already opened
//! ([`Opened`]) rather than opening a path itself: tower-http's own
//! backend would follow a symbolic link swapped in between the checks and
//! the open.

use std::fs::Metadata;
use std::future::{Ready, ready};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use tokio::io::{AsyncRead, AsyncSeek, ReadBuf};
use tower_http::services::ServeDir;
use tower_http::services::fs::{Backend, File};

use crate::http::Reply;
use crate::storage::{FsError, open_in_storage};

/// Answers a `GET` or `HEAD` of `root/tenant.../file`, streamed from the
/// file, as `content_type`; or why the file cannot be served.
pub async fn serve(
    root: &Path,
    tenant: &[String],
    file: &str,
    content_type: &'static str,
    req: Request,
) -> Result<Reply, FsError> {
    let (root, tenant, name) = (root.to_owned(), tenant.to_vec(), file.to_owned());
    let (f, meta) = tokio::task::spawn_blocking(move || {
        let names: Vec<&str> = tenant.iter().map(String::as_str).collect();
        open_in_storage(&root, &names, &name)
    })
    .await
    .map_err(|e| FsError::Io(io::Error::other(e)))??;
    // Only the method and the headers count: the path is the file's own
    // business (the backend ignores it).
    let (mut parts, _) = req.into_parts();
    parts.uri = axum::http::Uri::from_static("/package");
    if !if_range_holds(&parts.headers, &meta) {
        parts.headers.remove(header::RANGE);
    }
    let mut service = ServeDir::with_backend("", Opened::new(tokio::fs::File::from_std(f), meta))
        .append_index_html_on_directories(false)
        .redirect_to_trailing_slash(false)
        .ignore_multi_range_requests(true);
    let reply = service
        .try_call(Request::from_parts(parts, Body::empty()))
        .await
        .map_err(FsError::Io)?;
    let mut reply = reply.map(Body::new).into_response();
    if matches!(reply.status(), StatusCode::OK | StatusCode::PARTIAL_CONTENT) {
        reply
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    Ok(reply)
}

/// Whether a `Range` may be served as asked, as `If-Range` (RFC 9110
/// §13.1.5) says, which tower-http does not read: yes without it; with
/// it, only if it names the file as it is (its `ETag`, compared strongly,
/// or its `Last-Modified` date); otherwise the whole file is sent, so
/// that a client resuming a download of a package replaced meanwhile
/// never puts two versions together.
fn if_range_holds(headers: &HeaderMap, meta: &Metadata) -> bool {
    let Some(value) = headers.get(header::IF_RANGE) else {
        return true;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let Ok(modified) = meta.modified() else {
        return false;
    };
    if value.starts_with('"') {
        etag(meta.len(), modified).is_some_and(|e| e == value)
    } else {
        httpdate::fmt_http_date(modified) == value
    }
}

/// The `ETag` tower-http's `ServeDir` gives a file of `size` bytes
/// modified at `modified` (its `ETag::from_metadata`; a test holds the
/// two together, `downloads.rs`'s `If-Range` checks).
fn etag(size: u64, modified: SystemTime) -> Option<String> {
    let d = modified.duration_since(UNIX_EPOCH).ok()?;
    Some(format!(
        "\"{:x}.{:08x}-{:x}\"",
        d.as_secs(),
        d.subsec_nanos(),
        size
    ))
}

/// A `ServeDir` backend holding one file, already opened: it hands that
/// file out once, whatever path it is asked for, and its metadata (taken
/// from the open file) as often as asked. Each request has its own (the
/// mutex is never contended: it only lets the file be taken out once).
#[derive(Clone)]
struct Opened {
    file: Arc<Mutex<Option<tokio::fs::File>>>,
    meta: Metadata,
}

impl Opened {
    fn new(file: tokio::fs::File, meta: Metadata) -> Opened {
        Opened {
            file: Arc::new(Mutex::new(Some(file))),
            meta,
        }
    }
}

impl Backend for Opened {
    type File = OpenedFile;
    type Metadata = Metadata;
    type OpenFuture = Ready<io::Result<OpenedFile>>;
    type MetadataFuture = Ready<io::Result<Metadata>>;

    fn open(&self, _path: PathBuf) -> Self::OpenFuture {
        let file = self
            .file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        ready(
            file.map(|file| OpenedFile {
                file,
                meta: self.meta.clone(),
            })
            .ok_or_else(|| io::Error::other("the package's file was already served")),
        )
    }

    fn metadata(&self, _path: PathBuf) -> Self::MetadataFuture {
        ready(Ok(self.meta.clone()))
    }
}

/// The file [`Opened`] hands out, with the metadata it was opened with.
struct OpenedFile {
    file: tokio::fs::File,
    meta: Metadata,
}

impl AsyncRead for OpenedFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.file).poll_read(cx, buf)
    }
}

impl AsyncSeek for OpenedFile {
    fn start_seek(mut self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.file).start_seek(position)
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(&mut self.file).poll_complete(cx)
    }
}

impl File for OpenedFile {
    type Metadata = Metadata;
    type MetadataFuture<'a> = Ready<io::Result<Metadata>>;

    fn metadata(&self) -> Self::MetadataFuture<'_> {
        ready(Ok(self.meta.clone()))
    }
}
