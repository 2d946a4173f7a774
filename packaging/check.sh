#!/usr/bin/env bash
# Checks wsledger's distribution end to end with a built release binary, offline:
# - the npm tarballs (packaging/npm/pack.sh), installed from the files into a temporary
#   project with `npm install --offline`: `npx wsledger` gives the binary's bytes and exit
#   status, and the launcher's error on a platform with no package;
# - the release archive (packaging/release.sh): its sha256, binary, man page,
#   completions, and the action's install script on it;
# - the action's run script (packaging/action/run.sh) on fixtures/*, as GitHub runs it.
# One line per check; exits 1 when any failed.
#
# usage: packaging/check.sh [BINARY]   (default: ${CARGO_TARGET_DIR:-target}/release/wsledger)
# The conditions in single quotes are run by `check` (eval), where they expand.
# shellcheck disable=SC2016
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root="$PWD"
bin="${1:-${CARGO_TARGET_DIR:-target}/release/wsledger}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac

passed=0
failed=0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# check NAME CONDITION...: runs the condition (a command, in a subshell so that a `cd`
# stays there), one line for its outcome.
check() {
  local name="$1"
  shift
  if ("$@") >"$tmp/check.out" 2>&1; then
    passed=$((passed + 1))
    echo "packaging: ok    $name"
  else
    failed=$((failed + 1))
    echo "packaging: FAIL  $name"
    sed 's/^/    /' "$tmp/check.out" | head -n 20
  fi
}

# run DIR NAME CMD...: runs CMD in DIR, keeping stdout, stderr and status as $tmp/NAME.*
run() {
  local dir="$1" name="$2"
  shift 2
  (cd "$dir" && "$@") >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null
  echo $? >"$tmp/$name.status"
}
status_is() { [ "$(cat "$tmp/$1.status")" = "$2" ] || { echo "status $(cat "$tmp/$1.status"), wanted $2"; cat "$tmp/$1.err"; false; }; }
same_run() {
  cmp "$tmp/$1.out" "$tmp/$2.out" && cmp "$tmp/$1.err" "$tmp/$2.err" && cmp "$tmp/$1.status" "$tmp/$2.status"
}
has() { grep -q -- "$2" "$tmp/$1" || { echo "no \`$2\` in $1:"; cat "$tmp/$1"; false; }; }
empty() { [ ! -s "$tmp/$1" ] || { echo "$1 is not empty:"; cat "$tmp/$1"; false; }; }

started=$(date +%s)
prerequisites() {
  for tool in node npm npx tar xz sha256sum curl; do command -v "$tool" || { echo "$tool is missing"; return 1; }; done
  node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' || { echo "Node.js $(node --version) is older than 18"; return 1; }
  [ -x "$bin" ] || { echo "no binary at $bin: cargo build --release --locked"; return 1; }
}
check "tools (node, npm, tar, xz, sha256sum, curl) and the release binary are there" prerequisites
if [ "$failed" -gt 0 ]; then
  echo "packaging checks: cannot go on"
  exit 1
fi
version="$(packaging/version.sh)"
check "the release binary says Cargo.toml's version ($version)" test "$("$bin" --version)" = "wsledger $version"

# --- npm -------------------------------------------------------------------------------
npmdir="$tmp/npm"
check "pack.sh makes the launcher and linux-x64 tarballs" packaging/npm/pack.sh "$bin" "$npmdir"
launcher_tgz="$npmdir/wsledger-$version.tgz"
platform_tgz="$npmdir/wsledger-linux-x64-$version.tgz"

tarball_files() { tar -tzf "$1" | sort | tr '\n' ' '; }
launcher_manifest() {
  tar -xzOf "$launcher_tgz" package/package.json | VERSION="$version" node -e '
    const p = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const v = process.env.VERSION;
    const want = ["linux-x64", "linux-arm64", "darwin-arm64", "darwin-x64", "win32-x64"]
      .map((x) => "@wsledger/" + x).sort().join(",");
    const problems = [];
    if (p.name !== "wsledger" || p.version !== v) problems.push("name/version " + p.name + "@" + p.version);
    if (p.scripts) problems.push("it has scripts: " + JSON.stringify(p.scripts));
    if (p.dependencies) problems.push("it has dependencies");
    if (p.bin.wsledger !== "bin/wsledger.js") problems.push("bin " + JSON.stringify(p.bin));
    const opt = p.optionalDependencies || {};
    if (Object.keys(opt).sort().join(",") !== want) problems.push("optionalDependencies " + JSON.stringify(opt));
    if (Object.values(opt).some((x) => x !== v)) problems.push("optionalDependencies not at " + v);
    if (p.engines.node !== ">=18") problems.push("engines " + JSON.stringify(p.engines));
    if (problems.length) { console.log(problems.join("\n")); process.exit(1); }'
}
platform_manifest() {
  tar -xzOf "$platform_tgz" package/package.json | VERSION="$version" node -e '
    const p = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const ok = p.name === "@wsledger/linux-x64" && p.version === process.env.VERSION &&
      JSON.stringify(p.os) === "[\"linux\"]" && JSON.stringify(p.cpu) === "[\"x64\"]" &&
      !p.scripts && !p.bin && !p.dependencies;
    if (!ok) { console.log(JSON.stringify(p, null, 2)); process.exit(1); }'
}
check "launcher tarball: the launcher, README and LICENSE only" \
  test "$(tarball_files "$launcher_tgz")" = "package/LICENSE package/README.md package/bin/wsledger.js package/package.json "
