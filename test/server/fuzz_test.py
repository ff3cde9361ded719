#!/usr/bin/env python3
"""pmds-server under hostile input: random bytes and mutated RESP from several connections.

  fuzz_test.py SERVER_BIN PMDS_BIN STRUCTURE [--seconds S] [--seed N]
  fuzz_test.py --redis [--seconds S]        the same against redis-server (validates the test)

For --seconds (default 15) three connections at a time send random bytes, valid commands
with bytes flipped, inserted or deleted, huge and negative lengths ($99999999999, *-1, $-7),
deep nesting (*1\\r\\n*1\\r\\n...), non-digit lengths, missing CRLFs, very long inline lines,
requests cut short and connections reset, while another connection keeps issuing valid commands
and checking their replies. Throughout:
  - the server process stays alive;
  - the valid commands get their right replies (within the 10 s socket timeout);
  - whatever the server sends to a fuzzing connection parses as RESP2 replies.
Then every fuzzing connection is gone (INFO clients: connected_clients:1) and the server holds
less than 1 GiB of heap.
Afterwards: SIGTERM (exit 0), `pmds check POOL` (exit 0), and a restart brings back every key the
valid commands set, with its value.
"""

import os
import random
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

FUZZERS = 3

BASE_COMMANDS = [
    ["SET", "fuzz:a", "value"], ["GET", "fuzz:a"], ["SET", "fuzz:b", "1", "NX", "GET"],
    ["MSET", "fuzz:c", "x", "fuzz:d", "y"], ["MGET", "fuzz:a", "fuzz:c", "fuzz:zz"],
    ["INCR", "fuzz:n"], ["INCRBY", "fuzz:n", "-3"], ["DECRBY", "fuzz:n", "9"],
    ["APPEND", "fuzz:e", "tail"], ["STRLEN", "fuzz:e"], ["DEL", "fuzz:a", "fuzz:q"],
    ["EXISTS", "fuzz:a", "fuzz:b"], ["GETDEL", "fuzz:c"], ["SETNX", "fuzz:f", "v"],
    ["PING"], ["ECHO", "hi"], ["DBSIZE"], ["SCAN", "0", "MATCH", "fuzz:*", "COUNT", "5"],
    ["KEYS", "fuzz:?"], ["INFO", "persistence"], ["COMMAND", "COUNT"], ["CLIENT", "SETNAME", "f"],
    ["CONFIG", "GET", "save"], ["SELECT", "0"], ["WAITAOF", "1", "0", "0"],
]


def valid_stream(rng, n):
    return b"".join(h.encode(*rng.choice(BASE_COMMANDS)) for _ in range(n))


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        if not data:
            break
        i = rng.randrange(len(data))
        what = rng.randrange(6)
        if what == 0:
            data[i] ^= 1 << rng.randrange(8)  # flip a bit
        elif what == 1:
            data.insert(i, rng.randrange(256))  # insert a byte
        elif what == 2:
            del data[i]  # delete a byte
        elif what == 3:
            data[i:i] = rng.choice([b"\r\n", b"$", b"*", b"-", b"9999999999", b"\0", b"\r"])
        elif what == 4:
            j = min(len(data), i + rng.randint(1, 20))
            data[i:i] = data[i:j] * rng.randint(1, 50)  # repeat a chunk
        else:
            del data[i:]  # cut short
    return bytes(data)


