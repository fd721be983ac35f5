"""Start-up time of the gpuopt CLI against a bare click program with as many commands (issue 11, item 8).

    python benchmarks/startup.py [--runs 15]

Each figure is the median wall time of N fresh processes (python -c / the installed entry point). The bare
program defines the same number of subcommands as gpuopt's COMMANDS table, each an empty click command with
a docstring, so the difference is what gpuopt itself loads. Target: `gpuopt --help` within 2x the bare one.
Also prints which third-party packages `gpuopt solve` imports, to show it loads only what it uses.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuopt.cli.main import COMMANDS  # noqa: E402

EXAMPLE = ROOT / "examples" / "cn-chat-70b.yaml"


def bare_program(commands: int) -> str:
    lines = ["import click", "", "@click.group()", "def cli():", '    """A bare click program."""', ""]
    for i in range(commands):
        lines += [f"@cli.command('command{i}')", f"def command{i}():", f'    """Command {i} does nothing."""', ""]
    lines += ["cli()", ""]
    return "\n".join(lines)


def median_seconds(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def third_party_imports(args: list[str]) -> list[str]:
    code = ("import sys, json\nfrom gpuopt.cli.main import cli\ntry:\n    cli(" + json.dumps(args) + ")\n"
            "except SystemExit:\n    pass\n"
            "std = set(sys.stdlib_module_names)\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} - std - {'gpuopt', '__main__'})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return [m for m in found if not m.startswith("_")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    gpuopt = str(Path(sys.executable).with_name("gpuopt"))
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.py"
        bare.write_text(bare_program(len(COMMANDS)), encoding="utf-8")
        rows = [
            (f"bare click, {len(COMMANDS)} commands: --help", [sys.executable, str(bare), "--help"]),
            ("python -c pass (interpreter alone)", [sys.executable, "-c", "pass"]),
            ("gpuopt --help", [gpuopt, "--help"]),
            ("gpuopt --version", [gpuopt, "--version"]),
            ("gpuopt solve --help", [gpuopt, "solve", "--help"]),
            ("gpuopt fit --help", [gpuopt, "fit", "--help"]),
            ("gpuopt solve examples/cn-chat-70b.yaml --region cn", [gpuopt, "solve", str(EXAMPLE), "--region", "cn"]),
        ]
        print(f"median of {args.runs} fresh processes")
        results = {}
        for name, argv in rows:
            results[name] = median_seconds(argv, args.runs)
            print(f"  {name:<52} {results[name] * 1000:8.0f} ms", flush=True)
    baseline = results[rows[0][0]]
    ratio = results["gpuopt --help"] / baseline
    print(f"gpuopt --help / bare click --help: {ratio:.2f}x (target <= 2x)")
    print("third-party packages imported by `gpuopt --help`:", ", ".join(third_party_imports(["--help"])) or "-")
    print("third-party packages imported by `gpuopt solve`:",
          ", ".join(third_party_imports(["solve", str(EXAMPLE), "--region", "cn"])))


if __name__ == "__main__":
    main()
