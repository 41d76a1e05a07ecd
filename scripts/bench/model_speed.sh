#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# A model's training speed, ringtrain against PyTorch in the same rounds (issues 20 and 25), one
# thread per rank, each rank bound to a core (mpirun --bind-to core), so that every ratio is taken
# between runs of the same minute (this VM's speed drifts by 10-30%, and other work on it slows
# both sides alike within a round). The summary gives the median and the range over the rounds of
# each figure and of each ratio ringtrain / PyTorch. Prints a table; writes every run's JSON line
# to OUT/results.jsonl and the summary to --json (default OUT/summary.json); logs in OUT (default
# BUILD_DIR/gpt-speed or BUILD_DIR/cnn-speed). PyTorch is Debian's python3-torch for
# /usr/bin/python3 (RINGTRAIN_TORCH_PYTHON names another interpreter), installed with
# libopenblas0-pthread when missing (its reference BLAS would make it ~15x slower), except under
# --quick, which skips PyTorch with a message; --no-pytorch leaves it out.
#
# --model gpt-mini, gpt2-124m or gpt (shape from --model-args: --layers L --heads H --width C
# --context T --vocab V; the same shape goes to PyTorch): synthetic token windows, AdamW (lr
# 3e-4, betas 0.9/0.95, decay 0.1 on the matrices) on both sides. A round runs, one after the other:
#   ringtrain 1 rank     mpirun -np 1 ringtrain train --synthetic ...
#   pytorch 1 thread     mpirun -np 1 /usr/bin/python3 gpt_pytorch_reference.py
#   ringtrain 2 ranks    mpirun -np 2 ringtrain train --synthetic ... --backend shm
#   pytorch DDP 2 ranks  mpirun -np 2 /usr/bin/python3 gpt_pytorch_ddp_reference.py (gloo)
#   sgemm peak           mpirun -np 1 sgemm_peak (one thread, 1024x1024 float32, the serial
#                        OpenBLAS that ringtrain's build links; built here from sgemm_peak.cc;
#                        torch.mm on one thread without one)
# with the scaling efficiency tokens/s(2) / (2 tokens/s(1)) of each side in its round, and model
# FLOP/s per core against the sgemm peak of the same round. The first --warmup steps of every run
# are left out of its tokens/s: PyTorch times its steps after them (a barrier after them on 2
# ranks); ringtrain runs --warmup + --steps steps with --log-every --warmup, its 'done:' line gives
# the training seconds of all the steps (the slowest rank's; evaluation, logging and start-up are
# outside them) and its first progress line the tokens/s of the warm-up steps (rank 0's), whose
# time is taken away. The end-of-run evaluation is kept small (--synthetic-size is one epoch of the
# run's windows, --eval-every 0). Model FLOPs per token: ringtrain's count,
# Model::trainingFlopsPerSample / context (3 L (24 T C^2 + 4 T^2 C) + 6 V C T per sequence), from
# gpt_pytorch_reference.model_flops_per_sample. --quick (CI): 1 round of 2 steps after 1 warm-up
# step and a short peak measurement, for a tiny --model-args. --precision bf16: ringtrain's
# --precision bf16 against PyTorch's forward under torch.autocast("cpu", dtype=torch.bfloat16).
#
# --model cnn (models/model_factory.cc's LeNet-style cnn, 215,370 parameters), batch 64 per rank,
# float32, SGD lr 0.01 momentum 0.9 on both sides (at lr 0.1 a run may or may not diverge). A round:
#   step ringtrain       model_step_perf --models cnn: forward + backward on one thread, one fixed
#                        batch, --repeats rounds of at least --seconds, median of them
#   step pytorch         pytorch_step_reference.py --model cnn: the same (zero_grad, forward,
#                        backward), and the same plus the SGD step (interleaved)
#   ringtrain 2 ranks    mpirun -np 2 ringtrain train --model cnn --synthetic
#   pytorch DDP 2 ranks  mpirun -np 2 pytorch_ddp_reference.py --model cnn (gloo)
# The one-core figures also in CPU time per step (each process's own), which other work on a
# shared machine leaves out. --compare-build DIR adds, in each round, the step and the 2-rank run
# of another build (a change's parent, say) as "@compare" rows. The 2-rank figures are samples/s of
# the whole run's training time (ringtrain's 'done:' line; PyTorch from a barrier after --warmup
# steps); GFLOP/s count the products only, as Model::trainingFlopsPerSample does.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
bench="$root/scripts/bench"
ringtrain_allow_mpirun_as_root

