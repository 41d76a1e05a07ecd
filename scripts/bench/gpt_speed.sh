#!/usr/bin/env bash
# GPT training speed, ringtrain against PyTorch in the same rounds (issue 20's "Speed"): gpt-mini
# (4 layers, 4 heads, width 256, context 128, vocabulary 50257) on synthetic token windows, batch 8
# per rank, one thread per rank, each rank bound to a core by mpirun (--bind-to core), AdamW
# (lr 3e-4, betas 0.9/0.95, decay 0.1 on the matrices) on both sides. A round runs, one after the
# other:
#   ringtrain 1 rank     mpirun -np 1 ringtrain train --synthetic ...
#   pytorch 1 thread     mpirun -np 1 /usr/bin/python3 gpt_pytorch_reference.py
#   ringtrain 2 ranks    mpirun -np 2 ringtrain train --synthetic ... --backend shm
#   pytorch DDP 2 ranks  mpirun -np 2 /usr/bin/python3 gpt_pytorch_ddp_reference.py (gloo)
#   sgemm peak           mpirun -np 1 sgemm_peak (one thread, 1024x1024 float32, the serial
#                        OpenBLAS that ringtrain's build links; built here from sgemm_peak.cc)
# so that every ratio is taken between runs of the same minute (this VM's speed drifts by 10-30%);
# the summary gives the median and the range over the rounds of each figure and of each ratio:
# ringtrain/PyTorch at 1 and at 2 ranks, the scaling efficiency tokens/s(2) / (2 tokens/s(1)) of
# each side in its round, and model FLOP/s per core against the sgemm peak of the same round.
#
# Warm-up: the first --warmup steps of every run are left out of its tokens/s. PyTorch times its
# steps after them (a barrier after them on 2 ranks). ringtrain runs --warmup + --steps steps with
# --log-every --warmup: its 'done:' line gives the training seconds of all the steps (the slowest
# rank's; evaluation, logging and start-up are outside them) and its first progress line the
# tokens/s of the warm-up steps (rank 0's), whose time is taken away. No second run is needed.
# The end-of-run evaluation is kept small: --synthetic-size is one epoch of the run's windows,
# so the test set (size/8) is a few dozen windows, and --eval-every 0.
# Model FLOPs per token: ringtrain's count, Model::trainingFlopsPerSample / context (matrix
# products only, forward plus the two backward products: 3 L (24 T C^2 + 4 T^2 C) + 6 V C T per
# sequence), computed by gpt_pytorch_reference.model_flops_per_sample, which counts the same way.
#
#   scripts/bench/gpt_speed.sh [--build-dir DIR] [--rounds R] [--steps S] [--warmup W]
#                              [--batch B] [--backend shm|ring|mpi] [--model-args "ARGS"]
#                              [--out DIR] [--json FILE] [--no-pytorch] [--quick]
#                              [--precision fp32|bf16] [--one-rank]
# Defaults: build/, 3 rounds, 12 timed steps after 3 warm-up steps, batch 8, shm (what auto takes
# on one node), --model-args "--model gpt-mini". --model-args is passed to ringtrain as it is
# (gpt2-124m, or --model gpt --layers L --heads H --width C --context T --vocab V) and the same
# shape to PyTorch. --quick (CI): 1 round of 2 steps after 1 warm-up step and a short peak
# measurement; use it with a tiny --model-args. Without PyTorch for /usr/bin/python3 (Debian's
# python3-torch), the PyTorch runs are skipped with a message under --quick or --no-pytorch and
# installed (python3-torch, libopenblas0-pthread) otherwise, as scaling_efficiency.sh --pytorch
# does. --precision bf16: ringtrain's --precision bf16 against PyTorch's forward under
# torch.autocast("cpu", dtype=torch.bfloat16). --one-rank leaves the 2-rank runs out. Prints a table; writes every run's JSON line to OUT/results.jsonl and the summary to
# --json (default OUT/summary.json); logs in OUT (default BUILD_DIR/gpt-speed).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../lib/common.sh
source "$root/scripts/lib/common.sh"
ringtrain_allow_mpirun_as_root
bench="$root/scripts/bench"