def hostile(rng):
    """One payload; each branch is a kind of input the parser must survive."""
    kind = rng.randrange(14)
    if kind == 0:
        return rng.randbytes(rng.randint(1, 4096))
    if kind == 1:
        return mutate(rng, valid_stream(rng, rng.randint(1, 20)))
    if kind == 2:  # huge lengths
        return rng.choice([b"*1\r\n$99999999999\r\n",
                           b"*2\r\n$3\r\nGET\r\n$9223372036854775807\r\n",
                           b"*1\r\n$18446744073709551616\r\n",
                           b"*99999999999\r\n",
                           b"*2147483648\r\n$1\r\na\r\n",
                           b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4294967297\r\nab\r\n",
                           b"*1\r\n$" + b"9" * 400 + b"\r\n",
                           b"*" + b"9" * 400 + b"\r\n"])
    if kind == 3:  # negative and null lengths
        return rng.choice([b"*-1\r\n", b"*-2\r\nPING\r\n", b"*1\r\n$-1\r\n",
                           b"*1\r\n$-7\r\nabc\r\n", b"*-9223372036854775808\r\n",
                           b"*2\r\n$3\r\nGET\r\n$-2\r\n", b"*0\r\n*0\r\n*-1\r\nPING\r\n"])
    if kind == 4:  # deep nesting
        return b"*1\r\n" * rng.choice([2, 10, 1000, 100000]) + b"$4\r\nPING\r\n"
    if kind == 5:  # non-digit lengths
        return rng.choice([b"*1x\r\n$4\r\nPING\r\n", b"*1\r\n$ 4\r\nPING\r\n",
                           b"*+1\r\n$4\r\nPING\r\n", b"*\r\n", b"*1\r\n$\r\n\r\n",
                           b"*1\r\n$4x\r\nPING\r\n", b"*0x10\r\n", b"*1\r\n$1e3\r\n", b"*\xff\r\n",
                           b"*1\r\n$4\r\nPING\r\n$\r\n"])
    if kind == 6:  # missing or broken CRLF
        return rng.choice([b"*1\r\n$4\r\nPINGxx", b"*1\n$4\nPING\n", b"*1\r\n$4\r\nPING",
                           b"*1\r\n$4\r\nPING\n\r", b"*1\r$4\rPING\r",
                           b"*2\r\n$3\r\nGET\r\n$1\r\nab\r\n", b"*1\r\n$4\r\nPING\r\r\r\r\n"])
    if kind == 7:  # very long inline lines, with and without a newline
        n = rng.choice([60000, 70000, 1 << 20])
        return rng.choice([b"x" * n, b"SET fuzz:long " + b"y" * n + b"\r\n", b" " * n + b"\r\n",
                           b"GET " + b"a " * (n // 2) + b"\r\n"])
    if kind == 8:  # a big multibulk of small arguments
        n = rng.choice([1000, 50000])
        return b"*%d\r\n$4\r\nMGET\r\n" % (n + 1) + b"$6\r\nfuzz:a\r\n" * n
    if kind == 9:  # a promised big value that never comes in full
        return b"*3\r\n$3\r\nSET\r\n$6\r\nfuzz:s\r\n$1000000\r\n" + b"z" * rng.randint(0, 70000)
    if kind == 10:  # values and keys over the limits
        return (h.encode("SET", "fuzz:big", b"v" * rng.choice([8000, 100000, 1 << 20]))
                + h.encode("SET", b"fuzz:" + b"k" * rng.choice([1100, 70000]), "v"))
    if kind == 11:  # random binary keys and values in valid framing
        return b"".join(h.encode(rng.choice(["SET", "GET", "APPEND", "DEL", "INCR"]),
                                 b"fuzz:" + rng.randbytes(rng.randint(0, 40)),
                                 rng.randbytes(rng.randint(0, 300)))
                        for _ in range(rng.randint(1, 30)))
    if kind == 12:  # RESP types a client may not send
        return rng.choice([b"+PING\r\n", b"-ERR\r\n", b":1\r\n", b"$4\r\nPING\r\n", b"%1\r\n",
                           b"~1\r\n", b"_\r\n", b">1\r\n", b"#t\r\n"])
    inline = rng.choice([b"PING\r\n", b"SET fuzz:i v\r\n", b'SET fuzz:j "a b\\x41"\r\n',
                         b"GET fuzz:i\r\n", b"ECHO 'x'\r\n", b"MGET fuzz:i fuzz:j\r\n"])
    return mutate(rng, inline * rng.randint(1, 5))


def parse_prefix(data):
    """None if data is a sequence of RESP2 replies (the last may be cut short), else why not."""
    i, n = 0, len(data)

    def line(i):
        j = data.find(b"\r\n", i)
        return (None, n) if j < 0 else (data[i:j], j + 2)

    def one(i, depth):
        if depth > 64:
            raise ValueError("replies nested over 64 deep")
        if i >= n:
            return n
        kind = data[i:i + 1]
        text, j = line(i + 1)
        if text is None:
            return n  # cut short
        if kind in (b"+", b"-"):
            return j
        if kind == b":":
            int(text)
            return j
        if kind == b"$":
            size = int(text)
            if size < 0:
                return j
            if j + size + 2 > n:
                return n
            if data[j + size:j + size + 2] != b"\r\n":
                raise ValueError("a bulk string not ended by CRLF at %d" % (j + size))
            return j + size + 2
        if kind == b"*":
            count = int(text)
            for _ in range(max(count, 0)):
                j = one(j, depth + 1)
                if j >= n:
                    return n
            return j
        raise ValueError("byte %d is %r, no RESP2 reply type" % (i, kind))

    try:
        while i < n:
            i = one(i, 0)
    except ValueError as e:
        return "%s: ...%r" % (e, data[max(0, i - 40):i + 80])
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.connections = 0
        self.protocol_errors = 0
        self.bytes_sent = 0
        self.failures = []

    def fail(self, message):
        with self.lock:
            self.failures.append(message)
        print("  FAIL: " + message, flush=True)


def fuzzer(port, seed, deadline, stats):
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        payload = b"".join(hostile(rng) for _ in range(rng.randint(1, 3)))
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            stats.fail("fuzz: cannot connect: %r" % e)
            time.sleep(0.5)
            continue
        received = b""
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Sent whole, in random pieces, or a byte at a time at the start.
            pieces = rng.choice([1, 1, 3, 20])
            cuts = sorted(rng.randrange(len(payload) + 1) for _ in range(pieces - 1))
            for a, b in zip([0] + cuts, cuts + [len(payload)]):
                s.sendall(payload[a:b])
                if pieces > 1:
                    time.sleep(0.001)
            with stats.lock:
                stats.bytes_sent += len(payload)
            how = rng.randrange(4)
            if how == 0:
                s.shutdown(socket.SHUT_WR)  # EOF after the request: read to the end
                s.settimeout(2)
            else:
                s.settimeout(0.05)
            while len(received) < (4 << 20):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                received += chunk
        except OSError:
            pass  # the server closed on a protocol error (reset, EPIPE, ENOTCONN), or we stopped
        finally:
            if rng.random() < 0.3:  # an abortive close: RST instead of FIN
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        why = parse_prefix(received)
        if why:
            stats.fail("fuzz: the server's bytes are not RESP replies: %s\n  payload began %r"
                       % (why, payload[:120]))
        with stats.lock:
            stats.connections += 1
            stats.protocol_errors += received.count(b"-ERR Protocol error")


def validator(port, deadline, stats, valid):
    """Valid commands all along, on a long-lived connection and on fresh ones."""
    import redis
    rng = random.Random(7)
    r = redis.Redis(port=port, socket_timeout=10)
    i = 0
    try:
        while time.monotonic() < deadline:
            i += 1
            key, value = "valid:%d" % i, b"v%d:" % i + rng.randbytes(rng.randint(0, 100))
            if i % 25 == 0:  # a fresh connection now and then
                with redis.Redis(port=port, socket_timeout=10) as fresh:
                    if not fresh.set(key, value):
                        stats.fail("SET %s on a fresh connection did not reply OK" % key)
            elif not r.set(key, value):
                stats.fail("SET %s did not reply OK" % key)
            valid[key.encode()] = value
            old = rng.choice(list(valid))
            got = r.get(old)
            if got != valid[old]:
                stats.fail("GET %s: %r, expected %r" % (old, got, valid[old]))
            n = r.incr("valid:counter")
            if n != i:
                stats.fail("INCR valid:counter: %d, expected %d" % (n, i))
                return
            valid[b"valid:counter"] = str(i).encode()
            time.sleep(0.002)
    except Exception as e:
        stats.fail("valid commands failed at %d: %r" % (i, e))
    finally:
        r.close()


def rss_anon_kb(pid):
    """The process's anonymous resident memory (heap: not the pool file's pages), in KiB."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    ap = h.pmds_or_redis_parser(__doc__, "server", "pmds", "structure")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--seed", type=int, default=None, help="default: from the clock (printed)")
    opts = ap.parse_args()
    if not opts.redis and not (opts.server and opts.pmds and opts.structure):
        ap.error("SERVER_BIN PMDS_BIN STRUCTURE, or --redis")
    h.require(["redis-server"] if opts.redis else [], python_redis=True)
    import redis
    seed = opts.seed if opts.seed is not None else int(time.time() * 1000) % 1000000
    print("fuzz_test: %s, %.0f s, seed %d" % ("redis-server" if opts.redis else opts.structure,
                                               opts.seconds, seed), flush=True)
    tmp = h.make_tmpdir("fuzz")
    pool = os.path.join(tmp, "fuzz.pool")
    stats = Stats()
    valid = {}
    server = None

    def start():
        if opts.redis:
            return h.RedisServer(tmp, appendonly=True)
        return h.PmdsServer(opts.server, pool, opts.structure, tmp)

    t0 = time.monotonic()
    try:
        server = start()
        deadline = time.monotonic() + opts.seconds
        threads = [threading.Thread(target=validator, args=(server.port, deadline, stats, valid))]
        threads += [threading.Thread(target=fuzzer, args=(server.port, seed + k, deadline, stats))
                    for k in range(FUZZERS)]
        for t in threads:
            t.daemon = True
            t.start()
        died = False
        while any(t.is_alive() for t in threads):
            if not server.alive():
                stats.fail("the server died during the fuzzing\n" + server.describe())
                died = True
                break
            time.sleep(0.1)
        for t in threads:
            t.join(30)
        if not died:
            if not server.alive():
                stats.fail("the server died during the fuzzing\n" + server.describe())
            else:
                print("fuzzed: %d connections, %.1f MB sent, %d protocol errors; %d valid keys"
                      % (stats.connections, stats.bytes_sent / 1e6, stats.protocol_errors,
                         len(valid)))
                if len(valid) < 10:
                    stats.fail("only %d valid commands went through in %.0f s"
                               % (len(valid), opts.seconds))
                # Every fuzzing connection is closed: the server must have let go of them all
                # (INFO's connected_clients counts this one), and of their buffers.
                r = redis.Redis(port=server.port, socket_timeout=15)
                deadline = time.monotonic() + 5
                while (r.info("clients").get("connected_clients", 1) > 1
                       and time.monotonic() < deadline):
                    time.sleep(0.1)
                clients = r.info("clients").get("connected_clients")
                r.close()
                if clients != 1:
                    stats.fail("INFO clients after the fuzzing, all other connections closed: "
                               "connected_clients:%s, expected 1" % clients)
                anon = rss_anon_kb(server.proc.pid)
                print("server anonymous memory after the fuzzing: %s MiB"
                      % (anon // 1024 if anon is not None else "?"))
                if anon is not None and anon > 1 << 20:
                    stats.fail("the server holds %d MiB of anonymous memory after the fuzzing "
                               "connections closed" % (anon // 1024))
                rc = server.terminate()
                if rc != 0:
                    stats.fail("SIGTERM after the fuzzing: exit status %s, expected 0\n%s"
                               % (rc, server.describe()))
                if not opts.redis:
                    rc, out = h.run_pmds_check(opts.pmds, pool)
                    if rc != 0:
                        stats.fail("pmds check %s after the fuzzing: exit %d\n%s" % (pool, rc, out))
                server = start()
                r = redis.Redis(port=server.port, socket_timeout=15)
                names = list(valid)
                got = dict(zip(names, r.mget(names))) if names else {}
                wrong = [k for k in names if got[k] != valid[k]]
                if wrong:
                    stats.fail("after the restart %d of %d valid keys are wrong, e.g. %s: %r, "
                               "expected %r" % (len(wrong), len(names), wrong[0], got[wrong[0]],
                                                valid[wrong[0]]))
                r.close()
                rc = server.terminate()
                if rc != 0:
                    stats.fail("SIGTERM: exit status %s, expected 0\n%s" % (rc, server.describe()))
                server = None
    except h.ServerFailure as e:
        stats.fail(str(e))
    finally:
        tail = server.describe() if server else ""
        if server:
            server.stop_quietly()
        h.remove_tmpdir(tmp)
    print("fuzz_test: %.1f s, seed %d" % (time.monotonic() - t0, seed))
    return h.report_failures(stats.failures, tail, limit=30)


if __name__ == "__main__":
    sys.exit(main())
