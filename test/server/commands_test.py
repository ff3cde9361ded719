#!/usr/bin/env python3
"""pmds-server's commands end to end, checked reply by reply against Redis's behaviour.

  commands_test.py SERVER_BIN STRUCTURE     pmds-server serving STRUCTURE
  commands_test.py --redis                  the same checks against redis-server 7.0 (which is how
                                            the expectations here were validated)

Every expectation is Redis's: a check that only pmds-server can pass (SCAN refused on the hash
map, WAITAOF, which Redis 7.0 lacks, FLUSHALL refused by default, SELECT 1 and SET's expiry
options refused, the maps' size limits, the ordered maps' key order, INFO's pmds_ lines,
a second server refused a pool in use) runs only against pmds-server and says "[pmds-only]".
Errors whose wording changed between Redis versions are checked by their prefix (the error
class) only.

Sections: each command and its edge cases; SCAN/KEYS (glob patterns, cursors, concurrent
change); INFO, COMMAND, CONFIG GET, CLIENT, HELLO, WAITAOF; pipelining (redis-py, one write of
1000 commands, a byte at a time, 12 MB of replies); inline commands; malformed requests (a
Protocol error, then the connection closed); atomicity under concurrent connections (INCR,
SET NX, GETDEL, APPEND, SET GET, MSET/MGET, torn values, DBSIZE); a stalled client, 300
connections, a client that reads nothing; big values; redis-py and redis-cli (--pipe, --scan);
requirepass; FLUSHALL with --enable-flushall; a pool that grows; a full pool; SIGTERM/SIGINT
right after the ready line; restarts (SIGTERM and SIGINT, clients connected) keeping every key.

The checks run in sections; a failing check is recorded and the section goes on, so one run
reports every wrong reply. Exit status 0 if all passed, 1 if any failed, 77 if redis-cli or the
redis module is missing.
"""

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402
from server_harness import ErrorReply, RawConn  # noqa: E402

ORDERED = {"skiplist-bytes/soft", "skiplist-bytes/montage", "masstree-bytes/incll"}
# The maps whose keys and values have a size limit (1 KiB keys, about 7 KiB values).
SIZE_LIMITED = {"hash-bytes/montage", "skiplist-bytes/montage", "hash-bytes/soft",
                "skiplist-bytes/soft"}
DURABLE = {"hash-bytes/soft", "skiplist-bytes/soft"}  # the rest are buffered
NOT_INTEGER = "ERR value is not an integer or out of range"
OVERFLOW = "ERR increment or decrement would overflow"


def arity(name):
    return ErrExact("ERR wrong number of arguments for '%s' command" % name)


# ---- expectations ------------------------------------------------------------------------------

class Err:
    """Any error reply whose text starts with prefix (the error class, or more)."""

    def __init__(self, prefix):
        self.prefix = prefix

    def matches(self, got):
        return isinstance(got, ErrorReply) and got.text.startswith(self.prefix)

    def __repr__(self):
        return "an error starting -%s" % self.prefix


class ErrExact(Err):
    def matches(self, got):
        return isinstance(got, ErrorReply) and got.text == self.prefix

    def __repr__(self):
        return "-%s" % self.prefix


class Pred:
    """A reply for which predicate(reply) holds; text describes it."""

    def __init__(self, text, predicate):
        self.text, self.predicate = text, predicate

    def matches(self, got):
        try:
            return bool(self.predicate(got))
        except Exception:
            return False

    def __repr__(self):
        return self.text


def matches(expected, got):
    if hasattr(expected, "matches"):
        return expected.matches(got)
    return type(expected) is type(got) and expected == got


def show(value, limit=300):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "... (%d chars)" % len(text)


def show_cmd(args):
    parts = []
    for a in args:
        if isinstance(a, (bytes, bytearray)):
            a = bytes(a)
            parts.append(a.decode() if re.fullmatch(rb"[!-~]{1,60}", a) else show(a, 80))
        else:
            parts.append(str(a))
    return " ".join(parts)


# ---- the target: pmds-server or redis-server ---------------------------------------------------

class Target:
    def __init__(self, opts):
        self.redis_mode = opts.redis
        self.binary = opts.server
        self.structure = "redis" if opts.redis else opts.structure
        self.pmds = not opts.redis
        # What the served map can do: Redis scans (in no particular order); the pmds ordered maps
        # scan in key order; the hash map refuses SCAN and KEYS.
        self.scan = self.redis_mode or self.structure in ORDERED
        self.ordered = self.pmds and self.structure in ORDERED
        self.size_limited = self.pmds and self.structure in SIZE_LIMITED
        self.criterion = "durable" if self.structure in DURABLE else "buffered"
        self.tmp = h.make_tmpdir("commands")
        self.servers = []

    def start(self, name="main", requirepass=None, enable_flushall=False, pool_size=None,
              max_pool_size=None, maxclients=None):
        if self.redis_mode:
            extra = ["--requirepass", requirepass] if requirepass else []
            if maxclients:
                extra += ["--maxclients", str(maxclients)]
            if max_pool_size:  # Redis's equivalent of a full pool: maxmemory, no eviction
                extra += ["--maxmemory", str(max_pool_size), "--maxmemory-policy", "noeviction"]
            # appendonly: the restart section expects the data back after SIGTERM.
            workdir = os.path.join(self.tmp, name)
            os.makedirs(workdir, exist_ok=True)
            server = h.RedisServer(workdir, extra=extra, appendonly=True)
        else:
            extra = []
            if requirepass:
                extra += ["--requirepass", requirepass]
            if enable_flushall:
                extra.append("--enable-flushall")
            if pool_size:
                extra += ["--pool-size", str(pool_size)]
            if max_pool_size:
                extra += ["--max-pool-size", str(max_pool_size)]
            if maxclients:
                extra += ["--maxclients", str(maxclients)]
            server = h.PmdsServer(self.binary, os.path.join(self.tmp, name + ".pool"),
                                  self.structure, self.tmp, extra=extra)
        server.start_args = dict(name=name, requirepass=requirepass,
                                 enable_flushall=enable_flushall, pool_size=pool_size,
                                 max_pool_size=max_pool_size, maxclients=maxclients)
        self.servers.append(server)
        return server

    def restart(self, server, sig=signal.SIGTERM):
        """SIGTERM or SIGINT (a clean close: exit status 0) and start again on the same pool."""
        rc = server.terminate(sig=sig)
        self.servers.remove(server)
        if rc != 0:
            raise h.ServerFailure("%s: exit status %s, expected 0\n%s"
                                  % (signal.Signals(sig).name, rc, server.describe()))
        return self.start(**server.start_args)

    def cleanup(self):
        for s in self.servers:
            s.stop_quietly()
        h.remove_tmpdir(self.tmp)


# ---- the runner --------------------------------------------------------------------------------

class Suite:
    def __init__(self, target):
        self.t = target
        self.server = None
        self.failures = []
        self.section = ""
        self.checks = 0

    def fail(self, message):
        self.failures.append("[%s] %s" % (self.section, message))
        print("  FAIL: " + message.replace("\n", "\n        "), flush=True)

    def check(self, condition, message):
        self.checks += 1
        if not condition:
            self.fail(message)
        return bool(condition)

    def expect(self, conn, args, expected, note=""):
        """Send args as one command on conn; the reply must match expected."""
        self.checks += 1
        try:
            got = conn.cmd(*args)
        except h.ConnectionClosed:
            got = "(connection closed by the server)"
        except socket.timeout:
            got = "(no reply within %.0f s)" % conn.sock.gettimeout()
        if not matches(expected, got):
            self.fail("%scommand: %s\n  expected: %s\n  got:      %s"
                      % (note and note + ": ", show_cmd(args), show(expected), show(got)))
            if isinstance(got, str):
                raise h.ConnectionClosed(got)  # the connection is unusable: end the section
        return got

    def conn(self, port=None, timeout=10.0):
        return RawConn(port or self.server.port, timeout)

    def run(self, name, fn):
        self.section = name
        before = len(self.failures)
        print("-- %s" % name, flush=True)
        try:
            fn(self)
        except Exception as e:  # a section that cannot go on: report it and run the next one
            self.fail("section aborted: %s: %s\n%s" % (type(e).__name__, e,
                                                         traceback.format_exc(limit=3)))
        if self.server is not None and not self.server.alive():
            self.fail("the server died during this section\n" + self.server.describe())
            return False
        print("   %s" % ("ok" if len(self.failures) == before else "FAILED"), flush=True)
        return True


# ---- sections ----------------------------------------------------------------------------------

def basics(s):
    c = s.conn()
    s.expect(c, ["PING"], b"PONG")
    s.expect(c, ["ping"], b"PONG", "command names are case-insensitive")
    s.expect(c, ["PING", "hello"], b"hello")
    s.expect(c, ["PING", "a", "b"], arity("ping"))
    s.expect(c, ["EcHo", "hello world"], b"hello world")
    s.expect(c, ["ECHO"], arity("echo"))
    s.expect(c, ["ECHO", ""], b"", "ECHO of the empty string")
    s.expect(c, ["ECHO", b"\0\r\n\xff"], b"\0\r\n\xff", "ECHO of binary")
    s.expect(c, ["PING", ""], b"", "PING with an empty message")
    s.expect(c, ["ECHO", "a", "b"], arity("echo"))
    s.expect(c, ["SELECT", "0"], b"OK")
    s.expect(c, ["SELECT", "abc"], Err("ERR"))
    s.expect(c, ["SELECT"], arity("select"))
    if s.t.pmds:  # [pmds-only] Redis has 16 databases; pmds-server serves one
        s.expect(c, ["SET", "sel:k", "v"], b"OK")
        s.expect(c, ["SELECT", "1"], Err("ERR"), "[pmds-only] SELECT of another database")
        s.expect(c, ["GET", "sel:k"], b"v", "[pmds-only] after a refused SELECT 1, still db 0")
    s.expect(c, ["NOSUCHCOMMAND", "a", "b"], Err("ERR unknown command"))
    s.expect(c, ["GET"], arity("get"))
    s.expect(c, ["GET", "a", "b"], arity("get"))
    s.expect(c, ["SET", "k"], arity("set"))
    s.expect(c, ["AUTH", "nopassword"], Err("ERR"), "AUTH with no password configured")
    s.expect(c, ["PING"], b"PONG", "the connection survives error replies")
    q = s.conn()
    s.expect(q, ["SET", "quit:k", "v"], b"OK")
    s.expect(q, ["QUIT"], b"OK")
    s.check(q.closed_by_server(3), "QUIT: the server did not close the connection after +OK")
    q.close()
    s.expect(c, ["GET", "quit:k"], b"v", "a write before QUIT stays")
    q = s.conn()
    q.send(h.encode("QUIT") + h.encode("SET", "quit:after", "1"))
    s.check(q.read_reply() == b"OK" and q.closed_by_server(3),
            "QUIT, SET in one write: +OK, then closed")
    q.close()
    s.expect(c, ["EXISTS", "quit:after"], 0, "a command pipelined after QUIT is not run")
    c.close()


