"""How long `gpuopt catalog list` takes on the shipped catalog (target: <= 1 s), in a fresh process each time.

Prints the median wall time and the median CPU time (user + sys of the child) of N runs, the time the listing
itself takes inside one process (catalog load + render, no interpreter start-up or imports), and how long a
replayed refresh takes. The CPU figure is the one to compare across machines: on a shared machine the wall time
also counts waiting for a core.

    python benchmarks/catalog_speed.py [--runs 7]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, cpu seconds) of one `python -m gpuopt ARGS` run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpuopt", *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def in_process(args: list[str]) -> float:
    from click.testing import CliRunner

    from gpuopt.cli.main import cli

    runner = CliRunner()
    runner.invoke(cli, args)  # warm: imports, the GPU and region tables
    start = time.perf_counter()
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "GPUOPT_CACHE_DIR": cache}
        os.environ["GPUOPT_CACHE_DIR"] = cache
        for label, args in (("catalog list (table)", ["catalog", "list"]),
                            ("catalog list --format json", ["catalog", "list", "--format", "json"]),
                            ("--version (interpreter + imports only)", ["--version"]),
                            ("catalog refresh runpod --file (replay)",
                             ["catalog", "refresh", "runpod", "--file", "tests/fixtures/runpod_gpu_types.json",
                              "--as-of", "2025-10-10"])):
            samples = [child(args, env) for _ in range(runs)]
            wall = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            print(f"{label:45s} median of {runs}: wall {wall:.2f} s, cpu {cpu:.2f} s")
        print(f"{'catalog list, inside one warm process':45s} {in_process(['catalog', 'list']):.3f} s")


if __name__ == "__main__":
    main()
