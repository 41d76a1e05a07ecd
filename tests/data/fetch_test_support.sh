# shellcheck shell=bash
# shellcheck disable=SC2154  # $fetch_script and $work are the caller's
# Shared by the fetch scripts' tests (fetch_mnist_test.sh, fetch_gpt2_vocab_test.sh): checks that
# count failures, a runner of the script under test, and the verdict. The caller sets
# $fetch_script and $work (a temporary folder) before calling fetch.
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

# fetch EXPECTED_STATUS ARGS...: runs the script, its output in $work/out.
fetch() {
  local expected="$1" status=0
  shift
  bash "$fetch_script" "$@" >"$work/out" 2>&1 || status=$?
  if [ "$status" -ne "$expected" ]; then
    echo "FAIL: $(basename "$fetch_script") $* exited with $status, expected $expected; output:" >&2
    cat "$work/out" >&2
    failures=$((failures + 1))
  fi
}

output_has() { grep -qF -- "$1" "$work/out"; }
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

# The verdict: exit status 1 when a check failed.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "$(basename "$fetch_script"): all checks passed"
}