def set_options(s):
    c = s.conn()
    s.expect(c, ["GET", "set:a"], None)
    s.expect(c, ["SET", "set:a", "1"], b"OK")
    s.expect(c, ["GET", "set:a"], b"1")
    s.expect(c, ["SET", "set:a", "2", "NX"], None, "NX on an existing key")
    s.expect(c, ["GET", "set:a"], b"1")
    s.expect(c, ["SET", "set:b", "1", "XX"], None, "XX on an absent key")
    s.expect(c, ["EXISTS", "set:b"], 0)
    s.expect(c, ["SET", "set:a", "3", "XX"], b"OK")
    s.expect(c, ["GET", "set:a"], b"3")
    s.expect(c, ["SET", "set:n", "1", "NX"], b"OK", "NX on an absent key")
    s.expect(c, ["GET", "set:n"], b"1")
    s.expect(c, ["SET", "set:c", "v", "GET"], None, "GET option, absent key")
    s.expect(c, ["GET", "set:c"], b"v")
    s.expect(c, ["SET", "set:c", "w", "GET"], b"v", "GET option returns the old value")
    s.expect(c, ["GET", "set:c"], b"w")
    s.expect(c, ["SET", "set:c", "x", "NX", "GET"], b"w",
             "NX GET on an existing key: old value, not set")
    s.expect(c, ["GET", "set:c"], b"w")
    s.expect(c, ["SET", "set:d", "x", "NX", "GET"], None, "NX GET on an absent key: nil, set")
    s.expect(c, ["GET", "set:d"], b"x")
    s.expect(c, ["SET", "set:e", "x", "XX", "GET"], None, "XX GET on an absent key: nil, not set")
    s.expect(c, ["EXISTS", "set:e"], 0)
    s.expect(c, ["SET", "set:c", "y", "GET", "XX"], b"w",
             "XX GET on an existing key: old value, set")
    s.expect(c, ["GET", "set:c"], b"y")
    s.expect(c, ["SET", "set:c", "z", "nx"], None, "options are case-insensitive")
    s.expect(c, ["SET", "set:a", "v", "NX", "XX"], ErrExact("ERR syntax error"))
    s.expect(c, ["SET", "set:a", "v", "BOGUS"], ErrExact("ERR syntax error"))
    s.expect(c, ["GET", "set:a"], b"3", "a refused SET changes nothing")
    if s.t.pmds:  # [pmds-only] Redis accepts expiry; pmds-server has no TTLs and refuses them
        for opt in (["EX", "100"], ["PX", "100000"], ["EXAT", "99999999999"],
                    ["PXAT", "99999999999000"]):
            s.expect(c, ["SET", "set:a", "q"] + opt, Err("ERR"),
                     "[pmds-only] expiry option refused")
        s.expect(c, ["GET", "set:a"], b"3", "[pmds-only] a refused expiry SET changes nothing")
        # KEEPTTL keeps a time to live, and no key has one here: a plain SET (as in Redis for a
        # key without a TTL).
        s.expect(c, ["SET", "set:a", "q", "KEEPTTL"], b"OK")
        s.expect(c, ["GET", "set:a"], b"q")
        s.expect(c, ["SET", "set:a", "3"], b"OK")
        s.expect(c, ["SET", "set:ex", "q", "EX", "100"], Err("ERR"),
                 "[pmds-only] expiry option refused")
        s.expect(c, ["EXISTS", "set:ex"], 0, "[pmds-only] a refused expiry SET creates nothing")
    s.expect(c, ["SETNX", "set:f", "v"], 1)
    s.expect(c, ["SETNX", "set:f", "w"], 0)
    s.expect(c, ["GET", "set:f"], b"v")
    s.expect(c, ["SETNX", "set:f"], arity("setnx"))
    s.expect(c, ["GETDEL", "set:absent"], None)
    s.expect(c, ["GETDEL", "set:f"], b"v")
    s.expect(c, ["GET", "set:f"], None)
    s.expect(c, ["EXISTS", "set:f"], 0)
    s.expect(c, ["GETDEL", "set:f"], None, "GETDEL twice")
    s.expect(c, ["GETDEL"], arity("getdel"))
    c.close()


def multi_key(s):
    c = s.conn()
    s.expect(c, ["MSET", "m:1", "a", "m:2", "b"], b"OK")
    s.expect(c, ["DEL", "m:1", "m:1", "m:2", "m:3"], 2, "DEL counts each key removed once")
    s.expect(c, ["EXISTS", "m:1"], 0)
    s.expect(c, ["DEL", "m:1"], 0)
    s.expect(c, ["SET", "m:1", "a"], b"OK")
    s.expect(c, ["SET", "m:2", "b"], b"OK")
    s.expect(c, ["EXISTS", "m:1", "m:1", "m:2", "m:3"], 3, "EXISTS counts repeated keys")
    s.expect(c, ["EXISTS"], arity("exists"))
    s.expect(c, ["DEL"], arity("del"))
    s.expect(c, ["MGET", "m:1", "m:3", "m:2", "m:1"], [b"a", None, b"b", b"a"])
    s.expect(c, ["MGET", "m:absent"], [None])
    s.expect(c, ["MGET"], arity("mget"))
    s.expect(c, ["MSET", "m:4", "x", "m:5", "y"], b"OK")
    s.expect(c, ["MGET", "m:4", "m:5"], [b"x", b"y"])
    s.expect(c, ["MSET", "m:6", "a", "m:6", "b"], b"OK")
    s.expect(c, ["GET", "m:6"], b"b", "MSET of one key twice: the last value wins")
    s.expect(c, ["MSET", "m:7"], arity("mset"))
    s.expect(c, ["MSET", "m:7", "a", "m:8"], arity("mset"))
    s.expect(c, ["EXISTS", "m:7"], 0, "a refused MSET sets nothing")
    s.expect(c, ["STRLEN", "m:absent"], 0)
    s.expect(c, ["SET", "m:9", "hello world"], b"OK")
    s.expect(c, ["STRLEN", "m:9"], 11)
    s.expect(c, ["STRLEN"], arity("strlen"))
    s.expect(c, ["APPEND", "m:10", "ab"], 2, "APPEND creates the key")
    s.expect(c, ["APPEND", "m:10", "cd"], 4)
    s.expect(c, ["APPEND", "m:10", ""], 4)
    s.expect(c, ["GET", "m:10"], b"abcd")
    s.expect(c, ["APPEND", "m:10"], arity("append"))
    c.close()


def counters(s):
    c = s.conn()
    s.expect(c, ["INCR", "n:a"], 1, "INCR of an absent key")
    s.expect(c, ["INCR", "n:a"], 2)
    s.expect(c, ["GET", "n:a"], b"2", "INCR stores the decimal string")
    s.expect(c, ["INCRBY", "n:a", "10"], 12)
    s.expect(c, ["INCRBY", "n:a", "-20"], -8)
    s.expect(c, ["DECR", "n:a"], -9)
    s.expect(c, ["DECRBY", "n:a", "1"], -10)
    s.expect(c, ["DECRBY", "n:a", "-15"], 5)
    s.expect(c, ["GET", "n:a"], b"5")
    s.expect(c, ["DECR", "n:b"], -1, "DECR of an absent key")
    s.expect(c, ["DECRBY", "n:c", "5"], -5)
    s.expect(c, ["INCRBY", "n:d", "7"], 7)
    for bad in ["abc", "1.5", "", "99999999999999999999", "9223372036854775808", "1 "]:
        s.expect(c, ["INCRBY", "n:a", bad], ErrExact(NOT_INTEGER), "INCRBY by %r" % bad)
    s.expect(c, ["DECRBY", "n:a", "x"], ErrExact(NOT_INTEGER))
    s.expect(c, ["GET", "n:a"], b"5", "a refused INCRBY changes nothing")
    # Redis's integers are strict (string2ll): no sign but '-', no spaces, no leading zeros.
    for i, bad in enumerate(["abc", "", " 1", "1 ", "1.0", "01", "+1", "-0", "0x10", "1e3",
                             "12345678901234567890", "9223372036854775808"]):
        key = "n:bad%d" % i
        s.expect(c, ["SET", key, bad], b"OK")
        s.expect(c, ["INCR", key], ErrExact(NOT_INTEGER), "INCR of the value %r" % bad)
        s.expect(c, ["GET", key], bad.encode(), "a refused INCR leaves the value")
    s.expect(c, ["SET", "n:e", "-5"], b"OK")
    s.expect(c, ["INCR", "n:e"], -4)
    s.expect(c, ["SET", "n:f", "0"], b"OK")
    s.expect(c, ["INCR", "n:f"], 1)
    s.expect(c, ["SET", "n:g", "9223372036854775806"], b"OK")
    s.expect(c, ["INCR", "n:g"], 9223372036854775807)
    s.expect(c, ["INCR", "n:g"], ErrExact(OVERFLOW))
    s.expect(c, ["INCRBY", "n:g", "9223372036854775807"], ErrExact(OVERFLOW))
    s.expect(c, ["GET", "n:g"], b"9223372036854775807", "an overflowing INCR changes nothing")
    s.expect(c, ["SET", "n:h", "-9223372036854775808"], b"OK")
    s.expect(c, ["DECR", "n:h"], ErrExact(OVERFLOW))
    s.expect(c, ["DECRBY", "n:h", "1"], ErrExact(OVERFLOW))
    s.expect(c, ["INCRBY", "n:h", "-1"], ErrExact(OVERFLOW))
    s.expect(c, ["INCR", "n:h"], -9223372036854775807)
    # DECRBY's negation of the smallest integer: "ERR decrement would overflow" in Redis 7.0.
    s.expect(c, ["DECRBY", "n:f", "-9223372036854775808"], Err("ERR"))
    # Counters are strings: APPEND to one, INCR what APPEND made, STRLEN of a negative one.
    s.expect(c, ["SET", "n:s", "5"], b"OK")
    s.expect(c, ["APPEND", "n:s", "0"], 2)
    s.expect(c, ["INCR", "n:s"], 51)
    s.expect(c, ["APPEND", "n:s", "x"], 3)
    s.expect(c, ["INCR", "n:s"], ErrExact(NOT_INTEGER))
    s.expect(c, ["DECRBY", "n:neg", "12"], -12)
    s.expect(c, ["STRLEN", "n:neg"], 3)
    s.expect(c, ["GETDEL", "n:neg"], b"-12")
    s.expect(c, ["INCR", "n:neg"], 1, "INCR after GETDEL starts again")
    s.expect(c, ["SET", "n:long", "7" * 6000], b"OK")
    s.expect(c, ["INCR", "n:long"], ErrExact(NOT_INTEGER))
    s.expect(c, ["INCR"], arity("incr"))
    s.expect(c, ["INCRBY", "n:a"], arity("incrby"))
    s.expect(c, ["DECR", "n:a", "1"], arity("decr"))
    s.expect(c, ["DECRBY", "n:a"], arity("decrby"))
    c.close()


