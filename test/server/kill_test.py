#!/usr/bin/env python3
"""The durability contract of pmds-server under SIGKILL, seen by real clients.

  kill_test.py SERVER_BIN PMDS_BIN STRUCTURE [--rounds N] [--seed S]

Each round, 4 writer connections (threads, each its own redis.Redis) issue SET/INCR/DEL on keys
of their own (the key names carry the round and the connection, the SET values the connection's
sequence number, so every value names the write that stored it) and log every acknowledged
reply; every ~50 writes a connection issues WAITAOF 1 0 0 and, once it answers [1, 0], records
how many of its writes were acknowledged before it. At a random moment (0.2-1.5 s) the server
is SIGKILLed and restarted on the same pool. Then, per connection:
  - its surviving keys equal the state after some prefix of its writes: 1..i, i at most the
    acknowledged ones plus the one in flight when the server died (the map is buffered durably
    linearizable, and each connection's keys are its own, so its writes survive in order);
  - that prefix covers every write acknowledged before its last completed WAITAOF;
  - the keys of earlier rounds are as they were recovered (nothing recovered is lost later);
  - writes of any connection acknowledged before a WAITAOF was sent (on any connection) that
    completed are there: WAITAOF covers every earlier acknowledged write;
  - the ready line's recovered=N equals DBSIZE.
The restarted servers run 1, 2 or 4 worker threads (--threads), round by round.
In every second round the restarted server is SIGKILLed again 0-15 ms after it starts (during
its recovery, mostly) and started once more: recovering must survive being interrupted.
The writes lost (acknowledged, after the last WAITAOF, not recovered) are printed: a buffered
map may lose them; a durable one (criterion=durable on the ready line, e.g. hash-bytes/soft)
may not, and any such loss fails the round. A last round stops the server with SIGTERM under the same load instead: exit
status 0, `pmds check POOL` passes, and no acknowledged write is lost. Finally one more clean
close (SIGTERM, `pmds check`) and restart must bring back exactly the same keys.
"""

import argparse
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

WRITERS = 4
DURABLE = {"hash-bytes/soft", "skiplist-bytes/soft"}  # durably linearizable: every acknowledged write survives a kill
KEYS_PER_WRITER = 4
WAITAOF_EVERY = 50


def wait_durable(r):
    """WAITAOF 1 0 0: [1, 0] once every write acknowledged before it is durable."""
    return r.execute_command("WAITAOF", 1, 0, 0)


