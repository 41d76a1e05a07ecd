# shellcheck shell=bash
# shellcheck disable=SC2154  # $fetch_script and $work are the caller's
# Shared by the tests of data/'s scripts and programs (fetch_mnist_test.sh,
# fetch_gpt2_vocab_test.sh, gpt2_tokenize_test.sh, ...): checks that count failures, a runner that
# keeps the output and checks the exit status, and the verdict. The caller sets $work (a temporary
# folder), and $fetch_script before calling fetch.
failures=0

# check WHAT COMMAND...: counts a failure, naming WHAT, when COMMAND fails.
check() {
  local what="$1"
  shift
  if ! "$@"; then
    echo "FAIL: $what" >&2
    failures=$((failures + 1))
  fi
}

# expect_status EXPECTED_STATUS COMMAND...: runs COMMAND, its output in $work/out.
expect_status() {
  local expected="$1" status=0
  shift
  "$@" >"$work/out" 2>&1 || status=$?
  if [ "$status" -ne "$expected" ]; then
    echo "FAIL: $* exited with $status, expected $expected; output:" >&2
    cat "$work/out" >&2
    failures=$((failures + 1))
  fi
}

# fetch EXPECTED_STATUS ARGS...: runs the fetch script with ARGS.
fetch() { expect_status "$1" bash "$fetch_script" "${@:2}"; }

output_has() { grep -qF -- "$1" "$work/out"; }
output_is() { test "$(cat "$work/out")" = "$1"; }
lines_of_output() { wc -l <"$work/out" | tr -d ' '; }
checksums() { (cd "$1" && md5sum -- * 2>/dev/null); }

# check_rerun_does_nothing DIR: a second run over the complete DIR says so and changes nothing.
check_rerun_does_nothing() {
  local before
  before="$(checksums "$1")"
  fetch 0 "$1"
  check "second run says nothing to do" output_has "already in $1; nothing to do"
  check "second run changes nothing" test "$before" = "$(checksums "$1")"
}

# finish NAME: the verdict, exit status 1 when a check failed.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$1: $failures check(s) failed" >&2
    exit 1
  fi
  echo "$1: all checks passed"
}