def binary_and_sizes(s):
    c = s.conn()
    s.expect(c, ["SET", "", ""], b"OK", "the empty key")
    s.expect(c, ["GET", ""], b"")
    s.expect(c, ["EXISTS", ""], 1)
    s.expect(c, ["STRLEN", ""], 0)
    s.expect(c, ["SET", "", "x"], b"OK")
    s.expect(c, ["GET", ""], b"x")
    s.expect(c, ["DEL", ""], 1)
    s.expect(c, ["GET", ""], None)
    s.expect(c, ["SET", "b:empty", ""], b"OK", "an empty value")
    s.expect(c, ["GET", "b:empty"], b"", "an empty value is not nil")
    s.expect(c, ["EXISTS", "b:empty"], 1)
    s.expect(c, ["MGET", "b:empty", "b:absent"], [b"", None])
    s.expect(c, ["APPEND", "b:empty", ""], 0)
    value = bytes(range(256)) + b"\r\n\0\r\n*1\r\n$3\r\nGET\r\n\0"
    s.expect(c, ["SET", "b:bin", value], b"OK", "a binary value")
    s.expect(c, ["GET", "b:bin"], value)
    s.expect(c, ["STRLEN", "b:bin"], len(value))
    s.expect(c, ["APPEND", "b:bin", b"\0\r\n"], len(value) + 3)
    s.expect(c, ["GET", "b:bin"], value + b"\0\r\n")
    key = b"b:\0\r\n\xff\x00key"
    s.expect(c, ["SET", key, b"v\0v"], b"OK", "a binary key")
    s.expect(c, ["GET", key], b"v\0v")
    s.expect(c, ["EXISTS", key], 1)
    s.expect(c, ["GET", b"b:"], None, "a key is not cut at its first NUL")
    s.expect(c, ["GET", b"b:\0"], None, "a key is not cut at its first NUL")
    long_key = b"b:" + b"k" * 1022
    s.expect(c, ["SET", long_key, "v"], b"OK", "a 1024-byte key")
    s.expect(c, ["GET", long_key], b"v")
    s.expect(c, ["GET", long_key[:-1]], None)
    big = random.Random(1).randbytes(6000)
    s.expect(c, ["SET", "b:6000", big], b"OK", "a 6000-byte value")
    s.expect(c, ["GET", "b:6000"], big)
    if s.t.size_limited:  # [pmds-only] a map's size limits: a clear error, nothing written
        s.expect(c, ["SET", b"b:" + b"k" * 4094, "v"], Err("ERR"), "[pmds-only] a 4096-byte key")
        s.expect(c, ["EXISTS", b"b:" + b"k" * 4094], 0, "[pmds-only] a refused key is not stored")
        s.expect(c, ["SET", "b:huge", b"h" * 100000], Err("ERR"), "[pmds-only] a 100000-byte value")
        s.expect(c, ["EXISTS", "b:huge"], 0, "[pmds-only] a refused value is not stored")
        s.expect(c, ["APPEND", "b:6000", b"a" * 60000], Err("ERR"),
                 "[pmds-only] APPEND past the value limit")
        s.expect(c, ["STRLEN", "b:6000"], 6000, "[pmds-only] a refused APPEND changes nothing")
        s.expect(c, ["PING"], b"PONG", "[pmds-only] the connection survives a refused size")
    c.close()


def dbsize(s):
    c = s.conn()
    d0 = s.expect(c, ["DBSIZE"], Pred("an integer >= 0", lambda r: isinstance(r, int) and r >= 0))
    if not isinstance(d0, int):
        return
    s.expect(c, ["MSET", "dbs:1", "a", "dbs:2", "b", "dbs:3", "c"], b"OK")
    s.expect(c, ["DBSIZE"], d0 + 3)
    s.expect(c, ["SET", "dbs:1", "again"], b"OK")
    s.expect(c, ["DBSIZE"], d0 + 3, "overwriting adds no key")
    s.expect(c, ["DEL", "dbs:1"], 1)
    s.expect(c, ["DBSIZE"], d0 + 2)
    s.expect(c, ["GETDEL", "dbs:2"], b"b")
    s.expect(c, ["DBSIZE"], d0 + 1)
    s.expect(c, ["DBSIZE", "x"], arity("dbsize"))
    c.close()


GLOB_KEYS = ["g:a", "g:b", "g:c", "g:d", "g:ab", "g:*", "g:?", "g:[", "g:]", "g:\\", "g:hello",
             "g:hallo", "g:hxllo", "g:hllo", "g:heeeello"]
GLOB_CASES = [
    ("g:*", GLOB_KEYS),
    ("g:?", ["g:a", "g:b", "g:c", "g:d", "g:*", "g:?", "g:[", "g:]", "g:\\"]),
    ("g:[a-c]", ["g:a", "g:b", "g:c"]),
    ("g:[b-a]", ["g:a", "g:b"]),  # a reversed range is the same range
    ("g:[^a]", ["g:b", "g:c", "g:d", "g:*", "g:?", "g:[", "g:]", "g:\\"]),
    ("g:[\\]]", ["g:]"]),  # an escaped ] inside brackets
    ("g:[ab]*", ["g:a", "g:b", "g:ab"]),
    ("g:h?llo", ["g:hello", "g:hallo", "g:hxllo"]),
    ("g:h*llo", ["g:hello", "g:hallo", "g:hxllo", "g:hllo", "g:heeeello"]),
    ("g:h[ae]llo", ["g:hello", "g:hallo"]),
    ("g:\\*", ["g:*"]),
    ("g:\\?", ["g:?"]),
    ("g:\\[", ["g:["]),
    ("g:\\\\", ["g:\\"]),
    ("g:\\", ["g:\\"]),  # a backslash ending the pattern is literal
    ("g:\\a", ["g:a"]),  # an escaped ordinary character is itself
    ("g:zzz*", []),
]


def scan_all(s, c, extra, note):
    """Every key a full SCAN iteration returns, in order; None if a reply was malformed."""
    cursor, out, rounds = b"0", [], 0
    while True:
        reply = s.expect(c, ["SCAN", cursor] + extra,
                         Pred("[cursor (decimal digits), [keys...]]",
                              lambda r: isinstance(r, list) and len(r) == 2
                              and re.fullmatch(rb"\d+", r[0]) and isinstance(r[1], list)), note)
        if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], list)):
            return None
        cursor, keys = reply
        out += keys
        rounds += 1
        if cursor == b"0":
            return out
        if rounds > 100000:
            s.fail("%s: SCAN %s did not end after 100000 calls" % (note, extra))
            return None


