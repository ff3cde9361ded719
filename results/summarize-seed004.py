#!/usr/bin/python3
"""results/summarize-seed004.py DIR — results/seed004's ratios as Markdown tables.

Reads DIR/json/*.json (`pmds bench --json`). A ratio is always between two records of the SAME
file (one `pmds bench` invocation), taken round by round: repetition i of both ran in round i of
the interleaved schedule, so ratio_i = mops_reps_a[i] / mops_reps_b[i]; a cell gives the median of
those per-round ratios and, in brackets, their min and max.
"""
import sys

from ratio_lib import fmt, fmt_ratio, group, load_runs, per_round, row, table


def twin_of(technique):
    """The volatile twin a combining technique's ratio is taken against."""
    base = technique.split("-")[0]
    return base + "-transient" if base in ("pbcomb", "pwfcomb") else "transient"


def main(out):
    runs = load_runs(out)

    print("# Seed 004 (persistent software combining) at this machine's scale: ratios within one "
          "run\n")
    print("Each ratio: the median of the per-round throughput ratios [min-max over the rounds]. "
          "twin: a combining structure's volatile twin (the same code with persistence compiled "
          "out), else the transient lock-free original; izraelevitz: the Izraelevitz "
          "transformation of the lock-free original, same run. flushes/op and fences/op (pwbs and "
          "pfences/psyncs per operation) come from the counting backend.\n")
    table("run", "structure", "thr", "Mops/s", "/ twin", "/ izraelevitz", "/ transient",
          "flushes/op", "fences/op")
    for name, recs in runs.items():
        by = group(recs, lambda r: (r["structure"].split("/")[0], r["threads"]))
        for (fam, thr), techniques in sorted(by.items()):
            for tech, r in sorted(techniques.items()):
                twin = techniques.get(twin_of(tech)) if tech != twin_of(tech) else None
                izr = techniques.get("izraelevitz") if tech != "izraelevitz" else None
                tra = techniques.get("transient") if tech != "transient" else None
                row(name, f"{fam}/{tech}", thr, fmt(r.get("mops")), fmt_ratio(per_round(r, twin)),
                    fmt_ratio(per_round(r, izr)), fmt_ratio(per_round(r, tra)),
                    fmt(r.get("flushes_per_op"), 3), fmt(r.get("fences_per_op"), 3))


if __name__ == "__main__":
    main(sys.argv[1])
