"""The input boundary (gpuopt/inputs/loader.py and the strict file models): every bad file or flag is one
`error:` line naming the field and line, exit 2, before any solving."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import ConfigError, InputError
from gpuopt.inputs.capacity import load_capacity_file
from gpuopt.inputs.loader import (
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    check_output_path,
    load_yaml,
    read_text,
    write_output_file,
)
from gpuopt.inputs.workload import load_workload
from gpuopt.physics.vllm_profile import profiles

EXAMPLES = Path(__file__).parent.parent / "examples"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

WORKLOAD = f"""schema_version: 1
workloads:
  - name: a
    model: {MODEL}
    requests_per_second: 2
    input_tokens: 100
    output_tokens: 50
"""

CAPACITY = f"""schema_version: 1
horizon: {{periods: 4, period: quarter}}
workloads:
  - name: a
    model: {MODEL}
    demand: {{requests_per_second: DEMAND}}
    input_tokens: 100
    output_tokens: 50
"""


def write(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(load, path: Path) -> tuple[str, ...]:
    with pytest.raises(InputError) as info:  # ConfigError for contents, InputError for the path
        load(path)
    return info.value.problems


def run(*args: object) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, prog_name="gpuopt")


# ---- YAML ---------------------------------------------------------------------------------------------


def test_duplicate_key_names_both_lines(tmp_path):
    text = WORKLOAD.replace("requests_per_second: 2\n", "requests_per_second: 2\n    requests_per_second: 200\n")
    (msg,) = problems(load_workload, write(tmp_path, text))
    assert msg == (f"{tmp_path / 'w.yaml'}:6: invalid YAML: duplicate key 'requests_per_second' "
                   "(first on line 5, again on line 6)")


def test_merge_keys_are_not_duplicates(tmp_path):
    data, _ = load_yaml(write(tmp_path, "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n"))
    assert data["other"] == {"x": 1, "y": 3}


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 5000])
def test_deep_nesting_is_a_message_not_a_recursion_error(tmp_path, depth):
    path = write(tmp_path, "a: " + "[" * depth + "]" * depth + "\n")
    (msg,) = problems(load_workload, path)
    assert msg == f"{path}:1: invalid YAML: nested deeper than {MAX_YAML_DEPTH} levels"


def test_nesting_at_the_limit_loads(tmp_path):
    depth = MAX_YAML_DEPTH - 1  # the top-level mapping is the first level
    data, _ = load_yaml(write(tmp_path, "a: " + "[" * depth + "]" * depth + "\n"))
    inner = data["a"]
    for _ in range(depth - 1):
        inner = inner[0]
    assert inner == []


def test_an_alias_bomb_is_refused_at_the_value_that_passes_the_limit(tmp_path):
    """QA: nine levels of nine aliases under `tags` took 45 s and 2.3 GB before its message; `schema_version:
    *alias` printed a 226 MB error line. 9^6 = 531,441 values at level 5 (line 7) pass MAX_YAML_VALUES; level 4's
    59,049 (and the values its list holds) do not."""
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"] + [
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    path = write(tmp_path, "\n".join(["schema_version: 1", *levels, ""]))
    (msg,) = problems(load_workload, path)
    assert msg == (f"{path}:7: invalid YAML: this value expands to more than {MAX_YAML_VALUES:,} values through its "
                   "aliases (*name): refused")
    # below the limit aliases work as before, and a wrong value built of them is quoted briefly
    small = write(tmp_path, "schema_version: 1\n" + "\n".join(levels[:4]) + "\n", "s.yaml")
    assert load_yaml(small)[0]["l3"][0][0][0] == ["x"] * 9
    quoted = write(tmp_path, "\n".join(levels[:4]) + "\nschema_version: *l3\n", "v.yaml")
    (msg,) = problems(load_workload, quoted)
    # at the key's line (5), not the anchor's (4)
    assert msg.startswith(f"{quoted}:5: schema_version: expected the number 1, got list ") and len(msg) < 200
    # an aliased list item: the list's line, not the anchor's (review)
    item = write(tmp_path, WORKLOAD.replace("schema_version: 1\n", "schema_version: 1\nx-bad: &b nope\n", 1)
                 + "    precisions:\n      - *b\n", "i.yaml")
    line = item.read_text().splitlines().index("      - *b") + 1
    assert f"{item}:{line}: workloads.0.precisions.0: expected 'bf16'" in "\n".join(problems(load_workload, item))


def test_unhashable_key_is_a_message(tmp_path):
    path = write(tmp_path, "? [a, b]\n: 1\n")
    with pytest.raises(ConfigError, match="a mapping key must be a plain value"):
        load_yaml(path)


# ---- paths --------------------------------------------------------------------------------------------


def test_each_bad_path_has_its_own_message(tmp_path):
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"schema_version: 1\x00\x01\x02")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"a: 1\nname: caf\xe9\n")
    cases = {
        tmp_path: f"{tmp_path}: is a directory, not a YAML file",
        tmp_path / "missing.yaml": f"{tmp_path / 'missing.yaml'}: YAML file not found",
        tmp_path / "no" / "w.yaml": f"{tmp_path / 'no' / 'w.yaml'}: YAML file not found (folder {tmp_path / 'no'} "
                                    "does not exist)",
        binary: f"{binary}: is a binary file (contains NUL bytes), not a YAML file",
        latin: f"{latin}:2: not UTF-8 text (byte 0xe9 at offset 14); a YAML file must be UTF-8",
    }
    for path, expected in cases.items():
        assert problems(load_workload, path) == (expected,)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file(tmp_path):
    path = write(tmp_path, WORKLOAD)
    path.chmod(0)
    with pytest.raises(InputError, match="is not readable"):
        read_text(path, "YAML file")


KNOWN_RELEASES = ", ".join(p.version for p in profiles())


def test_model_config_directory_is_reported_with_the_workload(tmp_path):
    text = WORKLOAD.replace(f"model: {MODEL}", "model: {config: ., name: x}")
    path = write(tmp_path, text)
    assert problems(load_workload, path) == (
        f"{path}:4: workloads.0.model.config: {tmp_path}: is a directory, not a model config.json",)


# ---- types and values ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "message"), [
    ("true", "expected a valid number, got boolean true"),
    ('"2"', "expected a valid number, got string '2'"),
    (".inf", "expected a finite number, got inf"),
    ("-.inf", "expected a finite number, got -inf"),
    (".nan", "expected a finite number, got nan"),
    ("1.0e+400", "expected a finite number, got inf"),
])
def test_numbers_are_numbers_and_finite(tmp_path, value, message):
    path = write(tmp_path, WORKLOAD.replace("requests_per_second: 2", f"requests_per_second: {value}"))
    assert problems(load_workload, path) == (f"{path}:5: workloads.0.requests_per_second: {message}",)


def test_schema_version_as_a_string_says_a_number_was_expected(tmp_path):
    path = write(tmp_path, WORKLOAD.replace("schema_version: 1", 'schema_version: "1"'))
    assert problems(load_workload, path) == (f"{path}:1: schema_version: expected the number 1, got string '1'",)


def test_a_boolean_version_and_an_integer_key_are_said_as_elsewhere(tmp_path):
    """QA: `schema_version: true` read "got bool True" where every other message says "boolean true"; a key `5:`
    on line 3 was located at line 1 (the YAML's text "5" against pydantic's integer 5)."""
    path = write(tmp_path, WORKLOAD.replace("schema_version: 1", "schema_version: true"))
    assert problems(load_workload, path) == (f"{path}:1: schema_version: expected the number 1, got boolean true",)
    keyed = write(tmp_path, WORKLOAD.replace("workloads:", "5: 1\nworkloads:", 1), "k.yaml")
    line = WORKLOAD.splitlines().index("workloads:") + 1
    assert problems(load_workload, keyed) == (
        f"{keyed}:{line}: invalid YAML: key '5' is read as the int 5: keys are names; quote it ('5') if it is meant",)
    # `null:` was "None: Keys should be strings" at line 1, and `1:` beside `true:` a "duplicate key 'True'"
    both = write(tmp_path, WORKLOAD.replace("workloads:", "1: a\ntrue: b\nnull: c\nworkloads:", 1), "n.yaml")
    assert problems(load_workload, both) == (
        f"{both}:{line}: invalid YAML: key '1' is read as the int 1: keys are names; quote it ('1') if it is meant",)
    nothing = write(tmp_path, WORKLOAD.replace("workloads:", "null: c\nworkloads:", 1), "z.yaml")
    assert problems(load_workload, nothing) == (
        f"{nothing}:{line}: invalid YAML: key 'null' is read as null: keys are names; quote it ('null') if it is "
        "meant",)


def test_unknown_schema_version_names_the_supported_one(tmp_path):
    path = write(tmp_path, WORKLOAD.replace("schema_version: 1", "schema_version: 2"))
    assert problems(load_workload, path) == (
        f"{path}:1: schema_version: 2 is not supported (this gpuopt reads schema_version 1)",)


def test_quota_for_an_unknown_provider(tmp_path):
    path = write(tmp_path, WORKLOAD + "quotas: [{provider: azure, max_instances: 1}]\n")
    (msg,) = problems(load_workload, path)
    assert msg.startswith(f"{path}:8: quotas.0.provider: unknown provider 'azure' (known: alibaba, aws,")


def test_a_quota_that_caps_nothing_is_refused_at_its_line(tmp_path):
    """A misspelt region or SKU matched no offering and the plan used the one it meant (exit 0)."""
    path = write(tmp_path, WORKLOAD.replace(f"model: {MODEL}", "model: meta-llama/Llama-3.1-8B-Instruct") +
                 "quotas:\n  - {provider: aws, region: us-east1, max_instances: 0}\n"
                 "  - {provider: aws, sku: g6.xlarg, max_instances: 0}\n"
                 "  - {provider: aws, sku: g6.xlarge, region: cn-beijing, max_instances: 0}\n")
    result = run("solve", path, "--provider", "aws")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {path}:9: quotas.0.region: aws has no region 'us-east1' in the catalog, so the quota would cap "
        "nothing; did you mean us-east-1, us-west-1, us-east-2?",
        f"error: {path}:10: quotas.1.sku: aws has no sku 'g6.xlarg' in the catalog, so the quota would cap nothing; "
        "did you mean g6.xlarge, g6e.xlarge, g6.8xlarge?",
        f"error: {path}:11: quotas.2.region: aws has no region 'cn-beijing' in the catalog, so the quota would "
        "cap nothing"]


def test_infinite_budget_and_unknown_currency(tmp_path):
    path = write(tmp_path, WORKLOAD + "budget: {max_monthly: .inf, currency: EUR}\n")
    assert problems(load_workload, path) == (
        f"{path}:8: budget.max_monthly: expected a finite number, got inf",
        f"{path}:8: budget.currency: expected 'USD' or 'CNY', got string 'EUR'",
    )


@pytest.mark.parametrize(("demand", "message"), [
    ("{base: 0, growth: 0.5}", "workloads.0.demand.requests_per_second.base: Input should be greater than 0"),
    ("{growth: 0.5}", "workloads.0.demand.requests_per_second.base: Field required"),
    ("[1, .nan, 2, 3]", "workloads.0.demand.requests_per_second.1: expected a finite number, got nan"),
    ("{Q1: 1, Q2: true}", "workloads.0.demand.requests_per_second.Q2: expected a valid number, got boolean true"),
    ("5", "workloads.0.demand.requests_per_second: expected a valid list, got integer 5"),
])
def test_capacity_demand_messages_say_what_is_wrong(tmp_path, demand, message):
    path = write(tmp_path, CAPACITY.replace("DEMAND", demand))
    assert problems(load_capacity_file, path) == (f"{path}:6: {message}",)


def test_capacity_growth_demand_still_loads(tmp_path):
    cf = load_capacity_file(write(tmp_path, CAPACITY.replace("DEMAND", "{base: 2, growth: 0.5}")))
    series = cf.workloads[0].demand.series
    assert (series.base, series.growth) == (2.0, 0.5)  # type: ignore[union-attr]
    assert cf.model_dump()["workloads"][0]["demand"]["requests_per_second"] == {"base": 2.0, "growth": 0.5}


# ---- flags ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["solve", "W", "--max-monthly", "inf"], "error: Invalid value for '--max-monthly': expected a finite number, "
                                             "got 'inf' (see 'gpuopt solve --help')"),
    # review: float() and int() read digit groups and non-ASCII digits
    (["solve", "W", "--max-monthly", "1_000"], "error: Invalid value for '--max-monthly': expected a number in ASCII "
                                               "digits, got '1_000' (see 'gpuopt solve --help')"),
    (["fit", "--model", "8B", "--gpu", "L4-24GB", "--max-model-len", "٨١٩٢"],
     "error: Invalid value for '--max-model-len': '٨١٩٢' is not a whole number in ASCII digits (see 'gpuopt fit "
     "--help')"),
    (["simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4-24GB", "--request-rate", "1_0"],
     "error: --request-rate must be a positive number or inf (got '1_0')"),
    (["solve", "W", "--headroom", "nan"], "error: Invalid value for '--headroom': expected a finite number, "
                                          "got 'nan' (see 'gpuopt solve --help')"),
    (["fit", "--model", MODEL, "--gpu", "H100-SXM-80GB", "--input-tokens", "10", "--output-tokens", "10",
      "--request-rate", "nan"],
     "error: Invalid value for '--request-rate': expected a finite number, got 'nan' (see 'gpuopt fit --help')"),
    (["solve", "W", "--vllm-version", "99.0"],
     "error: Invalid value for '--vllm-version': 99.0 is newer than the newest modelled release 0.34 "
     f"(known releases: {KNOWN_RELEASES}) (see 'gpuopt solve --help')"),
    (["solve", "W", "--vllm-version", "0.7"],
     "error: Invalid value for '--vllm-version': 0.7 is older than the oldest modelled release 0.8 "
     f"(known releases: {KNOWN_RELEASES}) (see 'gpuopt solve --help')"),
    (["solve", "W", "--vllm-version", "latest"],
     "error: Invalid value for '--vllm-version': 'latest' is not a version like 0.19 or 0.11.0 "
     f"(known releases: {KNOWN_RELEASES}) (see 'gpuopt solve --help')"),
    (["fit", "--model-config", ".", "--gpu", "H100-SXM-80GB"],
     "error: .: directory has no config.json (point --model at a checkpoint directory or at its config.json)"),
    (["report", "."], "error: .: is a directory, not a plan file"),
    (["solve", "W", "--catalog", "."], "error: --catalog .: is a directory, not a CSV file"),
    (["solve", "W", "-o", "/nonexistent/dir/out.txt"],
     "error: Invalid value for '-o' / '--output': folder /nonexistent/dir does not exist (see 'gpuopt solve --help')"),
])
def test_bad_flags_are_one_line_exit_2(tmp_path, args, message):
    workload = write(tmp_path, WORKLOAD)
    result = run(*[str(workload) if a == "W" else a for a in args])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message + "\n")


def test_vllm_version_between_modelled_releases_is_accepted():
    from gpuopt.cli.options import VLLM_VERSION

    assert VLLM_VERSION.convert("0.19", None, None) == "0.19"
    assert VLLM_VERSION.convert("0.33.2", None, None) == "0.33.2"


def test_output_is_checked_before_the_solve(tmp_path, monkeypatch):
    import gpuopt.planner.solve as planner

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the solve started before -o was checked")

    monkeypatch.setattr(planner, "plan_workloads", must_not_run)
    result = run("solve", write(tmp_path, WORKLOAD), "-o", tmp_path / "missing" / "plan.txt")
    assert result.exit_code == 2 and "does not exist" in result.stderr


# ---- output ----------------------------------------------------------------------------------------------


def test_atomic_write_replaces_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    write_output_file(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def disk_full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(InputError, match=r"-o .*out.txt: cannot write: No space left on device"):
        write_output_file(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_dev_full_is_a_clean_error():
    check_output_path(Path("/dev/full"))  # a writable device passes the early check
    with pytest.raises(InputError, match="-o /dev/full: cannot write: No space left on device"):
        write_output_file(Path("/dev/full"), "x" * 100_000)
    assert Path("/dev/full").exists() and not Path("/dev/full").is_file()  # never replaced by a rename


def test_output_to_a_directory(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        check_output_path(tmp_path)


def test_stdout_device_is_written_in_place(tmp_path):
    fifo_free = tmp_path / "plain.txt"
    write_output_file(fifo_free, "a")
    assert fifo_free.read_text() == "a"
    if sys.platform.startswith("linux"):
        write_output_file(Path("/dev/null"), "discarded")
        assert Path("/dev/null").exists() and not Path("/dev/null").is_file()


def test_a_symlink_is_written_through_and_kept(tmp_path):
    """QA: the temp file was renamed over the link itself (the link became a file, its target kept the old
    text); with `-o /dev/stdout` and stdout redirected to a file, that replaced /dev/stdout."""
    real, link = tmp_path / "real.json", tmp_path / "out.json"
    real.write_text("original")
    link.symlink_to(real)
    write_output_file(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "real.json"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd")
def test_a_path_that_resolves_into_proc_is_written_in_place(tmp_path):
    """A link into /proc (what /dev/stdout is) is written in place through the link, never renamed over."""
    out = tmp_path / "redirected.txt"
    link = tmp_path / "stdout"
    with open(out, "w") as handle:
        link.symlink_to(f"/proc/self/fd/{handle.fileno()}")
        write_output_file(link, "through the descriptor")
    assert link.is_symlink() and out.read_text() == "through the descriptor"


def test_init_writes_a_fifo_in_place(tmp_path):
    """QA: init had its own temp-and-rename writer, which replaced a FIFO (and, as root, /dev/full) with a file."""
    import threading
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    result = run("init", "--non-interactive", "--model", "meta-llama/Llama-3.1-8B-Instruct", "-o", str(fifo),
                 "--force")
    reader.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and got and got[0].startswith("# interactive chat assistant")


def test_exponent_numbers_are_numbers_as_in_yaml_1_2(tmp_path):
    wf = load_workload(write(tmp_path, WORKLOAD.replace("requests_per_second: 2", "requests_per_second: 2.5e1")))
    assert wf.workloads[0].requests_per_second == 25.0
    path = write(tmp_path, WORKLOAD.replace("requests_per_second: 2", 'requests_per_second: "2.5e1"'))
    assert problems(load_workload, path) == (
        f"{path}:5: workloads.0.requests_per_second: expected a valid number, got string '2.5e1'",)


@pytest.mark.parametrize(("value", "read"), [
    ("0100", 100),  # YAML 1.1: 64 (octal)
    ("0o144", 100),  # YAML 1.2's octal
    ("0x64", 100),
])
def test_integers_are_read_as_yaml_1_2_writes_them(tmp_path, value, read):
    wf = load_workload(write(tmp_path, WORKLOAD.replace("input_tokens: 100\n", f"input_tokens: {value}\n")))
    assert wf.workloads[0].input_tokens == read


@pytest.mark.parametrize("value", ["1:30.5", "3:20", "yes", "on"])
def test_yaml_1_1_sexagesimals_and_booleans_are_strings_refused_where_a_number_goes(tmp_path, value):
    """YAML 1.1 read `1:30.5` as 90.5 and `3:20` as 200 (base 60), `yes` and `on` as true: planned silently."""
    path = write(tmp_path, WORKLOAD.replace("requests_per_second: 2", f"requests_per_second: {value}"))
    (line,) = problems(load_workload, path)
    assert line.startswith(f"{path}:5: workloads.0.requests_per_second: ") and repr(value) in line


def test_control_characters_are_a_message(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_bytes(b"schema_version: 1\n\x08workloads: []\n")
    assert problems(load_workload, path) == (
        f"{path}:2: invalid YAML: control character #x0008 is not allowed (write it as an escape inside a "
        "double-quoted string)",)


@pytest.mark.parametrize(("line", "message"), [
    ('    name: "\\U00110000"', "an escape sequence names no Unicode character (above \\U0010FFFF)"),
    ('    name: "\\UFFFFFFFF"', "an escape sequence names no Unicode character (above \\U0010FFFF)"),
    ("    name: !!timestamp 2001-13-45", "'2001-13-45' is not a valid timestamp"),
    ("    name: !!timestamp 2001-12-14t21:59:43.10-99:00",
     "'2001-12-14t21:59:43.10-99:00' is not a valid timestamp"),
])
def test_values_pyyaml_cannot_read_are_a_located_message(tmp_path, line, message):
    """PyYAML lets these escape as ValueError / OverflowError / AttributeError (found by benchmarks/fuzz.py)."""
    path = write(tmp_path, "schema_version: 1\nworkloads:\n  - model: x\n" + line + "\n")
    assert problems(load_workload, path) == (f"{path}:4: invalid YAML: {message}",)


def test_a_date_like_scalar_is_the_string_it_looks_like_as_in_yaml_1_2(tmp_path):
    """QA: YAML 1.1's implicit timestamps made `tags: {when: 2026-01-01}` a date, refused as "expected a valid
    string, got date datetime.date(2026, 1, 1)"; the core schema has no timestamps."""
    text = WORKLOAD.replace("requests_per_second: 2", "requests_per_second: 2\n    tags: {when: 2026-01-01}")
    wf = load_workload(write(tmp_path, text))
    assert wf.workloads[0].tags == {"when": "2026-01-01"}


