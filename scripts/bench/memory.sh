#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Memory per rank (issue 35's table): the peak resident set of every rank and its parts, for
# gpt-mini (batch 8, context 128) and gpt2-124m (batch 4, context 1024) at their demo batch and
# context, on each of --ranks ranks (mpirun --oversubscribe: memory, not speed), with each
# --zero-values and --precisions, against PyTorch on the same model, batch and context in the same
# run. A point trains --steps steps of AdamW (lr 3e-4, betas 0.9/0.95, decay 0.1 on the
# matrices) on synthetic token windows:
#   ringtrain  mpirun -np R ringtrain train --model M --synthetic ... [--zero Z] --precision P
#              --backend B (--backend, ring by default: the exchange --zero shards; shm maps every
#              rank's gradients into every rank). Its end-of-run line 'memory per rank' gives
#              each rank's peak resident set (ru_maxrss) and --logdir's metrics.jsonl the parts:
#              parameters, gradients, averaged gradients, optimiser state, activations,
#              communication buffers (training/memory_report.h; the largest over the ranks).
#   pytorch    mpirun -np R /usr/bin/python3 gpt_pytorch_ddp_reference.py: zero 0 is DDP (gloo)
#              with AdamW (no DDP on one rank), zero 1 ZeroRedundancyOptimizer(AdamW); each rank's
#              ru_maxrss at the end and its optimiser state's bytes.
# Safety first: the machine's memory is shared. Before each point MemAvailable is read, and a
# point whose predicted need exceeds --headroom of it is not started ("skipped: needs ~X GiB,
# MemAvailable Y GiB"). The prediction for R ranks is R times a rank's: the same model's measured
# 1-rank peak (same framework and precision), or before that is measured an estimate from the
# model's shape (16 bytes per parameter, the tied head's gradient and the activations the blocks
# keep, PyTorch's 1.6 times that, plus 300 MiB for the program); above one rank plus a second
# gradient buffer (the averages, DDP's buckets) and with shm the other ranks' gradients, and 2%.
# Rank counts run in increasing order, so the 1-rank point comes first.
#
# Prints a table; writes every point to --json (default OUT/memory.json), with its status (ok,
# skipped, failed) and reason; logs in --out (default BUILD_DIR/memory). Exit 1 when a point
# failed (the JSON is written first), 2 for bad options. PyTorch is Debian's python3-torch for
# /usr/bin/python3 (RINGTRAIN_TORCH_PYTHON names another); without it, or with --no-pytorch, the
# PyTorch points are recorded as skipped with the reason.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
bench="$root/scripts/bench"
ringtrain_allow_mpirun_as_root

ringtrain_opt --models models "gpt-mini gpt2-124m" "models, of gpt-mini and gpt2-124m"
ringtrain_opt --ranks ranks "1 2 4" "rank counts"
ringtrain_opt --zero-values zero_values "0 1" "ringtrain's --zero values (PyTorch: 0 AdamW, 1 ZeroRedundancyOptimizer)"
ringtrain_opt --precisions precisions "fp32 bf16" "precisions, of fp32 and bf16"
ringtrain_opt --steps steps 2 "training steps per point"
ringtrain_opt --batch batch "" "batch per rank (default: the model's demo batch, gpt-mini 8, gpt2-124m 4)"
ringtrain_opt --model-args model_args "" "more model options for every model (--layers L --heads H --width C --context T --vocab V)"
ringtrain_opt --backend backend ring "ringtrain's backend on several ranks"
ringtrain_opt --headroom headroom 0.85 "the share of MemAvailable a point may be predicted to need"
ringtrain_opt --build-dir build_dir "$root/build" "the build whose bin/ holds ringtrain"
ringtrain_opt --out out "" "folder of the logs (default BUILD_DIR/memory)"
ringtrain_opt --json json "" "the results (default OUT/memory.json)"
ringtrain_flag --no-pytorch no_pytorch "ringtrain's points only"
ringtrain_parse_args "$@"
ringtrain_fair_malloc  # for PyTorch and ringtrain alike, said in the output
echo "# $ringtrain_malloc_note"

