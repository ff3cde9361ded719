"""Shared helpers for the pmds-server end-to-end tests (test/server/*.py).

Starts and stops pmds-server and redis-server (so that every expectation can first be checked
against the real Redis), finds free ports, keeps private temporary directories under /dev/shm,
and speaks raw RESP for the checks that a client library would hide (exact error texts, inline
commands, malformed requests, closed connections).

Every server started here dies with the test: children get PR_SET_PDEATHSIG=SIGKILL (so a test
killed by CTest's timeout leaves nothing behind) and an atexit hook kills any still running.
"""

import argparse
import atexit
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77  # CTest SKIP_RETURN_CODE: a tool the test needs is not installed

READY_TIMEOUT_S = 30


# ---- skipping ----------------------------------------------------------------------------------

def require(programs=(), python_redis=False):
    """Exit with 77 (CTest skips the test) if a needed program or the redis module is missing."""
    missing = [p for p in programs if shutil.which(p) is None and not os.access(p, os.X_OK)]
    if python_redis:
        try:
            import redis  # noqa: F401
        except ImportError:
            missing.append("python module 'redis' (python3-redis) for " + sys.executable)
    if missing:
        print("SKIP: missing " + ", ".join(missing), flush=True)
        sys.exit(SKIP)


def nutcracker_path():
    """nutcracker lives in /usr/sbin, which is not on every PATH."""
    return shutil.which("nutcracker") or ("/usr/sbin/nutcracker"
                                          if os.access("/usr/sbin/nutcracker", os.X_OK) else None)


# ---- command lines -----------------------------------------------------------------------------

