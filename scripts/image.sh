#!/usr/bin/env bash
# Builds the vllm-diag container image from a binary, pulling nothing (FROM scratch, deploy/Containerfile).
#
#   scripts/image.sh [--binary PATH] [--tag NAME] [--engine CMD]
#   scripts/image.sh --print-tag      the default tag, which deploy/kubernetes names; builds nothing
#
#   --binary PATH  the vllm-diag binary to put in the image [default: target/release/vllm-diag,
#                  built with `cargo build --release --locked` when missing]
#   --tag NAME     the image name [default: localhost/vllm-diag:<version in Cargo.toml>]
#   --engine CMD   the container engine, split on spaces [default: $CONTAINER_ENGINE, else podman];
#                  podman or buildah (both take `build --pull=never`)
#
# The image holds the binary at /usr/local/bin/vllm-diag (the entrypoint), the shared libraries
# `ldd` lists for it (glibc's libc, libm, libgcc_s and the loader: the binary is dynamically linked
# against the build machine's glibc, so the image carries that same glibc), /etc/passwd and
# /etc/group naming user 65532 (vllm-diag), and /etc/nsswitch.conf. It runs as 65532 and needs no
# writable path. Prints the tag on stdout when done. docs/container.md says how to run and publish it.
set -euo pipefail
cd "$(dirname "$0")/.."

binary="" tag="" engine="${CONTAINER_ENGINE:-podman}" print_tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --engine) engine="$2"; shift 2 ;;
    --print-tag) print_tag=1; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
tag="${tag:-localhost/vllm-diag:$version}"
if [ -n "$print_tag" ]; then echo "$tag"; exit 0; fi
if [ -z "$binary" ]; then
  binary=target/release/vllm-diag
  [ -x "$binary" ] || cargo build --release --locked --bin vllm-diag >&2
fi
[ -x "$binary" ] || { echo "image.sh: $binary is not an executable file" >&2; exit 2; }
command -v ldd >/dev/null || { echo "image.sh: ldd is needed (Debian package libc-bin)" >&2; exit 2; }

ctx="$(mktemp -d "${TMPDIR:-/tmp}/vllm-diag-image.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc"
cp "$binary" "$root/usr/local/bin/vllm-diag"
chmod 0755 "$root/usr/local/bin/vllm-diag"

# Every library the dynamic loader resolves, and the loader itself, at the path the binary names.
libs="$(ldd "$binary" | awk '/=> \// {print $3} /^[[:space:]]*\// {print $1}')"
[ -n "$libs" ] || { echo "image.sh: ldd lists no library for $binary (a static binary needs none: fine)" >&2; }
for lib in $libs; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done

printf 'root:x:0:0:root:/root:/sbin/nologin\nvllm-diag:x:65532:65532:vllm-diag:/nonexistent:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nvllm-diag:x:65532:\n' > "$root/etc/group"
# glibc resolves host names through this file's order: /etc/hosts (which engines and Kubernetes
# mount), then DNS.
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
cp deploy/Containerfile "$ctx/Containerfile"

# shellcheck disable=SC2086 # the engine command is split on purpose (e.g. "buildah bud")
$engine build --pull=never --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.title=vllm-diag" -f "$ctx/Containerfile" -t "$tag" "$ctx" >&2
echo "$tag"
