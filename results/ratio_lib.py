"""results/ratio_lib.py — what the results/summarize-*.py scripts share: loading `pmds bench --json`
records, grouping them, the per-round ratio between two records of one run (repetition i of both
ran in round i of the interleaved schedule, so ratio_i = mops_reps_a[i] / mops_reps_b[i]), with
formatting, and printing Markdown tables."""
import glob
import json
import os
import statistics
from collections import defaultdict


def load(path):
    with open(path) as f:
        return [r for r in json.load(f)["results"] if r.get("status", "ok") == "ok"]


def load_runs(out):
    """Every run of OUT/json/*.json by name (the file name without .json), in name order."""
    files = sorted(glob.glob(os.path.join(out, "json", "*.json")))
    return {os.path.basename(p)[:-5]: load(p) for p in files}


def group(recs, key, field="technique"):
    """Records by key(record), then by record[field] (the later record wins)."""
    groups = defaultdict(dict)
    for r in recs:
        groups[key(r)][r[field]] = r
    return groups


def per_round(a, b):
    """(median, min, max) of a's per-round throughput over b's, or None."""
    if a is None or b is None:
        return None
    ra, rb = a.get("mops_reps") or [], b.get("mops_reps") or []
    if not ra or len(ra) != len(rb) or min(rb) <= 0:
        return None
    rs = [x / y for x, y in zip(ra, rb)]
    return statistics.median(rs), min(rs), max(rs)


def fmt_ratio(r, spread=True):
    if r is None:
        return "-"
    digits = 2 if r[0] >= 0.1 else 3
    text = f"{r[0]:.{digits}f}"
    return f"{text} [{r[1]:.{digits}f}-{r[2]:.{digits}f}]" if spread else text


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def table(*columns):
    """Prints a Markdown table's header row and its rule."""
    row(*columns)
    print("|" + "---|" * len(columns))


def row(*cells):
    """Prints one Markdown table row; a cell prints as an f-string field would."""
    print("| " + " | ".join(str(c) for c in cells) + " |")


def space_row(r):
    """A row of the space and recovery table: structure, elements, pool, DRAM and total bytes per
    element, recovery ms, recovered elements."""
    row(r["structure"], r.get("elements"), fmt(r.get("pool_bytes_per_element"), 1),
        fmt(r.get("dram_bytes_per_element"), 1), fmt(r.get("bytes_per_element"), 1),
        fmt(r.get("recovery_ms"), 1), r.get("recovered_elements", "-"))