ringtrain_opt --model model gpt-mini "gpt-mini, gpt2-124m, gpt or cnn"
ringtrain_opt --build-dir build_dir "$root/build" "the build whose bin/ holds the programs"
ringtrain_opt --rounds rounds "" "rounds (default 3; 1 with --quick)"
ringtrain_opt --steps steps "" "timed steps (GPTs: 12, 2 with --quick; cnn: 300 training steps)"
ringtrain_opt --warmup warmup "" "warm-up steps (GPTs: 3, 1 with --quick; cnn: PyTorch's, 10)"
ringtrain_opt --batch batch "" "batch per rank (GPTs: 8, cnn: 64)"
ringtrain_opt --backend backend "" "2-rank backend (GPTs: shm, what auto takes on one node; cnn: auto)"
ringtrain_opt --out out "" "folder of the logs and results (default BUILD_DIR/gpt-speed or cnn-speed)"
ringtrain_opt --json json "" "the summary (default OUT/summary.json)"
ringtrain_flag --no-pytorch no_pytorch "ringtrain's rows only"
ringtrain_opt --model-args model_args "" "GPTs: more ringtrain model options (--layers L --heads H ...)"
ringtrain_flag --quick quick "GPTs: 1 round of 2 steps after 1 warm-up step (CI)"
ringtrain_opt --precision precision "" "GPTs: fp32 or bf16 (default fp32)"
ringtrain_flag --one-rank one_rank "GPTs: leave the 2-rank runs out"
ringtrain_opt --compare-build compare "" "cnn: another build's rows in the same rounds, as @compare"
ringtrain_opt --seconds seconds "" "cnn: the shortest step round, seconds (default 1)"
ringtrain_opt --repeats repeats "" "cnn: step rounds per round (default 3)"
ringtrain_parse_args "$@"
ringtrain_fair_malloc  # for PyTorch and ringtrain alike, said in the output
echo "# $ringtrain_malloc_note"
pytorch=$((1 - no_pytorch))
two_ranks=$((1 - one_rank))

# only_for MODELS VARIABLE:OPTION...: exit 2 when an option of other models was given.
only_for() {
  local models="$1" pair variable
  shift
  for pair in "$@"; do
    variable="${pair%%:*}"
    [ -z "${!variable}" ] || [ "${!variable}" = 0 ] ||
      { echo "model_speed.sh: ${pair#*:} is for --model $models only" >&2; exit 2; }
  done
}
case "$model" in
  gpt | gpt-mini | gpt2-124m)
    family=gpt
    only_for cnn compare:--compare-build seconds:--seconds repeats:--repeats
    if [ "$quick" = 1 ]; then
      rounds="${rounds:-1}" steps="${steps:-2}" warmup="${warmup:-1}"
    fi
    rounds="${rounds:-3}" steps="${steps:-12}" warmup="${warmup:-3}" batch="${batch:-8}"
    backend="${backend:-shm}" precision="${precision:-fp32}"
    [[ "$precision" =~ ^(fp32|bf16)$ ]] ||
      { echo "model_speed.sh: --precision must be fp32 or bf16" >&2; exit 2; }
    model_args="--model $model${model_args:+ $model_args}" ;;
  cnn)
    family=cnn
    only_for "gpt-mini, gpt2-124m or gpt" model_args:--model-args quick:--quick \
      precision:--precision one_rank:--one-rank
    rounds="${rounds:-3}" steps="${steps:-300}" warmup="${warmup:-10}" batch="${batch:-64}"
    backend="${backend:-auto}" seconds="${seconds:-1}" repeats="${repeats:-3}"
    ringtrain_need_count --repeats "$repeats"
    [[ "$seconds" =~ ^[0-9]*\.?[0-9]+$ ]] ||
      { echo "model_speed.sh: --seconds must be a number" >&2; exit 2; } ;;
  *) echo "model_speed.sh: --model '$model': expected gpt-mini, gpt2-124m, gpt or cnn" >&2; exit 2 ;;
esac
ringtrain_need_count --rounds "$rounds"
ringtrain_need_count --steps "$steps"
ringtrain_need_count --batch "$batch"
ringtrain_need_count --warmup "$warmup" 0
builds=("$build_dir")
[ -n "$compare" ] && builds+=("$compare")
if [ -n "$compare" ] && [ "$compare" = "$build_dir" ]; then
  echo "model_speed.sh: --compare-build is the --build-dir itself" >&2; exit 2