def test_counts_above_the_sanity_ceilings_are_refused(tmp_path):
    text = WORKLOAD.replace("requests_per_second: 2", "requests_per_second: 2\n    min_replicas: 5555105990363723776")
    path = write(tmp_path, text)
    assert problems(load_workload, path) == (
        f"{path}:6: workloads.0.min_replicas: Input should be less than or equal to 10000",)


def test_capacity_growth_past_the_ceiling_is_refused(tmp_path):
    path = write(tmp_path, CAPACITY.replace("DEMAND", "{base: 1000, growth: 99}"))
    assert problems(load_capacity_file, path) == (
        f"{path}:6: workloads.0.demand.requests_per_second: demand 1e+07 in period 3 is above what gpuopt plans for "
        "(1e+06)",)


def test_json_nested_past_what_a_reader_goes_is_one_error_line(tmp_path):
    """Found by QA: 100,000 nested brackets in a config.json, a --compilation-config or a refresh --file were
    RecursionError (exit 70); the plan-file reader already refused them."""
    deep = "[" * 100_000 + "]" * 100_000
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(deep)
    answer = tmp_path / "answer.json"
    answer.write_text(deep)
    for args, needle in (
            (("fit", "--model", model, "--gpu", "H100-SXM-80GB"), "nested deeper than a JSON reader goes"),
            (("fit", "--model", "Qwen/Qwen3-8B", "--gpu", "H100-SXM-80GB", "--compilation-config",
              "[" * 5000 + "]" * 5000), "takes a JSON object"),
            (("catalog", "refresh", "runpod", "--file", answer), "nested deeper than a JSON reader goes")):
        result = CliRunner().invoke(cli, [str(a) for a in args], prog_name="gpuopt")
        lines = result.stderr.splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], (args[:2], result.stderr[:300])
        assert len(lines[0]) < 400  # the value is named, not echoed


