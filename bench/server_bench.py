#!/usr/bin/env python3
"""pmds-server against redis-server, with redis-benchmark driving both the same way.

Contenders: pmds-server over each servable map, and redis-server 7 with no persistence, with
AOF (appendfsync everysec) and with AOF (appendfsync always), its files in the directory of
the pools. They alternate in rounds (the order rotates each round): one redis-benchmark run of
every shape per contender per round, each against a server started fresh on an empty directory.
The table gives, per shape and test, requests per second and p50/p99 latency (medians over
the rounds) and each contender's ratio to each redis-server configuration, taken per round and
reported as the median with the spread of the rounds. A ratio counts only from one run: this
program's. Then, per pmds map: the time from kill -9 to ready of a server holding --fill keys,
and the memory per key against redis-server's (INFO memory).

    bench/server_bench.py --server build/release/bin/pmds-server --dir /dev/shm/pmds-bench
    (the issue's full shape: --requests 1000000 --keyspace 1000000 --clients 50)
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

STRUCTURES = ["hash-bytes/soft", "hash-bytes/montage", "skiplist-bytes/montage", "masstree-bytes/incll"]
REDIS_CONFIGS = {
    "redis-none": ["--appendonly", "no"],
    "redis-everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "redis-always": ["--appendonly", "yes", "--appendfsync", "always"],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A pmds-server or redis-server on a fresh directory, stopped with stop()."""

    def __init__(self, name, args, workdir):
        self.name, self.workdir = name, workdir
        shutil.rmtree(workdir, ignore_errors=True)
        os.makedirs(workdir)
        if name.startswith("redis"):
            self.port = free_port()
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--dir", workdir, "--daemonize", "no", "--logfile", os.path.join(workdir, "log")]
            cmd += REDIS_CONFIGS[name]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.wait_for_ping()
            self.ready_seconds = None
        else:
            self.start_pmds(args)

    def start_pmds(self, args):
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [args.server, "--pool", os.path.join(self.workdir, "data.pool"), "--structure",
             self.name, "--port", "0", "--threads", str(args.threads)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "ready" not in line:
            raise RuntimeError(f"{self.name} did not start: {line} {self.proc.stderr.read()}")
        self.ready_seconds = time.monotonic() - t0
        self.ready_line = line.strip()
        self.port = int(line.split("address=")[1].split()[0].rsplit(":", 1)[1])

    def wait_for_ping(self):
        for _ in range(200):
            r = subprocess.run(["redis-cli", "-p", str(self.port), "PING"], capture_output=True,
                               text=True)
            if r.stdout.strip() == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} on port {self.port} did not answer PING")

    def info(self, section):
        out = subprocess.run(["redis-cli", "-p", str(self.port), "INFO", section],
                             capture_output=True, text=True).stdout
        return dict(l.split(":", 1) for l in out.splitlines() if ":" in l)

    def stop(self, kill=False):
        self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        self.proc.wait(timeout=120)


