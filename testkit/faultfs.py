#!/usr/bin/env python3
"""A FUSE file system for the storage-error tests (tests/storage_errors.rs,
through testkit/src/faultfs.rs): a passthrough of a source directory whose
operations fail with an errno on demand, for the whole mount or below one
path.

    faultfs.py SOURCE MOUNTPOINT CONTROL_DIR
    faultfs.py --check        exits 0 if the FUSE bindings are there

Runs in the foreground until unmounted (`fusermount -u -z MOUNTPOINT`).

The test switches it by replacing CONTROL_DIR/mode (written beside, then
renamed over) with one line:

    SEQ ok                   every operation passes through
    SEQ ERRNO PREFIX         every operation on PREFIX or below it fails
                             with ERRNO (a name: EIO, ESTALE, ...);
                             PREFIX "/" is the whole mount

Each operation that fails is noted, as a line `SEQ OP PATH`, in
CONTROL_DIR/failed (appended to): a test can wait for an operation that
failed after a point in time (a poll that failed), not sleep and hope.

Every operation looks at the control file first (a `stat`; read again when
it was replaced), so an operation that begins after the rename sees the new
mode. Once it has read a line, the file system writes its SEQ to
CONTROL_DIR/ack (beside, then renamed over): a test that sees its SEQ there
knows that every operation from then on fails (or passes) as it asked.
The kernel keeps no entry, attribute or negative cache for this mount
(`entry_timeout`, `attr_timeout`, `negative_timeout` are 0) and reads go
to the file system (`direct_io`): nothing is answered without asking it.

Needs Debian's python3-fusepy (module `fusepy`) or PyPI's fusepy (module
`fuse`); exits with status 3, saying so on stderr, without it.
"""

import errno
import os
import sys
import threading

try:
    import fusepy as fuse
except ImportError:
    try:
        import fuse

        if not hasattr(fuse, "FUSE"):  # python3-fuse, another binding
            raise ImportError("the module fuse is not fusepy")
    except ImportError as e:
        sys.stderr.write(f"faultfs: no fusepy ({e}); Debian: apt-get install python3-fusepy\n")
        sys.exit(3)


