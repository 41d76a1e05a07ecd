#!/usr/bin/env python3
"""model_speed.sh --model cnn's summary: RESULTS JSON BATCH STEPS BACKEND. Reads the runs' JSON lines, writes
the medians and ranges over the rounds (and the per-round ratios ringtrain / PyTorch) to JSON and
prints them as tables. One-core figures in wall and in CPU time per step."""
import json
import statistics
import sys

results, json_path, batch, steps, backend = sys.argv[1:6]
rows = [json.loads(line) for line in open(results)]
rounds = sorted({r["round"] for r in rows})


def figure(config, what=None, key=None):
    """{round: value}: a step row's `key` (default ms per step), a training run's samples/s."""
    key = key or ("ms_per_step" if config.startswith("step-") else "samples_per_second")
    return {r["round"]: r[key] for r in rows if r["config"] == config and
            (what is None or r.get("what") == what) and r.get(key) is not None}


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def ratio(a, b):
    """a[r] / b[r] over the rounds where both ran."""
    return [a[r] / b[r] for r in rounds if r in a and r in b]


# FLOPs per step as ringtrain counts them (model_step_perf's GFLOP/s times its time).
flops_per_step = next(r["ms_per_step"] * r["gflops"] * 1e6 for r in rows
                      if r["config"] == "step-ringtrain")
# (label, config, what) of the one-core rows, and (label, config) of the 2-rank ones.
step_rows = [("ringtrain step (forward+backward)", "step-ringtrain", "cnn step"),
             ("ringtrain@compare step", "step-ringtrain@compare", "cnn step"),
             ("PyTorch step (forward+backward)", "step-pytorch", "cnn forward+backward"),
             ("PyTorch step + SGD", "step-pytorch", "cnn forward+backward+sgd")]
train_rows = [(f"ringtrain 2 ranks ({backend})", "ringtrain-2"),
              ("ringtrain@compare 2 ranks", "ringtrain-2@compare"),
              ("PyTorch DDP gloo 2 ranks", "pytorch-ddp-2")]
summary = {"model": "cnn", "batch_per_rank": int(batch), "train_steps": int(steps),
           "backend_2_ranks": backend, "rounds": len(rounds), "flops_per_step": flops_per_step,
           "one_core_ms_per_step": {}, "one_core_cpu_ms_per_step": {},
           "two_ranks_samples_per_second": {}, "ratios": {}}
for label, config, what in step_rows:
    for key, group in (("ms_per_step", "one_core_ms_per_step"),
                       ("cpu_ms_per_step", "one_core_cpu_ms_per_step")):
        f = figure(config, what, key)
        if f:
            summary[group][label] = spread(list(f.values()))
for label, config in train_rows:
    f = figure(config)
    if f:
        summary["two_ranks_samples_per_second"][label] = spread(list(f.values()))
pytorch_ddp = figure("pytorch-ddp-2")
for name in ("", "@compare"):
    for key, unit in (("ms_per_step", ""), ("cpu_ms_per_step", ", cpu time")):
        mine = figure("step-ringtrain" + name, "cnn step", key)
        for what, label in (("cnn forward+backward", "pytorch forward+backward"),
                            ("cnn forward+backward+sgd", "pytorch with sgd")):
            theirs = figure("step-pytorch", what, key)
            if mine and theirs:  # speed: PyTorch's time over ringtrain's
                summary["ratios"][f"step{name} / {label}{unit}"] = spread(ratio(theirs, mine))
    trained = figure("ringtrain-2" + name)
    if trained and pytorch_ddp:
        summary["ratios"][f"2 ranks{name} / pytorch ddp"] = spread(ratio(trained, pytorch_ddp))
json.dump(summary, open(json_path, "w"), indent=1)

fmt = lambda s, p=0: f"{s['median']:,.{p}f} ({s['min']:,.{p}f}-{s['max']:,.{p}f})"
gflops = lambda s: fmt(spread([flops_per_step / v * 1e-6 for v in s["values"]]), 1)
print(f"# cnn, batch {batch} per rank, one thread per rank bound to a core, {len(rounds)} "
      f"round(s) interleaved; medians (range) over the rounds; {flops_per_step / 1e9:.3f} GFLOP "
      f"per step (products only)")
print("| one core | ms/step | GFLOP/s | CPU ms/step | GFLOP/s of CPU time |")
print("|---|---:|---:|---:|---:|")
for label, s in summary["one_core_ms_per_step"].items():
    c = summary["one_core_cpu_ms_per_step"].get(label)  # none from an older model_step_perf
    cpu = f"{fmt(c, 2)} | {gflops(c)}" if c else "- | -"
    print(f"| {label} | {fmt(s, 2)} | {gflops(s)} | {cpu} |")
print(f"\n| 2 ranks, {steps} steps each | samples/s |")
print("|---|---:|")
for label, s in summary["two_ranks_samples_per_second"].items():
    print(f"| {label} | {fmt(s)} |")
if summary["ratios"]:
    print("\n| ringtrain's speed / PyTorch's, per round | median (range) |")
    print("|---|---:|")
for label, s in summary["ratios"].items():
    print(f"| {label} | {fmt(s, 3)} |")
