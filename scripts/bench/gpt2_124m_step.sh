#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# GPT-2 124M training steps on this machine (issue 20's "Speed"): `ringtrain train --model
# gpt2-124m --synthetic --batch-size 4` (context 1024, 124M parameters, ~150 tensors) for a few
# steps, one thread per rank bound to a core, AdamW; by default four runs, one after the other:
#   1          1 rank (no gradient exchange)
#   shm        2 ranks, --backend shm (what auto takes on one node), --timeline
#   ring       2 ranks, --backend ring (float32 on the wire), --timeline
#   ring-bf16  2 ranks, --backend ring --compression bf16, --timeline
# Per run: the first step's time (warm-up: first touch of the activations and the optimiser's
# moments), the median time of the later steps and their tokens/s (rank 0's step times, from
# --log-every 1's progress lines, whose whole tokens/s put about 0.5% of rounding into a step
# time), the model FLOP/s per core over those steps (ringtrain's count, as model_speed.sh says),
# the 'done:' line's tokens/s over all steps, the peak memory of
# every rank (its maximum resident set size, from GNU time's %M around each rank: ru_maxrss, over
# the whole process, evaluation and start-up included), the number of gradient buckets (the
# start-up line), and for 2 ranks the share of the all-reduce time not hidden behind computation:
# from the timeline with the first step left out (timeline_summary.py --skip 1, mean over ranks:
# the waits for averaged gradients over the all-reduce spans; above 100% when a rank waits for
# the other to finish its backward too) and the run's own final line (all steps).
# One step is ~3.5 TFLOP of matrix products (4 x 874 GFLOP): about a minute on one core of the
# 2-vCPU CI VM, so a run of 3 steps takes 2.5-3 minutes with start-up and the end-of-run evaluation
# (kept to a few windows: --synthetic-size is one epoch of the run, the test set an eighth of it).
#
# Prints a table; writes the summary to --json; logs and timelines in --out.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_allow_mpirun_as_root

ringtrain_opt --build-dir build_dir "$root/build" "the build whose bin/ holds ringtrain"
ringtrain_opt --steps steps 3 "steps per run, at least 2"
ringtrain_opt --batch batch 4 "batch per rank"
ringtrain_opt --runs runs "1 shm ring ring-bf16" "the runs, of 1, shm, ring, ring-bf16"
ringtrain_opt --model-args model_args "--model gpt2-124m" "ringtrain's model options (a smaller GPT for a check of the script)"
ringtrain_opt --out out "" "folder of the logs and timelines (default BUILD_DIR/gpt2-124m-step)"
ringtrain_opt --json json "" "the summary (default OUT/summary.json)"
ringtrain_parse_args "$@"
[[ "$steps" =~ ^[1-9][0-9]*$ && "$steps" -ge 2 && "$batch" =~ ^[1-9][0-9]*$ ]] ||
  { echo "gpt2_124m_step.sh: --steps must be at least 2, --batch at least 1" >&2; exit 2; }
build_dir="$(cd "$build_dir" 2>/dev/null && pwd)" ||
  { echo "gpt2_124m_step.sh: no build folder $build_dir" >&2; exit 2; }
ringtrain="${RINGTRAIN_BIN:-$build_dir/bin/ringtrain}"
[ -x "$ringtrain" ] || { echo "gpt2_124m_step.sh: no $ringtrain (build first)" >&2; exit 2; }
[ -x /usr/bin/time ] || ringtrain_install_packages time
out="${out:-$build_dir/gpt2-124m-step}"
json="${json:-$out/summary.json}"
mkdir -p "$out"
read -ra model <<<"$model_args"
mpirun_cmd=(mpirun --bind-to core)
[ "$(nproc)" -ge 2 ] || mpirun_cmd+=(--oversubscribe)

results="$out/results.jsonl"
: >"$results"
for name in $runs; do
  case "$name" in
    1) np=1 engine=() ;;
    shm) np=2 engine=(--backend shm) ;;
    ring) np=2 engine=(--backend ring) ;;
    ring-bf16) np=2 engine=(--backend ring --compression bf16) ;;
    *) echo "gpt2_124m_step.sh: --runs: unknown run '$name' (1, shm, ring, ring-bf16)" >&2; exit 2 ;;
  esac
  timeline=()
  [ "$np" -gt 1 ] && timeline=(--timeline "$out/$name.timeline.json")
  log="$out/$name.log"
  rm -f "$out/$name.maxrss".*
  echo "# $name: $np rank(s), $steps steps ($(date -u +%H:%M:%S))" >&2
  # GNU time around each rank writes that rank's maximum resident set size (KiB).
  # shellcheck disable=SC2016  # $0, $@ and the rank belong to the inner shell
  "${mpirun_cmd[@]}" -np "$np" sh -c \
    'exec /usr/bin/time -f %M -o "$0.${OMPI_COMM_WORLD_RANK:-0}" "$@"' "$out/$name.maxrss" \
    "$ringtrain" train "${model[@]}" --synthetic --synthetic-size $((batch * np * steps)) \
    --batch-size "$batch" --steps "$steps" --log-every 1 --eval-every 0 --optimizer adamw \
    --lr 3e-4 --beta1 0.9 --beta2 0.95 --weight-decay 0.1 "${engine[@]}" "${timeline[@]}" \
    >"$log" 2>&1 || { echo "gpt2_124m_step.sh: run $name failed, see $log" >&2; tail -5 "$log" >&2; exit 1; }
  exposed=""
  if [ "$np" -gt 1 ]; then
    exposed="$(python3 "$root/scripts/bench/timeline_summary.py" "$out/$name.timeline.json" \
      --skip 1 --json)"
  fi
  python3 - "$name" "$np" "$batch" "$log" "$out/$name.maxrss" "$exposed" "$root/scripts/bench" \
    >>"$results" <<'EOF'
