#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Scaling sweep on a cluster simulated on one machine (netns_cluster.sh): the all-reduce benchmark
# and the synthetic training benchmark for 1, 2, 4 ranks, one rank per host, at several link
# speeds, for each backend, with overlap and compression on and off. Every measurement leaves its
# log (and allreduce_perf's JSON) under RAW/ and one line in RAW/runs.jsonl; the report step
# merges them into OUT/scaling.json, OUT/tables.md and PNG plots (gnuplot). The raw logs stay
# out of the repository: RAW is build/scaling-raw/ (ignored by git) unless --raw or --out say
# otherwise; only the compact report goes to docs/scaling/. Each measurement is announced on
# standard error as "[scaling-sweep] [run k/n] NAME: ...", n counted before the first.
#
#   scripts/mpirun/scaling_sweep.sh [options] [PART...]
#   scripts/mpirun/scaling_sweep.sh                       # every part: report in docs/scaling/,
#                                                         # raw logs in build/scaling-raw/
#   scripts/mpirun/scaling_sweep.sh --lock /tmp/ringtrain-cpu.lock path allreduce
#   scripts/mpirun/scaling_sweep.sh --quick --out /tmp/sweep   # CI smoke test, tiny sizes
#
# Parts, in this order when none is named (path targets allreduce baseline train baseline
# profiles report; each can run alone, and results accumulate in OUT):
#   path       the unshaped namespace path: allreduce_perf on 2 hosts without shaping, to know
#              the rate above which a shaped link would measure the machine, not the link
#   targets    the issue's two targets in one run, on 1 Gbit/s links (also separately, as
#              target-a and target-b): (a) ring bus bandwidth against the link rate and against
#              MPI_Allreduce, 2 and 4 hosts, with Open MPI's defaults and with Open MPI's TCP
#              eager limit raised to 1 MiB; each run shows the ring with its default network
#              chunks (under the eager limit) and with the former 512 KiB ones; (b) a model of 28.4M parameters, the engine against plain per-layer
#              all-reduce without overlap; target-a-repeat measures (a) again at the issue's
#              16 MiB, three times per host count with more iterations, against the noise of one
#              5-iteration sample on a shared 2-core machine
#   allreduce  allreduce_perf (ring and MPI_Allreduce side by side) on 2 and 4 hosts per rate
#   baseline   the training benchmark on 1 host (the denominator of scaling efficiency)
#   train      ringtrain train --synthetic on 2 and 4 hosts per rate, both backends, engine
#              settings per-layer (no fusion, no overlap), overlap, overlap+fp16
#   profiles   ringtrain bench (docs/bench.md) for resnet50 and gpt2-124m on 1, 2, 4, 8 and 16
#              hosts (16 only where the memory holds every rank's gradients) per rate of
#              --profile-rates, the computation a sleeping stand-in
#   report     scaling.json, tables.md and the plots from what RAW holds
#
# RAW is --raw, else OUT/raw when --out is given, else build/scaling-raw (outside the tracked
# tree). --lock FILE holds `flock -x FILE` around each part (the training part: each link rate),
# never around the whole sweep, so builds and tests sharing the machine neither disturb the
# measurements nor wait long.
# Open MPI only (its TCP settings are part of the sweep). Needs root (network namespaces),
# python3 and, for the plots, gnuplot.
set -euo pipefail

# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
say() { printf '[scaling-sweep] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

ringtrain_opt --out out "" "report folder: scaling.json, tables.md, plots (default docs/scaling)" nonempty
ringtrain_opt --raw raw "" "folder for each run's log and JSON and runs.jsonl (default above)" nonempty
ringtrain_opt --bin bin "" "folder with ringtrain and allreduce_perf (default build-cluster/bin, else build/bin)" nonempty
ringtrain_opt --rates rates 1gbit,300mbit,100mbit "shaped link rates for allreduce and train; the word \"unshaped\" adds runs without shaping" nonempty
ringtrain_opt --hosts host_counts 2,4 "host counts above 1 (1 host is always the training baseline)" nonempty
ringtrain_opt --profile-rates profile_rates 1gbit,unshaped "link rates of the profiles part" nonempty
ringtrain_flag --quick quick "tiny sizes and few steps, 2 hosts, 1gbit only: checks the machinery, measures nothing worth keeping"
ringtrain_opt --lock lock "" "hold flock -x LOCK around each part (above)" nonempty
ringtrain_flag --fresh fresh "delete RAW first"
ringtrain_rest named_parts "the parts (above; default: every part, in that order)" words
ringtrain_parse_args "$@"
[ -z "$out" ] || [ -n "$raw" ] || raw="$out/raw"
out="${out:-$root/docs/scaling}"
parts=()
for part in "${named_parts[@]}"; do
  case "$part" in
    path | allreduce | baseline | train | profiles | target-a | target-a-repeat | target-b | report) parts+=("$part") ;;
    targets) parts+=(target-a target-a-repeat target-b) ;;
    *) die "unknown part '$part' (see --help)" ;;
  esac
