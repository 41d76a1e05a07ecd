#!/usr/bin/env bash
# scripts/lib/args.sh: a script declaring options, a flag and `--` parses --opt VALUE and
# --opt=VALUE, prints --help from its header and declarations, and refuses an unknown option, a
# missing value and a flag given a value with one line naming it and exit status 2; the exit
# commands run last-registered first and the temporary folders are gone after exit.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../scripts/lib/args.sh
source "$here/../../scripts/lib/args.sh"
ringtrain_test_start checks

cat >"$work/demo.sh" <<DEMO
#!/usr/bin/env bash
# shellcheck disable=SC2154
# A demo script.
#   second line of the header
set -euo pipefail
source "$here/../../scripts/lib/args.sh"
ringtrain_opt --rounds rounds 3 "how many rounds"
ringtrain_opt --model-args model_args "--model gpt-mini" "the model's options"
ringtrain_flag --quick quick "a short run"
ringtrain_rest extra "passed to mpirun"
ringtrain_parse_args "\$@"
echo "rounds=[\$rounds] model_args=[\$model_args] quick=[\$quick] extra=[\${extra[*]}] n=\${#extra[@]}"
DEMO

# run ARGS...: the demo's output in $output, its status in $status.
run() { output="$(bash "$work/demo.sh" "$@" 2>&1)" && status=0 || status=$?; }

run
check "defaults" "$output" "rounds=[3] model_args=[--model gpt-mini] quick=[0] extra=[] n=0"
run --rounds 5 --model-args "--model cnn" --quick -- -x "a b"
check "--opt VALUE, a flag, --" "$output" "rounds=[5] model_args=[--model cnn] quick=[1] extra=[-x a b] n=2"
run --rounds=7 --model-args=--model=gpt
check "--opt=VALUE" "$output" "rounds=[7] model_args=[--model=gpt]"
run --rounds ""
check "an empty value" "$output" "rounds=[] "
run --help
[ "$status" -eq 0 ] && ok "--help: exit status 0" || fail "--help: exit status $status" "$output"
check "--help" "$output" "usage: demo.sh [OPTIONS] [-- ...]" "A demo script." "  second line of the header" \
  "--rounds ROUNDS" "how many rounds (default: 3)" "--model-args MODEL_ARGS" "--quick" "a short run" \
  "-- ..." "passed to mpirun"
grep -q "set -euo\\|shellcheck" <<<"$output" && fail "--help prints the script's code or a directive" "$output" || ok "--help stops at the code"

for bad in "--nope:unknown option '--nope'" "--rounds:--rounds needs a value" \
  "--quick=1:--quick takes no value" "-r:unknown option '-r'"; do
  run "${bad%%:*}"
  [ "$status" -eq 2 ] && ok "${bad%%:*}: exit status 2" || fail "${bad%%:*}: exit status $status" "$output"
  [ "$output" = "demo.sh: ${bad#*:} (see --help)" ] && ok "${bad%%:*}: one line naming it" ||
    fail "${bad%%:*}: output" "$output"
done

# ringtrain_on_exit and ringtrain_temp_dir in a child shell: the order of the exit commands, and
# the folder removed.
output="$(bash -c 'source "$1"; ringtrain_temp_dir dir; echo "$dir"; ringtrain_on_exit "echo first"
  ringtrain_on_exit "echo second"; touch "$dir/file"' _ "$here/../../scripts/lib/args.sh")"
dir="$(head -1 <<<"$output")"
[ "$(tail -n +2 <<<"$output")" = "$(printf 'second\nfirst')" ] && ok "exit commands, last first" ||
  fail "exit commands" "$output"
[ -n "$dir" ] && [ ! -e "$dir" ] && ok "temporary folder removed at exit" || fail "temporary folder left: $dir"
[ -d "$work" ] && ok "\$work is a folder" || fail "no \$work"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all $passes checks passed"
