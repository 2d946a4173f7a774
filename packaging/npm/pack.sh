#!/usr/bin/env bash
# Builds wsledger's npm tarballs: the launcher package `wsledger` and the platform
# package `@wsledger/<platform>` that holds BINARY. The version is Cargo.toml's
# (packaging/version.sh); the platform list below is the one the launcher's
# optionalDependencies are made from.
#
# usage: packaging/npm/pack.sh BINARY OUTDIR [PLATFORM]
#   PLATFORM: Node's `<process.platform>-<process.arch>` of BINARY; default: this
#   machine's. Prints the paths of the two tarballs.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

# Node's process.platform and process.arch values, with what npm matches them on.
platforms="linux-x64 linux-arm64 darwin-arm64 darwin-x64 win32-x64"

die() {
  echo "error: $1" >&2
  echo "hint: $2" >&2
  exit 2
}

[ $# -ge 2 ] && [ $# -le 3 ] || die "expected BINARY OUTDIR [PLATFORM], got $# argument(s)" \
  "usage: packaging/npm/pack.sh BINARY OUTDIR [PLATFORM]"
binary="$1"
outdir="$2"
command -v node >/dev/null && command -v npm >/dev/null ||
  die "node and npm are needed to pack the npm packages" "install Node.js 18 or later"
host="$(node -p 'process.platform + "-" + process.arch')"
platform="${3:-$host}"
case " $platforms " in
  *" $platform "*) ;;
  *) die "no npm package is made for the platform \`$platform\`" "use one of: $platforms" ;;
esac
[ -f "$binary" ] || die "the binary \`$binary\` does not exist" "build it first: cargo build --release --locked"
version="$("$root/packaging/version.sh")"

# A binary of another version would make packages that lie about their version. It can
# only be asked when it runs here.
if [ "$platform" = "$host" ]; then
  said="$("$binary" --version)" || die "\`$binary --version\` failed" "give a wsledger binary built for $platform"
  [ "$said" = "wsledger $version" ] ||
    die "\`$binary\` says \`$said\`, but Cargo.toml's version is $version" \
      "rebuild it from this checkout: cargo build --release --locked"
fi

mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# The launcher: its template, with the version and one optional dependency per platform
# at exactly that version.
mkdir -p "$stage/wsledger/bin"
cp "$here/wsledger/bin/wsledger.js" "$stage/wsledger/bin/"
cp "$here/wsledger/README.md" "$root/LICENSE" "$stage/wsledger/"
chmod 755 "$stage/wsledger/bin/wsledger.js"
VERSION="$version" PLATFORMS="$platforms" node -e '
  const fs = require("fs");
  const [template, out] = process.argv.slice(1);
  const t = JSON.parse(fs.readFileSync(template, "utf8"));
  const v = process.env.VERSION;
  const optionalDependencies = {};
  for (const p of process.env.PLATFORMS.split(" ")) optionalDependencies["@wsledger/" + p] = v;
  const pkg = { name: t.name, version: v, ...t, optionalDependencies };
  fs.writeFileSync(out, JSON.stringify(pkg, null, 2) + "\n");
' "$here/wsledger/package.json" "$stage/wsledger/package.json"

# The platform package: the binary and `os`/`cpu` (and, on Linux, the C library it was
# linked against), nothing else.
exe=wsledger
[ "${platform%%-*}" = win32 ] && exe=wsledger.exe
mkdir -p "$stage/platform/bin"
"$root/packaging/ship-binary.sh" "$binary" "$stage/platform/bin/$exe"
VERSION="$version" PLATFORM="$platform" EXE="$exe" node -e '
  const fs = require("fs");
  const p = process.env.PLATFORM;
  const [os, cpu] = p.split("-");
  const pkg = {
    name: "@wsledger/" + p,
    version: process.env.VERSION,
    description: "The wsledger binary for " + p + " (installed by the `wsledger` package)",
    license: "Apache-2.0",
    os: [os],
    cpu: [cpu],
    ...(os === "linux" ? { libc: ["glibc"] } : {}),
    files: ["bin/" + process.env.EXE],
    preferUnplugged: true,
  };
  fs.writeFileSync(process.argv[1], JSON.stringify(pkg, null, 2) + "\n");
' "$stage/platform/package.json"

for dir in wsledger platform; do
  # `npm pack` prints the tarball's name last on stdout.
  name="$(cd "$stage/$dir" && npm pack --silent --pack-destination "$outdir" | tail -n 1)"
  [ -f "$outdir/$name" ] || die "npm pack made no tarball in \`$outdir\` for $dir" "run npm pack in a copy of packaging/npm/wsledger to see why"
  echo "$outdir/$name"
done