done
[ "${#parts[@]}" -gt 0 ] || parts=(path target-a target-a-repeat target-b allreduce baseline train baseline profiles report)
if [ -z "$bin" ]; then
  bin="$root/build-cluster/bin"
  [ -x "$bin/ringtrain" ] || bin="$root/build/bin"
fi
for program in ringtrain allreduce_perf; do
  [ -x "$bin/$program" ] || die "$bin/$program not found: build first (cmake --build build-cluster)"
done
IFS=, read -r -a rate_list <<<"$rates"
IFS=, read -r -a host_list <<<"$host_counts"
IFS=, read -r -a profile_rate_list <<<"$profile_rates"
for rate in "${rate_list[@]}" "${profile_rate_list[@]}"; do
  [[ "$rate" =~ ^(unshaped|[0-9]+(\.[0-9]+)?[kmg]?bit)$ ]] || die "--rates: '$rate' is not a rate like 1gbit"
done
for hosts in "${host_list[@]}"; do
  [[ "$hosts" =~ ^[2-9]$|^[1-9][0-9]+$ ]] || die "--hosts: '$hosts' is not a host count above 1"
done

cluster="$root/scripts/mpirun/netns_cluster.sh"
quick_flag=()
[ "$quick" -eq 0 ] || quick_flag=(--quick)
[ -n "$raw" ] || raw="$root/build/scaling-raw"
[ "$fresh" -eq 0 ] || rm -rf "$raw"
mkdir -p "$raw"

# The sizes and lengths of each kind of measurement. The all-reduce sweep stops at 16 MiB below
# 1 Gbit/s (32 MiB at 100 Mbit/s is 4 s per call); training runs long enough that start-up and
# the first step's page faults are a few percent of the time.
if [ "$quick" -eq 1 ]; then
  rate_list=(1gbit) host_list=(2)
  allreduce_sizes=(-b 64K -e 1M -f 4 -w 1 -n 2)
  path_sizes=(-b 1M -e 4M -f 4 -w 1 -n 2)
  scaling_model=(--model mlp --hidden 256 --batch-size 32) scaling_steps=(--steps 5)
  target_model=(--model mlp --hidden "512,512" --batch-size 32) target_steps=(--steps 4)
  target_sizes=(-b 1M -e 4M -f 4 -w 1 -n 2)
  repeat_sizes=(-b 1M -e 1M -w 1 -n 2) repeats=1
  profile_rate_list=(1gbit) profile_hosts=(1 2) profiles=(resnet50)
  bench_steps=(--warmup-steps 0 --chunks 2 --steps-per-chunk 1)
else
  allreduce_sizes=(-b 64K -e 16M -f 4 -w 2 -n 5)
  path_sizes=(-b 64K -e 64M -f 4 -w 2 -n 10)
  # The MLP 784-1024-1024-10 (1.86M parameters, 7.4 MB of gradients), 512 samples per rank.
  scaling_model=(--model mlp --hidden "1024,1024" --batch-size 512) scaling_steps=(--steps 20)
  # The MLP 784-4096-4096-2048-10: 28.4M parameters, 114 MB of gradients per step.
  target_model=(--model mlp --hidden "4096,4096,2048" --batch-size 64) target_steps=(--steps 12)
  target_sizes=(-b 1M -e 32M -f 2 -w 2 -n 5)
  repeat_sizes=(-b 16M -e 16M -w 2 -n 20) repeats=3
  profile_hosts=(1 2 4 8 16) profiles=(resnet50 gpt2-124m)
  bench_steps=(--warmup-steps 2 --chunks 3 --steps-per-chunk 3)
