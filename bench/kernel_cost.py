"""What one student's kernel and server cost: memory and CPU seconds to start them.

Starts N kernels at once (1 by default) from this environment, as JupyterLab starts them, and in
each runs what the first cell of a lecture runs: ``import torch``, the course's helpers and a first
tensor operation.  Prints, per kernel, the wall time until the imports were done, the CPU seconds
the kernel process spent (user + system), its resident memory (RSS), its own memory (USS) and its
proportional share (PSS: shared libraries divided among the processes that map them), read with
psutil.  ``--server`` also starts a JupyterLab server (nbgrader's extensions loaded, as on the hub)
and reads the same figures once it answers.  The capacity table of docs/jupyterhub.md comes from
this script:

    .venv/bin/python bench/kernel_cost.py --kernels 1 --server
    .venv/bin/python bench/kernel_cost.py --kernels 4 --json kernels.json
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import psutil
from jupyter_client.manager import KernelManager

FIRST_CELL = ("import torch\n"
              "from autograder.kernel import checks, diagrams\n"
              "x = torch.arange(6.0).view(2, 3)\n"
              "y = (x.t() * 2).sum()\n")
MIB = 2 ** 20


def measure_one(timeout: float) -> dict:
    """Start a kernel, run the first cell, read its process; then shut it down."""
    started = time.perf_counter()
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=timeout)
        ready = time.perf_counter() - started
        reply = client.execute_interactive(FIRST_CELL, timeout=timeout, output_hook=lambda msg: None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the first cell failed: {reply['content'].get('ename')}")
        done = time.perf_counter() - started
        return {"ready_s": ready, "imports_done_s": done, **_figures(psutil.Process(km.provisioner.pid))}
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def _figures(proc: psutil.Process) -> dict:
    cpu = proc.cpu_times()
    mem = proc.memory_full_info()
    return {"cpu_s": cpu.user + cpu.system, "rss_mib": mem.rss / MIB, "uss_mib": mem.uss / MIB,
            "pss_mib": getattr(mem, "pss", mem.uss) / MIB}


def measure_server(timeout: float) -> dict:
    """Start ``jupyter lab`` (no browser, a free port, a scratch folder), wait until its API
    answers, read its process; then stop it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "kernel-cost"
    with tempfile.TemporaryDirectory(prefix="copy-that-server-cost-") as root:
        argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip", "127.0.0.1", "--port", str(port),
                f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}"]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        started = time.perf_counter()
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                if server.poll() is not None or time.perf_counter() - started > timeout:
                    raise RuntimeError("jupyter lab did not answer")
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.5)
            return {"ready_s": time.perf_counter() - started, **_figures(psutil.Process(server.pid))}
        finally:
            server.terminate()
            server.wait(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1, help="kernels started at once")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--server", action="store_true", help="also measure a JupyterLab server's start")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    result: dict = {"cores": psutil.cpu_count(), "kernels": args.kernels}

    with ThreadPoolExecutor(args.kernels) as pool:
        rows = list(pool.map(lambda _: measure_one(args.timeout), range(args.kernels)))
    keys = ("ready_s", "imports_done_s", "cpu_s", "rss_mib", "uss_mib", "pss_mib")
    summary = {k: statistics.median(r[k] for r in rows) for k in keys}
    print(f"{args.kernels} kernel(s) started at once on {psutil.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}; median per kernel:")
    print(f"  ready after {summary['ready_s']:.1f} s, first cell (import torch, helpers) done after "
          f"{summary['imports_done_s']:.1f} s, {summary['cpu_s']:.1f} CPU seconds")
    print(f"  memory: RSS {summary['rss_mib']:.0f} MiB, own (USS) {summary['uss_mib']:.0f} MiB, "
          f"proportional (PSS) {summary['pss_mib']:.0f} MiB")
    result.update(median=summary, each=rows)
    if args.server:
        server = measure_server(args.timeout)
        print(f"JupyterLab server: answered after {server['ready_s']:.1f} s, {server['cpu_s']:.1f} CPU seconds; "
              f"RSS {server['rss_mib']:.0f} MiB, USS {server['uss_mib']:.0f} MiB, PSS {server['pss_mib']:.0f} MiB")
        result["server"] = server
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
