#!/usr/bin/env bash
# Builds the chart server's container image without any network access:
# the static binary first (cargo, target x86_64-unknown-linux-musl), then
# `buildah build` of the Containerfile beside this script (FROM scratch:
# nothing is pulled; --network none, --pull=never).
#
#   chart-index/deploy/build-image.sh [NAME[:TAG] ...]
#
# Prints the image's ID on stdout, all else on stderr. Tags it
# localhost/chart-index:VERSION (the package's version) and each NAME
# given. Needs buildah, the Rust target (`rustup target add
# x86_64-unknown-linux-musl`) and musl-gcc (Debian's musl-tools: crates
# that compile C, such as ring, build with it); says which is missing.
#
# Environment: CHART_INDEX_SOURCE, the image's source label (default: the
# URL of the git remote `origin`, else "unknown"); SOURCE_DATE_EPOCH, the
# image's creation time (default: the time of the commit checked out):
# the same binary and commit make the same image ID. CARGO_TARGET_DIR as
# cargo reads it.
set -euo pipefail
deploy=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$deploy/../.." && pwd)
target=x86_64-unknown-linux-musl
say() { echo "build-image: $*" >&2; }

missing=()
command -v buildah >/dev/null 2>&1 || missing+=("buildah (Debian: apt-get install buildah)")
command -v musl-gcc >/dev/null 2>&1 || missing+=("musl-gcc (Debian: apt-get install musl-tools)")
rustup target list --installed 2>/dev/null | grep -qx "$target" ||
    missing+=("the Rust target $target (rustup target add $target)")
if [ ${#missing[@]} -gt 0 ]; then
    for m in "${missing[@]}"; do say "missing: $m"; done
    exit 1
fi

cd "$root"
pkgid=$(cargo pkgid --manifest-path chart-index/Cargo.toml)
version=${pkgid##*[#@]}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
    revision="$revision-dirty"
fi
source=${CHART_INDEX_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}
created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

say "cargo build --release -p chart-index --target $target"
cargo build --release -p chart-index --target "$target" >&2
binary="${CARGO_TARGET_DIR:-$root/target}/$target/release/chart-index"

# The build context: the binary without its debug information (its
# symbols stay, for the names in a backtrace), and an empty directory for
# the storage.
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
install -m 0755 "$binary" "$context/chart-index"
strip --strip-debug "$context/chart-index"
mkdir -m 0755 "$context/charts"
"$context/chart-index" --version >&2

names=("localhost/chart-index:$version" "$@")
tags=()
for name in "${names[@]}"; do tags+=(-t "$name"); done
labels=(
    "org.opencontainers.image.version=$version"
    "org.opencontainers.image.revision=$revision"
    "org.opencontainers.image.source=$source"
)
annotations=()
for l in "${labels[@]}"; do annotations+=(--annotation "$l"); done
say "buildah build (version $version, revision $revision)"
buildah build --network none --pull=never --format oci --timestamp "$created" \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
    --build-arg "SOURCE=$source" "${annotations[@]}" \
    --iidfile "$context/iid" "${tags[@]}" \
    -f "$deploy/Containerfile" "$context" >&2
id=$(cat "$context/iid")
say "built $id ($(buildah images --format '{{.Size}}' "$id" 2>/dev/null || echo '?')), tagged ${names[*]}"
echo "$id"
