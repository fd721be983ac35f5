"""`gpuopt simulate`: vllm bench serve's flags and result shape, bad input, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from tests.conftest import check_golden

BASE = ("simulate", "--model", "Qwen/Qwen3-4B", "--gpu", "H100-SXM-80GB", "--max-model-len", "8192",
        "--vllm-version", "0.11", "--num-prompts", "50")
FIXTURE = Path(__file__).parent / "fixtures" / "vllm_bench_serve_result.json"


def run(*args: str):
    return CliRunner().invoke(cli, [*BASE, *args])


def test_text_summary_reads_like_vllm_bench_serve_golden():
    result = run("--random-input-len", "512", "--random-output-len", "64", "--request-rate", "4", "--seed", "1")
    assert result.exit_code == 0, result.output
    assert "Successful requests:" in result.stdout and "Mean TTFT (ms):" in result.stdout
    check_golden("simulate_qwen3_4b_h100.txt", result.stdout)


def test_json_has_the_save_result_summary_keys_and_a_seed_reproduces_it_byte_for_byte():
    args = ("--dataset-name", "sharegpt", "--request-rate", "10", "--json", "--seed", "3")
    first, second = run(*args), run(*args)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    data = json.loads(first.stdout)
    assert data["completed"] == 50
    for key in ("duration", "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput",
                "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "preemptions",
                "kv_usage_peak", "mean_ttft_ms", "median_tpot_ms", "p99_itl_ms", "p90_e2el_ms", "p95_ttft_ms"):
        assert key in data
    other = run("--dataset-name", "sharegpt", "--request-rate", "10", "--json", "--seed", "4")
    assert other.stdout != first.stdout


def test_save_result_writes_every_key_vllm_writes(tmp_path: Path):
    out = tmp_path / "result.json"
    result = run("--max-concurrency", "4", "--save-result", str(out), "--random-output-len", "16")
    assert result.exit_code == 0, result.output
    ours = json.loads(out.read_text())
    theirs = json.loads(FIXTURE.read_text())
    assert set(theirs) <= set(ours)
    assert len(ours["ttfts"]) == 50 and len(ours["itls"]) == 50
    assert all(len(gaps) == 15 for gaps in ours["itls"])  # 16 tokens: 15 gaps each
    assert ours["rtfx"] == 0.0  # vLLM's speech-to-text ratio, 0 for text as vLLM writes it


def test_server_args_are_honoured_and_unknown_flags_named_on_stderr():
    small = run("--server-args", "--max-num-seqs 2 --served-model-name chat --enable-prefix-caching", "--json",
                "--random-output-len", "32")
    default = run("--json", "--random-output-len", "32")
    assert small.exit_code == 0, small.output
    assert "note: --server-args --served-model-name is not modelled" in small.stderr
    # a flag the release's own parser does not have is refused, as vLLM refuses it
    typo = run("--server-args", "--max-num-seq 2")
    assert typo.exit_code == 2 and typo.stderr.startswith("error: --server-args: --max-num-seq is not a flag of vLLM")
    assert json.loads(small.stdout)["duration"] > json.loads(default.stdout)["duration"]  # 2 at a time is slower


def test_offline_and_dp_run():
    offline = run("--offline", "--json")
    assert offline.exit_code == 0, offline.output
    dp = run("--dp", "2", "--json")
    assert dp.exit_code == 0, dp.output
    assert json.loads(dp.stdout)["completed"] == 50


def test_deepseek_r1_as_eight_data_parallel_engines_with_expert_parallelism_fits_eight_h200s():
    """DeepSeek's usual deployment: each engine TP=1, the experts dealt over the 8 GPUs. It used to be
    'infeasible: weights need 627.65 GiB per GPU' (every engine was given all the experts)."""
    args = ["simulate", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "H200-141GB", "--max-model-len", "8192",
            "--random-input-len", "1000", "--random-output-len", "100", "--num-prompts", "64", "--json"]
    alone = CliRunner().invoke(cli, args)
    assert alone.exit_code == 1 and "infeasible: weights need" in alone.stderr
    dp = CliRunner().invoke(cli, [*args, "--server-args", "--data-parallel-size 8 --enable-expert-parallel"])
    assert dp.exit_code == 0, dp.output
    assert json.loads(dp.stdout)["completed"] == 64


def test_lengths_file_histogram(tmp_path: Path):
    hist = tmp_path / "mix.csv"
    hist.write_text("input_tokens,output_tokens,share\n100,10,0.5\n1000,100,0.5\n")
    result = run("--lengths-file", str(hist), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["total_input_tokens"] % 100 == 0  # every prompt is 100 or 1,000 tokens


@pytest.mark.parametrize(("args", "flag"), [
    (("--random-input-len", "0"), "--random-input-len"),
    (("--random-output-len", "-5"), "--random-output-len"),
    (("--sharegpt-input-len", "0"), "--sharegpt-input-len"),
    (("--num-prompts", "0"), "--num-prompts"),
    (("--num-prompts", "1000000001"), "--num-prompts"),
    (("--random-range-ratio", "1"), "--random-range-ratio"),
    (("--random-range-ratio", "-0.2"), "--random-range-ratio"),
    (("--request-rate", "0"), "--request-rate"),
    (("--request-rate", "nan"), "--request-rate"),
    (("--request-rate", "-3"), "--request-rate"),
    (("--request-rate", "fast"), "--request-rate"),
    (("--request-rate", "1e-300"), "--request-rate"),  # positive, but the clock cannot resolve such a run
    (("--server-args", "--no-enable-chunked-prefill --max-num-batched-tokens 4096"), "--max-num-batched-tokens"),
    (("--server-args", "--block-size 7"), "--block-size"),
    (("--server-args", "--max-num-seqs 'oops"), "--server-args"),
    (("--server-args", "--max-num-seqs many"), "--server-args"),
    (("--max-concurrency", "0"), "--max-concurrency"),
    (("--backend", "grpc"), "--backend"),
    (("--seed", "-1"), "--seed"),
    (("--random-input-len", str(2**63), "--random-range-ratio", "0.5"), "--random-input-len"),
])
def test_bad_input_is_one_error_line_naming_the_flag_and_exit_2(args: tuple[str, ...], flag: str):
    result = run(*args)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and flag in errors[0]
    assert result.stdout == ""


def test_histogram_shares_that_do_not_sum_to_one(tmp_path: Path):
    hist = tmp_path / "bad.csv"
    hist.write_text("input_tokens,output_tokens,share\n100,10,0.5\n1000,100,0.4\n")
    result = run("--lengths-file", str(hist))
    assert result.exit_code == 2
    assert "error: --lengths-file" in result.stderr and "sum to 1" in result.stderr


def test_the_chat_backend_counts_its_role_chunks_and_changes_nothing_the_engine_did():
    args = ("--random-input-len", "128", "--random-output-len", "4", "--json")
    plain, chat = json.loads(run(*args).stdout), json.loads(run(*args, "--backend", "openai-chat").stdout)
    for key in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput", "duration", "completed"):
        assert chat[key] == plain[key]
    # 4 tokens a request: each request's 3 gaps become 4 with the role chunk's 0, the mean ITL 3/4 of it
    assert chat["mean_itl_ms"] == pytest.approx(plain["mean_itl_ms"] * 3 / 4, rel=1e-6)
    assert chat["max_output_tokens_per_s"] > plain["max_output_tokens_per_s"]


def test_a_lengths_file_that_is_not_utf8_or_has_ragged_rows_is_one_error_line(tmp_path: Path) -> None:
    binary, ragged = tmp_path / "b.csv", tmp_path / "r.csv"
    binary.write_bytes(b"\xff\xfe1,2,3\n")
    ragged.write_text("input_tokens,output_tokens,share\n100,10,0.5,extra\n200,20\n300,30,0.5\n")
    result = run("--lengths-file", str(binary))
    assert (result.exit_code, result.stderr) == (2, f"error: --lengths-file {binary}:1: not UTF-8 text (byte 0xff at "
                                                    "offset 0); a lengths CSV file must be UTF-8\n")
    result = run("--lengths-file", str(ragged))
    assert (result.exit_code, result.stderr) == (2, f"error: --lengths-file {ragged} line 2: 4 fields, the header "
                                                    f"has 3\nerror: --lengths-file {ragged} line 3: 2 fields, the "
                                                    "header has 3\n")


def test_a_lengths_file_column_named_twice_or_a_number_not_in_ascii_digits_is_refused(tmp_path: Path) -> None:
    """Review: a second `share` column replaced the first, silently; `1_00` and `٢٠٠` were read as 100 and 200."""
    twice, digits = tmp_path / "t.csv", tmp_path / "d.csv"
    twice.write_text("input_tokens,output_tokens,share,share\n100,100,0.9,0.5\n200,200,0.1,0.5\n")
    digits.write_text("input_tokens,output_tokens,share\n1_00,100,0.5\n٢٠٠,200,0.5\n", encoding="utf-8")
    result = run("--lengths-file", str(twice))
    assert (result.exit_code, result.stderr) == (2, f"error: --lengths-file {twice}: column 'share' appears 2 times "
                                                    "in the header\n")
    result = run("--lengths-file", str(digits))
    assert result.exit_code == 2 and result.stderr == "".join(
        f"error: --lengths-file {digits} line {n}: input_tokens and output_tokens must be integers and share a "
        "number\n" for n in (2, 3))


def test_save_result_is_checked_before_the_run_and_written_whole(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    for target, why in ((folder, "is a directory; expected a file name"),
                        (tmp_path / "no" / "x.json", f"folder {tmp_path / 'no'} does not exist")):
        result = run("--save-result", str(target))
        assert (result.exit_code, result.stderr) == (2, f"error: --save-result {target}: {why}\n")
        assert result.stdout == ""  # nothing was simulated
    saved = tmp_path / "r.json"
    result = run("--save-result", str(saved))
    assert result.exit_code == 0 and json.loads(saved.read_text())["num_prompts"] > 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_sharegpt_lengths_given_for_the_random_dataset_are_said_to_be_ignored() -> None:
    result = run("--sharegpt-input-len", "100", "--random-input-len", "256", "--random-output-len", "16")
    assert result.exit_code == 0
    assert "note: --sharegpt-input-len applies to --dataset-name sharegpt without --lengths-file only: ignored" \
        in result.stderr


@pytest.mark.parametrize(("args", "error"), [
    (("--gpus", ""), "error: --gpus: an empty list (leave the flag out for the default)"),
    (("--precisions", ","), "error: --precisions: an empty list (leave the flag out for the default)"),
    (("--requests-per-second", "1e308"),
     "error: --requests-per-second must be at most 1e+06, as in a workload file (got 1e+308)"),
])
def test_matrix_refuses_an_empty_list_and_a_rate_no_workload_file_takes(args: tuple[str, ...], error: str) -> None:
    result = CliRunner().invoke(cli, ["matrix", "7B", *args])
    assert (result.exit_code, result.stderr) == (2, error + "\n")


def test_catalog_list_refuses_an_empty_currency_and_an_fx_rate_of_one_currency() -> None:
    result = CliRunner().invoke(cli, ["catalog", "list", "--currency", ""])
    assert (result.exit_code, result.stderr) == (
        2, "error: --currency: empty (known: USD, CNY; leave the flag out for none)\n")
    result = CliRunner().invoke(cli, ["catalog", "list", "--fx-rate", "USD:USD=2"])
    assert (result.exit_code, result.stderr) == (
        2, "error: --fx-rate 'USD:USD=2': base and quote must be two currencies\n")


def test_quantization_in_the_server_args_is_the_weight_format_a_plan_prints() -> None:
    """A plan's command for fp8 weights on a 16-bit checkpoint says `--quantization fp8`; pasted into
    --server-args it was parsed and ignored (the weights simulated in BF16: 170,432 KV tokens for the plan's
    408,512 and a 20x TTFT miss). It is now the precision; a method the model does not ship in is refused."""
    base = ["simulate", "--model", "Qwen/Qwen2.5-32B-Instruct", "--gpu", "H100-NVL-94GB", "--random-input-len", "1200",
            "--random-output-len", "300", "--num-prompts", "20", "--request-rate", "2", "--json"]
    pasted = CliRunner().invoke(cli, [*base, "--server-args", "--quantization fp8 --kv-cache-dtype fp8 "
                                                               "--max-model-len 8192"])
    flagged = CliRunner().invoke(cli, [*base, "--precision", "fp8", "--kv-cache-dtype", "fp8",
                                       "--max-model-len", "8192"])
    assert pasted.exit_code == 0 and flagged.exit_code == 0, pasted.output
    assert json.loads(pasted.stdout) == json.loads(flagged.stdout)
    wrong = CliRunner().invoke(cli, [*base, "--server-args", "--quantization awq"])
    assert wrong.exit_code == 2
    assert "error: --server-args --quantization awq: Qwen/Qwen2.5-32B-Instruct is not a quantized checkpoint" in \
        wrong.stderr


def test_a_release_newer_than_modelled_is_refused_as_every_other_command_refuses_it():
    """QA: simulate took --vllm-version 99.0 (and '') and simulated 0.34's defaults; fit, matrix and solve refuse."""
    for version, why in (("99.0", "99.0 is newer than the newest modelled release"),
                         ("", "'' is not a version like 0.19 or 0.11.0")):
        result = run("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--num-prompts", "5",
                     "--vllm-version", version)
        assert result.exit_code == 2 and result.stdout == "" and why in result.stderr
