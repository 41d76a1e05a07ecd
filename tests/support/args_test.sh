#!/usr/bin/env bash
# scripts/lib/args.sh: a script declaring options, a flag and `--` parses --opt VALUE and
# --opt=VALUE, prints --help from its header and declarations, and refuses an unknown option, a
# missing value and a flag given a value with one line naming it and exit status 2; a nonempty
# option refuses an empty value, a list option collects every value, and the rest's modes
# (command, words, any) take what they say; the exit commands run last-registered first and the
# temporary folders are gone after exit.
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

# run ARGS...: the output of the demo $script in $output, its status in $status.
script=demo.sh
run() { output="$(bash "$work/$script" "$@" 2>&1)" && status=0 || status=$?; }

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

# A nonempty option, a list option and the rest's modes (DEMO_MODE: the rest's MODE).
cat >"$work/modes.sh" <<DEMO
#!/usr/bin/env bash
# The rest's modes.
set -euo pipefail
source "$here/../../scripts/lib/args.sh"
ringtrain_opt --out out "" "a folder" nonempty
ringtrain_list --env env_items "NAME=VALUE to pass on"
ringtrain_flag --dry-run dry_run "print only"
ringtrain_rest rest "the rest" "\${DEMO_MODE:-}"
ringtrain_parse_args "\$@"
echo "out=[\$out] env=[\${env_items[*]}] n_env=\${#env_items[@]} dry_run=[\$dry_run] rest=[\${rest[*]}] n=\${#rest[@]}"
DEMO
script=modes.sh
run
check "a list's default" "$output" "env=[] n_env=0"
run --env A=1 --env=B --env "C D" --out d
check "a list collects every value" "$output" "out=[d] env=[A=1 B C D] n_env=3"
# refused NAME LINE ARGS...: the demo, given ARGS, exits 2 and prints LINE alone.
refused() {
  local name="$1" line="$2"
  shift 2
  run "$@"
  if [ "$status" -eq 2 ] && [ "$output" = "$line" ]; then ok "$name"; else fail "$name: status $status" "$output"; fi
}
refused "nonempty refuses --out ''" "modes.sh: --out needs a value, not an empty one (see --help)" --out ""
refused "nonempty refuses --out=" "modes.sh: --out needs a value, not an empty one (see --help)" --out=
run --help
check "--help: a list option" "$output" "usage: modes.sh [OPTIONS] [-- ...]" "--env ENV_ITEMS" \
  "NAME=VALUE to pass on (repeatable)"
refused "no mode: a word is refused" "modes.sh: unknown option 'a' (see --help)" a

export DEMO_MODE=command
run --dry-run mpirun -np 2 --out x
check "command: from the first word on" "$output" "out=[] env=[] n_env=0 dry_run=[1] rest=[mpirun -np 2 --out x] n=5"
run --out d -- -x y
check "command: after --" "$output" "out=[d] env=[] n_env=0 dry_run=[0] rest=[-x y] n=2"
refused "command: an unknown option before the command is refused" "modes.sh: unknown option '-x' (see --help)" \
  -x mpirun
run --help
check "command: --help" "$output" "usage: modes.sh [OPTIONS] [--] ..." "[--] ...                   the rest"

export DEMO_MODE=words
run a --dry-run b -- --out c
check "words: between the options, and after --" "$output" "dry_run=[1] rest=[a b --out c] n=4"
refused "words: an unknown option is refused" "modes.sh: unknown option '-x' (see --help)" a -x

export DEMO_MODE=any
run -R allreduce --dry-run -E "x y" -- --out
check "any: every undeclared argument, in order" "$output" "dry_run=[1] rest=[-R allreduce -E x y --out] n=5"
run --out=d -j2
check "any: a declared option still parsed" "$output" "out=[d] env=[] n_env=0 dry_run=[0] rest=[-j2] n=1"
run --help
check "any: --help" "$output" "usage: modes.sh [OPTIONS] [...]"
unset DEMO_MODE

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
