#!/usr/bin/env python3
"""docs/options.md's "Exit statuses" tables against the code.

    exit_status_test.py SOURCE_DIR

Checks: the statuses table lists exactly base/exit_status.h's constants, each with its value;
the programs' entry points return no status as a bare number but through those names; every
launch script of the second table exits only with the numbers its row lists (an `exit N`, a
`die` with its status), and its row names no number the script cannot return. Prints one line
per check and exits 1 when one fails.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
failures = 0


def check(ok, name, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    failures += 0 if ok else 1


header = (root / "base/exit_status.h").read_text()
constants = {name: int(value) for name, value in
             re.findall(r"inline constexpr int (kExit\w+) = (\d+);", header)}
check(set(constants.values()) >= {0, 1, 2, 3, 137, 143}, "base/exit_status.h names 0, 1, 2, 3, 137, 143",
      constants)

doc = (root / "docs/options.md").read_text()
section = doc.split("## Exit statuses", 1)[1].split("\n## ", 1)[0]
rows = {int(status): name for status, name in re.findall(r"^\| (\d+) \| `(kExit\w+)` \|", section, re.M)}
check(rows == {value: name for name, value in constants.items()},
      "the statuses table is base/exit_status.h's constants, value by value",
      f"table {rows}, header {constants}")

# The programs' entry points: a status is returned by name, never as a bare number.
for source in ["src/main.cc", "src/commands/eval_command.cc", "src/commands/generation.cc",
               "training/exported_weights.cc"]:
    bare = re.findall(r"return (?:argc < 2 \? )?\d+\b", (root / source).read_text())
    check(not bare, f"{source} returns statuses by name", bare)

scripts = {
    "forward_sigterm.sh COMMAND": "scripts/lib/forward_sigterm.sh",
    "slurm_train.sbatch": "scripts/mpirun/slurm_train.sbatch",
    "run_hosts.sh": "scripts/mpirun/run_hosts.sh",
    "launcher-entrypoint.sh": "k8s/launcher-entrypoint.sh",
}
launchers = {}
for line in section.splitlines():
    match = re.match(r"^\| `([^`]+)`[^|]*\| ([^|]*) \|", line)
    if match:
        launchers[match.group(1)] = {int(n) for n in re.findall(r"\b(\d+)\b", match.group(2))}
for row, path in scripts.items():
    text = (root / path).read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    exits = {int(n) for n in re.findall(r"\bexit (\d+)\b", code)}
    die = re.search(r"die\(\) \{[^}]*exit (\d+)", code)
    check(row in launchers, f"the launch scripts' table has a row for {path}")
    listed = launchers.get(row, set())
    # 0 is a script's success (or --help, --dry-run), listed where it means more than that.
    check(exits - {0} <= listed, f"{path} exits only with the statuses its row lists",
          f"script {sorted(exits)}, row {sorted(listed)}")
    check(listed <= exits | {143}, f"{path}'s row lists no status the script lacks",
          f"script {sorted(exits)}, row {sorted(listed)}")
    if die:
        check(int(die.group(1)) in listed, f"{path}'s error exit ({die.group(1)}) is in its row")
    if 143 in listed:
        check(constants.get("kExitSigterm") == 143, f"{path}'s 143 is kExitSigterm")

sys.exit(1 if failures else 0)