class Writer(threading.Thread):
    """One connection's writes. ops[i] = (kind, key, value after it): the state the write leaves
    its key in (None: deleted), computed as the writes are issued; a reply that disagrees with
    that is a failure too."""

    def __init__(self, port, rnd, cid, seed, everyone):
        super().__init__(daemon=True)
        self.everyone = everyone  # all the round's writers (this one included)
        self.port, self.cid = port, cid
        self.rng = random.Random(seed)
        self.prefix = "r%d:c%d:" % (rnd, cid)
        self.keys = [self.prefix + "k%d" % j for j in range(KEYS_PER_WRITER)]
        self.counter = self.prefix + "n"
        self.ops = []          # every write issued, in order
        self.acked = 0         # ops[:acked] were acknowledged
        self.inflight = False  # ops[acked] was sent and not answered when the connection broke
        self.durable = 0       # ops[:durable] were acknowledged before the last completed WAITAOF
        self.covered = 0       # ops[:covered] were acknowledged before some connection's WAITAOF
        #                        that completed (WAITAOF covers every earlier acknowledged write)
        self.waitaofs = 0
        self.errors = []       # wrong replies (not the broken connection at the kill)
        self.ended_by = None

    def all_keys(self):
        return self.keys + [self.counter]

    def run(self):
        import redis
        # No retry (redis-py's default): a write resent after the kill would muddle the log.
        r = redis.Redis(port=self.port, socket_timeout=15, socket_connect_timeout=5,
                        single_connection_client=True)
        state = {k: None for k in self.all_keys()}
        seq = 0
        try:
            while True:
                seq += 1
                roll = self.rng.random()
                if roll < 0.5:
                    key = self.rng.choice(self.keys)
                    # Mostly short values, some long (other payload sizes in the pool).
                    long_one = self.rng.random() < 0.05
                    pad = self.rng.randrange(200, 5000) if long_one else self.rng.randrange(0, 200)
                    value = b"c%d:s%d:" % (self.cid, seq) + b"x" * pad
                    self.ops.append(("SET", key, value))
                    self.inflight = True
                    reply = r.set(key, value)
                    want = True
                elif roll < 0.75:
                    n = int(state[self.counter] or 0) + 1
                    value = str(n).encode()
                    self.ops.append(("INCR", self.counter, value))
                    self.inflight = True
                    reply = r.incr(self.counter)
                    want = n
                else:
                    key = self.rng.choice(self.keys)
                    want = 0 if state[key] is None else 1
                    value = None
                    self.ops.append(("DEL", key, None))
                    self.inflight = True
                    reply = r.delete(key)
                self.inflight = False
                self.acked += 1
                state[self.ops[-1][1]] = value
                if reply != want:
                    self.errors.append("write %d %s %s: reply %r, expected %r"
                                       % (seq, self.ops[-1][0], self.ops[-1][1], reply, want))
                    return
                if seq % WAITAOF_EVERY == 0:
                    before = [w.acked for w in self.everyone]  # read before sending it
                    reply = wait_durable(r)
                    if reply != [1, 0]:
                        self.errors.append("WAITAOF 1 0 0 after write %d: %r, expected [1, 0]"
                                           % (seq, reply))
                        return
                    self.durable = before[self.everyone.index(self)]
                    for w, n in zip(self.everyone, before):
                        w.covered = max(w.covered, n)
                    self.waitaofs += 1
        except (redis.ConnectionError, redis.TimeoutError, ConnectionError) as e:
            self.ended_by = repr(e)  # the kill
        except Exception as e:
            self.errors.append("write %d: %r" % (seq, e))
        finally:
            r.close()

    def states(self, upto):
        """Yield (i, state after ops[:i]) for i = 0..upto."""
        state = {k: None for k in self.all_keys()}
        yield 0, state
        for i, (_, key, value) in enumerate(self.ops[:upto]):
            state[key] = value
            yield i + 1, state


def analyse(w, observed, fail, clean=False, durable=False):
    """The prefixes of w's writes that observed equals; fails unless one covers w.durable (all
    of w's acknowledged writes after a clean close, or on a durable map)."""
    upto = w.acked + (1 if w.inflight else 0)
    matching = [i for i, state in w.states(upto) if state == observed]
    if not matching:
        last = w.ops[max(0, w.acked - 5):upto]
        fail("connection %d: the recovered state is no prefix of its writes\n  recovered: %s\n"
             "  acknowledged %d, in flight %s, last writes: %s"
             % (w.cid, show_state(observed), w.acked, w.inflight,
                [(k, key, short(v)) for k, key, v in last]))
        return None
    best = max(matching)
    if clean and best < w.acked:
        fail("connection %d: writes acknowledged before SIGTERM are lost: recovered the state "
             "after write %d of %d acknowledged (a clean close keeps every acknowledged write)"
             "\n  recovered: %s" % (w.cid, best, w.acked, show_state(observed)))
    elif best < w.durable:
        fail("connection %d: writes acknowledged before its last WAITAOF are lost: recovered the "
             "state after write %d, WAITAOF had covered %d (acknowledged %d)\n  recovered: %s"
             % (w.cid, best, w.durable, w.acked, show_state(observed)))
    elif best < w.covered:
        fail("connection %d: writes acknowledged before another connection's WAITAOF are lost: "
             "recovered the state after write %d, a WAITAOF sent after write %d had been "
             "acknowledged completed (its own WAITAOFs covered %d)\n  recovered: %s"
             % (w.cid, best, w.covered, w.durable, show_state(observed)))
    return best