fi
common_train=(train --synthetic --log-every 0 --lr 0.01 --seed 1)
eager_mca=(--mca btl_tcp_eager_limit 1048576 --mca btl_tcp_rndv_eager_limit 1048576
  --mca btl_tcp_max_send_size 1048576)

# Engine settings by name: how the gradients of a step are averaged.
#   per-layer     one all-reduce per layer (a fusion threshold of 1 byte makes every layer its
#                 own bucket), after backward, nothing overlapped: plain data parallelism
#   fused         one bucket of up to 64 MiB (the whole model here), after backward
#   overlap       buckets of 8 MiB (the default) reduced while backward runs
#   overlap-fp16  the same, gradients cross the wire as float16 (bf16 likewise)
engine_options() {
  case "$1" in
    per-layer) echo "--overlap off --fusion-threshold 1 --compression none" ;;
    fused) echo "--overlap off --fusion-threshold 64M --compression none" ;;
    overlap) echo "--overlap on --fusion-threshold 8M --compression none" ;;
    overlap-fp16) echo "--overlap on --fusion-threshold 8M --compression fp16" ;;
    overlap-bf16) echo "--overlap on --fusion-threshold 8M --compression bf16" ;;
    *) die "unknown engine setting $1" ;;
  esac
}

# "[run k/n]" before each measurement: a counting pass over the parts (counting=1, measure()
# only counts) finds n first. A part run under --lock in a child sweep gets the numbers through
# SCALING_SWEEP_RUNS_DONE and SCALING_SWEEP_RUNS.
runs_done="${SCALING_SWEEP_RUNS_DONE:-0}" runs="${SCALING_SWEEP_RUNS:-0}" counting=0

# measure NAME HOSTS RATE FIELDS_JSON COMMAND...: runs COMMAND on a fresh cluster of HOSTS hosts
# with links at RATE, logs to RAW/NAME.log and appends a record to RAW/runs.jsonl. FIELDS_JSON
# is extra JSON members (without braces) describing the run.
measure() {
  local name="$1" hosts="$2" rate="$3" fields="$4" status=0 shaping=() started
  shift 4
  if [ "$counting" -eq 1 ]; then runs=$((runs + 1)); return 0; fi
  runs_done=$((runs_done + 1))
  [ "$rate" = unshaped ] || shaping=(--rate "$rate")
  local runner=("$cluster" --hosts "$hosts" "${shaping[@]}" --)
  say "[run $runs_done/$runs] $name: $hosts host(s), links $rate: $*"
  started="$(date -u +%FT%TZ)"
  timeout 600 "${runner[@]}" "$@" >"$raw/$name.log" 2>&1 || status=$?
  [ "$status" -eq 0 ] || say "$name failed (exit status $status): see $raw/$name.log"
  printf '{"name":"%s","hosts":%d,"rate":"%s","status":%d,"started":"%s",%s}\n' \
    "$name" "$hosts" "$rate" "$status" "$started" "$fields" >>"$raw/runs.jsonl"
}

# allreduce NAME HOSTS RATE SIZES... [-- MPIRUN_OPTION...]: allreduce_perf, ring and mpi side by
# side.
allreduce() {
  local name="$1" hosts="$2" rate="$3" sizes=() mpirun_options=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do sizes+=("$1"); shift; done
  [ $# -eq 0 ] || { shift; mpirun_options=("$@"); }
  measure "$name" "$hosts" "$rate" \
    "\"kind\":\"allreduce\",\"json\":\"$name.json\",\"options\":\"${sizes[*]}\",\"mpirun_options\":\"${mpirun_options[*]}\"" \
    mpirun -np "$hosts" "${mpirun_options[@]}" "$bin/allreduce_perf" "${sizes[@]}" --backends mpi,ring \
      --json "$raw/$name.json"
}

# train NAME HOSTS RATE BACKEND ENGINE MODEL_ARGS...: one ringtrain run, one rank per host.
train() {
  local name="$1" hosts="$2" rate="$3" backend="$4" engine="$5" engine_args
  shift 5
  read -r -a engine_args <<<"$(engine_options "$engine")"
  measure "$name" "$hosts" "$rate" \
    "\"kind\":\"train\",\"backend\":\"$backend\",\"engine\":\"$engine\",\"model_args\":\"$*\"" \
    mpirun -np "$hosts" "$bin/ringtrain" "${common_train[@]}" --expect-world-size "$hosts" \
    --backend "$backend" "${engine_args[@]}" "$@"
}

# Each profile's stand-in computation per step, batch per rank, and the memory one rank needs (MB:
# its gradients and their averages in float32, and the process).
#   resnet50   64 images of 224x224, 200 ms
#   gpt2-124m  8 sequences of 1024 tokens, 1000 ms
bench_args() {
  case "$1" in
    resnet50) echo "--compute-ms 200 --batch-size 64" ;;
    gpt2-124m) echo "--compute-ms 1000 --batch-size 8" ;;
    *) die "no bench settings for profile $1" ;;
  esac
}
bench_rank_mb() {
  case "$1" in
    resnet50) echo 400 ;;
    gpt2-124m) echo 1200 ;;
  esac
}

