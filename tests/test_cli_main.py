"""The `gpuopt` group: lazy subcommands, one-line endings (exit 2 for usage, 70 for bugs), each message once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gpuopt.cli.main import COMMANDS, REPORT_HINT, CommandEntry, cli

EXAMPLES = Path(__file__).parent.parent / "examples"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@click.command("boom")
def boom() -> None:
    """Fails like a bug would."""
    raise ZeroDivisionError("division by zero\nsecond line")


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, prog_name="gpuopt")


def test_every_table_entry_names_a_click_command_of_that_name():
    import importlib

    for name, entry in COMMANDS.items():
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert isinstance(command, click.Command) and command.name == name, name
        assert entry.short_help and len(entry.short_help) <= 60, name


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_help_lists_every_command_without_importing_one():
    loaded = _modules_after("from gpuopt.cli.main import cli\ntry:\n    cli(['--help'])\nexcept SystemExit:\n    pass")
    assert not {m for m in loaded if m.startswith("gpuopt.") and m not in
                ("gpuopt.cli", "gpuopt.cli.main", "gpuopt.cli.terminal", "gpuopt.errors", "gpuopt.vocabulary",
                 "gpuopt.text")}
    assert not {"pandas", "pulp", "pydantic", "matplotlib", "rich", "yaml"} & loaded
    result = run("--help")
    for name, entry in COMMANDS.items():
        assert f"  {name}" in result.stdout and entry.short_help in result.stdout


def test_solve_imports_only_what_it_uses():
    loaded = _modules_after("from gpuopt.cli.main import cli\ntry:\n"
                            f"    cli(['solve', {str(EXAMPLES / 'cn-chat-70b.yaml')!r}, '--region', 'cn'])\n"
                            "except SystemExit:\n    pass")
    assert "gpuopt.cli.solve" in loaded and "pulp" in loaded
    unused = {"pandas", "matplotlib", "markdown", "boto3", "gpuopt.cli.fit", "gpuopt.cli.models", "gpuopt.cli.plan",
              "gpuopt.planner.sensitivity", "gpuopt.planner.capacity", "gpuopt.reports.html"}
    assert not unused & loaded


def test_a_new_command_is_one_table_entry(monkeypatch):
    monkeypatch.setitem(COMMANDS, "boom", CommandEntry("tests.test_cli_main", "boom", "Fails like a bug would."))
    assert re.search(r"\n  boom +Fails like a bug would\.\n", run("--help").stdout)


def test_internal_error_is_one_line_exit_70(monkeypatch):
    monkeypatch.setitem(COMMANDS, "boom", CommandEntry("tests.test_cli_main", "boom", "Fails."))
    result = run("boom")
    assert result.exit_code == 70 and result.stdout == ""
    assert result.stderr == f"error: internal error (ZeroDivisionError: division by zero); {REPORT_HINT}\n"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback(monkeypatch, how):
    monkeypatch.setitem(COMMANDS, "boom", CommandEntry("tests.test_cli_main", "boom", "Fails."))
    if how == "env":
        monkeypatch.setenv("GPUOPT_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run(*(["--debug"] if how == "flag" else []), "boom")


@pytest.mark.parametrize(("value", "shown"), [("on", True), ("yes", True), ("off", False), ("n", False),
                                              ("maybe", False), ("2", False)])
def test_gpuopt_debug_is_read_one_way(monkeypatch, value, shown):
    """QA: `off` and `n` showed the traceback (exit 1), while click's own reading of the variable refused `maybe`
    and `2` for every command, `models list` included, as a bad --debug."""
    monkeypatch.setitem(COMMANDS, "boom", CommandEntry("tests.test_cli_main", "boom", "Fails."))
    monkeypatch.setenv("GPUOPT_DEBUG", value)
    if shown:
        with pytest.raises(ZeroDivisionError):
            run("boom")
    else:
        assert run("boom").exit_code == 70
    assert run("models", "list", "--json").exit_code == 0


def test_usage_error_is_one_line():
    result = run("fit", "--tp", "x", "--gpu", "H100-SXM-80GB")
    assert (result.exit_code, result.stderr) == (
        2, "error: Invalid value for '--tp': 'x' is not a valid integer. (see 'gpuopt fit --help')\n")
    # click lists choices one per line; the error line joins them (it printed "Choose from:\x0a\x09k8s,...")
    missing = run("deploy", "plan.json", "--force")
    assert missing.stderr.startswith("error: Missing option '--target'. Choose from: k8s, skypilot, pai-eas, compose")


def test_catalog_note_is_printed_once(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUOPT_TODAY", "2026-11-29")
    monkeypatch.setenv("GPUOPT_CACHE_DIR", str(tmp_path / "cache"))
    result = run("solve", EXAMPLES / "cn-chat-70b.yaml", "--region", "cn", "--discount", "alibaba=0.1")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("alibaba prices carry a 10.0% discount") == 1
    assert "note: alibaba prices carry a 10.0% discount" in result.stderr


def _infeasible(tmp_path: Path) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(f"""schema_version: 1
workloads:
  - name: a
    model: {MODEL}
    requests_per_second: 2
    input_tokens: 100
    output_tokens: 50
    slo: {{ttft_ms: 1}}