build_dir="$root/build"
rounds=3
steps=12
warmup=3
batch=8
backend=shm
model_args="--model gpt-mini"
out=""
json=""
pytorch=1
quick=0
precision=fp32
two_ranks=1
set_rounds="" set_steps="" set_warmup=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --rounds) set_rounds="$2"; shift 2 ;;
    --steps) set_steps="$2"; shift 2 ;;
    --warmup) set_warmup="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --backend) backend="$2"; shift 2 ;;
    --model-args) model_args="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --no-pytorch) pytorch=0; shift ;;
    --quick) quick=1; shift ;;
    --precision) precision="$2"; shift 2 ;;
    --one-rank) two_ranks=0; shift ;;
    *) echo "gpt_speed.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then rounds=1 steps=2 warmup=1; fi
rounds="${set_rounds:-$rounds}" steps="${set_steps:-$steps}" warmup="${set_warmup:-$warmup}"
ringtrain_need_count --rounds "$rounds"
ringtrain_need_count --steps "$steps"
ringtrain_need_count --batch "$batch"
[[ "$precision" =~ ^(fp32|bf16)$ ]] ||
  { echo "gpt_speed.sh: --precision must be fp32 or bf16" >&2; exit 2; }
ringtrain_need_count --warmup "$warmup" 0
build_dir="$(cd "$build_dir" 2>/dev/null && pwd)" ||
  { echo "gpt_speed.sh: no build folder $build_dir" >&2; exit 2; }
ringtrain="${RINGTRAIN_BIN:-$build_dir/bin/ringtrain}"
[ -x "$ringtrain" ] || { echo "gpt_speed.sh: no $ringtrain (build first)" >&2; exit 2; }
out="${out:-$build_dir/gpt-speed}"
json="${json:-$out/summary.json}"
mkdir -p "$out"

# The model's shape, for PyTorch and the FLOP count: the preset's, then any explicit option.
read -ra ringtrain_model <<<"$model_args"
layers=4 heads=4 width=256 context=128 vocab=50257
for ((i = 0; i < ${#ringtrain_model[@]}; i++)); do
  next="${ringtrain_model[i + 1]:-}"
  case "${ringtrain_model[i]}" in
    --model)
      case "$next" in
        gpt | gpt-mini) ;;
        gpt2-124m) layers=12 heads=12 width=768 context=1024 vocab=50257 ;;
        *) echo "gpt_speed.sh: --model-args: --model $next is not a GPT" >&2; exit 2 ;;
      esac ;;
    --layers) layers="$next" ;;
    --heads) heads="$next" ;;
    --width) width="$next" ;;
    --context) context="$next" ;;
    --vocab) vocab="$next" ;;
  esac
done
shape=(--layers "$layers" --heads "$heads" --width "$width" --context "$context" --vocab "$vocab")

# PyTorch: Debian's, for /usr/bin/python3 (pyenv's python3 on PATH may have none);
# RINGTRAIN_TORCH_PYTHON names another interpreter (the test names one without torch).
torch_python="${RINGTRAIN_TORCH_PYTHON:-/usr/bin/python3}"
pytorch_note=""
if [ "$pytorch" = 1 ] && ! "$torch_python" -c 'import torch' >/dev/null 2>&1; then
  if [ "$quick" = 1 ]; then
    pytorch=0
  else
    # Debian's PyTorch finds BLAS through libblas.so.3; the reference BLAS would make it ~15x
    # slower.
    ringtrain_install_packages python3-torch libopenblas0-pthread
  fi
fi
if [ "$pytorch" = 0 ]; then
  pytorch_note="PyTorch runs skipped: $([ "$quick" = 1 ] && echo "$torch_python cannot import torch (apt-get install python3-torch)" || echo "--no-pytorch")"
  echo "# $pytorch_note" >&2
fi

# mpirun, one rank per core; --oversubscribe where the 2-rank runs would not fit.
mpirun_cmd=(mpirun --bind-to core)
[ "$(nproc)" -ge 2 ] || mpirun_cmd+=(--oversubscribe)

