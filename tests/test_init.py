"""`gpuopt init`: the questionnaire writes a commented workload file that solve accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.inputs.presets import presets
from gpuopt.inputs.workload import load_workload
from tests.conftest import check_golden

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _init(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[int, str, Path]:
    out = tmp_path / "w.yaml"
    result = CliRunner().invoke(cli, ["init", "-o", str(out), *args], input=stdin)
    return result.exit_code, result.stderr, out


@pytest.mark.parametrize("preset", sorted(presets()))
def test_every_preset_writes_a_valid_file_with_its_values(tmp_path: Path, preset: str) -> None:
    code, err, out = _init(tmp_path, "--non-interactive", "--preset", preset, "--model", MODEL)
    assert code == 0, err
    wf = load_workload(out)
    [w] = wf.workloads
    p = presets()[preset]
    assert (w.input_tokens, w.output_tokens, w.max_model_len) == (
        p["input_tokens"]["value"], p["output_tokens"]["value"], p["max_model_len"]["value"])
    assert (w.slo.ttft_ms, w.slo.tpot_ms) == (p["ttft_ms"]["value"], p["tpot_ms"]["value"])
    assert list(w.precisions) == p["precisions"]["value"]
    assert w.demand == next(iter(p["load"].values()))
    # every value carries its reason as a comment
    assert p["input_tokens"]["why"] in out.read_text()


def test_quality_and_code_presets_never_allow_int4_unless_asked(tmp_path: Path) -> None:
    for preset in ("code", "rag", "agent"):
        assert "int4" not in presets()[preset]["precisions"]["value"]
    code, err, out = _init(tmp_path, "--non-interactive", "--preset", "chat", "--model", MODEL, "--quality", "high")
    assert code == 0, err
    assert load_workload(out).workloads[0].precisions == ["bf16", "fp8"]


def test_answers_override_the_preset_and_cn_means_cny(tmp_path: Path) -> None:
    code, err, out = _init(tmp_path, "--non-interactive", "--preset", "chat", "--model", MODEL, "--concurrency",
                           "32", "--ttft-ms", "800", "--residency", "cn", "--budget-monthly", "50000", "--name", "cs")
    assert code == 0, err
    wf = load_workload(out)
    w = wf.workloads[0]
    assert (w.name, w.concurrency, w.requests_per_second, w.slo.ttft_ms) == ("cs", 32, None, 800)
    assert (wf.residency, wf.currency) == ("cn", "CNY")
    assert wf.budget is not None and (wf.budget.max_monthly, wf.budget.currency) == (50000, "CNY")


def test_interactive_answers_are_asked_in_order(tmp_path: Path) -> None:
    # model, rate, context, prompt, output, TTFT, TPOT, quality, residency, budget
    stdin = "\n".join([MODEL, "4", "", "1000", "", "1500", "", "high", "us", "12000"]) + "\n"
    code, err, out = _init(tmp_path, "--interactive", "--preset", "chat", stdin=stdin)
    assert code == 0, err
    wf = load_workload(out)
    w = wf.workloads[0]
    assert (w.model, w.requests_per_second, w.max_model_len, w.input_tokens, w.output_tokens) == (
        MODEL, 4.0, 8192, 1000, 300)
    assert (w.slo.ttft_ms, w.slo.tpot_ms, list(w.precisions)) == (1500, 50, ["bf16", "fp8"])
    assert wf.residency == "us" and wf.budget is not None and wf.budget.max_monthly == 12000


def test_stdin_that_ends_before_the_last_question_is_exit_2_with_nothing_written(tmp_path: Path) -> None:
    """QA: a piped stdin that ran out mid-interview was click's "Aborted!", exit 1 (the infeasible code)."""
    code, err, out = _init(tmp_path, "--interactive", "--preset", "chat", stdin=f"{MODEL}\n5\n")
    assert code == 2 and not out.exists()
    assert err.splitlines()[-1].endswith("error: init: stdin ended before every question was answered (give the "
                                         "answers as flags, or --non-interactive)")


