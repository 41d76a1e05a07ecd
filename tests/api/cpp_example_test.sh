#!/usr/bin/env bash
# An outside C++ project trains its own model through the installed package: `cmake --install`
# into a temporary prefix, examples/cpp configured with find_package(ringtrain) and built against
# it, then run on 1 rank (the whole batch) and on 2 ranks (half each). Checked: both ranks print
# the same parameters to the bit, the loss fell, and 2 ranks match 1 rank to float tolerance.
#   cpp_example_test.sh BUILD_DIR EXAMPLE_DIR MPIEXEC [MPIEXEC_FLAGS...]
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
build="${1:?usage: cpp_example_test.sh BUILD_DIR EXAMPLE_DIR MPIEXEC [FLAGS...]}"
example="${2:?}"
mpiexec="${3:?}"
shift 3
# The example reads the RINGTRAIN_* variables: none from the caller's shell.
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep '^RINGTRAIN_' || true)

if ! output="$(cmake --install "$build" --prefix "$work/prefix" 2>&1)"; then
  fail "cmake --install $build" "$output"
  exit 1
fi
for file in include/ringtrain/ringtrain.h lib/cmake/ringtrain/ringtrainConfig.cmake lib/libringtrain_api.a; do
  [ -f "$work/prefix/$file" ] || fail "installed $file"
done
if ! output="$(cmake -S "$example" -B "$work/example" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release 2>&1 && cmake --build "$work/example" 2>&1)"; then
  fail "examples/cpp configured and built against the installed package" "$output"
  exit 1
fi
ok "examples/cpp built out of tree with find_package(ringtrain)"

# Each rank writes its line to a file of its own: mpirun may interleave long lines of two ranks.
output="$("$mpiexec" -np 1 "$@" "$work/example/mlp_example" 60 "$work/one" 2>&1)" || fail "1 rank" "$output"
output="$("$mpiexec" -np 2 "$@" "$work/example/mlp_example" 60 "$work/two" 2>&1)" || fail "2 ranks" "$output"
one="$(cat "$work/one.0" 2>/dev/null)"
two="$(cat "$work/two.0" "$work/two.1" 2>/dev/null)"
params() { sed -n "s/^rank $1\/$2: .*; parameters //p" <<<"$3"; }
p1="$(params 0 1 "$one")"
p20="$(params 0 2 "$two")"
p21="$(params 1 2 "$two")"
if [ -n "$p20" ] && [ "$p20" = "$p21" ]; then
  ok "both ranks hold the same parameters to the bit"
else
  fail "ranks' parameters differ" "$two"
fi
# "loss A -> B": B well below A on every rank.
if awk '/loss/ { split($0, a, "loss "); split(a[2], b, " "); if (!(b[3] + 0 < 0.7 * b[1])) bad = 1; n++ }
        END { exit bad || n != 2 }' <<<"$two"; then
  ok "the loss fell on both ranks"
else
  fail "loss did not fall" "$two"
fi
# 2 ranks against 1 rank with the whole batch: each parameter within 1e-4 relative (60 steps of
# float32 sums in another order).
if [ -n "$p1" ] && paste <(tr ' ' '\n' <<<"$p1") <(tr ' ' '\n' <<<"$p20") |
  awk '{ d = $1 - $2; if (d < 0) d = -d; m = ($1 < 0 ? -$1 : $1); if (d > 1e-4 * (m > 1 ? m : 1)) { print "parameter " NR ": " $1 " vs " $2; bad = 1 } n++ }
       END { exit bad || n < 100 }'; then
  ok "2 ranks match 1 rank with the whole batch"
else
  fail "2 ranks differ from 1 rank" "$one"$'\n'"$two"
fi
[ "$failures" -eq 0 ]
