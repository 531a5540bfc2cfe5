#!/usr/bin/env bash
# Builds the release archive for Linux x86_64 (docs/install.md, "Release archives"):
#
#   scripts/release.sh [--binary PATH] [--out DIR]
#
#   --binary PATH  put this binary in the archive instead of building one (the test suite passes
#                  its own debug build, to check the archive's layout without a release build)
#   --out DIR      where the archive and its checksum go [default: target/dist]
#
# Without --binary it runs `cargo build --release --locked` (about 3.5 minutes on two cores from
# cold). The archive, vllm-diag-VERSION-x86_64-unknown-linux-gnu.tar.gz, holds one folder with:
#   vllm-diag                 the binary, linked against glibc (Debian 12's 2.36 here; it needs the
#                             glibc version GLIBC.txt names, or newer, on the machine it runs on)
#   README.md LICENSE CHANGELOG.md
#   GLIBC.txt                 the newest glibc symbol version the binary needs
#   man/man1/*.1              one manual page per command (vllm-diag man --out)
#   completions/              vllm-diag.bash, _vllm-diag (zsh), vllm-diag.fish
# and a .sha256 file beside it (`sha256sum -c` checks it). Prints the archive's path on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

binary="" out="target/dist"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
target=x86_64-unknown-linux-gnu
[ "$(uname -m)" = x86_64 ] || { echo "release.sh: builds for x86_64 on an x86_64 machine (this is $(uname -m))" >&2; exit 2; }
if [ -z "$binary" ]; then
  cargo build --release --locked --bin vllm-diag >&2
  binary=target/release/vllm-diag
fi
[ -x "$binary" ] || { echo "release.sh: $binary is not an executable file" >&2; exit 2; }

name="vllm-diag-$version-$target"
stage="$(mktemp -d "${TMPDIR:-/tmp}/vllm-diag-release.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
dir="$stage/$name"
mkdir -p "$dir/man/man1" "$dir/completions"
cp "$binary" "$dir/vllm-diag"
cp README.md LICENSE CHANGELOG.md "$dir/"
"$dir/vllm-diag" man --out "$dir/man/man1" >/dev/null
"$dir/vllm-diag" completions bash > "$dir/completions/vllm-diag.bash"
"$dir/vllm-diag" completions zsh > "$dir/completions/_vllm-diag"
"$dir/vllm-diag" completions fish > "$dir/completions/vllm-diag.fish"
glibc="$(objdump -T "$dir/vllm-diag" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -1 || true)"
{
  echo "vllm-diag $version for $target is dynamically linked against glibc."
  echo "Newest glibc symbol version it needs: ${glibc:-none}. Built on: $(ldd --version | head -1)."
} > "$dir/GLIBC.txt"

mkdir -p "$out"
archive="$out/$name.tar.gz"
# Reproducible order, owner and times: the same inputs give the same archive.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-0}" -C "$stage" -cf - "$name" | gzip -n > "$archive"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "$archive"