# The sgemm peak program, against the OpenBLAS that the build links (its CMakeCache says which);
# without one (an Eigen-only build), torch.mm on one thread stands in, and the table says so.
openblas="$(sed -n 's/^RINGTRAIN_OPENBLAS_SERIAL:FILEPATH=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)"
compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)"
peak_source=""
peak_bin="$out/sgemm_peak"
if [ -n "$openblas" ] && [ -f "$openblas" ] &&
  "${compiler:-c++}" -O2 -std=c++20 -o "$peak_bin" "$bench/sgemm_peak.cc" "$openblas" \
    -Wl,-rpath,"$(dirname "$openblas")" >"$out/sgemm_peak.build.log" 2>&1; then
  peak_source="cblas_sgemm of $openblas"
elif [ "$pytorch" = 1 ]; then
  peak_source="torch.mm on one thread (no OpenBLAS in $build_dir's build)"
else
  peak_source="not measured (no OpenBLAS in the build, no PyTorch)"
fi
peak_n=1024 peak_seconds=0.5 peak_repeats=3
[ "$quick" = 1 ] && peak_n=256 peak_seconds=0.1 peak_repeats=1

results="$out/results.jsonl"
: >"$results"

# record ROUND CONFIG LOG: the run's JSON line, appended to $results.
record() {
  python3 - "$@" "$batch" "$context" "$warmup" "$steps" >>"$results" <<'EOF'
import json, re, sys
round_, config, log, batch, context, warmup, steps = sys.argv[1:8]
batch, context, warmup, steps = int(batch), int(context), int(warmup), int(steps)
text = open(log).read()
row = {"round": int(round_), "config": config}
if config.startswith("ringtrain"):
    ranks = int(config.split("-")[-1])
    done = re.search(r"done: (\d+) steps in ([\d.]+) s of training .*?; (\d+) tokens/s", text)
    if not done:
        sys.exit(f"gpt_speed.sh: no 'done:' line with tokens/s in {log}")
    # The seconds from the rates (whole tokens/s), which keep more digits than the seconds do.
    total_steps, tokens_per_step = int(done.group(1)), batch * context * ranks
    seconds = total_steps * tokens_per_step / float(done.group(3))
    warm_seconds = 0.0
    if warmup > 0:
        first = re.search(r"step (\d+)/\d+ .*?(\d+) tokens/s \(", text)
        if not first or int(first.group(1)) != warmup:
            sys.exit(f"gpt_speed.sh: no progress line at step {warmup} in {log}")
        warm_seconds = warmup * tokens_per_step / float(first.group(2))
    timed = total_steps - warmup
    row.update(ranks=ranks, steps=timed, warmup=warmup, training_seconds=seconds,
               warmup_seconds=warm_seconds,
               tokens_per_second=timed * tokens_per_step / (seconds - warm_seconds),
               tokens_per_second_all_steps=float(done.group(3)),
               replicas_identical="replicas identical" in text)
    m = re.search(r"all-reduces took ([\d.]+) ms per step, (\d+)% of it not hidden", text)
    if m:
        row.update(allreduce_ms_per_step=float(m.group(1)), allreduce_not_hidden=int(m.group(2)) / 100)
    m = re.search(r"waiting for averaged gradients (\d+)%", text)
    if m:
        row["waiting_share"] = int(m.group(1)) / 100
elif config == "peak":
    m = re.search(r'\{"n".*\}|\{"peak_gflops".*\}', text)
    if not m:
        sys.exit(f"gpt_speed.sh: no result in {log}")
    r = json.loads(m.group(0))
    row.update(gflops=r.get("best_gflops", r.get("peak_gflops")), n=r.get("n"))
else:
    lines = [l for l in text.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"gpt_speed.sh: no JSON line in {log}")
    r = json.loads(lines[-1])
    row.update(ranks=r.get("ranks", 1), steps=r["steps"], warmup=r["warmup"],
               tokens_per_second=r["tokens_per_second"], seconds=r["seconds"],
               tokens_per_second_per_rank=r.get("tokens_per_second_per_rank"),
               cpu_share=r.get("cpu_share_per_rank", [r["cpu_seconds"] / r["seconds"]]
                               if "cpu_seconds" in r else None))
print(json.dumps(row))
EOF
}

# run ROUND CONFIG COMMAND...: runs it, keeps its log, records it.
run() {
  local round="$1" config="$2" log
  shift 2
  log="$out/r$round-$config.log"
  echo "# round $round: $config" >&2
  "$@" >"$log" 2>&1 || { echo "gpt_speed.sh: $config failed, see $log" >&2; tail -5 "$log" >&2; exit 1; }
  record "$round" "$config" "$log"
}

