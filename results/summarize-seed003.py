#!/usr/bin/python3
"""results/summarize-seed003.py DIR — results/seed003's ratios as Markdown tables.

Reads DIR/json/*.json (`pmds bench --json`) and DIR/sync.txt (bench/montage_sync_bench). A ratio
is always between two records of the SAME file (one `pmds bench` invocation), taken round by
round: repetition i of both ran in round i of the interleaved schedule, so ratio_i =
mops_reps_a[i] / mops_reps_b[i]; a cell gives the median of those per-round ratios and, in
brackets, their min and max.
"""
import os
import sys

from ratio_lib import fmt, fmt_ratio, group, load_runs, per_round, row, table


def throughput(runs):
    print("## Throughput against the transient twin (Figures 3-4)\n")
    print("/ transient: against the same algorithm in DRAM (hash/transient, skiplist/transient, "
          "queue/transient), same run; / montage: the technique against structure/montage, same "
          "run. flushes/op and fences/op come from the counting backend and include nbMontage's "
          "epoch advances (the background advancer's write-backs, every 10 ms); B/elem is the "
          "pool and DRAM bytes per element after the run.\n")
    table("run", "structure", "thr", "Mops/s", "/ transient", "montage / it", "flushes/op",
          "fences/op", "B/elem")
    for name, recs in runs.items():
        if name.startswith("recovery"):
            continue
        for thr, structures in sorted(group(recs, lambda r: r["threads"], "structure").items()):
            family = next(iter(structures)).split("/")[0]
            twin = structures.get(f"{family}/transient")
            montage = structures.get(f"{family}/montage")
            for s, r in structures.items():
                tra = twin if r is not twin else None
                mon = montage if r is not montage else None
                row(name, s, thr, fmt(r.get("mops")), fmt_ratio(per_round(r, tra)),
                    fmt_ratio(per_round(mon, r)), fmt(r.get("flushes_per_op"), 3),
                    fmt(r.get("fences_per_op"), 3), fmt(r.get("bytes_per_element"), 0))
    print()


def recovery(runs):
    print("## Recovery (Figure 6)\n")
    print("Opening the pool after the process holding the loaded structure was killed, until the "
          "first operation can be served: the pool's payload blocks scanned, §3.4's three rules "
          "applied, the DRAM index rebuilt over the given recovery threads. One measurement per "
          "run. Payloads put in is the prefill; recovered is what the pool held after the crash "
          "(the last two epochs' inserts are lost by design).\n")
    table("run", "structure", "recovery threads", "payloads put in", "recovered", "recovery")
    for name, recs in runs.items():
        if not name.startswith("recovery"):
            continue
        for r in recs:
            rec, n, got = r.get("recovery_ms"), r.get("recovery_elements"), r.get("recovered_elements")
            row(name, r["structure"], r.get("recovery_threads", 1),
                "-" if n is None else f"{n:.0f}", "-" if got is None else f"{got:.0f}",
                "-" if rec is None else f"{rec:.0f} ms")
    print()


def sync(out):
    path = os.path.join(out, "sync.txt")
    if not os.path.exists(path):
        return
    print("## sync() latency (Figure 5)\n")
    print("hash/montage at 2:1:1 over 1M keys (0.5M prefilled), the background advancer off, each "
          "thread calling sync() after every `every` operations of its own; latency over all "
          "calls (bench/montage_sync_bench).\n")
    print("```")
    with open(path) as f:
        print(f.read().rstrip())
    print("```")


def main(out):
    runs = load_runs(out)
    print("# Seed 003 (nbMontage) at this machine's scale: ratios within one run\n")
    throughput(runs)
    recovery(runs)
    sync(out)


if __name__ == "__main__":
    main(sys.argv[1])
