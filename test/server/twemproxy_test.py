#!/usr/bin/env python3
"""Two pmds-servers behind twemproxy (nutcracker): a Redis proxy that shards keys over them.

  twemproxy_test.py SERVER_BIN STRUCTURE
  twemproxy_test.py --redis                 the same with two redis-servers (validates the test)

nutcracker speaks to its servers as to Redis, so this is a check of the protocol with a client
that is not a library: redis-benchmark through the proxy (exit 0, a requests-per-second line per
test), then redis-py SET/GET/MGET/DEL/INCR through it, each key on exactly one of the servers, and
both servers holding keys.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

CONFIG = """pmds:
  listen: 127.0.0.1:{proxy}
  hash: fnv1a_64
  distribution: ketama
  redis: true
  timeout: 10000
  auto_eject_hosts: false
  server_connections: 1
  servers:
   - 127.0.0.1:{p1}:1 s1
   - 127.0.0.1:{p2}:1 s2
"""


def read_stats(port):
    """nutcracker's stats port: one JSON document per connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def main():
    ap = h.pmds_or_redis_parser(__doc__, "server", "structure")
    opts = ap.parse_args()
    if not opts.redis and not (opts.server and opts.structure):
        ap.error("SERVER_BIN STRUCTURE, or --redis")
    nutcracker = h.nutcracker_path()
    h.require(["redis-benchmark"] + ([nutcracker] if nutcracker else ["nutcracker"]) +
              (["redis-server"] if opts.redis else []), python_redis=True)
    import redis

    failures = []

    def fail(message):
        failures.append(message)
        print("  FAIL: " + message.replace("\n", "\n        "), flush=True)

    tmp = h.make_tmpdir("twemproxy")
    servers, proxy = [], None
    t0 = time.monotonic()
    try:
        for i in (1, 2):
            if opts.redis:
                os.makedirs(os.path.join(tmp, "r%d" % i))
                servers.append(h.RedisServer(os.path.join(tmp, "r%d" % i)))
            else:
                servers.append(h.PmdsServer(opts.server, os.path.join(tmp, "s%d.pool" % i),
                                            opts.structure, tmp))
        proxy_port, stats_port = h.free_port(), h.free_port()
        conf = os.path.join(tmp, "nutcracker.yml")
        with open(conf, "w") as f:
            f.write(CONFIG.format(proxy=proxy_port, p1=servers[0].port, p2=servers[1].port))
        r = subprocess.run([nutcracker, "-t", "-c", conf], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        if r.returncode != 0:
            raise h.ServerFailure("nutcracker -t rejected the configuration:\n%s"
                                  % r.stdout.decode())
        log = os.path.join(tmp, "nutcracker.log")
        proxy = h.Process([nutcracker, "-c", conf, "-s", stats_port, "-a", "127.0.0.1", "-i", "500",
                           "-o", log], tmp, "nutcracker")
        if not h.wait_port_open(proxy_port):
            raise h.ServerFailure("nutcracker does not listen on %d\n%s\nlog:\n%s"
                                  % (proxy_port, proxy.describe(), open(log).read()[-2000:]))

        bench = subprocess.run(["redis-benchmark", "-p", str(proxy_port), "-t", "set,get",
                                "-n", "2000", "-r", "1000", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        out = bench.stdout.decode("utf-8", "replace").replace("\r", "\n")
        print(out.strip().splitlines()[-2:] if out.strip() else "(no output)")
        if bench.returncode != 0:
            fail("redis-benchmark through the proxy: exit %d\n%s" % (bench.returncode, out[-2000:]))
        for test in ("SET", "GET"):
            if not re.search(r"^%s: [0-9.]+ requests per second" % test, out, re.M):
                fail("redis-benchmark through the proxy: no requests-per-second line for %s\n%s"
                     % (test, out[-2000:]))

        p = redis.Redis(port=proxy_port, socket_timeout=15)
        keys = ["tw:%d" % i for i in range(200)]
        for i, k in enumerate(keys):
            if p.set(k, "v%d" % i) is not True:
                fail("SET %s through the proxy did not reply OK" % k)
        got = [p.get(k) for k in keys]
        wrong = [k for k, g, i in zip(keys, got, range(200)) if g != b"v%d" % i]
        if wrong:
            fail("GET through the proxy: %d wrong, e.g. %s" % (len(wrong), wrong[:3]))
        # The proxy splits an MGET over the servers and joins the replies in order.
        got = p.mget(keys + ["tw:absent"])
        if got != [b"v%d" % i for i in range(200)] + [None]:
            fail("MGET of 201 keys through the proxy: %s..." % got[:5])
        counts = [p.incr("tw:counter") for _ in range(100)]
        if counts != list(range(1, 101)):
            fail("INCR through the proxy: %s..." % counts[:5])
        if p.delete(*keys[:50]) != 50:
            fail("DEL of 50 keys through the proxy did not count 50")
        if p.exists(*keys[:60]) != 10:
            fail("EXISTS of 60 keys, 50 deleted, through the proxy did not count 10")
        p.close()

        direct = [redis.Redis(port=s.port, socket_timeout=15) for s in servers]
        sizes = [d.dbsize() for d in direct]
        print("keys per server: %s" % sizes)
        if not all(size > 0 for size in sizes):
            fail("DBSIZE per server %s: the proxy did not spread keys over both" % sizes)
        placed = [sum(1 for d in direct if d.get(k) is not None) for k in keys[50:]]
        if placed != [1] * 150:
            fail("a key through the proxy is on %s servers, not exactly one"
                 % next(n for n in placed if n != 1))
        for d in direct:
            d.close()

        # The proxy saw no errors from its servers (a reply it cannot parse counts here).
        deadline = time.monotonic() + 5
        while True:
            stats = read_stats(stats_port)["pmds"]
            requests = [stats.get(n, {}).get("requests", 0) for n in ("s1", "s2")]
            errors = [stats.get(n, {}).get("server_err", 0) + stats.get(n, {}).get("server_eof", 0)
                      for n in ("s1", "s2")]
            if all(requests) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        if not all(requests) or any(errors):
            fail("nutcracker stats: requests per server %s, server errors/EOFs %s"
                 % (requests, errors))
        for s in servers:
            if not s.alive():
                fail("a server died\n%s" % s.describe())
        if not proxy.alive():
            fail("nutcracker died\n%s" % proxy.describe())
    except (h.ServerFailure, OSError, redis.RedisError) as e:
        fail("%s: %s" % (type(e).__name__, e))
    finally:
        log_tail = ""
        if os.path.exists(os.path.join(tmp, "nutcracker.log")):
            log_tail = open(os.path.join(tmp, "nutcracker.log"), errors="replace").read()[-1500:]
        tails = [s.describe() for s in servers]
        if proxy:
            proxy.stop_quietly()
        for s in servers:
            if s.alive():
                rc = s.terminate()
                if rc != 0:
                    fail("SIGTERM: exit status %s, expected 0\n%s" % (rc, s.describe()))
            s.stop_quietly()
        h.remove_tmpdir(tmp)
    print("twemproxy_test: %.1f s" % (time.monotonic() - t0))
    if failures:
        print("\nFAILURES (%d):" % len(failures))
        for f in failures:
            print(" * " + f.replace("\n", "\n   "))
        print("\nnutcracker log tail:\n" + log_tail)
        for t in tails:
            print("\nserver: " + t)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
