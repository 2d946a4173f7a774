#!/usr/bin/env bash
# The install step of the wsledger action (action.yml): puts one wsledger version on the
# job's PATH, from the release archive (its sha256 checked) or from npm.
#
# Inputs, as GitHub passes them:
#   INPUT_VERSION  `0.1.0` (a leading `v` is fine), `latest`, or empty: the version of
#                  the action itself (its Cargo.toml)
#   INPUT_INSTALL  `archive` (default) or `npm`
# WSLEDGER_REPOSITORY (owner/name) is where the releases are; default: the action's own
# repository. WSLEDGER_RELEASE_URL replaces `https://github.com/<repo>/releases/download`
# (a mirror, or a local folder as file://... for a test).
#
# Written for bash 3.2 too (macOS runners).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"

die() {
  echo "error: $1" >&2
  echo "hint: $2" >&2
  if [ "${GITHUB_ACTIONS:-}" = true ]; then
    printf '::error title=wsledger::%s (hint: %s)\n' "$1" "$2"
  fi
  exit 2
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d ' ' -f 1
  else
    shasum -a 256 "$1" | cut -d ' ' -f 1
  fi
}

# The action's repository: the runner says it, or its checkout path does
# (`.../_actions/<owner>/<name>/<ref>`), or the action runs from the repository itself.
repository() {
  if [ -n "${WSLEDGER_REPOSITORY:-}" ]; then
    echo "$WSLEDGER_REPOSITORY"
  elif [ -n "${GITHUB_ACTION_REPOSITORY:-}" ]; then
    echo "$GITHUB_ACTION_REPOSITORY"
  else
    case "${GITHUB_ACTION_PATH:-}" in
      */_actions/*/*/*)
        local rest="${GITHUB_ACTION_PATH#*/_actions/}"
        local owner="${rest%%/*}"
        rest="${rest#*/}"
        echo "$owner/${rest%%/*}"
        ;;
      *) echo "${GITHUB_REPOSITORY:-}" ;;
    esac
  fi
}

how="${INPUT_INSTALL:-archive}"
version="${INPUT_VERSION:-}"
version="${version#v}"
[ -n "$version" ] || version="$("$here/../version.sh")"

case "${RUNNER_OS:-$(uname -s)}/${RUNNER_ARCH:-$(uname -m)}" in
  Linux/X64 | Linux/x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux/ARM64 | Linux/aarch64) target=aarch64-unknown-linux-gnu ;;
  macOS/ARM64 | Darwin/arm64) target=aarch64-apple-darwin ;;
  macOS/X64 | Darwin/x86_64) target=x86_64-apple-darwin ;;
  Windows/X64) target=x86_64-pc-windows-msvc ;;
  *)
    die "wsledger is not released for ${RUNNER_OS:-$(uname -s)} on ${RUNNER_ARCH:-$(uname -m)}" \
      "build it in the job instead: cargo install --locked --path . in a checkout of wsledger"
    ;;
esac

base="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/wsledger-action"
mkdir -p "$base"

case "$how" in
  archive)
    command -v curl >/dev/null 2>&1 || die "curl is needed to download the release archive" "use \`install: npm\`"
    if [ -n "${WSLEDGER_RELEASE_URL:-}" ]; then
      releases="$WSLEDGER_RELEASE_URL"
    else
      repo="$(repository)"
      [ -n "$repo" ] || die "cannot tell which repository publishes wsledger's releases" \
        "set WSLEDGER_REPOSITORY (owner/name) for the step, or use \`install: npm\`"
      releases="https://github.com/$repo/releases/download"
      if [ "$version" = latest ]; then
        # The newest release's page is where /releases/latest redirects to.
        url="$(curl -fsSLI -o /dev/null -w '%{url_effective}' "https://github.com/$repo/releases/latest")" ||
          die "cannot find the newest release of $repo" "name a version, e.g. \`version: 0.1.0\`"
        version="${url##*/}"
        version="${version#v}"
      fi
    fi
    [ "$version" != latest ] || die "\`latest\` needs the releases on GitHub" "name a version, e.g. \`version: 0.1.0\`"
    name="wsledger-$version-$target"
    dir="$base/$name"
    rm -rf "$dir" "$dir.download"
    mkdir -p "$dir.download"
    for file in "$name.tar.xz" "$name.tar.xz.sha256"; do
      curl -fsSL --retry 3 -o "$dir.download/$file" "$releases/v$version/$file" ||
        die "cannot download $releases/v$version/$file" "check that release v$version exists and has an archive for $target"
    done
    expected="$(cut -d ' ' -f 1 <"$dir.download/$name.tar.xz.sha256")"
    actual="$(sha256_of "$dir.download/$name.tar.xz")"
    [ -n "$expected" ] && [ "$expected" = "$actual" ] ||
      die "$name.tar.xz has sha256 $actual, but its .sha256 file says ${expected:-nothing}" \
        "the download is damaged or not the released file: run the job again, and report it if it stays"
    mkdir -p "$dir"
    tar -xJf "$dir.download/$name.tar.xz" -C "$dir" --strip-components 1
    rm -rf "$dir.download"
    bindir="$dir"
    ;;
  npm)
    command -v npm >/dev/null 2>&1 || die "npm is needed for \`install: npm\`" "set up Node.js first (actions/setup-node), or use \`install: archive\`"
    dir="$base/npm-$version"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock "wsledger@$version" >&2 ||
      die "npm could not install wsledger@$version" "check that the version exists on npm"
    bindir="$dir/node_modules/.bin"
    ;;
  *) die "the input \`install\` is \`$how\`" "use \`archive\` or \`npm\`" ;;
esac

"$bindir/wsledger" --version >&2 || die "the installed wsledger does not run" "report it, with the job's log"
if [ -n "${GITHUB_PATH:-}" ]; then
  # On Windows the runner reads GITHUB_PATH as Windows paths; Git Bash's cygpath says it.
  if command -v cygpath >/dev/null 2>&1; then
    cygpath -w "$bindir" >>"$GITHUB_PATH"
  else
    echo "$bindir" >>"$GITHUB_PATH"
  fi
fi
echo "$bindir"
