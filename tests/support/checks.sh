# shellcheck shell=bash
# Sourced by the shell tests that print one line per check: ok NAME, fail NAME [OUTPUT] (the last
# 30 lines of OUTPUT indented below), check NAME OUTPUT PATTERN... (ok when every fixed string
# PATTERN occurs in OUTPUT), and expect_lines NAME FILE REGEX [COUNT] (ok when at least COUNT,
# default 1, lines of FILE match the extended REGEX). They count into $passes and $failures,
# which start at 0 here.

passes=0 failures=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
fail() {
  echo "FAIL $1"
  [ -z "${2:-}" ] || printf '%s\n' "$2" | tail -30 | while IFS= read -r line; do printf '     | %s\n' "$line"; done
  failures=$((failures + 1))
}
check() {
  local name="$1" output="$2" pattern
  shift 2
  for pattern in "$@"; do
    grep -qF -- "$pattern" <<<"$output" || { fail "$name: no '$pattern'" "$output"; return; }
  done
  ok "$name"
}
expect_lines() {
  local seen
  seen="$(grep -cE -- "$3" "$2" || true)"
  if [ "$seen" -lt "${4:-1}" ]; then
    fail "$1: '$3' seen $seen times (want ${4:-1})"
  else
    ok "$1"
  fi
}