class Control:
    """The mode, as the control file last said."""

    def __init__(self, directory):
        self.dir = directory
        self.file = os.path.join(directory, "mode")
        self.failed = os.path.join(directory, "failed")
        self.seq = "0"
        self.lock = threading.Lock()
        self.seen = None  # (inode, mtime_ns) of the file last read
        self.errno = 0
        self.prefix = "/"

    def _ack(self, seq):
        tmp = os.path.join(self.dir, "ack.tmp")
        with open(tmp, "w") as f:
            f.write(seq + "\n")
        os.rename(tmp, os.path.join(self.dir, "ack"))

    def _refresh(self):
        try:
            st = os.stat(self.file)
        except FileNotFoundError:
            return
        key = (st.st_ino, st.st_mtime_ns)
        if key == self.seen:
            return
        with open(self.file) as f:
            words = f.read().split()
        self.seen = key
        if not words:
            return
        seq, rest = words[0], words[1:]
        self.seq = seq
        if rest == ["ok"]:
            self.errno, self.prefix = 0, "/"
        else:
            self.errno = getattr(errno, rest[0])
            self.prefix = rest[1] if len(rest) > 1 else "/"
        self._ack(seq)

    def check(self, op, path):
        """Raises the mode's error if operation `op` on `path` is to fail
        now, and notes it in CONTROL_DIR/failed."""
        with self.lock:
            self._refresh()
            code, prefix = self.errno, self.prefix
            if code and (
                prefix == "/" or path == prefix or path.startswith(prefix.rstrip("/") + "/")
            ):
                fd = os.open(self.failed, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    os.write(fd, f"{self.seq} {op} {path}\n".encode())
                finally:
                    os.close(fd)
                raise fuse.FuseOSError(code)


class FaultFs(fuse.Operations):
    """A passthrough of `source`; every operation asks `control` first."""

    use_ns = True

    def __init__(self, source, control):
        self.source = source
        self.control = control

    def __call__(self, op, path, *args):
        # (Letting go of a handle never fails: the source's descriptor
        # would leak.)
        if op not in ("init", "destroy", "release", "releasedir"):
            self.control.check(op, path or "/")
        return super().__call__(op, path, *args)

    def _real(self, path):
        return os.path.join(self.source, path.lstrip("/"))

    @staticmethod
    def _os(call, *args):
        try:
            return call(*args)
        except OSError as e:
            raise fuse.FuseOSError(e.errno or errno.EIO)

    # Looking.
    def getattr(self, path, fh=None):
        st = self._os(os.lstat, self._real(path))
        keys = (
            "st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size",
            "st_atime_ns", "st_mtime_ns", "st_ctime_ns",
        )
        attrs = {k.replace("_ns", ""): getattr(st, k) for k in keys}
        return attrs

    def access(self, path, amode):
        if not os.access(self._real(path), amode, follow_symlinks=False):
            raise fuse.FuseOSError(errno.EACCES)

    def opendir(self, path):
        return 0

    def readdir(self, path, fh):
        out = [(".", None, 0), ("..", None, 0)]
        with os.scandir(self._real(path)) as it:
            for e in it:
                try:
                    mode = e.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue  # gone since the listing
                # (The type, so that the kernel hands out d_type as a
                # local file system does; the inode for `use_ino`.)
                out.append((e.name, {"st_mode": mode, "st_ino": e.inode()}, 0))
        return out

    def readlink(self, path):
        return self._os(os.readlink, self._real(path))

    def statfs(self, path):
        st = self._os(os.statvfs, self._real(path))
        keys = (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
            "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax",
        )
        return {k: getattr(st, k) for k in keys}

    # Files.
    def open(self, path, flags):
        return self._os(os.open, self._real(path), flags)

    def create(self, path, mode, fi=None):
        return self._os(os.open, self._real(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, size, offset, fh):
        return self._os(os.pread, fh, size, offset)

    def write(self, path, data, offset, fh):
        return self._os(os.pwrite, fh, data, offset)

    def truncate(self, path, length, fh=None):
        self._os(os.truncate, self._real(path), length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        self._os(os.fsync, fh)

    def release(self, path, fh):
        os.close(fh)

    # Names.
    def unlink(self, path):
        self._os(os.unlink, self._real(path))

    def mkdir(self, path, mode):
        self._os(os.mkdir, self._real(path), mode)

    def rmdir(self, path):
        self._os(os.rmdir, self._real(path))

    def rename(self, old, new):
        self.control.check("rename", new)
        self._os(os.rename, self._real(old), self._real(new))

    def symlink(self, target, source):
        self._os(os.symlink, source, self._real(target))

    def chmod(self, path, mode):
        self._os(os.chmod, self._real(path), mode)

    def utimens(self, path, times=None):
        real = self._real(path)
        if times is None:
            self._os(os.utime, real)
        else:
            self._os(lambda p: os.utime(p, ns=times), real)


def main():
    if sys.argv[1:] == ["--check"]:
        sys.exit(0)
    if len(sys.argv) != 4:
        sys.stderr.write("usage: faultfs.py SOURCE MOUNTPOINT CONTROL_DIR\n")
        sys.exit(2)
    source, mountpoint, control = sys.argv[1:]
    fuse.FUSE(
        FaultFs(os.path.abspath(source), Control(os.path.abspath(control))),
        mountpoint,
        foreground=True,
        nothreads=False,
        fsname="faultfs",
        subtype="faultfs",
        use_ino=True,
        entry_timeout=0,
        attr_timeout=0,
        negative_timeout=0,
        direct_io=True,
    )


if __name__ == "__main__":
    main()
