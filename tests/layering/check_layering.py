#!/usr/bin/env python3
"""Every #include of the libraries and programs against docs/design.md's layering table.

    check_layering.py ROOT    (exit 0: none points the wrong way; 1: one line per include that does)

The table's rows name a folder (or file) in their first column and what it may include in the
last: the paths in backquotes there (folders ending in '/', or single headers) before the first
"No", "Not" or "Nothing", which start what it may not include. Every part may
include itself and `base/` too; `ringtrain/ringtrain.h` is the public header of `api/`. An
include is matched to the part whose path is its longest prefix; includes of no part (the
standard library, third parties, generated headers) are not ours to check."""
import pathlib
import re
import sys

SOURCES = (".cc", ".h", ".cu", ".cuh")
PUBLIC_HEADER = ("ringtrain/", "api/")  # include/ringtrain/ is api/'s header


def table(design):
    """{part: set of allowed paths}, from the rows of the table with a `may include` column."""
    rows, header = {}, None
    for line in design.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| folder"):
            header = cells
            continue
        if header is None or not line.startswith("| `"):
            continue
        part = re.findall(r"`([^`]+)`", cells[0])[0]
        allowed_text = re.split(r"\b(?:No|Not|Nothing)\b", cells[-1])[0]  # not what it forbids
        rows[part] = set(re.findall(r"`([^`]+/[^`]*)`", allowed_text)) | {part, "base/"}
    if not rows:
        sys.exit(f"{design}: no layering table (a '| folder | ... | may include |' table)")
    return rows


def part_of(path, parts):
    """The longest part that is a prefix of path, or None."""
    found = [p for p in parts if path == p or (p.endswith("/") and path.startswith(p))]
    return max(found, key=len) if found else None


def allowed(target, rules):
    return any(target == r or (r.endswith("/") and target.startswith(r)) for r in rules)


def violations(root):
    rules = table(root / "docs" / "design.md")
    for file in sorted(root.rglob("*")):
        relative = file.relative_to(root).as_posix()
        if file.suffix not in SOURCES or relative.startswith(("build", "tests/", "examples/")):
            continue
        owner = part_of(relative, rules)
        if owner is None:
            continue
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not match:
                continue
            target = match.group(1)
            if target.startswith(PUBLIC_HEADER[0]):
                target = PUBLIC_HEADER[1] + target
            if part_of(target, rules) is None or allowed(target, rules[owner]):
                continue
            yield f"{relative}:{number}: {owner} includes {match.group(1)} " \
                  f"({part_of(target, rules)}), which docs/design.md does not let it"


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = list(violations(root))
    for line in found:
        print(line)
    print(f"{len(found)} include(s) against the layering of docs/design.md" if found else
          "every include follows the layering of docs/design.md")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
