#!/usr/bin/env bash
# Every MPIJob manifest against the MPI operator's CRD schema and rules, with the validator in
# ../shared/k8s-schemas (strict: unknown fields are errors, as `kubectl apply` would reject them).
#   validate_mpijobs.sh PYTHON SHARED_DIR FILE...
# Exit 77 (skipped) where the shared folder or the validator's Python modules are missing.
set -euo pipefail
python="$1" shared="$2"
shift 2
validator="$shared/k8s-schemas/validate_mpijob.py"
if [ ! -f "$validator" ]; then
  echo "SKIP: $validator not found (the shared folder belongs beside the repository, as ../shared)"
  exit 77
fi
if ! "$python" -c 'import yaml, jsonschema' 2>/dev/null; then
  echo "SKIP: $python lacks the yaml and jsonschema modules (apt-get install python3-yaml python3-jsonschema)"
  exit 77
fi
jobs=()
for file in "$@"; do
  if grep -q '^kind: MPIJob' "$file"; then jobs+=("$file"); fi
done
if [ "${#jobs[@]}" -eq 0 ]; then
  echo "FAIL: no MPIJob manifest among: $*"
  exit 1
fi
# The validator prints OK or FAIL per job and exits non-zero on any failure.
"$python" "$validator" --strict "${jobs[@]}"
# One operator version: the release docs/kubernetes.md installs is the one whose CRD this checks
# against (the schemas' README names it).
pinned="$(grep -o 'pins release v[0-9.]*[0-9]' "$shared/k8s-schemas/README.txt" | grep -o 'v[0-9.]*')"
docs="$(dirname "${BASH_SOURCE[0]}")/../../docs/kubernetes.md"
installed="$(grep -o 'mpi-operator/v[0-9.]*[0-9]/deploy' "$docs" | sort -u)"
if [ -z "$pinned" ] || [ "$installed" != "mpi-operator/$pinned/deploy" ]; then
  echo "FAIL: docs/kubernetes.md installs '${installed:-no release}', the CRD checked is release '${pinned:-?}''s"
  exit 1
fi
echo "OK   docs/kubernetes.md installs mpi-operator $pinned, the release whose CRD the manifests are validated against"
