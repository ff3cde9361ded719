#!/usr/bin/python3
"""results/summarize-seed001.py DIR — results/seed001's ratios as Markdown tables.

Reads DIR/json/*.json (`pmds bench --json`). A ratio is always between two records of the SAME
file (one `pmds bench` invocation), taken round by round: repetition i of both ran in round i of
the interleaved schedule, so ratio_i = mops_reps_a[i] / mops_reps_b[i]; the table gives the
median of those per-round ratios and, in brackets, their min and max.
"""
import sys

from ratio_lib import fmt, fmt_ratio, group, load_runs, per_round, row, space_row, table

TECHNIQUES = ["mirror", "flit", "izraelevitz", "linkfree", "soft", "psync-bound", "psync2-bound",
              "mirror-pm"]
SHORT = {"mirror": "M", "flit": "F", "izraelevitz": "I", "linkfree": "LF", "soft": "S",
         "psync-bound": "B", "psync2-bound": "B2", "mirror-pm": "Mpm", "transient": "T"}


def groups_of(recs):
    """Records by configuration, then by technique."""
    return group(recs, lambda r: (r["structure"].split("/")[0], r["threads"], r["key_range"],
                                  r.get("reads_pct"), r.get("fence_latency_ns", 0)))


def main(out):
    runs = load_runs(out)

    print("# Seed 001 (Mirror) at this machine's scale: ratios within one run\n")
    print("Each cell: the median of the per-round throughput ratios [min-max over the rounds]. "
          "T = the transient twin (Mops/s); M = mirror, F = flit, I = izraelevitz, LF = linkfree, "
          "S = soft, B = psync-bound (transient + one psync per successful update), B2 = "
          "psync2-bound (two psyncs, one after the other: Mirror's ceiling), Mpm = "
          "mirror-pm (seed 001 §6.3: both replicas on the pool's medium). fence ns: extra latency "
          "after every fence (--fence-latency).\n")
    table("run", "thr", "key range", "reads %", "fence ns", "T Mops/s",
          *(f"{SHORT[x]}/T" for x in TECHNIQUES), "M/I", "M/F")
    for name, recs in runs.items():
        if name.startswith("recovery-"):
            continue
        for (fam, thr, kr, reads, fence), by in sorted(groups_of(recs).items()):
            t = by.get("transient")
            row(name, thr, f"{kr:,}", reads, fence, fmt(t["mops"] if t else None),
                *(fmt_ratio(per_round(by.get(x), t)) for x in TECHNIQUES),
                fmt_ratio(per_round(by.get("mirror"), by.get("izraelevitz"))),
                fmt_ratio(per_round(by.get("mirror"), by.get("flit"))))

    print("\n# Flushes and fences per operation (counting backend)\n")
    print("At 0% updates (updates-*-0) every operation is a read: the design's figure is 0 "
          "flushes and 0 fences per read for Mirror, and FliT's is 0 while no store is in flight. "
          "At 20% updates (threads-*, 1 thread) about half the updates succeed.\n")
    table("run", "structure", "thr", "reads %", "flushes/op", "fences/op", "RMWs/op")
    for name, recs in runs.items():
        zero = name.endswith("-0") and name.startswith("updates-")
        if not (zero or name.startswith("threads-")):
            continue
        for r in recs:
            if r["technique"] in ("transient", "psync-bound", "psync2-bound"):
                continue
            if name.startswith("threads-") and r["threads"] != 1:
                continue
            row(name, r["structure"], r["threads"], r.get("reads_pct"),
                fmt(r.get("flushes_per_op"), 3), fmt(r.get("fences_per_op"), 3),
                fmt(r.get("rmws_per_op"), 3))

    print("\n# Space per element and recovery after a process crash (1 thread)\n")
    print("Mirror's DRAM figure includes its volatile replica (a copy of every pool slot).\n")
    table("structure", "elements", "pool B/elem", "DRAM B/elem", "total B/elem", "recovery ms",
          "recovered elements")
    for name, recs in runs.items():
        if not name.startswith("recovery-"):
            continue
        for r in sorted(recs, key=lambda r: r["structure"]):
            space_row(r)

    print("\n# Issue 13's targets\n")
    table("target", "threads", "measured (median [min-max] of per-round ratios)", "met?")

    def target(run, fam, a, b, goal, label):
        for (f, thr, kr, reads, fence), by in sorted(groups_of(runs.get(run, [])).items()):
            if f != fam or thr > 2:
                continue
            r = per_round(by.get(a), by.get(b))
            met = "-" if r is None else ("yes" if r[0] >= goal else "no")
            row(label, thr, fmt_ratio(r), met)

    target("threads-hash", "hash", "mirror", "transient", 0.8,
           "hash/mirror >= 0.8x hash/transient (80% reads)")
    target("threads-hash", "hash", "mirror", "izraelevitz", 3.0,
           "hash/mirror >= 3x hash/izraelevitz (80% reads)")
    target("threads-list128", "list", "mirror", "transient", 0.9,
           "list/mirror >= 0.9x list/transient (128 keys)")
    for name, recs in runs.items():
        if name.startswith("updates-") and name.endswith("-0"):
            for r in recs:
                if r["technique"] == "mirror":
                    ok = r.get("flushes_per_op") == 0 and r.get("fences_per_op") == 0
                    row(f"{r['structure']}: 0 flushes, 0 fences per read", r["threads"],
                        f"{fmt(r.get('flushes_per_op'), 4)} flushes/op, "
                        f"{fmt(r.get('fences_per_op'), 4)} fences/op", "yes" if ok else "no")
    for name, recs in runs.items():
        if name.startswith("recovery-"):
            for r in recs:
                # the target is for a large structure: the list's run holds 8K elements
                if r["technique"] == "mirror" and r.get("recovery_ms") is not None and \
                        (r.get("recovered_elements") or 0) >= 500_000:
                    ok = r["recovery_ms"] <= 500
                    row(f"{r['structure']}: recovery of {r.get('recovered_elements')} "
                        "elements <= 0.5 s", 1, f"{fmt(r['recovery_ms'], 1)} ms",
                        "yes" if ok else "no")


if __name__ == "__main__":
    main(sys.argv[1])