def short(v):
    return None if v is None else (v[:16] + b"..." if len(v) > 16 else v)


def show_state(state):
    return {k: short(v) for k, v in state.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("server")
    ap.add_argument("pmds")
    ap.add_argument("structure")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=None, help="default: from the clock (printed)")
    opts = ap.parse_args()
    h.require(python_redis=True)
    for binary in (opts.server, opts.pmds):
        if not os.access(binary, os.X_OK):
            print("FAIL: %s is not an executable" % binary)
            return 1
    import redis
    seed = opts.seed if opts.seed is not None else int(time.time() * 1000) % 1000000
    rng = random.Random(seed)
    print("kill_test: %s, %d rounds, seed %d" % (opts.structure, opts.rounds, seed), flush=True)

    failures = []
    tmp = h.make_tmpdir("kill")
    pool = os.path.join(tmp, "kill.pool")
    server = None
    t0 = time.monotonic()

    def fail(message):
        failures.append(message)
        print("  FAIL: " + message.replace("\n", "\n        "), flush=True)

    durable = opts.structure in DURABLE

    def check_ready(srv, what):
        r = redis.Redis(port=srv.port, socket_timeout=15)
        size = r.dbsize()
        r.close()
        expected = "durable" if durable else "buffered"
        if srv.ready["criterion"] != expected:
            fail("%s: ready line says criterion=%s, expected %s"
                 % (what, srv.ready["criterion"], expected))
        if int(srv.ready["recovered"]) != size:
            fail("%s: ready line says recovered=%s, DBSIZE is %d"
                 % (what, srv.ready["recovered"], size))
        return size

    recovered = {}  # every key of the finished rounds -> its recovered value (None: absent)
    total_lost = 0
    try:
        server = h.PmdsServer(opts.server, pool, opts.structure, tmp)
        check_ready(server, "first start")
        # The rounds: SIGKILL, and last SIGTERM under the same load (a clean close that loses no
        # acknowledged write).
        for rnd in range(1, opts.rounds + 2):
            clean = rnd == opts.rounds + 1
            writers = []
            writers += [Writer(server.port, rnd, cid, rng.randrange(1 << 30), writers)
                        for cid in range(WRITERS)]
            for w in writers:
                w.start()
            # The random moment counts from when every connection has a write acknowledged (on
            # a loaded machine starting the threads and connecting can take a while).
            deadline = time.monotonic() + 10
            while (any(w.acked == 0 and w.is_alive() for w in writers)
                   and time.monotonic() < deadline):
                time.sleep(0.005)
            delay = rng.uniform(0.2, 1.5)
            time.sleep(delay)
            if not server.alive():
                fail("round %d: the server died before the kill\n%s" % (rnd, server.describe()))
                break
            if clean:
                rc = server.terminate()
                if rc != 0:
                    fail("SIGTERM under load: exit status %s, expected 0\n%s"
                         % (rc, server.describe()))
                rc, out = h.run_pmds_check(opts.pmds, pool)
                if rc != 0:
                    fail("pmds check %s after SIGTERM under load: exit %d\n%s" % (pool, rc, out))
            else:
                server.kill()
            for w in writers:
                w.join(30)
                if w.is_alive():
                    fail("round %d: connection %d still running 30 s after the kill" % (rnd, w.cid))
            for w in writers:
                for e in w.errors:
                    fail("round %d, connection %d: %s" % (rnd, w.cid, e))

            again = ""
            if rnd % 2 == 0 and not clean:
                # A second crash, during the recovery from the first (or just after it): recovery
                # must be redoable.
                early = h.Process([opts.server, "--pool", pool, "--structure", opts.structure,
                                   "--port", "0", "--bind", "127.0.0.1"], tmp, "pmds-server")
                delay2 = rng.uniform(0, 0.015)
                time.sleep(delay2)
                early.kill()
                again = "; killed again %.0f ms into the restart (%s)" % (
                    delay2 * 1000, "after its ready line" if early.wait_for_line(h.READY_RE, 0)
                    else "before its ready line")
            # The next round's server runs 1, 2 or 4 worker threads.
            threads = (1, 2, 4)[rnd % 3]
            server = h.PmdsServer(opts.server, pool, opts.structure, tmp,
                                  extra=["--threads", str(threads)])
            size = check_ready(server, "round %d restart" % rnd)
            if server.ready["threads"] != str(threads):
                fail("round %d restart with --threads %d: the ready line says threads=%s"
                     % (rnd, threads, server.ready["threads"]))
            r = redis.Redis(port=server.port, socket_timeout=15)
            if recovered:
                names = list(recovered)
                now = dict(zip(names, r.mget(names)))
                changed = [k for k in names if now[k] != recovered[k]]
                if changed:
                    fail("round %d: %d keys recovered in earlier rounds changed, e.g. %s: %s -> %s"
                         % (rnd, len(changed), changed[0], short(recovered[changed[0]]),
                            short(now[changed[0]])))
            lost = []
            for w in writers:
                observed = dict(zip(w.all_keys(), r.mget(w.all_keys())))
                recovered.update(observed)
                best = analyse(w, observed, lambda m: fail("round %d: %s" % (rnd, m)), clean,
                               durable)
                if best is not None:
                    lost.append(max(0, w.acked - best))
            r.close()
            total_lost += sum(lost)
            print("round %d: %s after %.2f s; acknowledged %s writes, WAITAOF-covered %s, "
                  "%d WAITAOFs; recovered %d keys in %s ms; acknowledged writes lost per "
                  "connection %s%s"
                  % (rnd, "SIGTERM" if clean else "killed", delay, [w.acked for w in writers],
                     [w.durable for w in writers], sum(w.waitaofs for w in writers), size,
                     server.ready["recovery_ms"], lost, again), flush=True)
            if sum(w.acked for w in writers) == 0:
                fail("round %d: no write was acknowledged in %.2f s" % (rnd, delay))

        rc = server.terminate()
        if rc != 0:
            fail("SIGTERM: exit status %s, expected 0\n%s" % (rc, server.describe()))
        rc, out = h.run_pmds_check(opts.pmds, pool)
        if rc != 0:
            fail("pmds check %s after a clean close: exit %d\n%s" % (pool, rc, out))
        # A clean close loses nothing: the same keys once more.
        server = h.PmdsServer(opts.server, pool, opts.structure, tmp)
        size = check_ready(server, "start after the clean close")
        r = redis.Redis(port=server.port, socket_timeout=15)
        names = list(recovered)
        now = dict(zip(names, r.mget(names))) if names else {}
        present = sum(1 for v in recovered.values() if v is not None)
        r.close()
        if now != recovered or size != present:
            fail("after a clean close and restart: DBSIZE %d (expected %d), %d keys differ"
                 % (size, present, sum(1 for k in names if now.get(k) != recovered[k])))
        rc = server.terminate()
        if rc != 0:
            fail("SIGTERM: exit status %s, expected 0\n%s" % (rc, server.describe()))
        server = None
    except h.ServerFailure as e:
        fail(str(e))
    finally:
        tail = server.describe() if server else ""
        if server:
            server.stop_quietly()
        h.remove_tmpdir(tmp)

    print("kill_test: %s, %d rounds, %d acknowledged writes lost after the last WAITAOF in all, "
          "%.1f s, seed %d"
          % (opts.structure, opts.rounds, total_lost, time.monotonic() - t0, seed))
    return h.report_failures(failures, tail)


if __name__ == "__main__":
    sys.exit(main())
