//! The chart repository's routes, for a tenant path of any depth (`org`,
//! `org/team`, or none for the storage root):
//!
//! - `GET /<tenant>/index.yaml`: the index (header `X-Index-Seq`);
//! - `GET /<tenant>/charts/<file>.tgz`: a package the index lists;
//! - `POST /api/<tenant>/charts`: stores a package (201, 409, 400, 413);
//! - `DELETE /api/<tenant>/charts/<name>/<version>`: removes it (200, 404).
//!
//! Uploads and deletes only write to the storage directory: the index
//! learns of them from the watch, like any other writer's.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::chart::parse_chart;
use crate::http::{Conn, Head, Reply, read_body, segments};
use crate::index::{Index, render_index};
use crate::storage::{
    FsError, UPLOAD_PREFIX, create_new, fill, open_in_storage, rel, resolve_dir, safe_name,
    sync_dir,
};

/// What the routes share: the storage root and its index.
pub struct State {
    /// The storage directory, canonical.
    pub root: PathBuf,
    pub index: RwLock<Index>,
    /// The largest upload accepted, in bytes.
    max_upload: u64,
    /// Uploads so far (names temporary files uniquely).
    uploads: AtomicU64,
}

impl State {
    pub fn new(root: PathBuf, index: Index, max_upload: u64) -> State {
        State {
            root,
            index: RwLock::new(index),
            max_upload,
            uploads: AtomicU64::new(0),
        }
    }
}

impl FsError {
    /// The answer to a request that met this error on `what`.
    fn reply(self, what: &str) -> Reply {
        match self {
            FsError::Missing => Reply::error(404, &format!("no such {what}")),
            FsError::Refused(why) => Reply::error(400, &why),
            FsError::Io(e) => Reply::error(500, &e.to_string()),
        }
    }
}

/// Tenant names from URL segments: each must be a plain name.
fn tenant_of(segs: &[String]) -> Result<Vec<&str>, Reply> {
    segs.iter()
        .map(|s| {
            if safe_name(s) {
                Ok(s.as_str())
            } else {
                Err(Reply::error(
                    400,
                    &format!("{s:?} is not a valid tenant name"),
                ))
            }
        })
        .collect()
}

/// Answers one request.
pub fn route(state: &State, head: &Head, conn: &mut Conn) -> Reply {
    let segs = match segments(&head.target) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let n = segs.len();
    let last = segs.last().map_or("", String::as_str);
    let is_index = last == "index.yaml";
    let is_package = n >= 2 && segs[n - 2] == "charts" && last.ends_with(".tgz");
    let is_upload = n >= 2 && segs[0] == "api" && last == "charts";
    let is_delete = n >= 4 && segs[0] == "api" && segs[n - 3] == "charts";
    let method = head.method.as_str();
    let result = match method {
        "GET" | "HEAD" if is_index => get_index(state, &segs[..n - 1]),
        "GET" | "HEAD" if is_package => get_package(state, &segs[..n - 2], last),
        "POST" if is_upload => upload(state, &segs[1..n - 1], head, conn),
        "DELETE" if is_delete => delete(state, &segs[1..n - 3], &segs[n - 2], last),
        _ => {
            let mut allow = Vec::new();
            if is_index || is_package {
                allow.push("GET, HEAD");
            }
            if is_upload {
                allow.push("POST");
            }
            if is_delete {
                allow.push("DELETE");
            }
            Err(if allow.is_empty() {
                Reply::error(404, "no such route")
            } else {
                Reply::error(405, &format!("{method} is not allowed here"))
                    .with("Allow", allow.join(", "))
            })
        }
    };
    result.unwrap_or_else(|r| r)
}

fn get_index(state: &State, tenant: &[String]) -> Result<Reply, Reply> {
    let key = tenant_of(tenant)?.join("/");
    let index = state.index.read().unwrap_or_else(PoisonError::into_inner);
    let charts = index
        .tenants
        .get(&key)
        .ok_or_else(|| Reply::error(404, &format!("no tenant /{key}")))?;
    Ok(Reply::new(200, "application/x-yaml", render_index(charts))
        .with("X-Index-Seq", index.seq.to_string()))
}

