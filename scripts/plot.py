#!/usr/bin/python3
"""pmds plot: PNG figures from `pmds bench --json` files, shaped like the specification
papers' figures.

usage: plot.py [--out DIR] FILE.json [FILE.json ...]

Reads every record (status "ok") of the given files and finds the sweeps in them: records that
agree on every run parameter but one of
    threads       -> throughput against threads      (Zuriel et al. Fig. 7-8, InCLL Fig. 4,
                                                      Fatourou et al. Fig. 1-7)
    key_range     -> throughput against key range    (Zuriel et al. Fig. 9-10, InCLL Fig. 5),
                                                      log axis
    reads_pct     -> throughput against read share   (Zuriel et al. Fig. 11-12)
and draws one figure per sweep, one line per structure, with the min-max spread over
repetitions as error bars. When a durable structure's transient twin ("hash/transient" for
"hash/izraelevitz") is in the same sweep, a second panel shows the throughput ratio to it (the
ratios docs/ARCHITECTURE.md §6 describes, measured in the same run). For each set of durable
records it also draws flushes/op and fences/op (Fatourou et al. Fig. 2 and 5 report pwbs/op).

Figures go to DIR (default: the current directory); their names are printed, one per line.
"""

import argparse
import json
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SWEEPS = {
    "threads": ("threads", "throughput vs threads", False),
    "key_range": ("key range", "throughput vs key range", True),
    "reads_pct": ("read %", "throughput vs read percentage", False),
}
# The run parameters that define a configuration (besides the structure).
PARAMS = ["workload", "distribution", "threads", "key_range", "reads_pct", "fence_latency_ns",
          "zipf_theta", "local_work", "backend", "key_size", "value_size"]


def load(paths):
    records = []
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"pmds plot: cannot read {path}: {e}")
        results = doc.get("results") if isinstance(doc, dict) else None
        if not isinstance(results, list):
            sys.exit(f"pmds plot: {path} is not a `pmds bench --json` file (no \"results\" list)")
        for r in results:
            if r.get("status", "ok") == "ok" and r.get("mops") is not None:
                records.append(r)
    return records


def slug(text):
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(text)).strip("-")


def context_label(ctx):
    parts = []
    for key, value in ctx:
        if key == "workload":
            parts.insert(0, str(value))
        elif key == "threads":
            parts.append(f"{value} thread{'s' if value != 1 else ''}")
        elif key == "key_range":
            parts.append(f"key range {value:,}")
        elif key == "reads_pct":
            parts.append(f"{value}% reads")
        elif key == "distribution" and value not in ("none", None):
            parts.append(str(value))
        elif key == "fence_latency_ns" and value:
            parts.append(f"+{value} ns/fence")
        elif key in ("key_size", "value_size") and value not in (None, 8):
            parts.append(f"{value}-byte {key.split('_')[0]}s")
    return ", ".join(parts)


def twin_of(structure):
    name, _, technique = structure.partition("/")
    return None if technique == "transient" else f"{name}/transient"


def sweeps(records, variable):
    """Groups of records that differ only in `variable` (and structure), with >= 2 values."""
    groups = defaultdict(dict)
    for r in records:
        ctx = tuple((k, r.get(k)) for k in PARAMS if k != variable)
        # Later records replace earlier ones at the same point (re-runs).
        groups[ctx][(r["structure"], r.get(variable))] = r
    for ctx, points in groups.items():
        # A sweep needs some structure measured at two or more values (lists at 256 keys and
        # hash tables at 2^20 in one run are not a key-range sweep).
        per_structure = defaultdict(set)
        for (structure, x) in points:
            per_structure[structure].add(x)
        if any(len(xs) >= 2 for xs in per_structure.values()):
            yield ctx, points


