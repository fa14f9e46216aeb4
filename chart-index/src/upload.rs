//! Uploads: a package is written to a temporary `.upload-*` file as its
//! bytes arrive, and hashed on the way ([`Spool`]), never held whole; the
//! size limit is the body reader's, counted as bytes arrive (the `http`
//! and `form` modules), so a body past it is refused (413) with at most
//! one chunk more received, and its file removed.
//!
//! The writing and hashing run on one task of tokio's blocking pool per
//! upload, fed through a bounded channel: no file I/O (nor sha256) on a
//! runtime worker, and a client that sends faster than the disk writes
//! waits (the channel is full, so its body is not read meanwhile).
//!
//! The file is made in the tenant's directory when there is one, else in
//! the storage root (on the same file system as a tenant directory made
//! later, so that the finished file can be hard-linked to its name there;
//! the watch ignores `.upload-*` files wherever they are).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::chart::hex;
use crate::http::{Reply, Sink, error};
use crate::storage::{UPLOAD_PREFIX, create_new, resolve_dir};

/// Chunks waiting for the writer, at most (with hyper's chunks of up to
/// a few dozen KiB: well under a MiB per upload).
const QUEUE: usize = 8;

/// A temporary file's name, unique among replicas too (another host's
/// process may have our pid): `.upload-PID-N-NANOS`, `n` this server's
/// count of uploads.
pub fn temp_name(n: u64) -> String {
    format!(
        "{UPLOAD_PREFIX}{}-{n}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    )
}

/// A package's bytes received so far, written to a temporary file by a
/// blocking task; [`Spool::finish`] gives the [`Spooled`] file. Dropped
/// before that (a refused or broken upload), its file is removed once the
/// writer has seen the end of the channel.
pub struct Spool {
    tx: Option<mpsc::Sender<Bytes>>,
    task: Option<JoinHandle<io::Result<Spooled>>>,
}

/// A package received whole: its temporary file, size and sha256. Not
/// yet synced to disk. When this is dropped, the temporary name is
/// removed (the file stays under any name it was linked to; once renamed,
/// there is nothing left to remove).
pub struct Spooled {
    pub file: File,
    pub path: PathBuf,
    pub size: u64,
    pub digest: String,
}

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Spool {
    /// Starts spooling to a file named `name` in the directory of tenant
    /// `names` below `root` if it is there, else in `root`.
    pub fn new(root: PathBuf, names: Vec<String>, name: String) -> Spool {
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::task::spawn_blocking(move || {
            let tenant: Vec<&str> = names.iter().map(String::as_str).collect();
            let dir = resolve_dir(&root, &tenant, false).unwrap_or(root);
            write(&dir.join(name), rx)
        });
        Spool {
            tx: Some(tx),
            task: Some(task),
        }
    }

    /// Every chunk has been passed: waits for the writer to have written
    /// them, and gives the file.
    pub async fn finish(mut self) -> Result<Spooled, Reply> {
        self.tx = None;
        self.outcome().await
    }

    /// The writer's end: the file, or why it failed (500).
    async fn outcome(&mut self) -> Result<Spooled, Reply> {
        let Some(task) = self.task.take() else {
            return Err(error(
                500,
                "storing the package: the upload's writer is gone",
            ));
        };
        match task.await {
            Ok(Ok(spooled)) => Ok(spooled),
            Ok(Err(e)) => Err(error(500, &format!("storing the package: {e}"))),
            Err(e) => Err(error(500, &format!("storing the package: {e}"))),
        }
    }
}

impl Sink for Spool {
    async fn discard(&mut self) {
        self.tx = None;
        if let Some(task) = self.task.take() {
            // Its file is removed as the `Spooled` it gives is dropped.
            let _ = task.await;
        }
    }

    async fn take(&mut self, chunk: Bytes) -> Result<(), Reply> {
        let sent = match &self.tx {
            Some(tx) => tx.send(chunk).await.is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The writer has stopped: it failed, and says why.
        self.tx = None;
        match self.outcome().await {
            Ok(_) => Err(error(
                500,
                "storing the package: the upload's writer stopped",
            )),
            Err(reply) => Err(reply),
        }
    }
}

/// Writes what comes through `rx` to the new file `path`, hashing it,
/// until the channel closes.
fn write(path: &Path, mut rx: mpsc::Receiver<Bytes>) -> io::Result<Spooled> {
    let file = create_new(path)?;
    // From here on, dropping it removes the file.
    let mut spooled = Spooled {
        file,
        path: path.to_owned(),
        size: 0,
        digest: String::new(),
    };
    let mut hash = Sha256::new();
    while let Some(chunk) = rx.blocking_recv() {
        spooled.file.write_all(&chunk)?;
        hash.update(&chunk);
        spooled.size += chunk.len() as u64;
    }
    spooled.digest = hex(&hash.finalize());
    Ok(spooled)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use axum::body::Bytes;

    use super::{Spool, temp_name};
    use crate::chart::sha256_hex;
    use crate::http::Sink;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("a runtime")
    }

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_spool_writes_and_hashes_what_comes_and_removes_its_temporary_name() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("org")).unwrap();
        let rt = runtime();
        let chunks: Vec<Vec<u8>> = (0u8..40).map(|i| vec![i; 10_000]).collect();
        let whole = chunks.concat();
        let name = temp_name(1);
        let spooled = rt.block_on(async {
            let mut spool = Spool::new(root.clone(), vec!["org".into()], name.clone());
            for c in &chunks {
                spool.take(Bytes::from(c.clone())).await.unwrap();
            }
            spool.finish().await.unwrap()
        });
        assert_eq!(spooled.path, root.join("org").join(&name), "in the tenant");
        assert_eq!(spooled.size, whole.len() as u64);
        assert_eq!(spooled.digest, sha256_hex(&whole));
        let mut back = Vec::new();
        std::fs::File::open(&spooled.path)
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert!(back == whole);
        drop(spooled);
        assert!(names(&root.join("org")).is_empty(), "removed when dropped");

        // No such tenant yet: in the root. Dropped unfinished (a refused
        // upload): its file goes once the writer has seen the end.
        let name = temp_name(2);
        rt.block_on(async {
            let mut spool = Spool::new(root.clone(), vec!["new".into()], name.clone());
            spool.take(Bytes::from_static(b"abc")).await.unwrap();
            let finished = Spool::new(root.clone(), vec!["new".into()], temp_name(3));
            let kept = finished.finish().await.unwrap();
            assert_eq!(kept.path.parent(), Some(root.as_path()), "in the root");
            assert_eq!(
                (kept.size, kept.digest.as_str()),
                (0, sha256_hex(b"").as_str())
            );
            std::fs::hard_link(&kept.path, root.join("linked")).unwrap();
            drop(kept);
            drop(spool);
        });
        rt.shutdown_timeout(std::time::Duration::from_secs(10));
        assert_eq!(
            names(&root),
            ["linked", "org"],
            "the linked file stays; the dropped spool's file is gone"
        );
    }
}