def run_benchmark(port, args, pipeline, size):
    """One redis-benchmark run: {test: {rps, p50, p99}}."""
    cmd = ["redis-benchmark", "-p", str(port), "-t", args.tests, "-n", str(args.requests), "-r",
           str(args.keyspace), "-c", str(args.clients), "-P", str(pipeline), "-d", str(size),
           "--csv"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    results = {}
    for line in out.splitlines()[1:]:
        cells = [c.strip('"') for c in line.split('","')]
        if len(cells) >= 7:
            test = cells[0].split(" ")[0]  # "MSET (10 keys)" -> "MSET"
            results[test] = {"rps": float(cells[1]), "p50": float(cells[4]),
                             "p99": float(cells[6])}
    return results


def fill(port, keys, size):
    """keys distinct keys with values of size bytes, through redis-cli --pipe."""
    value = "v" * size
    payload = "".join(
        f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${size}\r\n{value}\r\n"
        for k in (f"key:{i:012d}" for i in range(keys)))
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=payload, text=True,
                   capture_output=True, check=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default="build/release/bin/pmds-server")
    p.add_argument("--dir", default="/dev/shm/pmds-server-bench",
                   help="where pools and AOF files go (once /dev/shm, once a disk directory)")
    p.add_argument("--structures", default=",".join(STRUCTURES))
    p.add_argument("--redis", default=",".join(REDIS_CONFIGS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=100000)
    p.add_argument("--keyspace", type=int, default=1000000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--tests", default="set,get,incr,mset")
    p.add_argument("--pipelines", default="1,16")
    p.add_argument("--sizes", default="16,1024")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="pmds-server worker threads")
    p.add_argument("--fill", type=int, default=1000000,
                   help="keys for the recovery and memory figures (0: skip them)")
    p.add_argument("--json", help="save the results here")
    args = p.parse_args()

    contenders = [s for s in args.structures.split(",") if s] + [r for r in args.redis.split(",") if r]
    shapes = [(int(pl), int(sz)) for pl in args.pipelines.split(",") for sz in args.sizes.split(",")]
    raw = {}  # (contender, P, d) -> [per-round {test: {...}}]
    for rnd in range(args.rounds):
        order = contenders[rnd % len(contenders):] + contenders[:rnd % len(contenders)]
        for pipeline, size in shapes:
            for c in order:
                server = Server(c, args, os.path.join(args.dir, c.replace("/", "_")))
                try:
                    raw.setdefault((c, pipeline, size), []).append(run_benchmark(server.port, args, pipeline, size))
                finally:
                    server.stop()
                    shutil.rmtree(server.workdir, ignore_errors=True)
                print(f"round {rnd + 1}/{args.rounds} -P {pipeline} -d {size} {c}: "
                      + " ".join(f"{t}={r['rps']:.0f}" for t, r in raw[(c, pipeline, size)][-1].items()),
                      file=sys.stderr, flush=True)

    tests = [t.upper() for t in args.tests.split(",")]
    results = {"environment": {"cpu": cpu_model(), "dir": args.dir, "requests": args.requests,
                               "keyspace": args.keyspace, "clients": args.clients,
                               "rounds": args.rounds, "threads": args.threads},
               "shapes": []}
    for pipeline, size in shapes:
        print(f"\n-P {pipeline} -d {size} ({args.requests} requests, -r {args.keyspace}, "
              f"-c {args.clients}, {args.rounds} rounds; rps and p50/p99 ms are medians)")
        header = f"{'contender':24} {'test':5} {'rps':>10} {'p50':>6} {'p99':>6}"
        redis_ref = [r for r in contenders if r.startswith("redis")]
        header += "".join(f" {('/' + r[6:]):>22}" for r in redis_ref)
        print(header)
        for c in contenders:
            rounds = raw[(c, pipeline, size)]
            for t in tests:
                if any(t not in r for r in rounds):
                    continue
                row = {"contender": c, "pipeline": pipeline, "size": size, "test": t,
                       "rps": statistics.median(r[t]["rps"] for r in rounds),
                       "p50": statistics.median(r[t]["p50"] for r in rounds),
                       "p99": statistics.median(r[t]["p99"] for r in rounds), "ratios": {}}
                line = f"{c:24} {t:5} {row['rps']:10.0f} {row['p50']:6.3f} {row['p99']:6.3f}"
                for ref in redis_ref:
                    ratios = [a[t]["rps"] / b[t]["rps"] for a, b in zip(rounds, raw[(ref, pipeline, size)])]
                    row["ratios"][ref] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
                    line += f" {statistics.median(ratios):8.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                print(line)
                results["shapes"].append(row)

    if args.fill > 0:
        results["recovery_and_memory"] = recovery_and_memory(args, contenders)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def recovery_and_memory(args, contenders):
    """Per contender: --fill keys of 100 bytes; memory per key; for pmds, kill -9 to ready."""
    print(f"\n{args.fill} keys of 16-byte names and 100-byte values:")
    out = []
    for c in contenders:
        server = Server(c, args, os.path.join(args.dir, c.replace("/", "_")))
        try:
            fill(server.port, args.fill, 100)
            keys = int(server.info("keyspace").get("db0", "keys=0").split(",")[0].split("=")[1])
            mem = server.info("memory")
            dram = int(mem["used_memory"])
            pool = int(mem.get("pmds_pool_allocated_bytes", 0))
            row = {"contender": c, "keys": keys, "dram_bytes_per_key": dram / keys,
                   "pool_bytes_per_key": pool / keys}
            if not c.startswith("redis"):
                t0 = time.monotonic()
                server.stop(kill=True)
                server.start_pmds(args)
                row["kill_to_ready_s"] = time.monotonic() - t0
                row["ready_line"] = server.ready_line
            print(f"  {c:24} keys {keys}  DRAM {row['dram_bytes_per_key']:.0f} B/key  pool "
                  f"{row['pool_bytes_per_key']:.0f} B/key"
                  + (f"  kill -9 to ready {row['kill_to_ready_s']:.2f} s" if "kill_to_ready_s" in row else ""))
            out.append(row)
        finally:
            server.stop()
            shutil.rmtree(server.workdir, ignore_errors=True)
    return out


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


if __name__ == "__main__":
    main()
