#!/usr/bin/env bash
# The layering check (check_layering.py) on the source tree, which must follow docs/design.md's
# table, and on a copy of the table with a tree of three upward includes (models/ including the
# training core, base/ including collectives/, formats/ including data/, which its row names as
# forbidden) and one allowed include, which must name exactly the three.
#   layering_test.sh SOURCE_DIR
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
source_dir="$1"
checker="$source_dir/tests/layering/check_layering.py"

if python3 "$checker" "$source_dir" >"$work/tree.out" 2>&1; then
  ok "the source tree: $(tail -1 "$work/tree.out")"
else
  fail "the source tree breaks the layering" "$(cat "$work/tree.out")"
fi

mkdir -p "$work/fake/docs" "$work/fake/models" "$work/fake/base" "$work/fake/engine" "$work/fake/formats"
cp "$source_dir/docs/design.md" "$work/fake/docs/"
printf '#include "training/config.h"\n#include "base/log.h"\n' >"$work/fake/models/upward.cc"
printf '#pragma once\n#include "collectives/communicator.h"\n' >"$work/fake/base/upward.h"
printf '#include "collectives/communicator.h"\n#include <vector>\n' >"$work/fake/engine/fine.cc"
printf '#include "data/dataset.h"\n' >"$work/fake/formats/upward.cc"
python3 "$checker" "$work/fake" >"$work/fake.out" 2>&1
status=$?
if [ "$status" -eq 1 ] &&
  grep -qx "models/upward.cc:1: models/ includes training/config.h (training/), which docs/design.md does not let it" "$work/fake.out" &&
  grep -qx "base/upward.h:2: base/ includes collectives/communicator.h (collectives/), which docs/design.md does not let it" "$work/fake.out" &&
  grep -qx "formats/upward.cc:1: formats/ includes data/dataset.h (data/), which docs/design.md does not let it" "$work/fake.out" &&
  [ "$(grep -c "does not let it" "$work/fake.out")" -eq 3 ]; then
  ok "three upward includes: exit 1, each named, the allowed one not"
else
  fail "upward includes (exit $status, want 1 and three lines)" "$(cat "$work/fake.out")"
fi
[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