# ringtrain_run ROUND RANKS
ringtrain_run() {
  local round="$1" np="$2" engine=()
  [ "$np" -gt 1 ] && engine=(--backend "$backend")
  run "$round" "ringtrain-$np" "${mpirun_cmd[@]}" -np "$np" "$ringtrain" train \
    "${ringtrain_model[@]}" --synthetic --synthetic-size $((batch * np * (warmup + steps))) \
    --batch-size "$batch" --steps $((warmup + steps)) --log-every $((warmup > 0 ? warmup : steps)) \
    --eval-every 0 --optimizer adamw --lr 3e-4 --beta1 0.9 --beta2 0.95 --epsilon 1e-8 \
    --weight-decay 0.1 --precision "$precision" "${engine[@]}"
}

peak_run() {
  local round="$1"
  if [ -x "$peak_bin" ] && [ "${peak_source#cblas}" != "$peak_source" ]; then
    run "$round" peak "${mpirun_cmd[@]}" -np 1 "$peak_bin" "$peak_n" "$peak_seconds" "$peak_repeats"
  elif [ "$pytorch" = 1 ]; then
    run "$round" peak "${mpirun_cmd[@]}" -np 1 "$torch_python" -c '
import json, os, sys, time
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import torch
torch.set_num_threads(1)
n, seconds, repeats = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
a, b = torch.rand(n, n), torch.rand(n, n)
torch.mm(a, b)
rates = []
for _ in range(repeats):
    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        torch.mm(a, b)
        count += 1
    rates.append(2 * n ** 3 * count / (time.perf_counter() - start) / 1e9)
print(json.dumps({"n": n, "best_gflops": max(rates)}))' "$peak_n" "$peak_seconds" "$peak_repeats"
  fi
}

for round in $(seq "$rounds"); do
  ringtrain_run "$round" 1
  if [ "$pytorch" = 1 ]; then
    run "$round" pytorch-1 "${mpirun_cmd[@]}" -np 1 "$torch_python" "$bench/gpt_pytorch_reference.py" \
      "${shape[@]}" --batch "$batch" --steps "$steps" --warmup "$warmup" --precision "$precision"
  fi
  if [ "$two_ranks" = 1 ]; then
    ringtrain_run "$round" 2
    if [ "$pytorch" = 1 ]; then
      run "$round" pytorch-ddp-2 "${mpirun_cmd[@]}" -np 2 "$torch_python" \
        "$bench/gpt_pytorch_ddp_reference.py" "${shape[@]}" --batch "$batch" --steps "$steps" \
        --warmup "$warmup" --port $((20000 + RANDOM % 20000)) --precision "$precision"
    fi
  fi
  peak_run "$round"
done

python3 - "$results" "$json" "$bench" "$model_args" "$batch" "$steps" "$warmup" "$backend" \
  "$peak_source" "$pytorch_note" "$precision" "${shape[@]}" <<'EOF'
import json, statistics, sys
(results, json_path, bench, model_args, batch, steps, warmup, backend, peak_source,
 pytorch_note, precision) = sys.argv[1:12]
shape = dict(zip(sys.argv[12::2], (int(v) for v in sys.argv[13::2])))
sys.path.insert(0, bench)
from gpt_pytorch_reference import model_flops_per_sample  # ringtrain's count; no torch needed
L, H, C, T, V = (shape[k] for k in ("--layers", "--heads", "--width", "--context", "--vocab"))
flops_per_token = model_flops_per_sample(L, C, T, V) / T
rows = [json.loads(line) for line in open(results)]
rounds = sorted({r["round"] for r in rows})
by = {(r["round"], r["config"]): r for r in rows}
configs = [c for c in ("ringtrain-1", "pytorch-1", "ringtrain-2", "pytorch-ddp-2")
           if any(k[1] == c for k in by)]
names = {"ringtrain-1": "ringtrain, 1 rank", "pytorch-1": "PyTorch, 1 thread",
         "ringtrain-2": f"ringtrain, 2 ranks ({backend})", "pytorch-ddp-2": "PyTorch DDP gloo, 2 ranks"}

