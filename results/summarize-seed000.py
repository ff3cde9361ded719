#!/usr/bin/python3
"""results/summarize-seed000.py DIR — the key ratios of results/seed000 as Markdown tables.

Reads DIR/json/*.json (`pmds bench --json`). Every ratio is between records of the SAME file,
i.e. the same `pmds bench` invocation (same run, same load), never across runs.
"""
import csv
import statistics
import os
import sys
from collections import defaultdict

from ratio_lib import fmt, group, load_runs, row, space_row, table

# The columns of the first table: X/Y, the ratio of X's median Mops/s to Y's.
RATIOS = [("psync-bound", "transient"), ("izraelevitz", "transient"), ("linkfree", "transient"),
          ("soft", "transient"), ("linkfree", "psync-bound"), ("soft", "psync-bound"),
          ("linkfree", "izraelevitz"), ("soft", "izraelevitz")]
SHORT = {"transient": "T", "psync-bound": "B", "izraelevitz": "I", "linkfree": "LF", "soft": "S"}


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def main(out):
    runs = load_runs(out)
    print("# Key ratios (each row: one `pmds bench` run; ratios within that run)\n")
    print("Columns: T = transient twin's median Mops/s; X/T = median throughput ratio to the "
          "transient twin; X/B = ratio to the psync-bound reference (the transient twin plus one "
          "psync per successful update: the ceiling of any durable set here); X/I = ratio to the "
          "Izraelevitz twin. B = psync-bound, I = izraelevitz, LF = linkfree, S = soft. Run "
          "eadr-hash1M has PMDS_EADR=1 (flushes skipped, fences kept); run clflush-hash1M has "
          "PMDS_FLUSH=clflush (the artifact's flush instruction, which evicts the line).\n")
    table("run", "threads", "key range", "reads %", "T Mops/s",
          *(f"{SHORT[a]}/{SHORT[b]}" for a, b in RATIOS))
    persistence = []
    space = []
    recovery = []
    pairs = []
    for name, recs in runs.items():
        if name == "pairs":
            pairs = recs
            continue
        groups = group(recs, lambda r: (r["threads"], r["key_range"], r.get("reads_pct")))
        for (threads, key_range, reads), by in sorted(groups.items()):
            m = {t: by[t]["mops"] if t in by else None for t in SHORT}
            row(name, threads, f"{key_range:,}", reads, fmt(m["transient"]),
                *(fmt(ratio(m[a], m[b])) for a, b in RATIOS))
            if name.startswith("threads-") or name.startswith("recovery-"):
                for t, r in by.items():
                    if name.startswith("threads-") and threads == 1 and t != "transient" \
                            and t != "psync-bound":
                        persistence.append((name, r))
                    if name.startswith("recovery-"):
                        space.append(r)
                        if r.get("recovery_ms") is not None:
                            recovery.append(r)
    print("\n# Flushes/op and fences/op (counting backend, 1 thread, 90% reads)\n")
    table("run", "structure", "flushes/op", "fences/op")
    for name, r in persistence:
        row(name, r["structure"], fmt(r.get("flushes_per_op"), 3), fmt(r.get("fences_per_op"), 3))
    targets = defaultdict(list)
    for name, recs in runs.items():
        if name.startswith("target-"):
            for threads, by in group(recs, lambda r: r["threads"]).items():
                m = {t: r["mops"] for t, r in by.items()}
                for a, b in (("linkfree", "transient"), ("soft", "transient"),
                             ("linkfree", "izraelevitz"), ("soft", "izraelevitz"),
                             ("psync-bound", "transient"), ("linkfree", "psync-bound"),
                             ("soft", "psync-bound")):
                    targets[(threads, a, b)].append(ratio(m.get(a), m.get(b)))
    if targets:
        print("\n# Issue 4 targets: hash, 1M keys, 2^20 buckets, 90% reads (target-hash1M-1..3)\n")
        table("threads", "ratio", "per run", "median", "target")
        for (threads, a, b), rs in sorted(targets.items()):
            ok = [x for x in rs if x is not None]
            med = sorted(ok)[len(ok) // 2] if ok else None
            goal = {"transient": ">= 0.85", "izraelevitz": ">= 2"}.get(b, "(reference)")
            if a == "psync-bound":
                goal = "(the ceiling)"
            row(threads, f"{a}/{b}", ", ".join(fmt(x) for x in rs), fmt(med), goal)
    if pairs:
        print("\n# Queue and stack pairs (enqueue+dequeue / push+pop, from empty, local work "
              "<= 512)\n")
        table("structure", "threads", "Mops/s (pairs)", "ratio to transient", "flushes/op",
              "fences/op")
        mops = {(r["structure"], r["threads"]): r["mops"] for r in pairs}
        for r in sorted(pairs, key=lambda r: (r["structure"], r["threads"])):
            twin = r["structure"].split("/")[0] + "/transient"
            row(r["structure"], r["threads"], fmt(r["mops"], 3),
                fmt(ratio(r["mops"], mops.get((twin, r["threads"])))),
                fmt(r.get("flushes_per_op"), 3), fmt(r.get("fences_per_op"), 3))
    if space:
        print("\n# Bytes per key and recovery (hash, 2^20 buckets, key range 2M prefilled with "
              "1M keys, 1 thread)\n")
        table("structure", "elements", "pool B/key", "DRAM B/key", "total B/key", "recovery ms",
              "recovered keys")
        for r in sorted(space, key=lambda r: r["structure"]):
            space_row(r)
    artifact_side_by_side(out)


def artifact_side_by_side(out):
    """The rounds of seed 000's artifact against pmds (regenerate-seed000.sh, SEED000_ARTIFACT)."""
    path = os.path.join(out, "artifact", "rounds.csv")
    if not os.path.exists(path):
        return
    kops = defaultdict(dict)  # (workload, threads, round) -> {(program, algorithm): kops}
    with open(path) as f:
        for r in csv.DictReader(f):
            kops[(r["workload"], int(r["threads"]), r["round"])][(r["program"], r["algorithm"])] = \
                float(r["kops"])

    def rounds(workload, threads):
        return [v for (w, t, _), v in kops.items() if w == workload and t == threads]

    def median_mops(rs, key):
        xs = [r[key] / 1000 for r in rs if key in r]
        return statistics.median(xs) if xs else None

    def ratio_cell(rs, a, b):
        xs = [r[a] / r[b] for r in rs if a in r and b in r and r[b] > 0]
        if not xs:
            return "-"
        return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"

    print("\n# Side by side with seed 000's published artifact (90% reads)\n")
    print("Each round runs the artifact's link-free and SOFT programs and one pmds invocation, in "
          "alternating order, 1 s each; a ratio is the median over rounds of the per-round ratio "
          "(min-max in brackets); Mops/s are medians over rounds. Artifact key ranges [0, N), "
          "pmds [1, N]; hash tables with 2^20 buckets.\n")
    table("workload", "threads", "rounds", "LF pmds Mops/s", "LF artifact Mops/s",
          "LF pmds/artifact", "S pmds Mops/s", "S artifact Mops/s", "S pmds/artifact",
          "pmds transient Mops/s", "pmds S/LF", "artifact S/LF")
    order = ["list256", "list1024", "skiplist1M", "hash1M"]
    for workload, threads in sorted({(w, t) for w, t, _ in kops},
                                    key=lambda k: (order.index(k[0]) if k[0] in order else 9, k[1])):
        rs = rounds(workload, threads)
        lf_p, lf_a = ("pmds", "linkfree"), ("artifact", "linkfree")
        s_p, s_a = ("pmds", "soft"), ("artifact", "soft")
        row(workload, threads, len(rs), fmt(median_mops(rs, lf_p)), fmt(median_mops(rs, lf_a)),
            ratio_cell(rs, lf_p, lf_a), fmt(median_mops(rs, s_p)), fmt(median_mops(rs, s_a)),
            ratio_cell(rs, s_p, s_a), fmt(median_mops(rs, ("pmds", "transient"))),
            ratio_cell(rs, s_p, lf_p), ratio_cell(rs, s_a, lf_a))


if __name__ == "__main__":
    main(sys.argv[1])
