#!/usr/bin/env bash
# Prints wsledger's version. Cargo.toml's [package] table is the one place it is set:
# the npm packages, the release archive and the action all take it from here.
# usage: packaging/version.sh [CARGO_TOML]
set -euo pipefail
toml="${1:-$(dirname "$0")/../Cargo.toml}"
if [ ! -f "$toml" ]; then
  echo "error: \`$toml\` does not exist" >&2
  echo "hint: give the path of wsledger's Cargo.toml" >&2
  exit 2
fi
version="$(awk '
  /^\[/ { in_package = ($0 == "[package]") }
  in_package && /^version[ \t]*=/ { sub(/^[^"]*"/, ""); sub(/".*$/, ""); print; exit }
' "$toml")"
if [ -z "$version" ]; then
  echo "error: no version in the [package] table of \`$toml\`" >&2
  echo "hint: give the path of wsledger's Cargo.toml" >&2
  exit 2
fi
printf '%s\n' "$version"
