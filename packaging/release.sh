#!/usr/bin/env bash
# Builds wsledger's release archive for one target: `wsledger-<version>-<target>.tar.xz`
# holding the binary, the man pages, completions for bash, zsh and fish, README.md and
# LICENSE under one folder of the same name, and `<archive>.sha256` beside it
# (`sha256sum -c` checks it). The version is Cargo.toml's (packaging/version.sh).
#
# usage: packaging/release.sh BINARY OUTDIR [TARGET]
#   TARGET: the Rust target triple BINARY was built for; default: the host's. BINARY
#   must run here (it writes the completions and is asked its version): the release
#   workflow builds each target on a machine of that target.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"

die() {
  echo "error: $1" >&2
  echo "hint: $2" >&2
  exit 2
}

[ $# -ge 2 ] && [ $# -le 3 ] || die "expected BINARY OUTDIR [TARGET], got $# argument(s)" \
  "usage: packaging/release.sh BINARY OUTDIR [TARGET]"
binary="$1"
outdir="$2"
target="${3:-}"
if [ -z "$target" ]; then
  target="$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')" || true
  [ -n "$target" ] || die "could not tell the host's target triple (rustc -vV)" "name the target: packaging/release.sh BINARY OUTDIR TARGET"
fi
[ -f "$binary" ] || die "the binary \`$binary\` does not exist" "build it first: cargo build --release --locked"
version="$("$root/packaging/version.sh")"
said="$("$binary" --version)" || die "\`$binary --version\` failed" "give a wsledger binary that runs on this machine"
[ "$said" = "wsledger $version" ] ||
  die "\`$binary\` says \`$said\`, but Cargo.toml's version is $version" \
    "rebuild it from this checkout: cargo build --release --locked"

name="wsledger-$version-$target"
mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
dir="$stage/$name"
mkdir -p "$dir/man" "$dir/completions"

exe=wsledger
case "$target" in *windows*) exe=wsledger.exe ;; esac
"$root/packaging/ship-binary.sh" "$binary" "$dir/$exe"
cp "$root/README.md" "$root/LICENSE" "$dir/"
# man/ is kept current by the man_pages test.
cp "$root"/man/*.1 "$dir/man/"
# The file names each shell looks for.
"$binary" completions bash >"$dir/completions/wsledger.bash"
"$binary" completions zsh >"$dir/completions/_wsledger"
"$binary" completions fish >"$dir/completions/wsledger.fish"

# With GNU tar the archive depends only on the files: sorted names, no owner, the last
# commit's time (the macOS and Windows runners' bsdtar takes the defaults).
tar_flags=()
if tar --version 2>/dev/null | grep -q 'GNU tar'; then
  when="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}"
  tar_flags=(--sort=name --owner=0 --group=0 --numeric-owner --mtime="@$when")
fi
archive="$name.tar.xz"
XZ_OPT=-9 tar ${tar_flags[@]+"${tar_flags[@]}"} -cJf "$outdir/$archive.part" -C "$stage" "$name"
mv "$outdir/$archive.part" "$outdir/$archive"

if command -v sha256sum >/dev/null 2>&1; then
  (cd "$outdir" && sha256sum "$archive" >"$archive.sha256")
else
  (cd "$outdir" && shasum -a 256 "$archive" >"$archive.sha256")
fi
echo "$outdir/$archive"
echo "$outdir/$archive.sha256"