fi
if [ "$family" = gpt ]; then
  build_dir="$(cd "$build_dir" 2>/dev/null && pwd)" ||
    { echo "model_speed.sh: no build folder $build_dir" >&2; exit 2; }
  ringtrain="${RINGTRAIN_BIN:-$build_dir/bin/ringtrain}"
  [ -x "$ringtrain" ] || { echo "model_speed.sh: no $ringtrain (build first)" >&2; exit 2; }
else
  for dir in "${builds[@]}"; do
    for program in ringtrain model_step_perf; do
      [ -x "$dir/bin/$program" ] || { echo "model_speed.sh: no $dir/bin/$program (build first)" >&2; exit 2; }
    done
  done
fi
out="${out:-$build_dir/$family-speed}"
json="${json:-$out/summary.json}"
mkdir -p "$out"

# PyTorch: Debian's, for /usr/bin/python3 (pyenv's python3 on PATH may have none).
torch_python="${RINGTRAIN_TORCH_PYTHON:-/usr/bin/python3}"
pytorch_note=""
if [ "$pytorch" = 1 ] && ! "$torch_python" -c 'import torch' >/dev/null 2>&1; then
  if [ "$quick" = 1 ]; then
    pytorch=0
  else
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
results="$out/results.jsonl"
: >"$results"

# run ROUND CONFIG COMMAND...: runs it, keeps its log, appends its JSON line(s) to $results.
# PyTorch's ranks meet in LOG.rendezvous, which must not be left from an earlier run.
run() {
  local round="$1" config="$2" log
  shift 2
  log="$out/r$round-$config.log"
  rm -f "$log.rendezvous"
  echo "# round $round: $config" >&2
  "$@" >"$log" 2>&1 || { echo "model_speed.sh: $config failed, see $log" >&2; tail -5 "$log" >&2; exit 1; }
  "record_$family" "$round" "$config" "$log" >>"$results"
}

# --- the GPTs ---
# The model's shape, for PyTorch and the FLOP count: the preset's, then any explicit option, as
# ringtrain reads them.
gpt_shape() {
  read -ra ringtrain_model <<<"$model_args"
  ringtrain_gpt_shape "$ringtrain" "${ringtrain_model[@]}" || exit 2
  shape=(--layers "$layers" --heads "$heads" --width "$width" --context "$context" --vocab "$vocab")
}

# The sgemm peak program, against the OpenBLAS that the build links (its CMakeCache says which);
# without one (an Eigen-only build), torch.mm on one thread stands in, and the table says so.
gpt_peak_setup() {
  local openblas compiler
  openblas="$(sed -n 's/^RINGTRAIN_OPENBLAS_SERIAL:FILEPATH=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)"
  compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)"
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
  if [ "$quick" = 1 ]; then peak_n=256 peak_seconds=0.1 peak_repeats=1; fi
}

# record_gpt ROUND CONFIG LOG: the run's JSON line.
record_gpt() {
  python3 - "$@" "$batch" "$context" "$warmup" "$steps" <<'EOF'
import json, re, sys
round_, config, log, batch, context, warmup, steps = sys.argv[1:8]
batch, context, warmup, steps = int(batch), int(context), int(warmup), int(steps)
text = open(log).read()
row = {"round": int(round_), "config": config}
if config.startswith("ringtrain"):
    ranks = int(config.split("-")[-1])
    done = re.search(r"done: (\d+) steps in ([\d.]+) s of training .*?; (\d+) tokens/s", text)
    if not done:
        sys.exit(f"model_speed.sh: no 'done:' line with tokens/s in {log}")
    # The seconds from the rates (whole tokens/s), which keep more digits than the seconds do.
    total_steps, tokens_per_step = int(done.group(1)), batch * context * ranks
    seconds = total_steps * tokens_per_step / float(done.group(3))
    warm_seconds = 0.0
    if warmup > 0:
        first = re.search(r"step (\d+)/\d+ .*?(\d+) tokens/s \(", text)
        if not first or int(first.group(1)) != warmup:
            sys.exit(f"model_speed.sh: no progress line at step {warmup} in {log}")
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
        sys.exit(f"model_speed.sh: no result in {log}")
    r = json.loads(m.group(0))
    row.update(gflops=r.get("best_gflops", r.get("peak_gflops")), n=r.get("n"))
else:
    lines = [l for l in text.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"model_speed.sh: no JSON line in {log}")
    r = json.loads(lines[-1])
    row.update(ranks=r.get("ranks", 1), steps=r["steps"], warmup=r["warmup"],
               tokens_per_second=r["tokens_per_second"], seconds=r["seconds"],
               tokens_per_second_per_rank=r.get("tokens_per_second_per_rank"),
               cpu_share=r.get("cpu_share_per_rank", [r["cpu_seconds"] / r["seconds"]]
                               if "cpu_seconds" in r else None))
print(json.dumps(row))
EOF
}