def scan_and_keys(s):
    c = s.conn()
    if not s.t.scan:  # [pmds-only] the hash map has no key order to scan by
        s.expect(c, ["MSET", "g:a", "1", "g:b", "2"], b"OK")
        s.expect(c, ["SCAN", "0"], Err("ERR"), "[pmds-only] SCAN on the hash map")
        s.expect(c, ["KEYS", "*"], Err("ERR"), "[pmds-only] KEYS on the hash map")
        s.expect(c, ["PING"], b"PONG")
        return
    for k in GLOB_KEYS:
        s.expect(c, ["SET", k, "v"], b"OK")
    for pattern, expected in GLOB_CASES:
        want = sorted(k.encode() for k in expected)
        if s.t.ordered:
            s.expect(c, ["KEYS", pattern], want, "KEYS in key order")
        else:
            s.expect(c, ["KEYS", pattern], Pred("%s in any order" % want,
                                                 lambda r, w=want: sorted(r) == w))
        got = scan_all(s, c, ["MATCH", pattern, "COUNT", "3"], "SCAN MATCH %s" % pattern)
        if got is not None:
            s.check((got if s.t.ordered else sorted(got)) == want,
                    "SCAN MATCH %s COUNT 3: got %s, expected %s%s"
                    % (pattern, got, want, " in key order" if s.t.ordered else ""))
    s.expect(c, ["KEYS"], arity("keys"))

    names = ["s:%04d" % i for i in range(300)]
    random.Random(2).shuffle(names)
    for i in range(0, 300, 50):
        args = ["MSET"]
        for n in names[i:i + 50]:
            args += [n, "v"]
        s.expect(c, args, b"OK")
    want = sorted(n.encode() for n in names)
    for extra in (["MATCH", "s:*"], ["MATCH", "s:*", "COUNT", "1"],
                  ["COUNT", "1000", "MATCH", "s:*"]):
        got = scan_all(s, c, extra, "SCAN %s" % " ".join(extra))
        if got is not None:
            s.check(len(got) == len(set(got)), "SCAN %s returned a key twice" % extra)
            s.check((got if s.t.ordered else sorted(got)) == want,
                    "SCAN %s: %d keys, expected the %d s:* keys%s (first got: %s)"
                    % (extra, len(got), len(want), " in key order" if s.t.ordered else "", got[:5]))
    got = scan_all(s, c, ["MATCH", "s:01*", "COUNT", "7"], "SCAN MATCH s:01*")
    if got is not None:
        s.check(sorted(got) == [b"s:%04d" % i for i in range(100, 200)],
                "SCAN MATCH s:01*: got %d keys %s..." % (len(got), got[:5]))
    everything = scan_all(s, c, [], "SCAN without MATCH")
    keys_all = s.expect(c, ["KEYS", "*"], Pred("a list", lambda r: isinstance(r, list)))
    if everything is not None and isinstance(keys_all, list):
        s.check(len(everything) == len(set(everything)) and set(everything) == set(keys_all),
                "SCAN 0 (no MATCH) returned %d keys, KEYS * %d" % (len(everything), len(keys_all)))
        s.expect(c, ["DBSIZE"], len(keys_all), "DBSIZE equals the number of KEYS *")
        if s.t.ordered:
            s.check(everything == sorted(everything), "SCAN without MATCH is not in key order")
            s.check(keys_all == sorted(keys_all), "KEYS * is not in key order")
    got = scan_all(s, c, ["MATCH", "nomatch:*", "COUNT", "5"], "SCAN with no match")
    s.check(got == [], "SCAN MATCH nomatch:* returned %s" % got)
    s.expect(c, ["SCAN", "0", "COUNT", "0"], Err("ERR"))
    s.expect(c, ["SCAN", "0", "COUNT", "abc"], Err("ERR"))
    s.expect(c, ["SCAN", "0", "BOGUS", "x"], Err("ERR"))
    s.expect(c, ["SCAN"], arity("scan"))

    # Redis's guarantee under concurrent change: a key present during the whole iteration is
    # returned (at least once). Between SCAN calls keys come and go elsewhere, and the last key
    # of each batch (an ordered map's cursor may be built from it) is deleted.
    w = s.conn()
    cursor, seen, deleted, step = b"0", set(), set(), 0
    while True:
        reply = c.cmd("SCAN", cursor, "MATCH", "s:*", "COUNT", "5")
        if not s.check(isinstance(reply, list) and len(reply) == 2,
                       "SCAN during writes: reply %s" % show(reply)):
            break
        cursor = reply[0]
        seen.update(reply[1])
        s.expect(w, ["SET", "s:%04d-new%d" % (step * 7 % 300, step), "v"], b"OK")
        s.expect(w, ["DEL", "s:%04d-new%d" % ((step - 1) * 7 % 300, step - 1)], Pred(
            "0 or 1", lambda r: r in (0, 1)))
        if reply[1] and step % 2 == 0 and reply[1][-1] in want:
            s.expect(w, ["DEL", reply[1][-1]], 1, "deleting the last key SCAN returned")
            deleted.add(reply[1][-1])
        step += 1
        if cursor == b"0" or step > 10000:
            break
    missing = set(want) - deleted - seen
    s.check(not missing, "SCAN during writes missed %d keys present throughout: %s"
            % (len(missing), sorted(missing)[:5]))
    s.expect(w, ["DEL", "s:%04d-new%d" % ((step - 1) * 7 % 300, step - 1)], 1, "the last new key")
    w.close()
    for k in deleted:
        s.expect(c, ["SET", k, "v"], b"OK")

    # A cursor the server never gave: an answer or an error, never a crash.
    s.expect(c, ["SCAN", "123456789", "COUNT", "3"],
             Pred("an array or an error", lambda r: isinstance(r, (list, ErrorReply))))
    s.expect(c, ["PING"], b"PONG")

    # redis-py's scan_iter needs the cursor to be an integer (Redis documents it as one).
    import redis
    r = redis.Redis(port=s.server.port, socket_timeout=10)
    got = set(r.scan_iter(match="s:00*", count=7))
    want = {b"s:%04d" % i for i in range(100)}
    s.check(got == want, "redis-py scan_iter(match='s:00*'): %d keys, missing %s, extra %s"
            % (len(got), sorted(want - got)[:3], sorted(got - want)[:3]))
    r.close()

    if s.t.ordered:  # [pmds-only] Redis has no key order
        # Byte order is unsigned (memcmp), and a key sorts before its extensions.
        odd = [b"o:", b"o:\x00", b"o:\x00\x00", b"o:\x01", b"o:\x7f", b"o:\x80", b"o:\xff",
               b"o:\xff\x00", b"o:A", b"o:a", b"o:aa"]
        args = ["MSET"]
        for k in odd:
            args += [k, "v"]
        s.expect(c, args, b"OK")
        s.expect(c, ["KEYS", "o:*"], sorted(odd), "[pmds-only] KEYS in unsigned byte order")
        got = scan_all(s, c, ["MATCH", "o:*", "COUNT", "2"], "SCAN of binary keys")
        s.check(got == sorted(odd), "[pmds-only] SCAN MATCH o:* COUNT 2: %s, expected %s in "
                "unsigned byte order" % (got, sorted(odd)))
        # Keys sharing long prefixes (masstree's layers: 8 bytes a layer), and a chain of keys
        # each the prefix of the next.
        layered = [b"layer:prefix-0123456789abcdef:%03d" % i for i in range(150)]
        layered += [b"layer:prefix-0123456789abcdef:%03d:deeper-still-by-more-than-8-bytes" % i
                    for i in range(0, 150, 7)]
        layered += [b"layer:" + b"L" * n for n in range(1, 40)]
        random.Random(4).shuffle(layered)
        for i in range(0, len(layered), 40):
            args = ["MSET"]
            for k in layered[i:i + 40]:
                args += [k, k[-5:]]
            s.expect(c, args, b"OK")
        for count in ("1", "7", "1000"):
            got = scan_all(s, c, ["MATCH", "layer:*", "COUNT", count], "SCAN of layered keys")
            first_difference = next((i for i, (a, b) in enumerate(zip(got or [], sorted(layered)))
                                     if a != b), None)
            s.check(got == sorted(layered), "[pmds-only] SCAN MATCH layer:* COUNT %s: %d keys, "
                    "expected %d in key order; first difference at %s"
                    % (count, len(got or []), len(layered), first_difference))
        s.expect(c, ["KEYS", "layer:L*"], sorted(k for k in layered if k.startswith(b"layer:L")))
        s.expect(c, ["MGET"] + layered[:20], [k[-5:] for k in layered[:20]])
    c.close()


def flushall_refused(s):
    c = s.conn()
    if s.t.pmds:  # [pmds-only] Redis flushes; pmds-server refuses unless --enable-flushall
        s.expect(c, ["SET", "flush:k", "v"], b"OK")
        d = s.expect(c, ["DBSIZE"], Pred("an integer > 0", lambda r: isinstance(r, int) and r > 0))
        s.expect(c, ["FLUSHALL"], Err("ERR"), "[pmds-only] FLUSHALL without --enable-flushall")
        s.expect(c, ["DBSIZE"], d, "[pmds-only] a refused FLUSHALL removes nothing")
        s.expect(c, ["GET", "flush:k"], b"v", "[pmds-only] a refused FLUSHALL removes nothing")
    c.close()


def introspection(s):
    c = s.conn()
    info = s.expect(c, ["INFO"], Pred("a bulk string with a '# Persistence' section",
                                      lambda r: b"# Persistence\r\n" in r))
    pers = s.expect(c, ["INFO", "persistence"],
                    Pred("a bulk string of the '# Persistence' section alone",
                         lambda r: r.startswith(b"# Persistence\r\n") and r.count(b"# ") == 1))
    s.expect(c, ["INFO", "PERSISTENCE"],
             Pred("the same section", lambda r: r.startswith(b"# Persistence")))
    if s.t.pmds and isinstance(pers, bytes):
        lines = pers.decode("utf-8", "replace").split("\r\n")
        s.check("pmds_structure:%s" % s.t.structure in lines,
                "[pmds-only] INFO persistence has no line pmds_structure:%s: %s"
                % (s.t.structure, lines))
        s.check("pmds_criterion:%s" % s.t.criterion in lines,
                "[pmds-only] INFO persistence has no line pmds_criterion:%s: %s"
                % (s.t.criterion, lines))
        s.check(isinstance(info, bytes) and b"pmds_structure:" in info,
                "[pmds-only] plain INFO lacks pmds_structure")

    s.expect(c, ["SET", "info:k", "v"], b"OK")  # db0 has keys (an empty one has no line)
    size = c.cmd("DBSIZE")
    s.expect(c, ["INFO", "keyspace"], Pred("# Keyspace with db0:keys=%s,..." % size,
                                          lambda r: r.startswith(b"# Keyspace\r\n")
                                          and b"\r\ndb0:keys=%d," % size in r))
    count = s.expect(c, ["COMMAND", "COUNT"],
                     Pred("an integer > 0", lambda r: isinstance(r, int) and r > 0))
    table = s.expect(c, ["COMMAND"], Pred(
        "an array of command descriptions",
        lambda r: isinstance(r, list) and r and all(isinstance(e, list) and isinstance(e[0], bytes)
                                                     for e in r)))
    if isinstance(table, list) and isinstance(count, int):
        s.check(len(table) == count,
                "COMMAND has %d entries, COMMAND COUNT says %d" % (len(table), count))
        names = {e[0] for e in table if isinstance(e, list) and e}
        needed = {b"ping", b"echo", b"quit", b"select", b"get", b"set", b"setnx", b"getdel", b"del",
                  b"exists", b"mget", b"mset", b"strlen", b"append", b"incr", b"incrby", b"decr",
                  b"decrby", b"dbsize", b"flushall", b"info", b"command", b"config", b"client",
                  b"auth"}
        if s.t.scan:
            needed |= {b"scan", b"keys"}
        s.check(needed <= names, "COMMAND lacks %s" % sorted(needed - names))
    # name, arity, flags, first key, last key, step: what clients use to find the keys.
    for name, ar, first, last, step in [("get", 2, 1, 1, 1), ("set", -3, 1, 1, 1),
                                        ("mget", -2, 1, -1, 1), ("mset", -3, 1, -1, 2),
                                        ("del", -2, 1, -1, 1), ("incr", 2, 1, 1, 1),
                                        ("ping", -1, 0, 0, 0)]:
        want = [name.encode(), ar, "flags", first, last, step]
        s.expect(c, ["COMMAND", "INFO", name.upper()],
                 Pred("[[%s, ...]]" % ", ".join(map(str, want)),
                      lambda r, w=want: len(r) == 1 and r[0][:2] == w[:2]
                      and isinstance(r[0][2], list) and r[0][3:6] == w[3:6]))
    s.expect(c, ["COMMAND", "INFO", "nosuchcommand"], [None])
    s.expect(c, ["COMMAND", "DOCS", "get"],
             Pred("[b'get', [b'summary', ...]]", lambda r: r[0] == b"get" and b"summary" in r[1]))
    s.expect(c, ["COMMAND", "DOCS"], Pred("a non-empty flat array of name, doc pairs",
                                          lambda r: len(r) >= 2 and len(r) % 2 == 0))

    s.expect(c, ["CONFIG", "GET", "save"],
             Pred("[b'save', <string>]",
                  lambda r: len(r) == 2 and r[0] == b"save" and isinstance(r[1], bytes)))
    s.expect(c, ["CONFIG", "GET", "appendonly"],
             Pred("[b'appendonly', b'yes' or b'no']",
                  lambda r: len(r) == 2 and r[0] == b"appendonly" and r[1] in (b"yes", b"no")))
    s.expect(c, ["CONFIG", "GET", "nosuchparameter"], [])
    s.expect(c, ["CONFIG", "GET", "AppendOnly"],
             Pred("[<the name, any case>, b'yes' or b'no']",
                  lambda r: len(r) == 2 and r[0].lower() == b"appendonly"
                  and r[1] in (b"yes", b"no")),
             "parameter names are case-insensitive")
    s.expect(c, ["CONFIG"], Err("ERR"))

    s.expect(c, ["CLIENT", "GETNAME"], None)
    s.expect(c, ["CLIENT", "SETNAME", "tester"], b"OK")
    s.expect(c, ["CLIENT", "GETNAME"], b"tester")
    s.expect(c, ["CLIENT", "SETNAME", "with space"], Err("ERR"))
    s.expect(c, ["CLIENT", "GETNAME"], b"tester", "a refused name leaves the old one")
    s.expect(c, ["CLIENT", "SETNAME", ""], b"OK")
    s.expect(c, ["CLIENT", "GETNAME"], None, "an empty name clears it")
    id1 = s.expect(c, ["CLIENT", "ID"], Pred("an integer", lambda r: isinstance(r, int)))
    with s.conn() as d:
        s.expect(d, ["CLIENT", "ID"], Pred("another connection's id (not %s)" % id1,
                                            lambda r: isinstance(r, int) and r != id1))
        s.expect(d, ["CLIENT", "GETNAME"], None, "names belong to connections")

    # HELLO is optional; where it answers protocol 2, the reply says so.
    with s.conn() as d:
        r = d.cmd("HELLO", "2")
        if isinstance(r, ErrorReply):
            s.check(r.text.startswith(("ERR", "NOPROTO")), "HELLO 2: error %s" % r)
        else:
            s.check(isinstance(r, list) and dict(zip(r[::2], r[1::2])).get(b"proto") == 2,
                    "HELLO 2: %s, expected a list with proto 2" % show(r))
        s.expect(d, ["PING"], b"PONG", "after HELLO 2")
    with s.conn() as d:
        d.send(h.encode("HELLO", "3"))
        first = d.sock.recv(1)
        s.check(first in (b"%", b"-"),
                "HELLO 3: reply starts with %r, expected a RESP3 map or an error" % first)
    c.close()