def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}

def per_round(f):
    """f(round) over the rounds where it is defined."""
    out = []
    for r in rounds:
        try:
            out.append(f(r))
        except KeyError:
            pass
    return out

tok = lambda r, c: by[(r, c)]["tokens_per_second"]
peak = lambda r: by[(r, "peak")]["gflops"]
summary = {"model_args": model_args, "layers": L, "heads": H, "width": C, "context": T,
           "vocab": V, "batch_per_rank": int(batch), "steps": int(steps), "warmup": int(warmup),
           "rounds": len(rounds), "backend_2_ranks": backend, "precision": precision,
           "model_flops_per_token": flops_per_token, "peak_source": peak_source,
           "configurations": {}, "ratios": {}, "scaling_efficiency": {}}
if pytorch_note:
    summary["pytorch_skipped"] = pytorch_note
peaks = per_round(peak)
if peaks:
    summary["sgemm_peak_gflops"] = spread(peaks)
for c in configs:
    ranks = 2 if c.endswith("-2") else 1
    s = spread(per_round(lambda r: tok(r, c)))
    s["gflops_per_core"] = spread(per_round(lambda r: tok(r, c) * flops_per_token / ranks / 1e9))
    share = per_round(lambda r: tok(r, c) * flops_per_token / ranks / 1e9 / peak(r))
    if share:
        s["share_of_sgemm_peak"] = spread(share)
    s["ranks"] = ranks
    summary["configurations"][c] = s
for ranks, (a, b) in ((1, ("ringtrain-1", "pytorch-1")), (2, ("ringtrain-2", "pytorch-ddp-2"))):
    x = per_round(lambda r: tok(r, a) / tok(r, b))
    if x:
        summary["ratios"][f"ringtrain_over_pytorch_{ranks}"] = spread(x)
for name, (one, two) in (("ringtrain", ("ringtrain-1", "ringtrain-2")),
                         ("pytorch", ("pytorch-1", "pytorch-ddp-2"))):
    x = per_round(lambda r: tok(r, two) / (2 * tok(r, one)))
    if x:
        summary["scaling_efficiency"][name] = spread(x)
json.dump(summary, open(json_path, "w"), indent=1)

fmt = lambda s, p=0: f"{s['median']:,.{p}f} ({s['min']:,.{p}f}-{s['max']:,.{p}f})"
print(f"# gpt L{L} H{H} C{C} T{T} V{V} ({model_args}), batch {batch} per rank, {steps} timed "
      f"steps after {warmup} warm-up, precision {precision}, {len(rounds)} round(s) interleaved, "
      f"one thread per rank "
      f"bound to a core; model FLOPs per token {flops_per_token / 1e6:.2f} M")
if pytorch_note:
    print(f"# {pytorch_note}")
print(f"# medians (range) over the rounds; sgemm peak: {peak_source}")
print("| configuration | tokens/s | model GFLOP/s per core | of the sgemm peak |")
print("|---|---:|---:|---:|")
for c in configs:
    s = summary["configurations"][c]
    p = s.get("share_of_sgemm_peak")
    share = f"{100 * p['median']:.0f}% ({100 * p['min']:.0f}-{100 * p['max']:.0f}%)" if p else "-"
    print(f"| {names[c]} | {fmt(s)} | {fmt(s['gflops_per_core'], 1)} | {share} |")
if peaks:
    print(f"| sgemm peak, one thread | | {fmt(summary['sgemm_peak_gflops'], 1)} | 100% |")
print("| ratio or efficiency | median (range) |")
print("|---|---:|")
for key, label in (("ringtrain_over_pytorch_1", "ringtrain / PyTorch, 1 rank"),
                   ("ringtrain_over_pytorch_2", "ringtrain / PyTorch DDP, 2 ranks")):
    if key in summary["ratios"]:
        print(f"| {label} | {fmt(summary['ratios'][key], 3)} |")
for key in ("ringtrain", "pytorch"):
    if key in summary["scaling_efficiency"]:
        print(f"| scaling efficiency 2 ranks, {key} | {fmt(summary['scaling_efficiency'][key], 3)} |")
EOF
echo "# runs: $results, summary: $json, logs: $out/"
