#!/usr/bin/env bash
# check_manifests.py finds the mistakes that are easy to make when adapting k8s/ to a cluster:
# a copy of the manifests with one mistake of each kind must fail, naming each one.
#   manifest_mistakes_test.sh PYTHON REPO_ROOT
set -uo pipefail
python="$1" root="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! "$python" -c 'import yaml' 2>/dev/null; then
  echo "SKIP: $python lacks the yaml module (apt-get install python3-yaml)"
  exit 77
fi
cp "$root"/k8s/*.yaml "$work/"
# More workers with -np and --expect-world-size written in the manifest for the old shape (the
# entrypoint would derive both; a manifest that still gives them must agree); a misspelled claim; a misspelled probe
# field and a Service pointing at a port the pod does not have; a PVC that only one node can mount.
sed -i 's/^\( *\)- mpirun$/&\n\1- -np\n\1- "8"/; s/^\( *\)- train$/&\n\1- --expect-world-size\n\1- "8"/' "$work/mpijob.yaml"
sed -i 's/^      replicas: 2$/      replicas: 3/; s/claimName: ringtrain-shared/claimName: ringtrain-shard/' "$work/mpijob.yaml"
sed -i 's/readinessProbe:/readinesProbe:/; s/targetPort: http/targetPort: web/' "$work/tensorboard.yaml"
sed -i 's/- ReadWriteMany/- ReadWriteOnce/' "$work/pvc.yaml"
# A benchmark job's launcher script broken by an edit.
# shellcheck disable=SC2016  # the $out is the script's, not this test's
sed -i 's/^\( *\)ls -l "\$out"$/\1ls -l "$out" (/' "$work/bench-mpijob.yaml"
output="$("$python" "$root/tests/cluster/check_manifests.py" "$work"/*.yaml 2>&1)"
status=$?
echo "$output"
failures=0
expect() {
  if grep -qF -- "$1" <<<"$output"; then echo "ok   found: $1"; else echo "FAIL not found: $1"; failures=$((failures + 1)); fi
}
[ "$status" -eq 1 ] || { echo "FAIL exit status $status, want 1"; failures=$((failures + 1)); }
expect "mpirun -np is 8 but Worker replicas x slotsPerWorker = 12"
expect "--expect-world-size is 8 but the job has 12 ranks"
expect "uses claim 'ringtrain-shard', which no file defines"
expect "targetPort 'web' is not a port of the selected pods"
expect "must be ReadWriteMany"
expect "the launcher's bash script does not parse"
if "$python" -c 'import kubernetes' 2>/dev/null; then
  expect "unknown field 'readinesProbe'"
else
  echo "skip the typed field check: python3-kubernetes is not installed"
fi
[ "$failures" -eq 0 ]