bad() { echo "memory.sh: $*" >&2; exit 2; }
for m in $models; do [[ "$m" =~ ^(gpt-mini|gpt2-124m)$ ]] || bad "--models: '$m' is not gpt-mini or gpt2-124m"; done
for p in $precisions; do [[ "$p" =~ ^(fp32|bf16)$ ]] || bad "--precisions: '$p' is not fp32 or bf16"; done
for z in $zero_values; do [[ "$z" =~ ^[0-9]+$ ]] || bad "--zero-values: '$z' is not a number"; done
for r in $ranks; do [[ "$r" =~ ^[1-9][0-9]*$ ]] || bad "--ranks: '$r' is not a rank count"; done
if [ -z "$models" ] || [ -z "$precisions" ] || [ -z "$zero_values" ] || [ -z "$ranks" ]; then
  bad "--models, --ranks, --zero-values and --precisions need a value each"
fi
ringtrain_need_count --steps "$steps"
[ -z "$batch" ] || ringtrain_need_count --batch "$batch"
[[ "$headroom" =~ ^0?\.[0-9]+$|^1(\.0*)?$ ]] || bad "--headroom must be a share in (0, 1]"
ranks="$(tr ' ' '\n' <<<"$ranks" | sort -n | uniq | tr '\n' ' ')"
build_dir="$(cd "$build_dir" 2>/dev/null && pwd)" || bad "no build folder $build_dir"
ringtrain="${RINGTRAIN_BIN:-$build_dir/bin/ringtrain}"
[ -x "$ringtrain" ] || bad "no $ringtrain (build first)"
out="${out:-$build_dir/memory}"
json="${json:-$out/memory.json}"
mkdir -p "$out"
points="$out/points.jsonl"
: >"$points"

torch_python="${RINGTRAIN_TORCH_PYTHON:-/usr/bin/python3}"
pytorch_skip=""
if [ "$no_pytorch" = 1 ]; then
  pytorch_skip="--no-pytorch"
elif ! "$torch_python" -c 'import torch' >/dev/null 2>&1; then
  pytorch_skip="$torch_python cannot import torch (apt-get install python3-torch)"
fi
[ -z "$pytorch_skip" ] || echo "# PyTorch points skipped: $pytorch_skip" >&2

# shape MODEL: the model's shape (its preset, then --model-args, as ringtrain reads them) and batch,
# as shell variables.
shape() {
  local -a args
  read -ra args <<<"$model_args"
  ringtrain_gpt_shape "$ringtrain" --model "$1" "${args[@]}" || exit 2
  demo_batch=8
  [ "$1" != gpt2-124m ] || demo_batch=4
  point_batch="${batch:-$demo_batch}"
}

# predict FRAMEWORK RANKS [ONE_RANK_PEAK]: the bytes RANKS ranks need together (see the top).
predict() {
  python3 -c '
import sys
f, backend, n, L, H, C, T, V, B = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:10])
P = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
if len(sys.argv) > 10:
    rank = int(sys.argv[10])
else:
    # per position and layer; ringtrain recomputes the attention probabilities (H * T)
    kept = 15 * C + 4 + (H * T if f == "pytorch" else 0)
    activations = 4 * B * T * (L * kept + 2 * V + 2 * (L + 4) * C)
    rank = (1.6 if f == "pytorch" else 1.0) * (16 * P + 4 * V * C + activations) + (300 << 20)
if n > 1:
    shared = f == "ringtrain" and backend == "shm"
    rank = 1.02 * (rank + 4 * P * (n if shared else 1))
print(int(n * rank))' "$1" "$backend" "$2" "$layers" "$heads" "$width" "$context" "$vocab" \
    "$point_batch" "${@:3}"
}

mem_available() { awk '/^MemAvailable:/ { printf "%.0f\n", $2 * 1024 }' /proc/meminfo; }

declare -A one_rank_peak  # "model precision framework" -> the 1-rank peak, bytes
failures=0

# record KEY=VALUE...: one point's JSON line into $points (values: JSON or plain strings).
record() {
  python3 - "$@" >>"$points" <<'EOF'
import json, sys
row = {}
for pair in sys.argv[1:]:
    key, value = pair.split("=", 1)
    try:
        row[key] = json.loads(value)
    except ValueError:
        row[key] = value
print(json.dumps(row))
EOF
}

