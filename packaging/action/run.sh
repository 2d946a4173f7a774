#!/usr/bin/env bash
# The run step of the wsledger action (action.yml):
#   wsledger doctor scan <workspaces> --format github <args>
# so each finding becomes an annotation, and the step ends with wsledger's exit status
# (0 nothing at or above --fail-on, 1 findings, 2 could not scan).
#
# Inputs, as GitHub passes them: INPUT_WORKSPACES (paths or globs, separated by spaces
# or new lines; quote a path that holds a space), INPUT_ARGS (more arguments, quoted the
# same way). WSLEDGER_BIN names the binary to run (default: `wsledger` on PATH, where the
# action's install step put it).
#
# Written for bash 3.2 too (macOS runners).
set -uo pipefail

bin="${WSLEDGER_BIN:-wsledger}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# An error of this script or of wsledger: the `error:`/`hint:` lines on stderr and, under
# GitHub Actions, an annotation, so the failure shows on the run's summary page.
annotate() {
  if [ "${GITHUB_ACTIONS:-}" = true ]; then
    local msg="${1//%/%25}"
    msg="${msg//$'\r'/%0D}"
    printf '::error title=wsledger::%s\n' "${msg//$'\n'/%0A}"
  fi
}
die() {
  echo "error: $1" >&2
  echo "hint: $2" >&2
  annotate "$1 (hint: $2)"
  exit 2
}

# Splits $1 into words as a shell would (quotes and backslashes), with no expansion or
# command substitution: xargs does the quoting. The words go to the array named $2.
split_words() {
  local out="$tmp/words" word
  if ! printf '%s\n' "$1" | xargs printf '%s\0' >"$out" 2>"$tmp/xargs.err"; then
    die "cannot split \`$1\` into words: $(head -n 1 "$tmp/xargs.err")" "close every quote"
  fi
  eval "$2=()"
  while IFS= read -r -d '' word; do
    [ -n "$word" ] && eval "$2+=(\"\$word\")"
  done <"$out"
}

words=()
args=()
split_words "${INPUT_WORKSPACES:-}" words
split_words "${INPUT_ARGS:-}" args
# Without a path wsledger would scan the machine's default workspace.
[ "${#words[@]}" -gt 0 ] || die "the input \`workspaces\` is empty" \
  "name the workspaces to scan, e.g. \`workspaces: fixtures/*/\`"

shopt -s nullglob
shopt -s globstar 2>/dev/null || true
workspaces=()
for word in "${words[@]}"; do
  case "$word" in
    *[*?[]*)
      # Pathname expansion only: no word splitting of the pattern.
      saved_ifs="$IFS"
      IFS=
      # shellcheck disable=SC2206
      matches=($word)
      IFS="$saved_ifs"
      [ "${#matches[@]}" -gt 0 ] || die "no path matches \`$word\`" \
        "check the input \`workspaces\` against the checked-out files"
      workspaces+=("${matches[@]}")
      ;;
    *) workspaces+=("$word") ;;
  esac
done
shopt -u nullglob

command -v "$bin" >/dev/null 2>&1 || die "\`$bin\` is not installed" \
  "install wsledger before this step (the action's install step does), or set WSLEDGER_BIN"

{
  printf '+ wsledger doctor scan'
  printf ' %q' "${workspaces[@]}" --format github ${args[@]+"${args[@]}"}
  printf '\n'
} >&2
# stdout (the annotations) goes straight through; stderr is kept to annotate an error.
"$bin" doctor scan "${workspaces[@]}" --format github ${args[@]+"${args[@]}"} 2>"$tmp/stderr"
status=$?
cat "$tmp/stderr" >&2
if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then
  annotate "$(grep -E '^(error|hint):' "$tmp/stderr" || echo "wsledger ended with status $status")"
fi
exit "$status"