def test_a_budget_that_is_not_a_number_is_asked_again(tmp_path: Path) -> None:
    """QA: `abc` as the budget was an internal error (exit 70); now the prompt says why and asks again."""
    stdin = "\n".join([MODEL, "", "", "", "", "", "", "", "", "abc", "-5", "nan", "1_000", "900"]) + "\n"
    code, err, out = _init(tmp_path, "--interactive", "--preset", "chat", stdin=stdin)
    assert code == 0, err
    for answer in ("abc", "-5", "nan", "1_000"):  # review: -5 and nan ended the run blaming --budget-monthly
        assert f"'{answer}' is not a positive number (blank: no budget)" in err
    budget = load_workload(out).budget
    assert budget is not None and budget.max_monthly == 900


def test_every_numeric_answer_that_is_no_positive_number_is_asked_again(tmp_path: Path) -> None:
    """Review: `nan` as the rate, `-5` as the TTFT target and `0` as the context ended the run with an error
    naming a flag never given; `1_500` was read as 1,500."""
    stdin = "\n".join([MODEL, "nan", "4", "0", "8192", "", "", "-5", "1_500", "1500", "", "high", "us", ""]) + "\n"
    code, err, out = _init(tmp_path, "--interactive", "--preset", "chat", stdin=stdin)
    assert code == 0, err
    for answer, kind in (("nan", "number"), ("0", "whole number"), ("-5", "number"), ("1_500", "number")):
        assert f"'{answer}' is not a positive {kind} (ASCII digits)" in err
    w = load_workload(out).workloads[0]
    assert (w.requests_per_second, w.max_model_len, w.slo.ttft_ms) == (4.0, 8192, 1500.0)


def test_every_bad_answer_is_said_at_once(tmp_path: Path) -> None:
    code, err, out = _init(tmp_path, "--non-interactive", "--model", MODEL, "--requests-per-second", "-1",
                           "--ttft-ms", "0", "--input-tokens", "-3", "--residency", "mars")
    lines = err.splitlines()
    assert code == 2 and not out.exists()
    assert [line.split(" ")[1] for line in lines] == ["--requests-per-second", "--ttft-ms", "--input-tokens",
                                                      "unknown"]
    assert all(line.startswith("error: ") for line in lines)


def test_golden_chat_file(tmp_path: Path) -> None:
    code, err, out = _init(tmp_path, "--non-interactive", "--preset", "chat", "--model", MODEL)
    assert code == 0, err
    check_golden("init_chat.yaml", out.read_text())


def test_hostile_model_string_stays_one_yaml_value(tmp_path: Path) -> None:
    evil = 'x"; injected: true # [a](b)'
    code, err, out = _init(tmp_path, "--non-interactive", "--model", evil)
    assert code == 0, err
    assert yaml.safe_load(out.read_text())["workloads"][0]["model"] == evil
    assert "not in the registry" in err or "unknown" in err


def test_a_model_string_with_a_line_break_or_control_character_is_refused(tmp_path: Path) -> None:
    """A line break, NEL or bidi override is no model id: the file it would make does not load, so init writes
    nothing (YAML would also read U+0085 in a double-quoted value back as a line break)."""
    for evil in ('x"\n  injected: true # \u202e', "org/a\u2028b\x85c"):
        code, err, out = _init(tmp_path, "--non-interactive", "--model", evil)
        assert code == 2 and not out.exists()
        assert "holds a control character or a line break (nothing written)" in err


@pytest.mark.parametrize(("args", "needle"), [
    (["--requests-per-second", "-1"], "--requests-per-second must be a positive finite number"),
    (["--requests-per-second", "nan"], "expected a finite number"),
    (["--requests-per-second", "2", "--concurrency", "3"], "not both"),
    (["--residency", "atlantis"], "region selector"),
    (["--context", "0"], "--context must be"),
])
def test_bad_answers_are_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    code, err, out = _init(tmp_path, "--non-interactive", "--model", MODEL, *args)
    assert code == 2 and needle in err and not out.exists()