# read_ringtrain LOG LOGDIR: the point's figures as KEY=JSON arguments for record.
read_ringtrain() {
  python3 - "$1" "$2/metrics.jsonl" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"memory per rank, MiB .*?peak resident [\d.]+ \(by rank: ([\d., ]+)\)", text)
if not m:
    sys.exit(f"memory.sh: no 'memory per rank' line in {sys.argv[1]}")
peaks = [int(float(v) * 2**20) for v in m.group(1).split(",")]
memory = [json.loads(l) for l in open(sys.argv[2]) if '"memory"' in l][-1]
parts = {k[:-len("_bytes")]: int(v) for k, v in memory.items()
         if k.endswith("_bytes") and not k.startswith("peak")}
print(f"peak_resident_bytes_per_rank={json.dumps(peaks)}")
print(f"peak_resident_bytes_max={max(peaks)}")
print(f"parts_bytes={json.dumps(parts)}")
print(f"accounted_bytes={sum(parts.values())}")
EOF
}

# read_pytorch LOG: the same for the PyTorch reference's JSON line.
read_pytorch() {
  python3 - "$1" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
if not lines:
    sys.exit(f"memory.sh: no JSON line in {sys.argv[1]}")
r = json.loads(lines[-1])
peaks = r["peak_resident_bytes_per_rank"]
print(f"peak_resident_bytes_per_rank={json.dumps(peaks)}")
print(f"peak_resident_bytes_max={max(peaks)}")
print("parts_bytes=" + json.dumps({"parameters": r["parameter_bytes"],
                                   "optimizer_state": max(r["optimizer_state_bytes_per_rank"])}))
EOF
}

# point MODEL PRECISION FRAMEWORK ZERO RANKS: runs one point (or skips it) and records it.
point() {
  local model="$1" precision="$2" framework="$3" zero="$4" np="$5"
  local name="$model-$precision-$framework-zero$zero-np$np"
  local log="$out/$name.log" logdir="$out/$name.logs" key="$1 $2 $3" predicted available
  local -a common=("model=$model" "precision=$precision" "framework=$framework" "zero=$zero"
                   "ranks=$np" "batch=$point_batch" "context=$context" "steps=$steps")
  if [ "$framework" = pytorch ] && [ -n "$pytorch_skip" ]; then
    record "${common[@]}" status=skipped "reason=$pytorch_skip"
    return
  fi
  if [ "$framework" = pytorch ] && [ "$zero" -gt 1 ]; then
    record "${common[@]}" status=skipped "reason=PyTorch has ZeRO stage 1 only (zero 1)"
    return
  fi
  if [ -n "${one_rank_peak[$key]:-}" ]; then
    predicted="$(predict "$framework" "$np" "${one_rank_peak[$key]}")"
  else
    predicted="$(predict "$framework" "$np")"
  fi
  available="$(mem_available)"
  if python3 -c "import sys; p, a, h = map(float, sys.argv[1:]); sys.exit(0 if p > h * a else 1)" \
    "$predicted" "$available" "$headroom"; then
    local reason
    reason="$(python3 -c "import sys; p, a = map(int, sys.argv[1:]); print(f'needs ~{p / 2**30:.1f} GiB, MemAvailable {a / 2**30:.1f} GiB')" \
      "$predicted" "$available")"
    echo "# $name skipped: $reason" >&2
    record "${common[@]}" status=skipped "reason=$reason" "predicted_bytes=$predicted" \
      "mem_available_bytes=$available"
    return
  fi
  echo "# $name (predicted ~$((predicted >> 20)) MiB, MemAvailable $((available >> 20)) MiB)" >&2
  local -a command figures
  rm -rf "$logdir"
  if [ "$framework" = ringtrain ]; then
    local -a extra=()
    [ "$zero" = 0 ] || extra+=(--zero "$zero")
    [ "$np" = 1 ] || extra+=(--backend "$backend")
    local -a words
    read -ra words <<<"$model_args"
    command=(mpirun --oversubscribe -np "$np" "$ringtrain" train --model "$model" "${words[@]}"
      --synthetic --synthetic-size $((point_batch * np * steps)) --batch-size "$point_batch"
      --steps "$steps" --log-every "$steps" --eval-every 0 --optimizer adamw --lr 3e-4
      --beta1 0.9 --beta2 0.95 --epsilon 1e-8 --weight-decay 0.1 --precision "$precision"
      --logdir "$logdir" "${extra[@]}")
  else
    local -a extra=()
    [ "$zero" = 0 ] || extra+=(--zero)
    command=(mpirun --oversubscribe -np "$np" "$torch_python" "$bench/gpt_pytorch_ddp_reference.py"
      --layers "$layers" --heads "$heads" --width "$width" --context "$context" --vocab "$vocab"
      --batch "$point_batch" --steps "$steps" --warmup 0 --precision "$precision"
      --rendezvous "$log.rendezvous" "${extra[@]}")
  fi
  rm -f "$log.rendezvous"  # where PyTorch's ranks meet: never one left from an earlier run
  if ! "${command[@]}" >"$log" 2>&1; then
    echo "memory.sh: $name failed, see $log" >&2
    tail -3 "$log" >&2
    record "${common[@]}" status=failed "reason=$(grep -m1 -i 'error' "$log" || tail -1 "$log")" \
      "log=$log"
    failures=$((failures + 1))
    return
  fi
  if [ "$framework" = ringtrain ]; then
    mapfile -t figures < <(read_ringtrain "$log" "$logdir")
  else
    mapfile -t figures < <(read_pytorch "$log")
  fi
  record "${common[@]}" status=ok "${figures[@]}" "predicted_bytes=$predicted" \
    "mem_available_bytes=$available" "log=$log"
  # The 1-rank peak that predicts this model's larger points: --zero 0's, else the first.
  if [ "$np" = 1 ] && { [ "$zero" = 0 ] || [ -z "${one_rank_peak[$key]:-}" ]; }; then
    local figure
    for figure in "${figures[@]}"; do
      [ "${figure%%=*}" != peak_resident_bytes_max ] || one_rank_peak[$key]="${figure#*=}"
    done
  fi
}

