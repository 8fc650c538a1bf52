#!/usr/bin/env python3
"""One request of N hosts through `spindle server` (issue #51, point 4).

Usage: cargo build --release -p spindle && python3 crates/spindle/benches/scripts/big_request.py N

Starts `spindle server` (SQLite, in a temporary directory), POSTs one request whose
`each:` job node runs a `noop` per host, polls it until it ends, then times
GET /api/v1/requests/{id} three times and GET .../elements?state=failed once, and
prints the server's peak resident memory. Standard library only.
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

SPECS = """sequences:
  big:
    request: true
    args:
      required:
        - name: hosts
    nodes:
      each-host:
        category: job
        type: noop
        each: [hosts:host]
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    binary = os.path.join(os.path.dirname(__file__), "../../../../target/release/spindle")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as work:
        os.mkdir(os.path.join(work, "specs"))
        with open(os.path.join(work, "specs", "big.yaml"), "w") as f:
            f.write(SPECS)
        server = subprocess.Popen(
            [os.path.abspath(binary), "server", "--listen", f"127.0.0.1:{port}",
             "--specs", "specs", "--database", "sqlite://big.db"],
            cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    urllib.request.urlopen(base + "/readyz")
                    break
                except OSError:
                    time.sleep(0.05)
            body = json.dumps({"type": "big", "args": {
                "hosts": [f"web-{i:06d}" for i in range(n)]}}).encode()
            started = time.time()
            request = urllib.request.Request(base + "/api/v1/requests", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            rid = json.loads(urllib.request.urlopen(request).read())["id"]
            posted = time.time() - started
            while json.loads(urllib.request.urlopen(f"{base}/api/v1/requests/{rid}").read())["state"] not in (3, 4):
                time.sleep(0.05)
            ended = time.time() - started
            gets = []
            for _ in range(3):
                t = time.time()
                urllib.request.urlopen(f"{base}/api/v1/requests/{rid}").read()
                gets.append((time.time() - t) * 1000)
            t = time.time()
            urllib.request.urlopen(f"{base}/api/v1/requests/{rid}/elements?state=failed").read()
            failed = (time.time() - t) * 1000
            with open(f"/proc/{server.pid}/status") as f:
                peak = next(line.split()[1] for line in f if line.startswith("VmHWM"))
            print(f"| {n} | {posted:.2f} s | {ended:.2f} s | "
                  f"{min(gets):.1f}-{max(gets):.1f} ms | {failed:.0f} ms | {int(peak) / 1024:.0f} MiB |")
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()


if __name__ == "__main__":
    main()