# bench NAME HOSTS RATE PROFILE: ringtrain bench, one rank per host, its JSON in RAW/NAME.json.
bench() {
  local name="$1" hosts="$2" rate="$3" profile="$4" link=0 args
  [ "$rate" = unshaped ] || link="$(rate_gbit "$rate")"
  read -r -a args <<<"$(bench_args "$profile")"
  measure "$name" "$hosts" "$rate" \
    "\"kind\":\"bench\",\"profile\":\"$profile\",\"json\":\"$name.json\",\"options\":\"${args[*]} ${bench_steps[*]}\"" \
    mpirun -np "$hosts" "$bin/ringtrain" bench --profile "$profile" "${args[@]}" "${bench_steps[@]}" \
    --link-gbit "$link" --json "$raw/$name.json"
}

# "1gbit" -> 1, "300mbit" -> 0.3: tc's units, Gbit/s for --link-gbit.
rate_gbit() {
  awk -v r="$1" 'BEGIN { n = r + 0; u = substr(r, length(n "") + 1);
    print (u == "gbit" ? n : u == "mbit" ? n / 1e3 : u == "kbit" ? n / 1e6 : n / 1e9) }'
}

part_profiles() {
  local rate profile hosts available_mb
  for rate in "${profile_rate_list[@]}"; do
    for profile in "${profiles[@]}"; do
      for hosts in "${profile_hosts[@]}"; do
        available_mb=$(($(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))
        if [ $((hosts * $(bench_rank_mb "$profile"))) -gt "$available_mb" ]; then
          [ "$counting" -eq 1 ] ||
            say "profile-$profile-${hosts}hosts-$rate skipped: $hosts ranks of $(bench_rank_mb "$profile") MB, $available_mb MB available"
          continue
        fi
        bench "profile-$profile-${hosts}hosts-$rate" "$hosts" "$rate" "$profile"
      done
    done
  done
}

part_path() {
  allreduce "path-2hosts-unshaped" 2 unshaped "${path_sizes[@]}"
}

part_allreduce() {
  local rate hosts
  for rate in "${rate_list[@]}"; do
    for hosts in "${host_list[@]}"; do
      allreduce "allreduce-${hosts}hosts-$rate" "$hosts" "$rate" "${allreduce_sizes[@]}"
    done
  done
}

part_train() {
  local rate hosts backend engine
  for rate in "${rate_list[@]}"; do
    for hosts in "${host_list[@]}"; do
      for backend in ring mpi; do
        for engine in per-layer overlap overlap-fp16; do
          train "train-${hosts}hosts-$rate-$backend-$engine" "$hosts" "$rate" "$backend" "$engine" \
            "${scaling_model[@]}" "${scaling_steps[@]}"
        done
      done
    done
  done
}

# One rank: no all-reduce at all (backend and engine do not matter), the baseline of every
# efficiency. The default order runs it before and after the training part, to see the drift.
part_baseline() {
  local name="train-1host-a"
  if grep -q '"name":"train-1host-a"' "$raw/runs.jsonl" 2>/dev/null; then name="train-1host-b"; fi
  train "$name" 1 unshaped ring per-layer "${scaling_model[@]}" "${scaling_steps[@]}"
}

part_target-a() {
  local hosts rate=1gbit
  # Above btl_tcp_eager_limit (64 KiB) a message waits for the receiver's go-ahead, and with 2
  # ranks that answer queues on the one TCP connection behind the other direction's megabytes of
  # data. The ring's default network chunks stay under the limit; the column ring-net512K is the
  # ring with the former 512 KiB network chunks, in the same run. Then the same with Open MPI's
  # eager limit raised to 1 MiB (MCA flags), under which 512 KiB chunks are eager too.
  local before=(--also-ring-network-chunk-bytes 512K)
  for hosts in "${host_list[@]}"; do
    allreduce "target-a-${hosts}hosts" "$hosts" "$rate" "${target_sizes[@]}" "${before[@]}"
    allreduce "target-a-${hosts}hosts-eager" "$hosts" "$rate" "${target_sizes[@]}" "${before[@]}" \
      -- "${eager_mca[@]}"
  done
}

# Target (a) at its size only, with Open MPI's defaults, several times: one short sample moves
# too much between runs on a shared machine to stand alone.
part_target-a-repeat() {
  local hosts run rate=1gbit
  for hosts in "${host_list[@]}"; do
    for run in $(seq "$repeats"); do
      allreduce "target-a-${hosts}hosts-repeat$run" "$hosts" "$rate" "${repeat_sizes[@]}" \
        --also-ring-network-chunk-bytes 512K
    done
  done
}

part_target-b() {
  local hosts engine rate=1gbit
  train "target-b-1host" 1 unshaped ring per-layer "${target_model[@]}" "${target_steps[@]}"
  for hosts in "${host_list[@]}"; do
    train "target-b-${hosts}hosts-mpi-per-layer" "$hosts" "$rate" mpi per-layer \
      "${target_model[@]}" "${target_steps[@]}"
    for engine in per-layer fused overlap overlap-fp16 overlap-bf16; do
      train "target-b-${hosts}hosts-ring-$engine" "$hosts" "$rate" ring "$engine" \
        "${target_model[@]}" "${target_steps[@]}"
    done
  done
}

part_report() {
  local machine
  [ -s "$raw/runs.jsonl" ] || die "no measurements in $raw (run a part first, or name their folder with --raw)"
  machine="$(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(uname -r), $(mpirun --version 2>/dev/null | head -1)"
  python3 "$root/scripts/mpirun/scaling_report.py" --raw "$raw" --out "$out" --machine "$machine" \
    --quick "$quick"
}

[ "$(id -u)" -eq 0 ] || [ "${parts[*]}" = report ] || die "needs root to make network namespaces (run with sudo)"
if [ "$runs" -eq 0 ]; then
  counting=1
  for part in "${parts[@]}"; do [ "$part" = report ] || "part_$part"; done
  counting=0
fi
# sweep_child ARGS...: this script for one part under the lock; its runs count on from ours.
recorded() { if [ -f "$raw/runs.jsonl" ]; then wc -l <"$raw/runs.jsonl"; else echo 0; fi; }
sweep_child() {
  local before
  before="$(recorded)"
  SCALING_SWEEP_RUNS_DONE="$runs_done" SCALING_SWEEP_RUNS="$runs" flock -x "$lock" \
    "${BASH_SOURCE[0]}" --out "$out" --raw "$raw" --bin "$bin" --hosts "$host_counts" \
    "${quick_flag[@]}" "$@"
  runs_done=$((runs_done + $(recorded) - before))
}
# With --lock, each part runs under one exclusive hold (the training part once per link rate), so
# that no hold lasts much over five minutes and the sweep needs few gaps in others' work.
for part in "${parts[@]}"; do
  if [ -z "$lock" ] || [ "$part" = report ]; then
    say "part $part"
    "part_$part"
  elif [ "$part" = profiles ]; then
    for rate in "${profile_rate_list[@]}"; do
      say "part profiles, links $rate: waiting for the lock $lock"
      sweep_child --profile-rates "$rate" profiles
    done
  elif [ "$part" = train ]; then
    for rate in "${rate_list[@]}"; do
      say "part train, links $rate: waiting for the lock $lock"
      sweep_child --rates "$rate" train
    done
  else
    say "part $part: waiting for the lock $lock"
    sweep_child --rates "$rates" "$part"
  fi
done