for model in $models; do
  shape "$model"
  for precision in $precisions; do
    for framework in ringtrain pytorch; do
      for zero in $zero_values; do
        for np in $ranks; do
          point "$model" "$precision" "$framework" "$zero" "$np"
        done
      done
    done
  done
done

python3 - "$points" "$json" "$backend" "$steps" "$model_args" <<'EOF'
import json, sys
points_path, json_path, backend, steps, model_args = sys.argv[1:6]
points = [json.loads(line) for line in open(points_path)]
json.dump({"backend": backend, "steps": int(steps), "model_args": model_args,
           "points": points}, open(json_path, "w"), indent=1)
mib = lambda b: f"{b / 2**20:,.0f}"
print(f"# peak resident set per rank and its parts, MiB; {steps} steps per point; ringtrain's "
      f"backend on several ranks: {backend}; parts as ringtrain accounts for them (the largest "
      "over the ranks), PyTorch's parameters and optimiser state")
columns = ["parameters", "gradients", "averaged_gradients", "optimizer_state", "activations",
           "communication_buffers"]
print("| model | precision | run | ranks | peak per rank (max) | by rank | " +
      " | ".join(c.replace("_", " ") for c in columns) + " | accounted |")
print("|---|---|---|---:|---:|---|" + "---:|" * (len(columns) + 1))
for p in points:
    run = {"ringtrain": f"ringtrain --zero {p['zero']}",
           "pytorch": "PyTorch ZeroRedundancyOptimizer" if p["zero"] else
                      "PyTorch DDP gloo" if p["ranks"] > 1 else "PyTorch"}[p["framework"]]
    head = f"| {p['model']} | {p['precision']} | {run} | {p['ranks']} |"
    if p["status"] != "ok":
        print(f"{head} {p['status']}: {p.get('reason', '')} |" + " |" * (len(columns) + 2))
        continue
    parts = p.get("parts_bytes", {})
    cells = [mib(parts[c]) if c in parts else "-" for c in columns]
    accounted = mib(p["accounted_bytes"]) if "accounted_bytes" in p else "-"
    print(f"{head} {mib(p['peak_resident_bytes_max'])} | "
          f"{', '.join(mib(v) for v in p['peak_resident_bytes_per_rank'])} | "
          + " | ".join(cells) + f" | {accounted} |")
EOF
echo "# points: $json, logs: $out/"
[ "$failures" = 0 ] || { echo "memory.sh: $failures point(s) failed" >&2; exit 1; }