def plot_sweep(ctx, points, variable, out_dir):
    xlabel, title, logx = SWEEPS[variable]
    by_structure = defaultdict(list)
    for (structure, x), r in points.items():
        by_structure[structure].append((x, r))
    structures = sorted(by_structure)
    mops = {(s, x): r["mops"] for (s, x), r in points.items()}
    has_ratio = any(twin_of(s) in by_structure for s in structures)

    # One colour per structure in both panels (the ratio line takes the durable structure's).
    palette = plt.get_cmap("tab20" if len(structures) > 10 else "tab10")
    color = {st: palette(i % palette.N) for i, st in enumerate(structures)}

    fig, axes = plt.subplots(1, 2 if has_ratio else 1, figsize=(11 if has_ratio else 6.4, 4.4),
                             squeeze=False)
    ax = axes[0][0]
    for s in structures:
        pts = sorted(by_structure[s], key=lambda p: p[0])
        xs = [p[0] for p in pts]
        ys = [p[1]["mops"] for p in pts]
        lo = [max(0.0, p[1]["mops"] - (p[1].get("mops_min") or p[1]["mops"])) for p in pts]
        hi = [max(0.0, (p[1].get("mops_max") or p[1]["mops"]) - p[1]["mops"]) for p in pts]
        style = "--" if s.endswith("/transient") else "-"
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", linestyle=style, capsize=3, label=s,
                    color=color[s])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("throughput (Mops/s)")
    ax.set_title(f"{title}\n{context_label(ctx)}", fontsize=10)
    if logx:
        ax.set_xscale("log", base=2)
    if variable == "threads":
        ax.set_xticks(sorted({x for (_, x) in points}))
    positive = [m for m in mops.values() if m > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")  # structures orders of magnitude apart: keep all of them visible
    else:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=7, framealpha=0.7)

    if has_ratio:
        rx = axes[0][1]
        for s in structures:
            twin = twin_of(s)
            if twin not in by_structure:
                continue
            # The median of the per-round ratios pmds bench measured, with its spread; older
            # files without it: the ratio of the medians.
            pts = []
            for x, r in sorted(by_structure[s], key=lambda p: p[0]):
                if r.get("ratio_to_transient") is not None:
                    ratio = r["ratio_to_transient"]
                    pts.append((x, ratio, ratio - r["ratio_to_transient_min"],
                                r["ratio_to_transient_max"] - ratio))
                elif (twin, x) in mops and mops[(twin, x)] > 0:
                    pts.append((x, mops[(s, x)] / mops[(twin, x)], 0.0, 0.0))
            if pts:
                rx.errorbar([p[0] for p in pts], [p[1] for p in pts],
                            yerr=[[p[2] for p in pts], [p[3] for p in pts]], marker="o",
                            capsize=3, label=f"{s} / {twin}", color=color[s])
        rx.axhline(1.0, color="grey", linewidth=0.8)
        rx.set_xlabel(xlabel)
        rx.set_ylabel("throughput / transient twin")
        rx.set_title("ratio to the transient twin (median of per-round ratios)", fontsize=10)
        if logx:
            rx.set_xscale("log", base=2)
        if variable == "threads":
            rx.set_xticks(sorted({x for (_, x) in points}))
        rx.set_yscale("log")
        rx.grid(True, alpha=0.3, which="both")
        rx.legend(fontsize=7, framealpha=0.7)

    fig.tight_layout()
    name = f"mops-vs-{slug(variable)}-{slug(context_label(ctx))}.png"
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_persistence(records, out_dir):
    """Flushes/op and fences/op of durable structures, one figure per configuration."""
    # Per configuration (any thread count), each structure at its fewest threads measured.
    groups = defaultdict(dict)
    for r in records:
        if r.get("criterion") in (None, "none"):
            continue
        ctx = tuple((k, r.get(k)) for k in PARAMS if k != "threads")
        seen = groups[ctx].get(r["structure"])
        if seen is None or r["threads"] <= seen["threads"]:
            groups[ctx][r["structure"]] = r
    paths = []
    for ctx, by_structure in groups.items():
        structures = sorted(by_structure)
        flushes = [by_structure[s].get("flushes_per_op") or 0 for s in structures]
        fences = [by_structure[s].get("fences_per_op") or 0 for s in structures]
        fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(structures) + 2), 4.2))
        xs = range(len(structures))
        width = 0.38
        ax.bar([x - width / 2 for x in xs], flushes, width, label="flushes/op")
        ax.bar([x + width / 2 for x in xs], fences, width, label="fences/op")
        for x, (f, n) in enumerate(zip(flushes, fences)):
            ax.annotate(f"{f:.3g}", (x - width / 2, f), ha="center", va="bottom", fontsize=7)
            ax.annotate(f"{n:.3g}", (x + width / 2, n), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(structures, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("per operation")
        if max(flushes + fences + [0]) > 50:
            ax.set_yscale("symlog", linthresh=1)
        threads = sorted({r["threads"] for r in by_structure.values()})
        label = context_label(ctx) + f", {'/'.join(map(str, threads))} thread(s)"
        ax.set_title(f"persistence instructions per operation\n{label}", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, f"persistence-{slug(context_label(ctx))}.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv):
    parser = argparse.ArgumentParser(prog="pmds plot",
                                     description="PNG figures from `pmds bench --json` files")
    parser.add_argument("--out", default=".", help="directory for the PNG files (default: .)")
    parser.add_argument("files", nargs="+", metavar="FILE.json")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    records = load(args.files)
    if not records:
        sys.exit("pmds plot: no successful records in " + ", ".join(args.files))
    written = []
    for variable in SWEEPS:
        for ctx, points in sweeps(records, variable):
            written.append(plot_sweep(ctx, points, variable, args.out))
    written += plot_persistence(records, args.out)
    if not written:
        print("pmds plot: no sweep found (records differ in nothing but the structure, or in "
              "more than one of threads, key range, read percentage) and no durable records",
              file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