def test_never_overwrites_without_force(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("keep me")
    code, err, out = _init(tmp_path, "--non-interactive", "--model", MODEL)
    assert code == 2 and "already exists" in err and out.read_text() == "keep me"
    code, err, out = _init(tmp_path, "--non-interactive", "--model", MODEL, "--force")
    assert code == 0 and load_workload(out).workloads[0].model == MODEL


def test_no_model_without_a_terminal_is_exit_2(tmp_path: Path) -> None:
    code, err, _ = _init(tmp_path, "--non-interactive")
    assert code == 2 and "--model is required" in err


def test_an_answer_the_schema_rejects_names_its_flag_and_writes_nothing(tmp_path: Path) -> None:
    """The problem is said of the flag that gave the answer, not of a line of the file that was not written."""
    code, err, out = _init(tmp_path, "--non-interactive", "--model", MODEL, "--name", "two words")
    assert code == 2 and not out.exists()
    assert err == "error: --name: String should match pattern '^[A-Za-z0-9_.-]+$' (nothing written)\n"
    code, err, out = _init(tmp_path, "--non-interactive", "--model", MODEL, "--context", "10", "--input-tokens",
                           "1000")
    assert code == 2 and not out.exists()
    assert err.startswith("error: --context: input_tokens + output_tokens (") and "(nothing written)" in err


def test_a_preset_context_above_the_models_limit_is_capped_and_solve_accepts_the_file(tmp_path: Path) -> None:
    """falcon-40b serves 2,048 tokens (max_position_embeddings): the chat preset's 8,192 would be a file `solve`
    refuses, so it is capped there and says why; the chat request (1,500 + 300 tokens) fits."""
    code, err, out = _init(tmp_path, "--non-interactive", "--model", "tiiuae/falcon-40b")
    assert code == 0
    line = next(x for x in out.read_text().splitlines() if "max_model_len" in x)
    assert line == "    max_model_len: 2048  # the preset's 8,192 capped at the model's limit (max_position_embeddings)"
    result = CliRunner().invoke(cli, ["solve", str(out), "--top", "0"])
    assert result.exit_code == 0, result.stderr


def test_a_context_or_preset_requests_above_the_models_limit_are_exit_2(tmp_path: Path) -> None:
    code, err, out = _init(tmp_path, "--non-interactive", "--model", "tiiuae/falcon-40b", "--context", "8192")
    assert code == 2 and not out.exists()
    assert err == ("error: --context 8,192 exceeds the 2,048 tokens tiiuae/falcon-40b supports "
                   "(max_position_embeddings); vLLM refuses to start above it (nothing written)\n")
    # the rag preset's 12,000 + 400 tokens do not fit Llama-2's 4,096: capping the context cannot save the file
    code, err, out = _init(tmp_path, "--non-interactive", "--preset", "rag", "--model", "meta-llama/Llama-2-7b-hf")
    assert code == 2 and not out.exists()
    assert err.startswith("error: the rag preset's requests (12,400 tokens of prompt and output) exceed the 4,096 "
                          "tokens of context meta-llama/Llama-2-7b-hf supports")


def test_the_written_file_has_the_mode_a_new_file_gets(tmp_path: Path) -> None:
    """The workload was written through mkstemp and kept its 0600 (a teammate on a shared host could not read it);
    a new file takes the umask's mode, an existing one keeps its own."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        code, err, out = _init(tmp_path, "--non-interactive", "--preset", "chat", "--model", MODEL)
        assert code == 0, err
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
        out.chmod(0o640)
        code, err, out = _init(tmp_path, "--non-interactive", "--preset", "rag", "--model", MODEL, "--force")
        assert code == 0, err
        assert stat.S_IMODE(out.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_an_empty_flag_is_refused_not_read_as_its_default(tmp_path: Path) -> None:
    """QA: `--name ''` wrote the preset's name and `--residency ''` wrote global, as if neither had been given."""
    code, err, out = _init(tmp_path, "--non-interactive", "--model", MODEL, "--name", "", "--residency", " ")
    assert code == 2 and not out.exists()
    assert err.splitlines() == ["error: --name: empty (leave the flag out for the default)",
                                "error: --residency: empty (leave the flag out for the default)"]
