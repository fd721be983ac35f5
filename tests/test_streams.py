"""Results on stdout, nothing else: each format with each installed solver, through real file descriptors
(HiGHS writes its banner from C++ to descriptor 1, which CliRunner would not see)."""

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pulp
import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"
SOLVERS = ["cbc"] + (["highs"] if "HiGHS" in pulp.listSolvers(onlyAvailable=True) else [])
FIRST = {"table": "Plan: ", "markdown": "# gpuopt plan\n", "html": "<!DOCTYPE html>\n"}


def gpuopt(solver: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUOPT_SOLVER": solver, "GPUOPT_TODAY": "2026-11-29", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "gpuopt", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def assert_only_the_result(fmt: str, stdout: str) -> None:
    assert "Running HiGHS" not in stdout and "Copyright" not in stdout and "Welcome to the CBC" not in stdout
    if fmt == "json":
        json.loads(stdout)
    elif fmt in ("csv", "focus"):
        rows = list(csv.reader(io.StringIO(stdout)))
        assert len({len(r) for r in rows}) == 1 and len(rows) > 1
    else:
        assert stdout.startswith(FIRST.get(fmt, "")), stdout[:200]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "html", "csv", "focus"])
def test_solve_writes_only_its_result_on_stdout(solver, fmt):
    result = gpuopt(solver, "solve", str(EXAMPLES / "two-models.yaml"), "--format", fmt)
    assert result.returncode == 0, result.stderr
    assert_only_the_result(fmt, result.stdout)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("fmt", ["json", "csv", "focus"])
def test_plan_writes_only_its_result_on_stdout(solver, fmt):
    result = gpuopt(solver, "plan", str(EXAMPLES / "capacity-cn.yaml"), "--format", fmt)
    assert result.returncode == 0, result.stderr
    assert_only_the_result(fmt, result.stdout)


def test_the_guard_sends_descriptor_1_to_stderr():
    code = ("import os; from gpuopt.cli.streams import stdout_to_stderr\n"
            "with stdout_to_stderr():\n    os.write(1, b'noise\\n'); print('more noise')\nprint('result')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout == "result\n"
    assert result.stderr == "noise\nmore noise\n"