# gpt_ringtrain ROUND RANKS
gpt_ringtrain() {
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

gpt_rounds() {
  gpt_shape
  gpt_peak_setup
  for round in $(seq "$rounds"); do
    gpt_ringtrain "$round" 1
    if [ "$pytorch" = 1 ]; then
      run "$round" pytorch-1 "${mpirun_cmd[@]}" -np 1 "$torch_python" "$bench/gpt_pytorch_reference.py" \
        "${shape[@]}" --batch "$batch" --steps "$steps" --warmup "$warmup" --precision "$precision"
    fi
    if [ "$two_ranks" = 1 ]; then
      gpt_ringtrain "$round" 2
      if [ "$pytorch" = 1 ]; then
        run "$round" pytorch-ddp-2 "${mpirun_cmd[@]}" -np 2 "$torch_python" \
          "$bench/gpt_pytorch_ddp_reference.py" "${shape[@]}" --batch "$batch" --steps "$steps" \
          --warmup "$warmup" --rendezvous "$out/r$round-pytorch-ddp-2.log.rendezvous" --precision "$precision"
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
}

# --- the cnn ---
# record_cnn ROUND CONFIG LOG: the run's JSON line(s).
record_cnn() {
  local round="$1" config="$2" log="$3"
  python3 - "$round" "$config" "$log" "$out/r$round-$config.jsonl" <<'EOF'
import json, re, sys
round_, config, log, step_json = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
text = open(log).read()
if config.startswith("step-"):
    source = open(step_json).read() if config.startswith("step-ringtrain") else text
    for line in source.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            print(json.dumps({"round": round_, "config": config, "what": r["what"],
                              "ms_per_step": r["median_ms"], "gflops": r["gflops"],
                              "cpu_ms_per_step": r.get("median_cpu_ms")}))
else:
    m = re.search(r"done: .*?([\d.]+) samples/s", text) if config.startswith("ringtrain") else \
        re.search(r"([\d.]+) samples/s \(", text)
    if not m:
        sys.exit(f"model_speed.sh: no samples/s in {log}")
    print(json.dumps({"round": round_, "config": config, "samples_per_second": float(m.group(1))}))
EOF
}

# cnn_train ROUND CONFIG BUILD: ringtrain's 2-rank training run.
cnn_train() {
  run "$1" "$2" "${mpirun_cmd[@]}" -np 2 "$3/bin/ringtrain" train --model cnn --synthetic \
    --synthetic-size $((2 * batch * (steps + 1))) --batch-size "$batch" --steps "$steps" \
    --log-every 0 --eval-every 0 --optimizer sgd --lr 0.01 --momentum 0.9 --backend "$backend"
}

# cnn_step ROUND CONFIG BUILD: model_step_perf's cnn step on one core.
cnn_step() {
  run "$1" "$2" "${mpirun_cmd[@]}" -np 1 "$3/bin/model_step_perf" --models cnn --batch "$batch" \
    --seconds "$seconds" --repeats "$repeats" --gemm 0 --json "$out/r$1-$2.jsonl"
}

cnn_rounds() {
  for round in $(seq "$rounds"); do
    cnn_step "$round" step-ringtrain "$build_dir"
    [ -n "$compare" ] && cnn_step "$round" step-ringtrain@compare "$compare"
    if [ "$pytorch" = 1 ]; then
      run "$round" step-pytorch "${mpirun_cmd[@]}" -np 1 "$torch_python" \
        "$bench/pytorch_step_reference.py" --model cnn --batch "$batch" --seconds "$seconds" \
        --repeats "$repeats"
    fi
    cnn_train "$round" ringtrain-2 "$build_dir"
    [ -n "$compare" ] && cnn_train "$round" ringtrain-2@compare "$compare"
    if [ "$pytorch" = 1 ]; then
      run "$round" pytorch-ddp-2 "${mpirun_cmd[@]}" -np 2 "$torch_python" \
        "$bench/pytorch_ddp_reference.py" --model cnn --batch-size "$batch" --steps "$steps" \
        --warmup "$warmup" --lr 0.01 --rendezvous "$out/r$round-pytorch-ddp-2.log.rendezvous"
    fi
  done
  python3 "$bench/cnn_speed_summary.py" "$results" "$json" "$batch" "$steps" "$backend"
}

"${family}_rounds"
echo "# runs: $results, summary: $json, logs: $out/"
