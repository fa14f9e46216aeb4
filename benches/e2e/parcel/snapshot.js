#!/usr/bin/env node
// The peer of `cargo bench --bench e2e -- restart` (benches/e2e/restart.rs):
// @parcel/watcher's writeSnapshot and getEventsSince on one tree.
//
//   node snapshot.js write DIR SNAPSHOT [BACKEND]
//     -> {"ms": <writeSnapshot's time>, "bytes": <the snapshot's size>, ...}
//   node snapshot.js since DIR SNAPSHOT [BACKEND]
//     -> {"ms": <getEventsSince's time>, "created": n, "updated": n,
//         "deleted": n, "events": [{"type": "create", "path": "/abs"}, ...]}
//
// BACKEND: `inotify` (Linux's default when watchman is not installed: the
// default tries watchman first), `brute-force`, or `default`. On Linux both
// crawl the same way for snapshots: InotifyBackend inherits
// BruteForceBackend's writeSnapshot and getEventsSince, which read the
// whole tree (src/unix/legacy.cc: readdir and an fstatat of every entry)
// and compare each entry's mtime (files only) with the snapshot's.
//
// ms is the call alone (measured around the awaited promise), not node's
// start-up nor the module's load; the bench times the whole process too.
//
// The package is loaded from target/parcel-bench, or from
// $SPECWATCH_PARCEL_PREFIX. Installed there from this directory's
// package.json and package-lock.json (restart.rs's header):
//
//   mkdir -p target/parcel-bench
//   cp benches/e2e/parcel/package.json benches/e2e/parcel/package-lock.json target/parcel-bench/
//   npm ci --prefix target/parcel-bench --no-audit --no-fund
'use strict';

const fs = require('fs');
const path = require('path');

const [mode, dir, snapshot, backendArg] = process.argv.slice(2);
if (!['write', 'since', 'version'].includes(mode) || (mode !== 'version' && (!dir || !snapshot))) {
  process.stderr.write('usage: node snapshot.js write|since DIR SNAPSHOT [inotify|brute-force|default]\n');
  process.exit(2);
}

const prefix =
  process.env.SPECWATCH_PARCEL_PREFIX || path.join(__dirname, '..', '..', '..', 'target', 'parcel-bench');
const pkgDir = path.join(prefix, 'node_modules', '@parcel', 'watcher');
let watcher;
try {
  watcher = require(pkgDir);
} catch (err) {
  process.stderr.write(`@parcel/watcher not loadable from ${pkgDir}: ${String(err.message).split('\n')[0]}\n`);
  process.exit(3);
}
const version = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
if (mode === 'version') {
  process.stdout.write(JSON.stringify({version}) + '\n');
  process.exit(0);
}

const backend = backendArg || 'inotify';
// `default` means the package's own choice: no option at all.
const opts = backend === 'default' ? {} : {backend};

async function main() {
  if (mode === 'write') {
    const t = process.hrtime.bigint();
    await watcher.writeSnapshot(dir, snapshot, opts);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    const bytes = fs.statSync(snapshot).size;
    process.stdout.write(JSON.stringify({mode, backend, version, ms, bytes}) + '\n');
  } else {
    const t = process.hrtime.bigint();
    const events = await watcher.getEventsSince(dir, snapshot, opts);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    const count = (type) => events.filter((e) => e.type === type).length;
    process.stdout.write(
      JSON.stringify({
        mode,
        backend,
        version,
        ms,
        created: count('create'),
        updated: count('update'),
        deleted: count('delete'),
        events: events.map((e) => ({type: e.type, path: e.path})),
      }) + '\n',
    );
  }
}

main().catch((err) => {
  process.stderr.write(`${mode} failed: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