check "launcher package.json: version $version, the five platforms as optional dependencies, no scripts" launcher_manifest
check "platform tarball: the binary only" \
  test "$(tarball_files "$platform_tgz")" = "package/bin/wsledger package/package.json "
check "platform package.json: @wsledger/linux-x64@$version, os linux, cpu x64, no scripts" platform_manifest

# A project that installs the two tarballs from their files, offline, with an empty cache
# of its own: nothing can come from a registry.
project="$tmp/project"
mkdir -p "$project"
echo '{"name":"wsledger-npm-check","version":"1.0.0","private":true}' >"$project/package.json"
ln -s "$root/fixtures" "$project/fixtures"
export npm_config_cache="$tmp/npm-cache" npm_config_offline=true npm_config_update_notifier=false \
  npm_config_audit=false npm_config_fund=false
run "$project" install npm install --offline --no-audit --no-fund "$launcher_tgz" "$platform_tgz"
check "npm install --offline of the two tarball files into a new project" status_is install 0

no_debug_info() {
  readelf -S "$project/node_modules/@wsledger/linux-x64/bin/wsledger" >"$tmp/sections" &&
    ! grep -q '\.debug_info' "$tmp/sections"
}
check "the packaged binary is the release build without its debug info" no_debug_info

run "$project" npx-version npx wsledger --version
check "npx wsledger --version prints \`wsledger $version\`" \
  eval 'status_is npx-version 0 && test "$(cat "$tmp/npx-version.out")" = "wsledger $version"'

for args in "doctor scan --workspace fixtures/stuck-running --format json" "doctor scan -w fixtures/corrupt-ledger"; do
  # shellcheck disable=SC2086
  run "$project" npx-scan npx wsledger $args
  # shellcheck disable=SC2086
  run "$project" bin-scan "$bin" $args
  check "npx wsledger $args: the binary's stdout, stderr and status ($(cat "$tmp/bin-scan.status"))" same_run npx-scan bin-scan
  check "  (that status is 1: findings)" status_is bin-scan 1
done

# Another platform, as Node reports it, without a switch in the launcher: a preload.
fake_platform() {
  printf 'Object.defineProperty(process, "platform", { value: "%s" });\nObject.defineProperty(process, "arch", { value: "%s" });\n' "$1" "$2" >"$tmp/preload-$1-$2.js"
  run "$project" "fake-$1-$2" node --require "$tmp/preload-$1-$2.js" node_modules/.bin/wsledger --version
}
fake_platform freebsd riscv64
check "unsupported platform (freebsd-riscv64): exit 2" status_is fake-freebsd-riscv64 2
check "  error: names the platform" has fake-freebsd-riscv64.err '^error: wsledger has no npm package for this platform, `freebsd-riscv64`'
check "  hint: says how to install with cargo" has fake-freebsd-riscv64.err '^hint: .*cargo install --locked'
check "  nothing on stdout" empty fake-freebsd-riscv64.out
fake_platform darwin arm64
check "platform whose package is not installed (darwin-arm64): exit 2, error names @wsledger/darwin-arm64" \
  eval 'status_is fake-darwin-arm64 2 && has fake-darwin-arm64.err "^error: \`@wsledger/darwin-arm64\`, the package"'

# The launcher passes arguments, stdin, exit status and a death by signal through: a
# copy of the installed project whose binary is a script.
fake="$tmp/fake-binary"
cp -R "$project" "$fake"
cat >"$fake/node_modules/@wsledger/linux-x64/bin/wsledger" <<'EOF'
#!/bin/sh
case "$1" in
  args) shift; printf '[%s]\n' "$@" ;;
  stdin) cat ;;
  status) exit "$2" ;;
  signal) kill -"$2" $$ ;;
  # A signal to the launcher alone (its pid is our parent's): held until we end.
  term-launcher) kill -TERM "$PPID"; sleep 0.2; echo "ended on my own" ;;