def pmds_or_redis_parser(doc, *positionals):
    """The command line of a test that runs against pmds-server, given by POSITIONALS (e.g.
    "server", "structure"), or with --redis against redis-server (which validates the test):
    so argparse leaves the positionals optional, and the test requires them without --redis."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in positionals:
        ap.add_argument(name, nargs="?")
    ap.add_argument("--redis", action="store_true")
    return ap


# ---- ports and directories ---------------------------------------------------------------------

def free_port():
    """A port nobody listens on now (the OS picks it). Another process could take it before we
    use it; only redis-server and nutcracker need this, pmds-server is started with --port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_tmpdir(tag):
    """A private directory under /dev/shm (tmpfs: pools there cost no disk I/O)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    return tempfile.mkdtemp(prefix="pmds-server-%s-" % tag, dir=base)


def remove_tmpdir(path):
    shutil.rmtree(path, ignore_errors=True)


# ---- processes ---------------------------------------------------------------------------------

_live = set()  # every child started here and not yet reaped
_live_lock = threading.Lock()


def _die_with_parent():
    # PR_SET_PDEATHSIG (1): the kernel SIGKILLs the child when the thread that started it dies.
    # Servers are started from the main thread, which lives as long as the test.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


def _kill_leftovers():
    with _live_lock:
        procs = list(_live)
    for p in procs:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass


atexit.register(_kill_leftovers)


def _sigterm_to_exit(signum, frame):
    # CTest (or a user) stopping the test: unwind so that finally blocks remove temp dirs.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _sigterm_to_exit)


class ServerFailure(AssertionError):
    pass


class Process:
    """A child process whose stderr goes to a file (readable after it died) and whose stdout
    lines are collected by a thread (so a chatty child never blocks on a full pipe)."""

    def __init__(self, argv, workdir, name):
        self.argv = [str(a) for a in argv]
        self.name = name
        self.stderr_path = os.path.join(workdir, "%s.%d.stderr" % (name, time.monotonic_ns()))
        self.stdout_lines = []
        self._cond = threading.Condition()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=err,
                                         preexec_fn=_die_with_parent)
        with _live_lock:
            _live.add(self.proc)
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    def _read_stdout(self):
        for raw in self.proc.stdout:
            with self._cond:
                self.stdout_lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for_line(self, regex, timeout):
        """The first stdout line matching regex (a match object), or None after timeout or when
        the process closed its stdout (exited) without printing one."""
        deadline = time.monotonic() + timeout
        pattern = re.compile(regex)
        seen = 0
        with self._cond:
            while True:
                while seen < len(self.stdout_lines):
                    m = pattern.match(self.stdout_lines[seen])
                    seen += 1
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or (not self._reader.is_alive() and seen == len(self.stdout_lines)):
                    return None
                self._cond.wait(min(left, 0.2))

    def alive(self):
        return self.proc.poll() is None

    def stderr_tail(self, limit=3000):
        try:
            with open(self.stderr_path, "rb") as f:
                data = f.read()
        except OSError:
            return "(no stderr file)"
        text = data[-limit:].decode("utf-8", "replace")
        return text if text.strip() else "(stderr empty)"

    def describe(self):
        state = "running" if self.alive() else "exited with %s" % self.proc.returncode
        return "%s (%s)\n  command: %s\n  stdout: %s\n  stderr tail:\n%s" % (
            self.name, state, " ".join(self.argv), self.stdout_lines[-5:],
            "\n".join("    " + line for line in self.stderr_tail().splitlines()))

    def _reap(self):
        with _live_lock:
            _live.discard(self.proc)

    def terminate(self, timeout=30, sig=signal.SIGTERM):
        """SIGTERM (or sig) and wait; the exit status (a signal number as a negative status).
        Kills it and fails if it does not exit within timeout."""
        if self.alive():
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._reap()
            raise ServerFailure("%s did not exit within %d s of %s\n%s"
                                % (self.name, timeout, signal.Signals(sig).name, self.describe()))
        self._reap()
        self._reader.join(5)
        return rc

    def kill(self):
        """SIGKILL and wait (the crash the kill test simulates)."""
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        self._reap()
        self._reader.join(5)

    def stop_quietly(self):
        """Cleanup path: end it whatever its state, never raise."""
        try:
            if self.alive():
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self._reap()


READY_RE = (r"^pmds-server ready address=(?P<host>[0-9.]+):(?P<port>\d+)"
            r" structure=(?P<structure>\S+) criterion=(?P<criterion>buffered|durable)"
            r" recovered=(?P<recovered>\d+) recovery_ms=(?P<recovery_ms>[0-9.]+)"
            r" threads=(?P<threads>\d+)$")


class PmdsServer(Process):
    """pmds-server on a pool, started with --port 0; .port and .ready (the ready line's fields)
    once start() returned."""

    kind = "pmds"

    def __init__(self, binary, pool, structure, workdir, extra=()):
        argv = [binary, "--pool", pool, "--structure", structure, "--port", "0",
                "--bind", "127.0.0.1"] + list(extra)
        super().__init__(argv, workdir, "pmds-server")
        self.pool = pool
        self.structure = structure
        m = self.wait_for_line(READY_RE, READY_TIMEOUT_S)
        if m is None:
            why = ("exited" if not self.alive()
                   else "printed no ready line within %d s" % READY_TIMEOUT_S)
            self.stop_quietly()
            raise ServerFailure("pmds-server %s (expected a line matching %s)\n%s"
                                % (why, READY_RE, self.describe()))
        self.ready = m.groupdict()
        self.port = int(self.ready["port"])
        if self.ready["structure"] != structure or self.ready["host"] != "127.0.0.1":
            self.stop_quietly()
            raise ServerFailure("ready line names structure %s and address %s, expected %s and "
                                "127.0.0.1\n%s" % (self.ready["structure"], self.ready["host"],
                                                   structure, self.describe()))


class RedisServer(Process):
    """redis-server on a free port, no RDB snapshots; appendonly only when asked (the restart
    checks need it: without it Redis keeps nothing across a restart)."""

    kind = "redis"

    def __init__(self, workdir, extra=(), appendonly=False, port=None):
        self.port = port or free_port()
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "yes" if appendonly else "no", "--dir", workdir] + list(extra)
        super().__init__(argv, workdir, "redis-server")
        self.ready = {"recovered": None}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(100)
                    if reply.startswith((b"+PONG", b"-NOAUTH")):  # not -LOADING: still loading
                        return
            except OSError:
                pass
            if not self.alive() or time.monotonic() > deadline:
                self.stop_quietly()
                raise ServerFailure("redis-server did not start\n%s" % self.describe())
            time.sleep(0.05)


def run_pmds_check(pmds_bin, pool, timeout=120):
    """`pmds check POOL`: (exit status, output)."""
    r = subprocess.run([pmds_bin, "check", pool], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    return r.returncode, r.stdout.decode("utf-8", "replace")


# ---- raw RESP ----------------------------------------------------------------------------------

class ErrorReply:
    """A RESP error reply, e.g. ErrorReply('ERR syntax error')."""

    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, ErrorReply) and other.text == self.text

    def __repr__(self):
        return "-" + self.text


class ConnectionClosed(Exception):
    pass


def encode(*args):
    """A command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a)
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RawConn:
    """A plain socket speaking RESP2: replies as bytes, int, None, list or ErrorReply."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def cmd(self, *args):
        self.send(encode(*args))
        return self.read_reply()

    def _fill(self):
        try:
            chunk = self.sock.recv(1 << 16)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise ConnectionClosed("the server closed the connection")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            return ErrorReply(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self._exact(n + 2)
            if data[-2:] != b"\r\n":
                raise ValueError("bulk string not followed by CRLF: %r" % data[-10:])
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read_reply() for _ in range(n)]
        raise ValueError("not a RESP2 reply: %r" % line[:200])

    def closed_by_server(self, timeout=3.0):
        """True if the server closes the connection (EOF or reset) within timeout, once every
        byte it sent before is consumed; False if it stays open."""
        self.sock.settimeout(timeout)
        self.buf = b""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                chunk = self.sock.recv(4096)
                if not chunk:
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        return False


def wait_port_open(port, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def report_failures(failures, server_tail="", limit=None):
    """Prints the failures (the first `limit`) and the server's stderr tail; the exit status."""
    if not failures:
        return 0
    print("\nFAILURES (%d):" % len(failures))
    for f in failures[:limit]:
        print(" * " + f.replace("\n", "\n   "))
    if server_tail:
        print("\nserver: " + server_tail)
    return 1