def test_a_horizon_that_runs_past_the_calendar_is_refused(tmp_path):
    """9999Q4 plus a year and the 5-year terms it can buy has no calendar dates: `plan --format focus` ended in a
    ValueError (exit 70)."""
    text = CAPACITY.replace("DEMAND", "[1, 1, 1, 1]").replace("period: quarter}", "period: quarter, start: 9999Q4}")
    path = write(tmp_path, text)
    assert problems(load_capacity_file, path) == (
        f"{path}:2: horizon: start 9999Q4: the horizon and the commitments it can buy run past the year 9999, "
        "which no calendar dates",)
    fine = write(tmp_path, CAPACITY.replace("DEMAND", "[1, 1, 1, 1]").replace("period: quarter}",
                                                                             "period: quarter, start: 2027Q1}"))
    assert load_capacity_file(fine).horizon.start == "2027Q1"


def test_a_plan_dated_past_the_calendar_is_refused_by_focus(tmp_path):
    plan = tmp_path / "plan.json"
    result = run("solve", EXAMPLES / "two-models.yaml", "--json", "-o", plan)
    assert result.exit_code == 0
    edited = tmp_path / "late.json"
    edited.write_text(re.sub(r'"as_of_date": "[0-9-]+"', '"as_of_date": "9999-12-15"', plan.read_text()))
    late = run("report", edited, "--format", "focus")
    assert late.exit_code == 2 and late.stdout == ""
    assert late.stderr == ("error: the plan's dates run past the year 9999 (9999-12-15 + 1 months): FOCUS billing "
                           "periods cannot be dated\n")


def test_a_scenario_needs_a_name(tmp_path):
    """QA: `scenarios: {"": 0.7}` planned a scenario named nothing."""
    path = write(tmp_path, CAPACITY.replace("DEMAND", "[1, 2, 3, 4]") + 'scenarios: {"": 0.7, base: 1.0}\n')
    assert problems(load_capacity_file, path) == (
        f"{path}:9: scenarios: a scenario needs a name (got an empty one)",)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("args", [("solve", "/dev/zero"), ("report", "/dev/urandom"),
                                  ("catalog", "validate", "--overlay", "/dev/zero"),
                                  ("fit", "--model", "/dev/zero", "--gpu", "H100-SXM-80GB")])
def test_a_device_that_never_ends_is_refused_without_reading_on(args):
    """QA: /dev/zero and /dev/urandom as inputs were read without limit (killed after 15 s); a file is judged
    binary on its first 8 KiB, and none may pass 256 MiB (gpuopt/files_read.py)."""
    result = run(*args)
    assert result.exit_code == 2 and "is a binary file (contains NUL bytes)" in result.output
