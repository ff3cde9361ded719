#!/usr/bin/python3
"""results/summarize-seed002.py DIR — results/seed002's ratios as Markdown tables.

Reads DIR/json/*.json (`pmds bench --json`). A ratio is always between two records of the SAME
file (one `pmds bench` invocation), taken round by round: repetition i of both ran in round i of
the interleaved schedule, so ratio_i = mops_reps_a[i] / mops_reps_b[i]; a cell gives the median of
those per-round ratios and, in brackets, their min and max.
"""
import sys

from ratio_lib import fmt, fmt_ratio, group, load_runs, per_round, row, table


def main(out):
    runs = load_runs(out)

    print("# Seed 002 (InCLL) at this machine's scale: ratios within one run\n")
    print("Each ratio: the median of the per-round throughput ratios [min-max over the rounds]. "
          "/ transient: against masstree/transient (the same tree in DRAM, no logging), same "
          "run; / logging: against masstree/logging (seed 002's LOGGING mode: the external log "
          "only), same run. flushes/op and fences/op come from the counting backend and include "
          "the epoch boundaries (the background advancer's flushes of the epoch's nodes); "
          "logged/epoch: nodes logged whole to the external log per epoch boundary (64 ms). "
          "Recovery: opening the pool after a crash of the loaded tree, until the first "
          "operation (a read) is served: eager (every border recovered before open returns), "
          "or lazy in the runs named -lazy (`--lazy-recovery`: each border is recovered on its "
          "first access).\n")
    table("run", "structure", "thr", "Mops/s", "/ transient", "/ logging", "flushes/op",
          "fences/op", "logged/epoch", "recovery")
    for name, recs in runs.items():
        for thr, techniques in sorted(group(recs, lambda r: r["threads"]).items()):
            for tech in ("transient", "incll", "logging"):
                r = techniques.get(tech)
                if r is None:
                    continue
                tra = techniques.get("transient") if tech != "transient" else None
                log = techniques.get("logging") if tech == "incll" else None
                rec = r.get("recovery_ms")
                row(name, r["structure"], thr, fmt(r.get("mops")), fmt_ratio(per_round(r, tra)),
                    fmt_ratio(per_round(r, log)), fmt(r.get("flushes_per_op"), 3),
                    fmt(r.get("fences_per_op"), 3), fmt(r.get("logged_per_epoch"), 0),
                    "-" if rec is None else f"{rec:.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