def waitaof(s):
    if not s.t.pmds:
        return  # [pmds-only] WAITAOF arrived in Redis 7.2
    c = s.conn(timeout=10)
    s.expect(c, ["SET", "w:a", "1"], b"OK")
    t0 = time.monotonic()
    s.expect(c, ["WAITAOF", "1", "0", "0"], [1, 0], "[pmds-only]")
    s.check(time.monotonic() - t0 < 5,
            "[pmds-only] WAITAOF 1 0 0 took %.1f s" % (time.monotonic() - t0))
    s.expect(c, ["WAITAOF", "1", "0", "1000"], [1, 0], "[pmds-only]")
    s.expect(c, ["waitaof", "1", "0", "0"], [1, 0], "[pmds-only]")
    s.expect(c, ["WAITAOF", "1", "1", "0"], Err("ERR"), "[pmds-only] no replicas to wait for")
    s.expect(c, ["WAITAOF", "1", "0"], arity("waitaof"), "[pmds-only]")
    s.expect(c, ["WAITAOF", "x", "0", "0"], Err("ERR"), "[pmds-only]")
    s.expect(c, ["WAITAOF", "1", "0", "-1"], Err("ERR"), "[pmds-only] a negative timeout")
    s.expect(c, ["GET", "w:a"], b"1")
    c.close()