""")
    return path


# a table shows the reasons itself; JSON carries them as data for programs, so people get them on stderr
@pytest.mark.parametrize(("fmt", "on_stdout", "on_stderr"), [("table", 1, 0), ("json", 1, 1)])
def test_infeasible_reasons_are_shown_once(monkeypatch, tmp_path, fmt, on_stdout, on_stderr):
    monkeypatch.setenv("GPUOPT_TODAY", "2026-11-29")
    monkeypatch.setenv("GPUOPT_CACHE_DIR", str(tmp_path / "cache"))
    result = run("solve", _infeasible(tmp_path), "--provider", "aws", "--format", fmt)
    assert result.exit_code == 1, result.output
    reason = "binding constraint: ttft"
    assert (result.stdout.count(reason), result.stderr.count(reason)) == (on_stdout, on_stderr)


def test_messages_escape_control_characters(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text('schema_version: 1\nworkloads: []\nresidency: 1\ndiscounts: {"a\\e[2Jb\\nc\\u202e": 0.1}\n')
    result = run("solve", path)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert all(line.startswith("error: ") for line in lines), lines
    assert "a\\x1b[2Jb\\x0ac\\u202e" in result.stderr and "\x1b" not in result.stderr


def test_a_unicode_line_separator_in_a_value_does_not_split_its_error_line(tmp_path):
    # found by benchmarks/fuzz.py: a checkpoint id of U+2028 + spaces (str.splitlines() breaks at U+2028/9)
    path = tmp_path / "w.yaml"
    path.write_text('schema_version: 1\nworkloads:\n- name: a\n  model: meta-llama/Llama-3.1-8B-Instruct\n'
                    '  input_tokens: 1\n  output_tokens: 1\n  requests_per_second: 1.0\n'
                    '  checkpoints:\n    int4: "\\u2028 x\\u2029"\n', encoding="utf-8")
    result = run("solve", path)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "\\u2028 x\\u2029" in lines[0], lines


def test_notes_name_what_the_user_wrote_on_one_line():
    result = run("simulate", "--model", "Qwen/Qwen3-4B", "--gpu", "H100-SXM-80GB", "--max-model-len", "8192",
                 "--num-prompts", "5", "--server-args", "'--made-up\u2028flag'")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "made-up" in line]
    assert notes == ["note: --server-args --made-up\\u2028flag is not modelled (no effect on the simulation)"]


@pytest.mark.parametrize("args", [
    ["init", "-o", "y" * 300],
    ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--profile", "y" * 300],
    ["fit", "--gpu", "H100-SXM-80GB", "--model-config", "y" * 300],
])
def test_a_file_name_too_long_for_the_system_is_bad_input(args):
    # found by benchmarks/fuzz.py: Path.is_dir/exists raise ENAMETOOLONG instead of answering False
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "internal error" not in lines[0], lines


@pytest.mark.parametrize("args", [
    ["fit", "--gpu", "H100-SXM-80GB", "--model-config", "a\x00b"],
    ["solve", "w\x00.yaml"],
    ["init", "-o", "a\x00b"],
    ["simulate", "--model", "Qwen/Qwen3-4B", "--gpu", "H100-SXM-80GB", "--lengths-file", "l\x00.csv"],
])
def test_a_nul_byte_in_a_path_flag_is_a_usage_error(args):
    # found by benchmarks/fuzz.py: click.Path stats the value and catches only OSError; a NUL raises ValueError
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "a path cannot contain a NUL byte" in lines[0], lines


@pytest.mark.parametrize("args", [
    ["solve", str(EXAMPLES / "two-models.yaml"), "--region", ""],
    ["solve", str(EXAMPLES / "two-models.yaml"), "--currency", " "],
    ["plan", str(EXAMPLES / "capacity-global.yaml"), "--region", ""],
    ["catalog", "list", "--region", ""],
    ["matrix", "meta-llama/Llama-3.1-8B-Instruct", "--region", ""],
])
def test_an_empty_region_or_currency_is_a_usage_error(args):
    """`--region ""` (a script's unset $REGION) planned under the workload file's residency, exit 0."""
    result = CliRunner().invoke(cli, args)
    flag = next(a for a in args if a.startswith("--"))
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Invalid value for '{flag}': is empty; give a value or leave the option out" in result.stderr


def test_catalog_show_refuses_an_empty_currency_as_catalog_list_does():
    for command in (["catalog", "show", "p5.48xlarge"], ["catalog", "list"]):
        result = CliRunner().invoke(cli, [*command, "--currency", ""])
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr == "error: --currency: empty (known: USD, CNY; leave the flag out for none)\n"