fn get_package(state: &State, tenant: &[String], file: &str) -> Result<Reply, Reply> {
    let names = tenant_of(tenant)?;
    if !safe_name(file) {
        return Err(Reply::error(
            400,
            &format!("{file:?} is not a package name"),
        ));
    }
    let key = names.join("/");
    let listed = state
        .index
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .tenants
        .get(&key)
        .is_some_and(|charts| charts.contains_key(file));
    if !listed {
        return Err(Reply::error(404, &format!("no package {file} in /{key}")));
    }
    let (mut f, meta) =
        open_in_storage(&state.root, &names, file).map_err(|e| e.reply("package"))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.read_to_end(&mut bytes)
        .map_err(|e| Reply::error(500, &e.to_string()))?;
    Ok(Reply::new(200, "application/gzip", bytes))
}

fn upload(state: &State, tenant: &[String], head: &Head, conn: &mut Conn) -> Result<Reply, Reply> {
    let names = tenant_of(tenant)?;
    let body = read_body(head, conn, state.max_upload)?;
    let chart = parse_chart(&body).map_err(|e| Reply::error(400, &e))?;
    let key = names.join("/");
    let listed = state
        .index
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .tenants
        .get(&key)
        .is_some_and(|charts| {
            charts
                .values()
                .any(|c| c.meta.name == chart.name && c.meta.version == chart.version)
        });
    let exists = || {
        Reply::error(
            409,
            &format!("{} {} already exists in /{key}", chart.name, chart.version),
        )
    };
    if listed {
        return Err(exists());
    }
    let dir = resolve_dir(&state.root, &names, true).map_err(|e| e.reply("tenant"))?;
    let file = format!("{}-{}.tgz", chart.name, chart.version);
    let target = dir.join(&file);
    if fs::symlink_metadata(&target).is_ok() {
        return Err(exists());
    }
    // Unique among replicas too (another host's process may have our pid).
    let tmp = dir.join(format!(
        "{UPLOAD_PREFIX}{}-{}-{}",
        std::process::id(),
        state.uploads.fetch_add(1, Ordering::Relaxed),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    ));
    let out = create_new(&tmp).map_err(|e| Reply::error(500, &format!("storing: {e}")))?;
    let written = fill(out, &body).and_then(|()| {
        // A link fails when the name exists: no upload replaces a package.
        match fs::hard_link(&tmp, &target) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            // No hard links here (some FUSE file systems): rename.
            Err(_) if fs::symlink_metadata(&target).is_ok() => Ok(false),
            Err(_) => fs::rename(&tmp, &target).map(|()| true),
        }
    });
    let _ = fs::remove_file(&tmp);
    sync_dir(&dir);
    match written {
        Ok(true) => {
            eprintln!(
                "upload: {} ({} {})",
                rel(&state.root, &target),
                chart.name,
                chart.version
            );
            Ok(Reply::json(201, "{\"saved\":true}".into()))
        }
        Ok(false) => Err(exists()),
        Err(e) => Err(Reply::error(500, &format!("storing the package: {e}"))),
    }
}

fn delete(state: &State, tenant: &[String], name: &str, version: &str) -> Result<Reply, Reply> {
    let names = tenant_of(tenant)?;
    if !safe_name(name) || !safe_name(version) {
        return Err(Reply::error(400, "not a valid chart name or version"));
    }
    let dir = resolve_dir(&state.root, &names, false).map_err(|e| e.reply("tenant"))?;
    // The file an upload makes, and any other file the index lists with
    // that name and version (one copied in by hand).
    let mut files = BTreeSet::from([format!("{name}-{version}.tgz")]);
    if let Some(charts) = state
        .index
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .tenants
        .get(&names.join("/"))
    {
        files.extend(
            charts
                .iter()
                .filter(|(_, c)| c.meta.name == name && c.meta.version == version)
                .map(|(f, _)| f.clone()),
        );
    }
    let mut removed = 0;
    for file in files {
        let path = dir.join(&file);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => match fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Reply::error(500, &format!("removing {file}: {e}"))),
            },
            _ => {}
        }
    }
    sync_dir(&dir);
    if removed == 0 {
        return Err(Reply::error(
            404,
            &format!("no {name} {version} in /{}", names.join("/")),
        ));
    }
    eprintln!("delete: /{} {name} {version}", names.join("/"));
    Ok(Reply::json(200, "{\"deleted\":true}".into()))
}
