"""Tries every way out of run_main's sandbox and reports each as JSON.

The test that runs it writes targets.json beside it: the server's pid,
files and directories outside the workspace, the server's TCP port and a
marker for the sleeping child. Each attempt reports "blocked: <reason>"
or "ESCAPED".
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

targets = json.load(open("targets.json"))
report = {}


def attempt(name, fn):
    try:
        fn()
        report[name] = "ESCAPED"
    except BaseException as e:  # MemoryError, OSError, ...
        report[name] = "blocked: " + type(e).__name__


def read(path):
    with open(path, "rb") as f:
        f.read(1)


attempt("proc_environ", lambda: read("/proc/%d/environ" % targets["pid"]))
attempt("proc_cmdline", lambda: read("/proc/%d/cmdline" % targets["pid"]))
for i, path in enumerate(targets["secrets"]):
    attempt("secret_%d" % i, lambda p=path: read(p))
for i, path in enumerate(targets["dirs"]):
    attempt("list_%d" % i, lambda p=path: os.listdir(p))


def connect():
    s = socket.create_connection(("127.0.0.1", targets["port"]), timeout=2)
    s.close()


attempt("tcp_connect", connect)


def bind():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    s.close()


attempt("tcp_bind", bind)
attempt("memory", lambda: bytearray(1100 << 20))


def big_file():
    with open("big.bin", "wb") as f:
        chunk = b"x" * (1 << 20)
        for _ in range(65):
            f.write(chunk)
            f.flush()


attempt("file_size", big_file)
try:
    os.remove("big.bin")
except OSError:
    pass


def many_files():
    held = []
    try:
        for _ in range(300):
            held.append(open("/dev/null"))
    finally:
        for f in held:
            f.close()


attempt("open_files", many_files)


def many_processes():
    pids = []
    try:
        for _ in range(400):
            # posix_spawn (vfork) keeps the attempt cheap on a busy machine.
            pids.append(os.posix_spawn("/bin/sleep", ["sleep", "300"], {}))
    finally:
        for pid in pids:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


attempt("processes", many_processes)

# A child in a session of its own, which must not outlive the run.
subprocess.Popen(["sleep", targets["marker"]], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

# What must keep working: a file in the workspace, TMPDIR, imports.
with open("written.txt", "w") as f:
    f.write("ok")
with tempfile.NamedTemporaryFile(dir=None) as f:
    report["tmpdir"] = os.path.dirname(f.name)
import hashlib, sqlite3, ssl, decimal  # noqa: E401,F401
report["imports"] = "ok"
report["env"] = sorted(os.environ)
json.dump(report, sys.stdout)
