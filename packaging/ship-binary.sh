#!/usr/bin/env bash
# Copies wsledger's binary as the npm packages and release archives ship it: without
# debug info. The release profile keeps line tables for profiling (Cargo.toml); they make
# the binary about five times larger (46 MB against 9 MB on linux-x64) and are no use to
# the people who install it. The symbols stay, so a panic's backtrace still names
# functions. On Windows the debug info is in a .pdb beside the .exe, so the .exe is
# copied as it is.
# usage: packaging/ship-binary.sh BINARY DEST
set -euo pipefail
src="$1"
dest="$2"
cp "$src" "$dest"
chmod 755 "$dest"
case "$(uname -s)" in
  Linux) strip --strip-debug "$dest" ;;
  Darwin) strip -S "$dest" ;;
  *) true ;;
esac || echo "note: could not strip the debug info from \`$dest\`; it ships as it is" >&2