esac
EOF
run "$fake" pass-args node_modules/.bin/wsledger args "a b" "" '$HOME' "--x=*"
check "launcher passes arguments unchanged (spaces, empty, \$, *)" \
  test "$(cat "$tmp/pass-args.out")" = "$(printf '[%s]\n' "a b" "" '$HOME' "--x=*")"
check "launcher passes stdin through" \
  test "$(cd "$fake" && printf 'line 1\nline 2\n' | node_modules/.bin/wsledger stdin)" = "$(printf 'line 1\nline 2')"
run "$fake" pass-status node_modules/.bin/wsledger status 7
check "launcher passes the exit status through (7)" status_is pass-status 7
run "$fake" pass-signal bash -c 'node_modules/.bin/wsledger signal TERM; echo $? >&2'
check "launcher ends by the signal that ended the binary (SIGTERM: 143 to the shell)" has pass-signal.err '^143$'
run "$fake" held-signal bash -c 'node_modules/.bin/wsledger term-launcher; echo $? >&2'
check "launcher holds a SIGTERM sent to it alone until the binary has ended, then ends by it" \
  eval 'has held-signal.out "^ended on my own$" && has held-signal.err "^143$"'

# --- release archive -------------------------------------------------------------------
reldir="$tmp/release"
target="$(rustc -vV | sed -n 's/^host: //p')"
archive="wsledger-$version-$target.tar.xz"
check "release.sh makes $archive and its .sha256" packaging/release.sh "$bin" "$reldir"
check "  the .sha256 file checks (sha256sum -c)" eval "cd '$reldir' && sha256sum -c '$archive.sha256'"
# The first hex digit changed to another one, whatever it was.
awk '{ d = substr($0, 1, 1); print (d == "0" ? "1" : "0") substr($0, 2) }' \
  "$reldir/$archive.sha256" >"$tmp/bad.sha256"
check "  (a wrong .sha256 does not check)" eval "cd '$reldir' && ! sha256sum -c '$tmp/bad.sha256'"
mkdir -p "$tmp/unpacked"
tar -xJf "$reldir/$archive" -C "$tmp/unpacked"
unpacked="$tmp/unpacked/wsledger-$version-$target"
archive_files() {
  (cd "$tmp/unpacked" && find . -type f | sort) >"$tmp/archive.files"
  for f in wsledger README.md LICENSE man/wsledger.1 man/wsledger-doctor-scan.1 completions/wsledger.bash completions/_wsledger completions/wsledger.fish; do
    grep -qx "./wsledger-$version-$target/$f" "$tmp/archive.files" || { echo "no $f"; cat "$tmp/archive.files"; return 1; }
  done
  diff <(cd man && printf '%s\n' *.1) <(cd "$unpacked/man" && printf '%s\n' *) || { echo "not man/'s pages"; return 1; }
  cmp LICENSE "$unpacked/LICENSE" && cmp README.md "$unpacked/README.md"
}
check "  it unpacks to one folder: binary, man pages, bash/zsh/fish completions, README, LICENSE" archive_files
check "  its binary says \`wsledger $version\`" test "$("$unpacked/wsledger" --version)" = "wsledger $version"
if command -v man >/dev/null 2>&1; then
  man_tool="man -l"
elif command -v groff >/dev/null 2>&1; then
  man_tool="groff -man"
else
  man_tool="a look at its roff (no man, no groff here)"
fi
man_page() {
  local page="$unpacked/man/wsledger-doctor-scan.1"
  case "$man_tool" in
    man*) MANPAGER=cat MANWIDTH=80 man -l "$page" >"$tmp/man.txt" 2>"$tmp/man.err" ;;
    groff*) groff -man -Tutf8 -ww "$page" >"$tmp/man.txt" 2>"$tmp/man.err" ;;
    *) head -n 3 "$page" | grep -q '^\.TH wsledger-doctor-scan 1' && grep -q '^\.SH SYNOPSIS' "$page"; return ;;
  esac || { cat "$tmp/man.err"; return 1; }
  [ ! -s "$tmp/man.err" ] || { cat "$tmp/man.err"; return 1; }
  grep -q 'wsledger-doctor-scan' "$tmp/man.txt" && grep -q 'SYNOPSIS' "$tmp/man.txt"
}
check "  its man page opens with $man_tool without a warning" man_page
completions() {
  bash -n "$unpacked/completions/wsledger.bash" &&
    grep -q '^#compdef wsledger' "$unpacked/completions/_wsledger" &&
    grep -q '^complete -c wsledger' "$unpacked/completions/wsledger.fish"
}
check "  its completions: bash parses, zsh's #compdef, fish's complete -c" completions