import glob, json, re, statistics, sys
name, np_, batch, log, rss, exposed, bench = sys.argv[1:8]
sys.path.insert(0, bench)
from gpt_pytorch_reference import model_flops_per_sample  # ringtrain's count; no torch needed
np_, batch = int(np_), int(batch)
text = open(log).read()
shape = re.search(r"model gpt \((\d+) layers, \d+ heads, width (\d+), context (\d+), "
                  r"vocabulary (\d+)\)", text)
layers, width, context, vocab = (int(x) for x in shape.groups())
flops_per_token = model_flops_per_sample(layers, width, context, vocab) / context
tokens_per_step = batch * np_ * context
rates = [float(m) for m in re.findall(r"step \d+/\d+ .*?(\d+) tokens/s \(", text)]
step_seconds = [tokens_per_step / r for r in rates]
later = step_seconds[1:]
done = re.search(r"done: (\d+) steps in ([\d.]+) s of training \(([\d.]+) s wall\).*?; (\d+) tokens/s", text)
buckets = re.search(r"(\d+) gradient bucket\(s\) up to (\d+) KiB", text)
params = re.search(r"training gpt \((\d+) parameters\)", text)
row = {"run": name, "ranks": np_, "batch_per_rank": batch, "context": context,
       "parameters": int(params.group(1)) if params else None,
       "steps": int(done.group(1)), "training_seconds": float(done.group(2)),
       "wall_seconds": float(done.group(3)), "tokens_per_second_all_steps": float(done.group(4)),
       "first_step_seconds": step_seconds[0],
       "step_seconds_median_after_first": statistics.median(later),
       "tokens_per_second_after_first": tokens_per_step * len(later) / sum(later),
       "model_gflops_per_core_after_first":
           flops_per_token * tokens_per_step * len(later) / sum(later) / np_ / 1e9,
       "max_rss_gib_per_rank": [int(open(f).read().split()[-1]) / 2**20
                                for f in sorted(glob.glob(rss + ".*"))],
       "replicas_identical": "replicas identical" in text}
if buckets:
    row.update(gradient_buckets=int(buckets.group(1)), bucket_limit_kib=int(buckets.group(2)))
m = re.search(r"all-reduces took ([\d.]+) ms per step, (\d+)% of it not hidden", text)
if m:
    row.update(allreduce_ms_per_step=float(m.group(1)), not_hidden_share_all_steps=int(m.group(2)) / 100)
m = re.search(r"time per step: (.*)", text)
if m:
    row["time_per_step"] = m.group(1)
if exposed:
    t = json.loads(exposed)["mean"]
    row.update(exposed_share_after_first=t["exposed_share"], timeline_allreduce_ms=t["allreduce_ms"],
               timeline_wait_ms=t["wait_ms"], timeline_compute_ms=t["compute_ms"])
print(json.dumps(row))
EOF
done

python3 - "$results" "$json" "$model_args" "$steps" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
summary = {"model_args": sys.argv[3], "steps": int(sys.argv[4]), "runs": rows}
json.dump(summary, open(sys.argv[2], "w"), indent=1)
names = {"1": "1 rank", "shm": "2 ranks, shm", "ring": "2 ranks, ring",
         "ring-bf16": "2 ranks, ring, bf16"}
r0 = rows[0]
print(f"# ringtrain train {sys.argv[3]} --synthetic, batch {r0['batch_per_rank']} per rank, "
      f"context {r0['context']}, {r0['parameters']:,} parameters, {sys.argv[4]} steps per run, "
      "one thread per rank bound to a core")
print("| run | first step, s | later steps, s (median) | tokens/s after the first step | "
      "model GFLOP/s per core, after the first step | tokens/s, all steps | peak RSS per rank, "
      "GiB | gradient buckets | waits / all-reduce per step (timeline, after step 1) | "
      "not hidden, all steps (run's line) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    rss = ", ".join(f"{x:.2f}" for x in r["max_rss_gib_per_rank"])
    exposed = f"{r['timeline_wait_ms']:.0f} / {r['timeline_allreduce_ms']:.0f} ms " \
        f"({100 * r['exposed_share_after_first']:.0f}%)" if "exposed_share_after_first" in r else "-"
    line = f"{100 * r['not_hidden_share_all_steps']:.0f}% of {r['allreduce_ms_per_step']:.0f} ms" \
        if r["ranks"] > 1 and "not_hidden_share_all_steps" in r else "-"
    buckets = f"{r['gradient_buckets']} (up to {r['bucket_limit_kib']} KiB)" \
        if r["ranks"] > 1 and "gradient_buckets" in r else "-"
    print(f"| {names.get(r['run'], r['run'])} | {r['first_step_seconds']:.2f} | "
          f"{r['step_seconds_median_after_first']:.2f} | {r['tokens_per_second_after_first']:.0f} | "
          f"{r['model_gflops_per_core_after_first']:.1f} | "
          f"{r['tokens_per_second_all_steps']:.0f} | {rss} | {buckets} | {exposed} | {line} |")
EOF
echo "# runs: $results, summary: $json, logs and timelines: $out/"