def pipelining(s):
    import redis
    r = redis.Redis(port=s.server.port, socket_timeout=20)
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.set("p:%d" % i, "v%d" % i)
    for i in range(500):
        p.get("p:%d" % i)
    got = p.execute()
    want = [True] * 500 + [b"v%d" % i for i in range(500)]
    s.check(got == want, "redis-py pipeline of 1000: first wrong reply at %s"
            % next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(got)))
    p = r.pipeline(transaction=False)
    for _ in range(1000):
        p.incr("p:counter")
    got = p.execute()
    s.check(got == list(range(1, 1001)), "pipelined INCR x1000: %s ..." % got[:5])
    r.close()

    # Many commands in one write, replies in order.
    c = s.conn()
    data, want = [], []
    for i in range(1000):
        if i % 3 == 0:
            data.append(h.encode("SET", "rp:%d" % i, "x%d" % i))
            want.append(b"OK")
        elif i % 3 == 1:
            data.append(h.encode("GET", "rp:%d" % (i - 1)))
            want.append(b"x%d" % (i - 1))
        else:
            data.append(h.encode("INCR", "rp:counter"))
            want.append(i // 3 + 1)
    c.send(b"".join(data))
    got = [c.read_reply() for _ in want]
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    s.check(not bad, "1000 commands in one write: reply %s is %s, expected %s"
            % (bad[:1], [got[i] for i in bad[:1]], [want[i] for i in bad[:1]]))

    # One command a byte at a time (every split point of the parser).
    for byte in h.encode("SET", "rp:slow", "value"):
        c.send(bytes([byte]))
        time.sleep(0.001)
    s.check(c.read_reply() == b"OK", "a command sent a byte at a time")
    s.expect(c, ["GET", "rp:slow"], b"value")

    # 2000 GETs of a 6000-byte value (12 MB of replies) sent by another thread while this one
    # reads: a server that holds its output must still read on, or answer late, never drop.
    big = random.Random(3).randbytes(6000)
    s.expect(c, ["SET", "rp:big", big], b"OK")
    sender = threading.Thread(target=lambda: c.send(h.encode("GET", "rp:big") * 2000), daemon=True)
    sender.start()
    wrong = sum(1 for _ in range(2000) if c.read_reply() != big)
    sender.join(20)
    s.check(wrong == 0, "2000 pipelined GETs of a 6000-byte value: %d wrong replies" % wrong)
    s.expect(c, ["PING"], b"PONG")
    c.close()


def inline(s):
    c = s.conn()
    c.send(b"PING\r\n")
    s.check(c.read_reply() == b"PONG", "inline PING")
    c.send(b"SET in:a b\r\n")
    s.check(c.read_reply() == b"OK", "inline SET in:a b")
    c.send(b"GET in:a\r\n")
    s.check(c.read_reply() == b"b", "inline GET in:a")
    c.send(b"ECHO lf-only\n")
    s.check(c.read_reply() == b"lf-only", "an inline command ended by LF alone")
    c.send(b"SET   in:spaces    v2  \r\n")
    s.check(c.read_reply() == b"OK", "inline command with runs of spaces")
    s.expect(c, ["GET", "in:spaces"], b"v2")
    c.send(b'SET in:q "x y\\r\\n"\r\n')
    s.check(c.read_reply() == b"OK", "inline SET with a quoted argument")
    s.expect(c, ["GET", "in:q"], b"x y\r\n", "a quoted inline argument with escapes")
    c.send(b"\r\n\r\nPING\r\n")
    s.check(c.read_reply() == b"PONG", "empty inline lines are ignored")
    c.send(b"PING\r\nECHO x\r\n" + h.encode("ECHO", "resp") + b"ping\r\n")
    got = [c.read_reply() for _ in range(4)]
    s.check(got == [b"PONG", b"x", b"resp", b"PONG"],
            "inline and RESP mixed in one write: %s" % got)
    c.send(b"NOSUCHCOMMAND x\r\n")
    got = c.read_reply()
    s.check(isinstance(got, ErrorReply) and got.text.startswith("ERR unknown command"),
            "inline unknown command: %s" % got)
    c.send(b"GET\r\n")
    got = c.read_reply()
    s.check(got == ErrorReply("ERR wrong number of arguments for 'get' command"),
            "inline GET without a key: %s" % got)
    # Nothing left unread: the next reply belongs to the next command.
    s.expect(c, ["PING"], b"PONG", "after the inline commands")
    c.close()


MALFORMED = [
    (b"*1\r\n$abc\r\n", "a non-numeric bulk length"),
    (b"*abc\r\n", "a non-numeric multibulk length"),
    (b"*1\r\n$99999999999\r\n", "a bulk length over the limit"),
    (b"*1\r\n$-5\r\n", "a negative bulk length"),
    (b"*99999999999\r\n", "a multibulk length over the limit"),
    (b"*1\r\nfoo\r\n", "an array element that is not a bulk string"),
    (b"*1\r\n*1\r\n$4\r\nPING\r\n", "a nested array"),
    (b'SET in:x "unbalanced\r\n', "an inline command with unbalanced quotes"),
    (b"x" * (1 << 20), "a 1 MiB inline line without a newline"),
]


def send_ignoring_reset(conn, data):
    try:
        conn.send(data)
    except OSError:
        pass  # the server closed first: what matters is what it replied


def malformed(s):
    for data, what in MALFORMED:
        with s.conn() as c:
            # A valid command first, in the same write: answered before the error. Sent by
            # another thread: the server may close before reading all of the 1 MiB line.
            sender = threading.Thread(target=send_ignoring_reset, args=(c, b"PING\r\n" + data))
            sender.start()
            try:
                first = c.read_reply()
                second = c.read_reply()
            except (h.ConnectionClosed, socket.timeout, ValueError) as e:
                s.fail("%s (%s): %s" % (what, show(data, 60), e))
                continue
            s.check(first == b"PONG", "%s: the PING before it got %s" % (what, show(first)))
            s.check(isinstance(second, ErrorReply) and second.text.startswith("ERR Protocol error"),
                    "%s: request %s\n  expected: -ERR Protocol error...\n  got:      %s"
                    % (what, show(data, 60), show(second)))
            s.check(c.closed_by_server(3), "%s: the connection was not closed" % what)
            sender.join(10)
    with s.conn() as c:
        # Empty and null arrays are no commands: no reply, the connection goes on.
        c.send(b"*0\r\n*-1\r\nPING\r\n")
        s.check(c.read_reply() == b"PONG", "*0 and *-1 before PING: the first reply is not +PONG")
        s.expect(c, ["ECHO", "next"], b"next")
    with s.conn() as c:
        s.expect(c, ["PING"], b"PONG", "a new connection after the protocol errors")


def incr_atomicity(s):
    import redis
    results, errors = [], []

    def worker():
        r = redis.Redis(port=s.server.port, socket_timeout=20)
        try:
            mine = [r.incr("atomic:n") for _ in range(500)]
            results.append(mine)
        except Exception as e:
            errors.append(repr(e))
        finally:
            r.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    s.check(not errors, "INCR threads failed: %s" % errors[:2])
    every = sorted(v for mine in results for v in mine)
    s.check(every == list(range(1, 4001)),
            "8 x 500 INCR: the replies are not 1..4000 each once (%d replies, max %s)"
            % (len(every), every[-1] if every else None))
    with s.conn() as c:
        s.expect(c, ["GET", "atomic:n"], b"4000")


def run_threads(n, fn, timeout=60):
    """fn(i) in n threads started together; the exceptions they raised."""
    errors = []
    barrier = threading.Barrier(n)

    def wrap(i):
        try:
            barrier.wait(10)
            fn(i)
        except Exception as e:
            errors.append("thread %d: %r" % (i, e))

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return errors


def atomicity(s):
    """Redis runs each command atomically; with several connections at once (pmds-server's
    worker threads) every command must still look like one indivisible step."""
    import redis
    port = s.server.port

    def client():
        return redis.Redis(port=port, socket_timeout=20)

    # SET NX: of 4 racing SET NX, exactly one succeeds and its value stays.
    rounds = 40
    winners = [[] for _ in range(rounds)]
    barrier = threading.Barrier(4)

    def setnx(i):
        r = client()
        for k in range(rounds):
            barrier.wait(10)
            if r.set("race:nx:%d" % k, "t%d" % i, nx=True):
                winners[k].append(i)
        r.close()
    errors = run_threads(4, setnx)
    s.check(not errors, "SET NX race: %s" % errors[:2])
    with s.conn() as c:
        for k in range(rounds):
            ok = len(winners[k]) == 1
            s.check(ok, "4 racing SET race:nx:%d v NX: %d got OK, expected exactly 1"
                    % (k, len(winners[k])))
            if ok:
                s.expect(c, ["GET", "race:nx:%d" % k], b"t%d" % winners[k][0],
                         "the SET NX winner's value")

    # GETDEL: of 4 racing GETDEL, exactly one gets the value.
    with s.conn() as c:
        for k in range(rounds):
            s.expect(c, ["SET", "race:gd:%d" % k, "v%d" % k], b"OK")
    got = [[] for _ in range(rounds)]

    def getdel(i):
        r = client()
        for k in range(rounds):
            barrier.wait(10)
            v = r.execute_command("GETDEL", "race:gd:%d" % k)
            if v is not None:
                got[k].append(v)
        r.close()
    errors = run_threads(4, getdel)
    s.check(not errors, "GETDEL race: %s" % errors[:2])
    bad = [k for k in range(rounds) if got[k] != [b"v%d" % k]]
    s.check(not bad, "4 racing GETDEL race:gd:%s: values returned %s, expected exactly one"
            % (bad[:1], [got[k] for k in bad[:1]]))

    # APPEND: 4 x 250 one-byte appends; the replies (new lengths) are 1..1000 each once.
    lengths = []

    def append(i):
        r = client()
        mine = [r.append("race:append", "x") for _ in range(250)]
        lengths.extend(mine)
        r.close()
    errors = run_threads(4, append)
    s.check(not errors, "APPEND race: %s" % errors[:2])
    s.check(sorted(lengths) == list(range(1, 1001)),
            "4 x 250 APPEND of one byte: the replies are not 1..1000 each once (%d distinct)"
            % len(set(lengths)))
    with s.conn() as c:
        s.expect(c, ["STRLEN", "race:append"], 1000)

    # SET ... GET: every value written is returned as an old value exactly once, or is the last.
    olds = []

    def swap(i):
        r = client()
        mine = [r.set("race:swap", "t%d:%d" % (i, j), get=True) for j in range(300)]
        olds.extend(mine)
        r.close()
    errors = run_threads(4, swap)
    s.check(not errors, "SET GET race: %s" % errors[:2])
    with s.conn() as c:
        final = c.cmd("GET", "race:swap")
    written = sorted(b"t%d:%d" % (i, j) for i in range(4) for j in range(300))
    returned = sorted([v for v in olds if v is not None] + [final])
    s.check(olds.count(None) == 1 and returned == written,
            "4 x 300 SET race:swap v GET: %d nil replies (expected 1); the old values and the last "
            "value are %s each written value once"
            % (olds.count(None), "" if returned == written else "not"))

    # MSET is atomic (Redis documents it: no client sees some keys updated and others not), and
    # so is MGET: a reader never sees the two keys of one MSET from different MSETs.
    stop = threading.Event()
    torn = []

    def mset_writer(i):
        r = client()
        n = 0
        while not stop.is_set() and n < 20000:
            n += 1
            r.mset({"race:m:x": n, "race:m:y": n})
        r.close()

    def mget_reader(i):
        r = client()
        for _ in range(3000):
            x, y = r.mget("race:m:x", "race:m:y")
            if x != y:
                torn.append((x, y))
        r.close()

    with s.conn() as c:
        s.expect(c, ["MSET", "race:m:x", "0", "race:m:y", "0"], b"OK")
    errors = run_threads(3, lambda i: mset_writer(i) if i == 0 else (mget_reader(i), stop.set()))
    stop.set()
    s.check(not errors, "MSET/MGET race: %s" % errors[:2])
    s.check(not torn, "MSET race:m:x n race:m:y n against MGET race:m:x race:m:y: %d of 6000 "
            "MGETs saw the two keys from different MSETs, e.g. %s (Redis: MSET and MGET are "
            "atomic)" % (len(torn), torn[:3]))

    # No torn values: 3 writers SET one key to runs of one byte of varying length, 3 readers GET.
    stop.clear()
    mixed = []

    def tear_writer(i):
        r = client()
        rng = random.Random(i)
        while not stop.is_set():
            r.set("race:tear", bytes([65 + i]) * rng.randint(1, 6000))
        r.close()

    def tear_reader(i):
        r = client()
        for _ in range(2000):
            v = r.get("race:tear")
            if v is not None and v != v[:1] * len(v):
                mixed.append(v)
        r.close()
    errors = run_threads(6, lambda i: tear_writer(i) if i < 3 else (tear_reader(i), stop.set()))
    stop.set()
    s.check(not errors, "torn-value race: %s" % errors[:2])
    s.check(not mixed, "GET race:tear while 3 writers SET it: %d values mixed two writes, e.g. %s"
            % (len(mixed), show(mixed[:1], 120)))

    # A reader of a counter that another connection increments never sees it go back.
    stop.clear()
    backwards = []

    def incr_writer(i):
        r = client()
        for _ in range(3000):
            if stop.is_set():
                break
            r.incr("race:mono")
        r.close()

    def incr_reader(i):
        r = client()
        last = 0
        for _ in range(2000):
            v = int(r.get("race:mono") or 0)
            if v < last:
                backwards.append((last, v))
            last = v
        r.close()
    errors = run_threads(3, lambda i: incr_writer(i) if i == 0 else (incr_reader(i), stop.set()))
    stop.set()
    s.check(not errors, "INCR/GET race: %s" % errors[:2])
    s.check(not backwards, "GET race:mono went backwards while another connection INCRs it: %s"
            % backwards[:3])

    if s.t.scan:
        # SCAN while 2 connections insert and delete keys between the stable ones all along:
        # each full iteration returns every key present throughout (Redis's SCAN guarantee).
        stable = {b"cs:%03d" % i for i in range(200)}
        with s.conn() as c:
            s.expect(c, ["MSET"] + [x for k in sorted(stable) for x in (k, b"v")], b"OK")
        stop.clear()
        problems = []

        def churner(i):
            r = client()
            j = 0
            while not stop.is_set():
                r.set("cs:%03d:%d" % (j * 7 % 200, i), "c")
                r.delete("cs:%03d:%d" % ((j - 20) * 7 % 200, i))
                j += 1
            r.close()

        def scanner(i):
            r = client()
            for _ in range(5):
                seen = set(r.scan_iter(match="cs:*", count=10))
                if stable - seen:
                    problems.append(sorted(stable - seen)[:3])
            r.close()
        errors = run_threads(3, lambda i: churner(i) if i < 2 else (scanner(i), stop.set()))
        stop.set()
        s.check(not errors, "SCAN during concurrent writes: %s" % errors[:2])
        s.check(not problems, "SCAN MATCH cs:* while 2 connections insert and delete other cs: "
                "keys: %d of 5 iterations missed keys present throughout, e.g. %s"
                % (len(problems), problems[:1]))

    # DBSIZE counts exactly what 4 connections created and deleted at once.
    with s.conn() as c:
        d0 = c.cmd("DBSIZE")

    def churn(i):
        r = client()
        p = r.pipeline(transaction=False)
        for j in range(250):
            p.set("race:dz:%d:%d" % (i, j), "v")
        p.execute()
        p = r.pipeline(transaction=False)
        for j in range(0, 250, 2):
            p.delete("race:dz:%d:%d" % (i, j))
        p.execute()
        r.close()
    errors = run_threads(4, churn)
    s.check(not errors, "SET/DEL churn: %s" % errors[:2])
    with s.conn() as c:
        s.expect(c, ["DBSIZE"], d0 + 500,
                 "DBSIZE after 4 connections set 1000 keys and deleted 500")


def many_connections(s):
    conns = []
    try:
        for i in range(300):
            conns.append(s.conn())
        for i, c in enumerate(conns):
            c.send(h.encode("SET", "conn:%d" % i, str(i)))
        bad = [i for i, c in enumerate(conns) if c.read_reply() != b"OK"]
        s.check(not bad, "300 connections at once: SET on %d of them not OK" % len(bad))
        for i, c in enumerate(conns):
            c.send(h.encode("GET", "conn:%d" % ((i + 1) % 300)))
        bad = [i for i, c in enumerate(conns) if c.read_reply() != str((i + 1) % 300).encode()]
        s.check(not bad, "300 connections at once: GET on %d of them wrong" % len(bad))
    finally:
        for c in conns:
            c.close()
    with s.conn() as c:
        s.expect(c, ["EXISTS"] + ["conn:%d" % i for i in range(300)], 300)


def slow_reader(s):
    """A client that sends a lot and reads nothing must not hold up the others."""
    big = random.Random(5).randbytes(6000)
    a = s.conn(timeout=30)
    s.expect(a, ["SET", "slow:big", big], b"OK")
    sender = threading.Thread(target=send_ignoring_reset,
                              args=(a, h.encode("GET", "slow:big") * 3000), daemon=True)
    sender.start()
    time.sleep(0.5)  # its replies (18 MB) fill the socket buffers; a stays unread
    for i in range(4):
        with s.conn(timeout=3) as b:
            s.expect(b, ["PING"], b"PONG", "another client while one reads nothing")
            s.expect(b, ["SET", "slow:%d" % i, "x"], b"OK")
    wrong = sum(1 for _ in range(3000) if a.read_reply() != big)
    s.check(wrong == 0, "the slow reader's 3000 GETs: %d wrong replies" % wrong)
    sender.join(10)
    s.expect(a, ["PING"], b"PONG")
    a.close()


def big_values(s):
    """Over the map's size limit: a clear error and nothing stored; under it: the bytes back."""
    c = s.conn(timeout=30)
    for size in (100000, 1000000):
        value = random.Random(size).randbytes(size)
        r = s.expect(c, ["SET", "bigv:%d" % size, value],
                     Pred("+OK, or an -ERR for a value over the limit",
                          lambda r: r == b"OK"
                          or (isinstance(r, ErrorReply) and r.text.startswith("ERR"))))
        if r == b"OK":
            s.expect(c, ["GET", "bigv:%d" % size], value, "a %d-byte value" % size)
        else:
            s.expect(c, ["EXISTS", "bigv:%d" % size], 0, "a refused %d-byte value" % size)
    # One command of 10001 arguments, and a reply of 5000 values.
    args = ["MSET"]
    for i in range(5000):
        args += ["many:%d" % i, "v%d" % i]
    s.expect(c, args, b"OK", "MSET of 5000 keys")
    s.expect(c, ["MGET"] + ["many:%d" % i for i in range(5000)], [b"v%d" % i for i in range(5000)],
             "MGET of 5000 keys")
    s.expect(c, ["DEL"] + ["many:%d" % i for i in range(0, 5000, 2)], 2500)
    c.close()


def maxclients(s):
    """--maxclients 5: the sixth connection gets Redis's error and is closed; a freed slot is
    taken again."""
    server = s.t.start("maxclients", maxclients=5)
    conns = []
    try:
        for i in range(5):
            conns.append(s.conn(server.port))
            s.expect(conns[-1], ["PING"], b"PONG", "connection %d of at most 5" % (i + 1))
        with s.conn(server.port) as extra:
            extra.send(h.encode("PING"))
            try:
                got = extra.read_reply()
            except (h.ConnectionClosed, socket.timeout) as e:
                got = "(%s)" % e
            s.check(got == ErrorReply("ERR max number of clients reached"),
                    "a 6th connection with --maxclients 5\n  expected: -ERR max number of clients "
                    "reached\n  got:      %s" % show(got))
            s.check(extra.closed_by_server(3), "the 6th connection was not closed")
        conns.pop().close()
        deadline, got = time.monotonic() + 5, None
        while time.monotonic() < deadline:
            with s.conn(server.port) as again:
                try:
                    got = again.cmd("PING")
                except (h.ConnectionClosed, socket.timeout):
                    got = None
            if got == b"PONG":
                break
            time.sleep(0.1)
        s.check(got == b"PONG", "after one of 5 connections closed, a new one: %s, expected +PONG"
                % show(got))
        s.expect(conns[0], ["PING"], b"PONG", "the first connections still served")
    finally:
        for c in conns:
            c.close()
        if server in s.t.servers:
            s.t.servers.remove(server)
        server.stop_quietly()


def redis_py(s):
    """What redis-py does on its own: CLIENT SETNAME at connect, INFO parsing, CONFIG GET."""
    import redis
    r = redis.Redis(port=s.server.port, socket_timeout=10, client_name="compat")
    s.check(r.ping() is True, "redis-py ping()")
    s.check(r.client_getname() == "compat", "redis-py client_name='compat': CLIENT GETNAME is %r"
            % r.client_getname())
    s.check(r.echo("e") == b"e", "redis-py echo()")
    info = r.info()
    s.check(isinstance(info, dict) and info, "redis-py info(): %r" % show(info))
    pers = r.info("persistence")
    if s.t.pmds:
        s.check(pers.get("pmds_structure") == s.t.structure
                and pers.get("pmds_criterion") == s.t.criterion,
                "[pmds-only] redis-py info('persistence'): %s" % show(pers))
    s.check("save" in r.config_get("save"),
            "redis-py config_get('save'): %r" % r.config_get("save"))
    s.check(r.mset({"py:a": "1", "py:b": "2"}) is True
            and r.mget("py:a", "py:b", "py:c") == [b"1", b"2", None], "redis-py mset()/mget()")
    s.check(r.incrby("py:a", 41) == 42 and r.getdel("py:a") == b"42" and r.exists("py:a") == 0,
            "redis-py incrby()/getdel()/exists()")
    s.check(isinstance(r.dbsize(), int), "redis-py dbsize()")
    r.close()


def stalled_client(s):
    a = s.conn()
    a.send(b"*3\r\n$3\r\nSET\r\n$9\r\nstall:key\r\n$5\r\nval")  # half a request, then silence
    b_inline = s.conn()
    b_inline.send(b"PIN")  # half an inline command
    with s.conn(timeout=3) as b:
        s.expect(b, ["PING"], b"PONG", "another client while one stalls mid-request")
        s.expect(b, ["SET", "stall:other", "x"], b"OK")
        s.expect(b, ["GET", "stall:other"], b"x")
        s.expect(b, ["GET", "stall:key"], None, "the stalled SET is not applied yet")
    a.send(b"ue\r\n")
    s.check(a.read_reply() == b"OK", "the stalled request, once completed")
    s.expect(a, ["GET", "stall:key"], b"value")
    b_inline.send(b"G\r\n")
    s.check(b_inline.read_reply() == b"PONG", "the stalled inline PING, once completed")
    a.close()
    b_inline.close()


def redis_cli(s):
    port = str(s.server.port)

    def cli(*args, stdin=None):
        r = subprocess.run(["redis-cli", "-p", port] + list(args), input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        return r.returncode, r.stdout.decode("utf-8", "replace")

    def expect_cli(args, want, stdin=None, text=None):
        rc, out = cli(*args, stdin=stdin)
        ok = want(out) if callable(want) else out == want
        s.check(rc == 0 and ok,
                "redis-cli -p PORT %s\n  expected: exit 0, %s\n  got:      exit %d, %s"
                % (" ".join(args), text or repr(want), rc, show(out, 800)))
        return out

    expect_cli(["SET", "cli:k", "v"], "OK\n")
    expect_cli(["GET", "cli:k"], "v\n")
    expect_cli(["GET", "cli:absent"], "\n")  # nil, printed raw (not a tty)
    expect_cli(["INCR", "cli:n"], "1\n")
    expect_cli(["MGET", "cli:k", "cli:absent", "cli:n"], "v\n\n1\n")
    expect_cli(["INCR", "cli:k"], lambda out: NOT_INTEGER in out, text="a line with " + NOT_INTEGER)
    expect_cli(["PING"], "PONG\n")
    expect_cli(["INFO", "persistence"], lambda out: "# Persistence" in out and (
        not s.t.pmds or "pmds_structure:%s" % s.t.structure in out),
        text="# Persistence" + (" and pmds_structure:%s" % s.t.structure if s.t.pmds else ""))

    # Mass insertion (redis-cli --pipe): RESP generated here, 3000 SETs.
    with s.conn() as c:
        before = c.cmd("DBSIZE")
    data = b"".join(h.encode("SET", "cli:pipe:%05d" % i, "value-%d" % i) for i in range(3000))
    expect_cli(["--pipe"], lambda out: re.search(r"errors: 0, replies: 3000\b", out), stdin=data,
               text="'errors: 0, replies: 3000'")
    with s.conn() as c:
        s.expect(c, ["DBSIZE"], before + 3000 if isinstance(before, int) else -1, "after --pipe")
        s.expect(c, ["MGET", "cli:pipe:00000", "cli:pipe:01234", "cli:pipe:02999"],
                 [b"value-0", b"value-1234", b"value-2999"])
    if s.t.scan:
        expect_cli(["--scan", "--pattern", "cli:pipe:001*"],
                   lambda out: sorted(out.split()) == ["cli:pipe:%05d" % i
                                                       for i in range(100, 200)],
                   text="the 100 keys cli:pipe:00100..cli:pipe:00199, one a line")


def requirepass(s):
    server = s.t.start("auth", requirepass="s3cret")
    try:
        c = s.conn(server.port)
        noauth = ErrExact("NOAUTH Authentication required.")
        s.expect(c, ["PING"], noauth)
        s.expect(c, ["GET", "k"], noauth)
        s.expect(c, ["SET", "k", "v"], noauth)
        s.expect(c, ["AUTH", "wrong"], Pred("an error reply", lambda r: isinstance(r, ErrorReply)))
        s.expect(c, ["GET", "k"], noauth, "after a wrong password")
        s.expect(c, ["AUTH", "s3cret"], b"OK")
        s.expect(c, ["PING"], b"PONG")
        s.expect(c, ["SET", "k", "v"], b"OK")
        s.expect(c, ["GET", "k"], b"v")
        c.close()
        with s.conn(server.port) as d:
            s.expect(d, ["GET", "k"], noauth, "authentication belongs to the connection")
            s.expect(d, ["AUTH", "default", "s3cret"], b"OK", "AUTH username password")
            s.expect(d, ["GET", "k"], b"v")
        with s.conn(server.port) as d:
            # Pipelined: the command before AUTH is refused, those after it run.
            d.send(h.encode("GET", "k") + h.encode("AUTH", "s3cret") + h.encode("GET", "k"))
            got = [d.read_reply() for _ in range(3)]
            s.check(got == [ErrorReply("NOAUTH Authentication required."), b"OK", b"v"],
                    "GET k, AUTH s3cret, GET k in one write: %s" % got)
        with s.conn(server.port) as d:
            d.send(b"GET k\r\n")
            s.check(d.read_reply() == ErrorReply("NOAUTH Authentication required."),
                    "inline GET unauthenticated")
        import redis
        r = redis.Redis(port=server.port, password="s3cret", socket_timeout=10)
        s.check(r.get("k") == b"v", "redis-py with password")
        r.close()
        r = redis.Redis(port=server.port, socket_timeout=10)
        try:
            r.get("k")
            s.fail("redis-py without password: no error")
        except redis.exceptions.AuthenticationError:
            pass
        except redis.exceptions.ResponseError as e:
            s.fail("redis-py without password: %r, expected AuthenticationError (-NOAUTH)" % e)
        r.close()
        out = subprocess.run(["redis-cli", "-p", str(server.port), "-a", "s3cret",
                              "--no-auth-warning", "GET", "k"],
                             stdout=subprocess.PIPE, timeout=30).stdout
        s.check(out == b"v\n", "redis-cli -a s3cret GET k: %r" % out)
    finally:
        s.t.servers.remove(server)
        server.stop_quietly()


def flushall_enabled(s):
    server = s.t.start("flush", enable_flushall=True)
    try:
        c = s.conn(server.port)
        s.expect(c, ["MSET", "f:1", "a", "f:2", "b", "f:3", "c"], b"OK")
        s.expect(c, ["DBSIZE"], 3)
        s.expect(c, ["FLUSHALL"], b"OK")
        s.expect(c, ["DBSIZE"], 0)
        s.expect(c, ["GET", "f:1"], None)
        s.expect(c, ["SET", "f:after", "x"], b"OK", "writes after FLUSHALL")
        s.expect(c, ["DBSIZE"], 1)
        c.close()
        server = s.t.restart(server, sig=signal.SIGINT)
        with s.conn(server.port) as c:
            s.expect(c, ["DBSIZE"], 1, "after FLUSHALL and a restart (SIGINT)")
            s.expect(c, ["GET", "f:after"], b"x")
            s.expect(c, ["GET", "f:1"], None, "a flushed key came back after the restart")
        if s.t.pmds:
            s.check(server.ready["recovered"] == "1",
                    "ready line after restart: recovered=%s, expected 1"
                    % server.ready["recovered"])
    finally:
        if server in s.t.servers:
            s.t.servers.remove(server)
        server.stop_quietly()


def growth(s):
    """A pool created small grows while serving (30 MB of values into 16 MiB); all of it back
    after a restart."""
    server = s.t.start("grow", pool_size=16 << 20)
    try:
        import redis
        r = redis.Redis(port=server.port, socket_timeout=60)

        def value(i):
            return b"%05d" % i + random.Random(i).randbytes(5995)
        for start in range(0, 5000, 500):
            p = r.pipeline(transaction=False)
            for i in range(start, start + 500):
                p.set("grow:%d" % i, value(i))
            if p.execute() != [True] * 500:
                s.fail("SET of 500 6000-byte values into a growing pool: not all OK")
        s.check(r.dbsize() == 5000, "DBSIZE after 5000 SETs into a growing pool: %s" % r.dbsize())
        r.close()
        server = s.t.restart(server)
        r = redis.Redis(port=server.port, socket_timeout=60)
        wrong = 0
        for start in range(0, 5000, 500):
            got = r.mget(["grow:%d" % i for i in range(start, start + 500)])
            wrong += sum(1 for i, g in zip(range(start, start + 500), got) if g != value(i))
        s.check(wrong == 0, "after a restart %d of 5000 values in the grown pool are wrong" % wrong)
        s.check(r.dbsize() == 5000, "DBSIZE after a restart of the grown pool: %s" % r.dbsize())
        if s.t.pmds:
            s.check(server.ready["recovered"] == "5000", "ready line: recovered=%s, expected 5000"
                    % server.ready["recovered"])
        r.close()
    finally:
        if server in s.t.servers:
            s.t.servers.remove(server)
        server.stop_quietly()


def pool_full(s):
    """A pool at its size limit (Redis: maxmemory reached): writes get an error (Redis: -OOM),
    the server goes on serving, and every write acknowledged before is there after a restart."""
    server = s.t.start("full", pool_size=8 << 20, max_pool_size=16 << 20)
    try:
        c = s.conn(server.port, timeout=30)
        acked, refused = [], None
        for i in range(10000):  # 60 MB into 16 MiB
            r = c.cmd("SET", "full:%d" % i, b"%05d" % i + b"f" * 5995)
            if r == b"OK":
                acked.append(i)
            else:
                refused = (i, r)
                break
        if not s.check(refused is not None and isinstance(refused[1], ErrorReply),
                       "60 MB of SETs into a pool limited to 16 MiB: %s, expected an error reply "
                       "(Redis: -OOM) once it is full" % (show(refused and refused[1]) if refused
                                                          else "all OK")):
            return
        print("   full after %d SETs: %s" % (len(acked), refused[1]))
        s.expect(c, ["PING"], b"PONG", "a full pool still serves")
        s.expect(c, ["EXISTS", "full:%d" % refused[0]], 0, "the refused SET stored nothing")
        s.expect(c, ["GET", "full:0"], b"00000" + b"f" * 5995)
        s.expect(c, ["DBSIZE"], len(acked))
        # Redis runs DEL at maxmemory (it frees memory): a full store can be emptied.
        r = s.expect(c, ["DEL", "full:0", "full:1"], 2, "DEL in a full pool")
        gone = 2 if r == 2 else 0  # what follows checks whatever DEL answered
        s.expect(c, ["DBSIZE"], len(acked) - gone, "after DEL in a full pool")
        s.expect(c, ["EXISTS", "full:0", "full:1"], 2 - gone, "after DEL in a full pool")
        c.close()
        server = s.t.restart(server)
        with s.conn(server.port, timeout=30) as c:
            s.expect(c, ["DBSIZE"], len(acked) - gone, "after a restart of the full pool")
            keys = ["full:%d" % i for i in acked[gone:]]
            for i in range(0, len(keys), 500):
                s.expect(c, ["MGET"] + keys[i:i + 500],
                         [b"%05d" % int(k[5:]) + b"f" * 5995 for k in keys[i:i + 500]],
                         "the acknowledged values after a restart of the full pool")
    finally:
        if server in s.t.servers:
            s.t.servers.remove(server)
        server.stop_quietly()


def early_signal(s):
    """SIGTERM or SIGINT the moment the server says it is ready: still a clean close (exit 0),
    every time (the handlers must be in place before the ready line)."""
    tries = 40 if s.t.pmds else 8  # a server may die of the signal only now and then
    for i in range(tries):
        server = s.t.start("early")
        sig = signal.SIGTERM if i % 2 == 0 else signal.SIGINT
        rc = server.terminate(sig=sig)
        s.t.servers.remove(server)
        if not s.check(rc == 0, "%s right after the ready line (start %d of %d): exit status %s, "
                       "expected 0\n%s" % (signal.Signals(sig).name, i + 1, tries, rc,
                                            server.describe())):
            break


def restart(s):
    """SIGTERM then start on the same pool: every key and value is back."""
    c = s.conn()
    s.expect(c, ["INCRBY", "restart:counter", "7"], 7)
    pairs = [("restart:%d" % i, random.Random(i).randbytes(i % 100)) for i in range(200)]
    for i in range(0, 200, 50):
        args = ["MSET"]
        for k, v in pairs[i:i + 50]:
            args += [k, v]
        s.expect(c, args, b"OK")
    size = c.cmd("DBSIZE")
    everything = None
    if s.t.scan:
        keys = c.cmd("KEYS", "*")
        everything = dict(zip(keys, c.cmd("MGET", *keys))) if keys else {}
    c.close()
    if s.t.pmds:  # [pmds-only] a second server on a pool in use must not serve it
        second = h.Process([s.t.binary, "--pool", s.server.pool, "--structure", s.t.structure,
                            "--port", "0"], s.t.tmp, "second-pmds-server")
        ready = second.wait_for_line(h.READY_RE, 5)
        s.check(ready is None, "[pmds-only] a second pmds-server on the pool in use started "
                "serving it: %s (expected it to refuse: exit with an error)"
                % (ready and ready.group(0)))
        second.stop_quietly()
    if s.t.pmds:  # [pmds-only] the pool holds another structure: refused, the pool untouched
        other = ("skiplist-bytes/montage" if s.t.structure != "skiplist-bytes/montage"
                 else "hash-bytes/montage")
        s.server.terminate()
        s.t.servers.remove(s.server)
        wrong = h.Process([s.t.binary, "--pool", s.server.pool, "--structure", other,
                           "--port", "0"], s.t.tmp, "wrong-structure-pmds-server")
        ready = wrong.wait_for_line(h.READY_RE, 10)
        rc = wrong.terminate() if ready else wrong.proc.wait(20)
        s.check(ready is None and rc != 0, "[pmds-only] pmds-server --structure %s on a pool of "
                "%s: %s, exit status %s (expected: refused, a non-zero exit)"
                % (other, s.t.structure, ready and ready.group(0), rc))
        s.server = s.t.start(**s.server.start_args)
    # Connections open at the close, one idle, one half-way through a request: still a clean exit.
    idle, half = s.conn(), s.conn()
    half.send(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$10\r\nabc")
    s.server = s.t.restart(s.server)
    idle.close()
    half.close()
    c = s.conn()
    s.expect(c, ["DBSIZE"], size, "DBSIZE after a restart")
    if s.t.pmds:
        s.check(s.server.ready["recovered"] == str(size),
                "ready line after restart: recovered=%s, DBSIZE before %s"
                % (s.server.ready["recovered"], size))
    s.expect(c, ["MGET"] + [k for k, _ in pairs], [v for _, v in pairs], "200 keys after a restart")
    if everything is not None:
        keys = c.cmd("KEYS", "*")
        after = dict(zip(keys, c.cmd("MGET", *keys))) if keys else {}
        diff = [k for k in set(everything) | set(after) if everything.get(k) != after.get(k)]
        s.check(not diff, "after a restart %d keys differ, e.g. %s: %s -> %s" % (
            len(diff), show(diff[:1]), show(everything.get(diff[0]) if diff else None),
            show(after.get(diff[0]) if diff else None)))
    s.expect(c, ["INCR", "restart:counter"], 8, "INCR on a recovered counter")
    c.close()


SECTIONS = [basics, set_options, multi_key, counters, binary_and_sizes, dbsize, scan_and_keys,
            flushall_refused, introspection, waitaof, pipelining, inline, malformed, incr_atomicity,
            atomicity, stalled_client, many_connections, maxclients, slow_reader, big_values,
            redis_py, redis_cli, requirepass, flushall_enabled, growth, pool_full, early_signal,
            restart]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("server", nargs="?", help="the pmds-server binary")
    ap.add_argument("structure", nargs="?", help="the structure to serve")
    ap.add_argument("--redis", action="store_true", help="run against redis-server instead")
    ap.add_argument("--only", help="comma-separated section names to run")
    opts = ap.parse_args()
    if not opts.redis and not (opts.server and opts.structure):
        ap.error("SERVER_BIN and STRUCTURE, or --redis")
    h.require(["redis-cli"] + (["redis-server"] if opts.redis else []), python_redis=True)
    if not opts.redis and not os.access(opts.server, os.X_OK):
        print("FAIL: %s is not an executable" % opts.server)
        return 1
    target = Target(opts)
    suite = Suite(target)
    sections = SECTIONS
    if opts.only:
        sections = [f for f in SECTIONS if f.__name__ in opts.only.split(",")]
    print("commands_test: %s"
          % ("redis-server" if opts.redis else "%s %s" % (opts.server, opts.structure)))
    t0 = time.monotonic()
    try:
        suite.server = target.start()
        for fn in sections:
            if not suite.run(fn.__name__, fn):
                break
    except h.ServerFailure as e:
        suite.fail(str(e))
    finally:
        stderr = suite.server.describe() if suite.server else ""
        target.cleanup()
    print("\ncommands_test: %d checks, %d failed, %.1f s" % (suite.checks, len(suite.failures),
                                                            time.monotonic() - t0))
    if suite.failures:
        print("\nFAILURES:")
        for f in suite.failures:
            print(" * " + f.replace("\n", "\n   "))
        print("\nserver: " + stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