# The action's install step, on that archive as a local "release" (file://).
mkdir -p "$tmp/releases/v$version" "$tmp/bad-releases/v$version"
cp "$reldir/$archive" "$reldir/$archive.sha256" "$tmp/releases/v$version/"
install_action() {
  local releases="$1" name="$2"
  mkdir -p "$tmp/$name-runner"
  : >"$tmp/$name-runner/path"
  run "$root" "$name" env GITHUB_ACTIONS=true RUNNER_OS=Linux RUNNER_ARCH=X64 RUNNER_TEMP="$tmp/$name-runner" \
    GITHUB_PATH="$tmp/$name-runner/path" INPUT_VERSION="$version" INPUT_INSTALL=archive \
    WSLEDGER_RELEASE_URL="file://$releases" bash packaging/action/install.sh
}
install_action "$tmp/releases" install-ok
check "action install.sh: downloads the archive, checks its sha256, puts it on GITHUB_PATH" \
  eval 'status_is install-ok 0 && test "$("$(cat "$tmp/install-ok-runner/path")/wsledger" --version)" = "wsledger $version"'
cp "$reldir/$archive.sha256" "$tmp/bad-releases/v$version/"
head -c 100000 "$reldir/$archive" >"$tmp/bad-releases/v$version/$archive"
install_action "$tmp/bad-releases" install-bad
check "action install.sh: refuses an archive whose sha256 differs (exit 2, ::error, nothing on GITHUB_PATH)" \
  eval 'status_is install-bad 2 && has install-bad.out "^::error title=wsledger::.*sha256" && empty install-bad-runner/path'

# --- the action's run step ---------------------------------------------------------------
action() {
  local name="$1" workspaces="$2" args="${3:-}"
  run "$root" "$name" env GITHUB_ACTIONS=true INPUT_WORKSPACES="$workspaces" INPUT_ARGS="$args" \
    WSLEDGER_BIN="$bin" bash packaging/action/run.sh
}
for ws in fixtures/*/; do
  ws="${ws%/}"
  [ -f "$ws/runtime.sqlite" ] || continue
  action action "$ws"
  run "$root" direct "$bin" doctor scan "$ws" --format github
  check "action run.sh on $ws: the binary's annotations and status ($(cat "$tmp/direct.status"))" \
    eval 'cmp "$tmp/action.out" "$tmp/direct.out" && cmp "$tmp/action.status" "$tmp/direct.status"'
  case "$ws" in
    fixtures/healthy)
      check "  healthy: passes (0), no ::error" eval 'status_is action 0 && ! grep -q "^::error" "$tmp/action.out"' ;;
    fixtures/corrupt-ledger | fixtures/stuck-running | fixtures/damage-*)
      check "  damaged: fails (1) with ::error annotations" eval 'status_is action 1 && has action.out "^::error file=$ws,title=wsledger "' ;;
  esac
done
action action-glob 'fixtures/damage-*/ fixtures/healthy'
run "$root" direct-glob "$bin" doctor scan fixtures/damage-*/ fixtures/healthy --format github
check "action run.sh expands globs in workspaces like the shell" \
  eval 'cmp "$tmp/action-glob.out" "$tmp/direct-glob.out" && status_is action-glob 1'
action action-args fixtures/stuck-running '--min-severity error --session "no such session"'
run "$root" direct-args "$bin" doctor scan fixtures/stuck-running --format github --min-severity error --session "no such session"
check "action run.sh passes args, quotes kept" \
  eval 'cmp "$tmp/action-args.out" "$tmp/direct-args.out" && cmp "$tmp/action-args.status" "$tmp/direct-args.status"'
action action-error fixtures/hostile
check "action run.sh on a folder with no database: fails (2) with an ::error annotation of the error" \
  eval 'status_is action-error 2 && has action-error.out "^::error title=wsledger::error: "'
action action-empty ''
check "action run.sh with no workspaces: fails (2) instead of scanning the default workspace" \
  eval 'status_is action-empty 2 && has action-empty.out "^::error title=wsledger::the input"'
action action-nomatch 'fixtures/no-such-*/'
check "action run.sh with a glob that matches nothing: fails (2)" \
  eval 'status_is action-nomatch 2 && has action-nomatch.err "no path matches"'

echo "packaging checks: $passed passed checks, $failed failed checks, $(($(date +%s) - started)) s"
[ "$failed" -eq 0 ]
