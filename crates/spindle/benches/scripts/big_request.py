#!/usr/bin/env python3
"""One request of N hosts through `spindle server` (issue #51, point 4).

Usage: cargo build --release -p spindle && python3 crates/spindle/benches/scripts/big_request.py N [rm-jr]

Starts `spindle server` (SQLite, in a temporary directory), or with `rm-jr` a `spindle
rm` and a `spindle jr` on a fresh database of the PostgreSQL server at
SPINDLE_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test; made and
dropped with `psql`), POSTs one request whose `each:` job node runs a `noop` per host,
waits for its end (`?wait=`), then times GET /api/v1/requests/{id} three times and
GET .../elements?state=failed once, the web UI's page of it and `spindle status`, and
prints each process's peak resident memory.
SPINDLE_BENCH_WRAPPER is a command to start the server or manager under (a profiler: `heaptrack -o FILE`).
It prints each process's user and system CPU and minor page faults from the POST to
the end; under `valgrind --tool=cachegrind` as the wrapper, the instructions it ran
(with SPINDLE_BENCH_RUN_ONLY=1 it stops at the end, before the reads).
With SPINDLE_BENCH_METRICS=1 it also prints, from the manager's /metrics, the store's
time by operation (where the run's time went). Standard library only.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# One `noop` per host (the grapher bench's spec too).
with open(os.path.join(os.path.dirname(__file__), "../../../../fixtures/specs/big.yaml")) as spec:
    SPECS = spec.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(base):
    while True:
        try:
            urllib.request.urlopen(base + "/readyz")
            return
        except OSError:
            time.sleep(0.05)


def cpu_used(pid):
    """A process's user and system CPU seconds and minor page faults so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick, int(fields[7])


def peak_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("VmHWM"))) / 1024


def store_time(base):
    """The store's operations by their summed time, from the manager's /metrics."""
    sums, counts = {}, {}
    for line in urllib.request.urlopen(base + "/metrics").read().decode().splitlines():
        for suffix, into in (("_sum{", sums), ("_count{", counts)):
            if line.startswith("spindle_store_query_duration_seconds" + suffix):
                labels, value = line.rsplit(" ", 1)
                operation = labels.split('operation="', 1)[1].split('"', 1)[0]
                into[operation] = into.get(operation, 0) + float(value)
    for operation, total in sorted(sums.items(), key=lambda item: -item[1])[:8]:
        print(f"  store {operation}: {total:.3f} s in {counts.get(operation, 0):.0f} calls")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rm_jr = len(sys.argv) > 2 and sys.argv[2] == "rm-jr"
    binary = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../../target/release/spindle"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    admin = os.environ.get("SPINDLE_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
    database = f"spindle_big_{os.getpid()}"
    processes = []
    # A profiler to start the server or manager under, such as `heaptrack -o /tmp/rm`.
    wrapper = os.environ.get("SPINDLE_BENCH_WRAPPER", "").split()
    with tempfile.TemporaryDirectory() as work:
        os.mkdir(os.path.join(work, "specs"))
        with open(os.path.join(work, "specs", "big.yaml"), "w") as f:
            f.write(SPECS)
        quiet = {"cwd": work, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        if rm_jr:
            subprocess.run(["psql", admin, "-qc", f'CREATE DATABASE "{database}"'], check=True)
            url = admin.rsplit("/", 1)[0] + "/" + database
            processes.append(subprocess.Popen(
                wrapper + [binary, "rm", "--listen", f"127.0.0.1:{port}", "--specs", "specs",
                 "--database", url], **quiet))
            jr_port = free_port()
            processes.append(subprocess.Popen(
                [binary, "jr", "--listen", f"127.0.0.1:{jr_port}", "--rm-url", base], **quiet))
            wait_ready(f"http://127.0.0.1:{jr_port}")
        else:
            processes.append(subprocess.Popen(
                wrapper + [binary, "server", "--listen", f"127.0.0.1:{port}",
                 "--specs", "specs", "--database", "sqlite://big.db"], **quiet))
        try:
            wait_ready(base)
            # The runner registered before the request goes out.
            while rm_jr and not json.loads(urllib.request.urlopen(base + "/api/v1/job-runners").read()):
                time.sleep(0.05)
            body = json.dumps({"type": "big", "args": {
                "hosts": [f"web-{i:06d}" for i in range(n)]}}).encode()
            cpu_before = [cpu_used(p.pid) for p in processes]
            started = time.time()
            request = urllib.request.Request(base + "/api/v1/requests", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            rid = json.loads(urllib.request.urlopen(request).read())["id"]
            posted = time.time() - started
            # Answered once the request has ended (a minute at most, then asked again):
            # its end to the millisecond, not to a poll's interval.
            while json.loads(urllib.request.urlopen(
                    f"{base}/api/v1/requests/{rid}?wait=60s").read())["state"] not in (3, 4):
                pass
            ended = time.time() - started
            # What each process spent from the POST to the end: user and system CPU
            # (page faults are system time) and its minor page faults.
            print("  cpu, POST to end: " + "; ".join(
                "user {:.2f} s, system {:.2f} s, {} minor faults".format(
                    *(after - before for before, after in zip(cpu_before[i], cpu_used(p.pid))))
                for i, p in enumerate(processes)))
            if os.environ.get("SPINDLE_BENCH_RUN_ONLY"):
                print(f"| {n} | POST {posted:.2f} s | end {ended:.2f} s |")
                return
            gets = []
            for _ in range(3):
                t = time.time()
                urllib.request.urlopen(f"{base}/api/v1/requests/{rid}").read()
                gets.append((time.time() - t) * 1000)
            t = time.time()
            urllib.request.urlopen(f"{base}/api/v1/requests/{rid}/elements?state=failed").read()
            failed = (time.time() - t) * 1000
            # The web UI's page of the request: its HTML, its drawing, and two polls of
            # its job states (what the open page asks every few seconds).
            before_ui = " / ".join(f"{peak_mib(p.pid):.0f}" for p in processes)
            ui = []
            for path in (f"/requests/{rid}", f"/ui/api/requests/{rid}/graph",
                         f"/ui/api/requests/{rid}/states", f"/ui/api/requests/{rid}/states?args=0"):
                t = time.time()
                size = len(urllib.request.urlopen(base + path).read())
                ui.append(f"{'states again' if 'args=0' in path else path.split('/')[-1] if 'api' in path else 'page'} "
                          f"{(time.time() - t) * 1000:.0f} ms ({size / 1e6:.1f} MB)")
            # `spindle status` of it, as an operator would ask.
            t = time.time()
            subprocess.run([binary, "status", rid, "--addr", base], check=True,
                           stdout=subprocess.DEVNULL)
            ui.append(f"`spindle status` {(time.time() - t) * 1000:.0f} ms")
            print("  web UI: " + ", ".join(ui) + f"; peak before the page {before_ui} MiB")
            if os.environ.get("SPINDLE_BENCH_METRICS"):
                store_time(base)
            peaks = " / ".join(f"{peak_mib(p.pid):.0f} MiB" for p in processes)
            print(f"| {n} | {'rm + jr, PostgreSQL' if rm_jr else 'server, SQLite'} | {posted:.2f} s | "
                  f"{ended:.2f} s | {min(gets):.1f}-{max(gets):.1f} ms | {failed:.0f} ms | {peaks} |")
        finally:
            for process in reversed(processes):
                process.send_signal(signal.SIGTERM)
                process.wait()
            if rm_jr:
                subprocess.run(["psql", admin, "-qc", f'DROP DATABASE "{database}" WITH (FORCE)'])


if __name__ == "__main__":
    main()
