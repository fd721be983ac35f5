"""`gpuopt calibrate`: evidence read from real files, factors recovered, profiles applied and checked."""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuopt.cli.main import cli
from gpuopt.cli.profile_option import apply_profile
from gpuopt.errors import InputError
from gpuopt.hardware import get_gpu, use_calibrated
from gpuopt.inputs.evidence import LatencyObservation, MemoryObservation, ServerConfig, read_evidence, read_log
from gpuopt.physics.profile import scale
from gpuopt.planner.calibrate import (
    BANDWIDTH_METRICS,
    Factors,
    _traded_group,
    calibrate,
    convoys,
    method,
    observed,
    predict,
    replay,
)

EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"
K8S = sorted(EVIDENCE.glob("llm-k8s_01_tp8_pp1_qps_*.json"))
# vLLM 0.8.3 runs: older than any modelled release, so the newest release's defaults apply, except async
# scheduling (a default only from 0.14)
K8S_FLAGS = ["--model", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "A100-SXM-40GB", "--tp", "8",
             "--server-args", "--no-async-scheduling"]


def test_bench_result_file_becomes_one_closed_loop_observation() -> None:
    obs = read_evidence(EVIDENCE / "vllm_bench_serve_result.json", ServerConfig(model="Qwen/Qwen3-32B", gpu="H100"))
    assert isinstance(obs, LatencyObservation)
    # 262,144 input and 131,072 output tokens over 128 completed requests, max_concurrency 1
    assert (obs.protocol, obs.input_tokens, obs.output_tokens, obs.concurrency) == ("closed-loop", 2048, 1024, 1)
    assert obs.mean_ttft_ms == pytest.approx(254.8350538681916)
    assert obs.output_throughput == pytest.approx(86.43024866858579)


def test_metrics_scrape_means_and_implied_concurrency() -> None:
    obs = read_evidence(EVIDENCE / "vllm_metrics_nvcr-25.09_qwen3-4b-fp8.txt",
                        ServerConfig(model="Qwen/Qwen3-4B", gpu="H100-SXM-80GB"))
    assert isinstance(obs, LatencyObservation)
    # 6 requests: 246 prompt and 1,739 generation tokens; 1,739 engine steps for 1,739 generated tokens
    assert obs.input_tokens == 41 and obs.output_tokens == pytest.approx(1739 / 6)
    assert obs.concurrency == 1.0
    assert obs.mean_ttft_ms is not None and obs.mean_tpot_ms is not None


def _startups() -> list[dict[str, str]]:
    with (EVIDENCE / "vllm_startup_lines.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("row", _startups(), ids=lambda r: r["source_url"].rsplit("/", 1)[-1][:60])
def test_every_quoted_startup_log_reads_back_its_logged_figures(row: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(row["log_lines"] + "\n", encoding="utf-8")
    obs = read_log(log, log.read_text())
    if row["logged_kv_cache_gib"] and "Available KV cache memory" in row["log_lines"]:
        assert obs.kv_cache_gib == pytest.approx(float(row["logged_kv_cache_gib"]), abs=0.006)
    if "GPU KV cache size" in row["log_lines"] and row["logged_kv_tokens"]:
        assert obs.kv_cache_tokens == int(float(row["logged_kv_tokens"]))


def _replayed(truth: tuple[float, float]) -> list[LatencyObservation]:
    """Runs as the simulator replays them on a GPU with known factors: two closed loops of the hikarioyama
    protocol (request rate inf, a concurrency cap, max(16, 4C) prompts: one client has a steady state, eight
    clients of equal-length requests run in convoys and are replayed), two runs sent all at once and one
    Poisson run past the replica's capacity (replayed)."""
    gpu = scale(get_gpu("H100-SXM-80GB"), *truth)
    config = ServerConfig(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", vllm_version="0.19",
                          max_model_len=4096)
    out = []
    for i, (protocol, cap, rate, prompts, inp, outp) in enumerate([
            ("closed-loop", 1, None, 16, 1024, 128), ("closed-loop", 8, None, 32, 256, 1024),
            ("all-at-once", None, None, 64, 1024, 128), ("all-at-once", None, None, 100, 256, 512),
            ("poisson", None, 80.0, 200, 512, 256)]):
        obs = LatencyObservation(f"r{i}", "synthetic", config, protocol, inp, outp, prompts, cap, rate,  # type: ignore[arg-type]
                                 None, None, None, None)
        p = predict(obs, gpu) if protocol == "closed-loop" and not convoys(obs) else replay(obs, gpu)
        out.append(replace(obs, mean_ttft_ms=p["mean_ttft_ms"], mean_tpot_ms=p["mean_tpot_ms"],
                           mean_itl_ms=p["mean_itl_ms"], output_throughput=p["output_throughput"]))
    return out


@settings(max_examples=6, deadline=None, derandomize=True)
@given(bandwidth=st.floats(0.6, 1.6), compute=st.floats(0.6, 1.6))
def test_runs_replayed_through_the_simulator_with_a_known_profile_recover_it(bandwidth: float, compute: float) -> None:
    """Property: whatever the GPU's true factors (0.6-1.6x), fitting runs simulated on it recovers them within
    4 % (0.5 % while the eight-client loop was predicted at steady state, before 2026-12-03: four of the five
    runs are replays now, one of them 32 prompts in four convoys, and a replay's step timing makes the loss
    rough -- 0.5952 and 0.6069 for 0.6; compute 1.1 fits 1.0752 and 1.125 1.0882, which hypothesis found on
    2026-12-04 once new constants in the code moved its examples: the 2 % this said before held only for the
    examples it happened to draw). A factor whose truth is the model's own 1 leaves nothing to fit
    (material_gain), so it stays at 1, and with both at 1 the GPU gets no entry."""
    runs = _replayed((bandwidth, compute))
    methods = {o.id: method(o, get_gpu("H100-SXM-80GB")) for o in runs}
    assert methods == {"r0": "steady state", "r1": "replayed", "r2": "replayed", "r3": "replayed",
                       "r4": "replayed"}
    result = calibrate(runs)
    if not result.profile.entries:
        assert bandwidth == pytest.approx(1.0, rel=0.02) and compute == pytest.approx(1.0, rel=0.02)
        return
    [entry] = result.profile.entries
    for fit, truth in ((entry.decode_bandwidth, bandwidth), (entry.prefill_compute, compute)):
        assert (fit.value if fit is not None else 1.0) == pytest.approx(truth, rel=0.04)
        assert fit is not None or truth == pytest.approx(1.0, rel=0.02)
    assert result.replays > 0


def test_runs_sent_all_at_once_alone_are_enough_to_fit() -> None:
    """Without a single steady-state run (the case the analytic fit could not use at all). These runs pin the
    bandwidth less sharply than closed loops: their decode steps carry 64-200 sequences whose host work
    (cpu_per_seq_us, 120 us each since the 2026-12-02 refit) dilutes the bandwidth term, and a replay's step
    timing makes the loss rough near its minimum (0.0010 at 0.76, 0.0012 at 0.771, 0 at the truth 0.75): the
    fit lands 2.8 % off (within 0.5 % before that refit)."""
    runs = [o for o in _replayed((0.75, 1.2)) if o.protocol != "closed-loop"]
    [entry] = calibrate(runs).profile.entries
    assert entry.decode_bandwidth is not None and entry.decode_bandwidth.value == pytest.approx(0.75, rel=0.04)


def _synthetic(truth: tuple[float, float, float]) -> list[LatencyObservation | MemoryObservation]:
    """Observations exactly as the models predict them on a GPU with known factors: closed loops whose lengths
    vary about their means (fractional means: no convoys), so the steady state describes them."""
    gpu = scale(get_gpu("H100-SXM-80GB"), *truth)
    config = ServerConfig(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", vllm_version="0.19")
    out: list[LatencyObservation | MemoryObservation] = []
    for i, (clients, inp, outp) in enumerate([(1, 1024, 128), (4, 1024, 128), (16, 256, 1024), (64, 2048, 256)]):
        obs = LatencyObservation(f"r{i}", "synthetic", config, "closed-loop", inp + 0.5, outp + 0.5, 100, clients,
                                 None, None, None, None, None)
        p = predict(obs, gpu)
        out.append(replace(obs, mean_ttft_ms=p["mean_ttft_ms"], mean_tpot_ms=p["mean_tpot_ms"],
                           output_throughput=p["output_throughput"]))
    for i, (util, length) in enumerate([(0.9, 8192), (0.8, 16384)]):
        mem = MemoryObservation(f"m{i}", "synthetic", replace(config, gpu_memory_utilization=util,
                                                              max_model_len=length), None, None, None, None)
        out.append(replace(mem, kv_cache_gib=predict(mem, gpu)["kv_cache_gib"]))
    return out


@pytest.mark.parametrize("truth", [(0.8, 1.3, -0.6), (1.15, 0.7, 0.4)])
def test_calibrating_on_a_known_profile_recovers_it(truth: tuple[float, float, float]) -> None:
    result = calibrate(_synthetic(truth))
    [entry] = result.profile.entries
    assert entry.decode_bandwidth is not None and entry.prefill_compute is not None
    assert entry.memory_offset_gib is not None
    assert entry.decode_bandwidth.value == pytest.approx(truth[0], rel=0.01)
    assert entry.prefill_compute.value == pytest.approx(truth[1], rel=0.01)
    assert entry.memory_offset_gib.value == pytest.approx(truth[2], abs=0.01)
    assert entry.decode_bandwidth.median_error_after_pct < 0.5 < entry.decode_bandwidth.median_error_before_pct


PROFILE = """kind: gpuopt-profile
schema_version: 1
entries:
- gpu: A100-SXM-40GB
  decode_bandwidth: {value: 0.8, observations: [hand], median_error_before_pct: 20.0, median_error_after_pct: 5.0,
                     leave_one_out_error_pct: null}
  fitted: '2026-12-01'
"""


def test_real_runs_past_capacity_are_replayed_and_no_factor_that_does_not_help_is_kept() -> None:
    """Rates 1 and 4 have a steady state (within 2.1-7.4 % on TPOT and ITL); 16 requests/s is past this
    replica's capacity and the last run is sent all at once: both are replayed through the simulator and
    enter the fit. Nothing is kept: the compute factor is pinned at 5x (these runs re-sent prompts a warm
    prefix cache held, which no GPU speed explains), and no bandwidth factor lowers the figures' median error
    by more than noise (22.5 % at 1, 23.9 % at the best overall fit; since a request's first token comes out of
    its prefill step, 2026-12-04; before, the factor that brought the figures closer fitted, 1.11, 22.5 -> 19.5
    %, took the steady-state runs from 4.6 to 10.5 %, their TPOT 7.4 and 2.1 % -> 13.3 and 8.0 %: it traded
    one kind of run for the other; 1.18, 22.5 -> 19.1 % and 24.0 % on each run left
    out, "does not generalise", before the tail of the prompts a step carries was relative; 1.26, 22.5 ->
    20.1 % and the steady-state runs from 4.6 to 7.2 % left out before a short prompt's step carried the
    prompts that arrived beside it, 2026-12-04; 1.26, 22.5 -> 20.0 % and 30.4 % on each run left out before a
    prompt step's cost was the mean over the prompts it carries, 2026-12-04; 1.11, 22.5 -> 19.5 %, trading the
    steady-state runs, 4.6 -> 9.9 % left out, for the replayed ones before a prompt's work
    was its share of a full prompt step, 2026-12-04; 1.12, 22.5 -> 19.2 % and 23.4 % on each run left out
    before it was its share of the steps that carry prompts, 2026-12-04; 1.19, 22.8 -> 18.6 % and 33.2 %
    before ShareGPT-shaped replays kept each request within 5 x the means, 2026-12-04; since prompts queue for
    the prefill work ahead of them, 2026-12-03; with a Poisson request's TPOT the request step alone, it took
    the steady-state runs from 4.6 to 6.7 % left out; with the residual of the step in flight, best value 1.03,
    replayed 40.3 -> 41.8 %; with the queues at the API server and for KV room, 1.16, replayed 40.3 -> 41.7 %;
    with round 14's calibration before them, the steady-state runs from 5.3 to 16.4 %; round 13's, 4.7 to
    13.3 %; with round 11's, the replayed ones from 41.2 to 45.1 %; with round 10's, the steady-state ones
    from 4.2 to 13.7 %): not the GPU's speed."""
    result = CliRunner().invoke(cli, ["calibrate", *map(str, K8S), *K8S_FLAGS, "--json"])
    assert result.exit_code == 2
    assert "no factor fitted" in result.stderr
    # refused as noise, as not generalising or as trading one kind of run for the other: which moves with
    # every change of the model (the docstring's history); that no bandwidth factor is kept does not
    refusal = next(line for line in result.stderr.splitlines() if "decode_bandwidth not fitted" in line)
    reasons = ("no value lowers the median error", "it does not generalise",
               "it trades one kind of run against the other")
    assert any(reason in refusal for reason in reasons)
    assert "prefill_compute not fitted: the best value (5.00) is at the edge" in result.stderr
    rows = {(r["observation"][:26], r["metric"]): r for r in json.loads(result.stdout)["comparisons"]}
    assert {r["method"] for (name, _), r in rows.items() if "qps_16" in name or "qps_inf" in name} == {"replayed"}
    assert {r["method"] for (name, _), r in rows.items() if "qps_01" in name or "qps_04" in name} == {"steady state"}
    # the steady state has no figure for an open loop's throughput (rate x output whatever the GPU)
    assert rows[("llm-k8s_01_tp8_pp1_qps_04.", "output_throughput")]["before"] is None
    inf_tpot = rows[("llm-k8s_01_tp8_pp1_qps_inf", "mean_tpot_ms")]
    assert inf_tpot["observed"] == pytest.approx(39.06, abs=0.01)
    assert inf_tpot["before"] == pytest.approx(73.37, abs=0.01)


class _FivePercentHigh:
    """A predictor stub: every figure 5 % above the observed; the first two runs by the steady state."""

    def __init__(self, items: list[LatencyObservation]) -> None:
        self.steady = {o.id for o in items[:2]}

    def method_of(self, o: LatencyObservation) -> str:
        return "steady state" if o.id in self.steady else "replayed"

    def __call__(self, o: LatencyObservation, f: object = None) -> dict[str, float]:
        """5 % high; with a bandwidth factor the steady-state runs 15 % high (a fit that trades them in-sample)."""
        traded = isinstance(f, Factors) and f.decode_bandwidth != 1.0 and o.id in self.steady
        return {m: v * (1.15 if traded else 1.05) for m, v in observed(o).items()}


def test_a_factor_that_trades_one_kind_of_run_for_the_other_is_named() -> None:
    config = ServerConfig(model="meta-llama/Llama-3.3-70B-Instruct", gpu="A100-SXM-40GB", tensor_parallel=8)
    items = [read_evidence(p, config) for p in K8S]
    stub = _FivePercentHigh(items)  # type: ignore[arg-type]

    def left_out(steady: float, replayed: float) -> dict[str, dict[str, float]]:
        return {o.id: {m: v * (steady if o.id in stub.steady else replayed) for m, v in observed(o).items()}
                for o in items}

    # left out of the fit the steady-state runs go from 5 % to 20 % off while the replays improve to 1 %:
    # the steady-state kind is the one traded
    none = Factors()
    traded = _traded_group(items, stub, none, left_out(1.20, 1.01), BANDWIDTH_METRICS)  # type: ignore[arg-type]
    assert traded is not None and traded[0] == "steady state"
    assert traded[1:] == pytest.approx((5.0, 20.0))
    # a worsening within the 1-point tolerance (5 -> 5.5 %) is noise, not a trade
    assert _traded_group(items, stub, none, left_out(1.055, 1.01), BANDWIDTH_METRICS) is None  # type: ignore[arg-type]
    # the same left out of the fit, but the fitted factor takes the steady-state runs to 15 % in-sample: a trade
    faster = Factors(decode_bandwidth=1.1)
    traded = _traded_group(items, stub, faster, left_out(1.055, 1.01), BANDWIDTH_METRICS)  # type: ignore[arg-type]
    assert traded is not None and traded[0] == "steady state"
    assert traded[1:] == pytest.approx((5.0, 15.0))


def test_a_profile_is_scored_on_new_runs_without_refitting(tmp_path: Path) -> None:
    out = tmp_path / "profile.yaml"
    out.write_text(PROFILE)
    check = CliRunner().invoke(cli, ["calibrate", *map(str, K8S[:2]), *K8S_FLAGS, "--check", str(out), "--json"])
    assert check.exit_code == 0, check.stderr
    rows = json.loads(check.stdout)["comparisons"]
    tpot = [r for r in rows if r["metric"] == "mean_tpot_ms"]
    assert len(tpot) == 2 and all(r["after"] > r["before"] for r in tpot)  # 80 % of the bandwidth: slower


def test_a_profile_changes_what_every_model_reads_of_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "profile.yaml"
    out.write_text(PROFILE)
    raw = get_gpu("A100-SXM-40GB").hbm_tb_s
    try:
        assert apply_profile(out, None) == str(out)
        assert raw is not None and get_gpu("A100-SXM-40GB").hbm_tb_s == pytest.approx(raw * 0.8)
        assert get_gpu("H100-SXM-80GB").hbm_tb_s == 3.35  # other GPUs untouched
    finally:
        use_calibrated({})
    assert get_gpu("A100-SXM-40GB").hbm_tb_s == raw


def test_one_run_is_too_little_evidence() -> None:
    result = CliRunner().invoke(cli, ["calibrate", str(K8S[0]), *K8S_FLAGS])
    assert result.exit_code == 2
    assert "no factor fitted" in result.stderr and "1 of the 2" in result.stderr


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("cut.json", '{"completed": 10, "total_output_tok', "not JSON"),
    ("server.log", "INFO starting server\nINFO ready\n", "no vLLM start-up lines"),
    ("metrics.txt", "# TYPE http_requests_total counter\nhttp_requests_total 3\n", "no vLLM series"),
])
def test_bad_files_are_exit_2_naming_the_file(tmp_path: Path, name: str, content: str, needle: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    result = CliRunner().invoke(cli, ["calibrate", str(path), *K8S_FLAGS])
    assert result.exit_code == 2 and f"{path}: " in result.stderr and needle in result.stderr


LOG = ("INFO vLLM API server version 0.19.0\nINFO non-default args: {ARGS}\n"
       "INFO Available KV cache memory: 55.0 GiB\nINFO GPU KV cache size: 450,000 tokens\n")


@pytest.mark.parametrize(("args", "problem"), [
    ("{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'tensor_parallel_size': 'abc'}",
     "non-default args tensor_parallel_size: expected a positive integer, got 'abc'"),
    ("{'model': 123}", "non-default args model: expected a name, got 123"),
    ("{'model': ['a']}", "non-default args model: expected a name, got ['a']"),
    ("{'model': 'm', 'gpu_memory_utilization': '0.9'}",
     "non-default args gpu_memory_utilization: expected a number in (0, 1], got '0.9'"),
    ("{'model': 'm', 'enforce_eager': 1}", "non-default args enforce_eager: expected True or False, got 1"),
])
def test_a_log_argument_of_the_wrong_type_is_one_line_naming_it(tmp_path: Path, args: str, problem: str) -> None:
    """QA: a log's non-default args were used untyped ('tensor_parallel_size': 'abc' -> TypeError, exit 70)."""
    path = tmp_path / "l.log"
    path.write_text(LOG.replace("{ARGS}", args))
    result = CliRunner().invoke(cli, ["calibrate", str(path), "--gpu", "H100-SXM-80GB"])
    assert result.exit_code == 2 and result.stderr == f"error: {path}: {problem}\n"


@pytest.mark.parametrize(("log", "problem"), [
    (LOG.replace("0.19.0", "99.0").replace("{ARGS}", "{'model': 'meta-llama/Llama-3.1-8B-Instruct'}"),
     "vLLM 99.0 is newer than the newest modelled release 0.34: its defaults are not modelled, so this run "
     "cannot be replayed"),
    (LOG.replace("{ARGS}", "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'kv_cache_dtype': 'nvfp4'}"),
     "non-default args kv_cache_dtype 'nvfp4' is not modelled (auto and the fp8 formats are): this run cannot "
     "be replayed"),
])
def test_a_log_of_what_gpuopt_does_not_model_is_refused(tmp_path: Path, log: str, problem: str) -> None:
    """QA: a 99.0 log was fitted with 0.34's defaults, an nvfp4 cache as a 2-byte one, both silently."""
    path = tmp_path / "l.log"
    path.write_text(log)
    result = CliRunner().invoke(cli, ["calibrate", str(path), "--gpu", "H100-SXM-80GB"])
    assert result.exit_code == 2 and result.stderr == f"error: {path}: {problem}\n"


@pytest.mark.parametrize(("sidecar", "problem"), [
    ("model: 123\n", "model: expected a string, got 123"),
    ("gpu: [H100]\n", "gpu: expected a string, got ['H100']"),
    ("vllm_version: 0.10\n", "vllm_version: expected a string, got 0.1 (quote it: YAML reads vllm_version: 0.1 "
                             "as a number)"),
])
def test_a_sidecar_value_of_the_wrong_type_is_named_in_the_sidecar(tmp_path: Path, sidecar: str,
                                                                  problem: str) -> None:
    """QA: `model: 123` was exit 70; `vllm_version: 0.10` became release 0.1, blamed on --vllm-version."""
    path = tmp_path / "l.log"
    path.write_text(LOG.replace("{ARGS}", "{'model': 'meta-llama/Llama-3.1-8B-Instruct'}"))
    (tmp_path / "l.log.yaml").write_text(sidecar)
    result = CliRunner().invoke(cli, ["calibrate", str(path), "--gpu", "H100-SXM-80GB"])
    assert result.exit_code == 2 and result.stderr == f"error: {tmp_path / 'l.log.yaml'}: {problem}\n"


@pytest.mark.parametrize("value", ["+Inf", "NaN", "-3"])
def test_a_metrics_series_that_is_not_finite_or_is_negative_is_refused(tmp_path: Path, value: str) -> None:
    """QA: a +Inf TTFT sum reached a logarithm (exit 70); NaN dropped the TTFT silently; a negative prompt-token
    sum was used."""
    text = (EVIDENCE / "vllm_metrics_nvcr-25.09_qwen3-4b-fp8.txt").read_text()
    edited, n = re.subn(r"^(vllm:time_to_first_token_seconds_sum\{[^}]*\}) \S+$", rf"\1 {value}", text,
                        flags=re.M)
    assert n == 1
    path = tmp_path / "m.txt"
    path.write_text(edited)
    with pytest.raises(InputError, match=r"series vllm:time_to_first_token_seconds_sum is .*: vLLM's series are "
                                         r"finite and never negative"):
        read_evidence(path, ServerConfig(model="Qwen/Qwen3-4B", gpu="H100-SXM-80GB"))


def test_unknown_configuration_is_exit_2_naming_what_is_missing() -> None:
    result = CliRunner().invoke(cli, ["calibrate", str(K8S[0]), str(K8S[1])])
    assert result.exit_code == 2 and "unknown gpu of this run" in result.stderr and K8S[0].name in result.stderr
    # a weight format gpuopt does not know was silently ignored (the fit ran on the checkpoint's own)
    bad = CliRunner().invoke(cli, ["calibrate", str(K8S[0]), str(K8S[1]), "--gpu", "A100-SXM-40GB",
                                   "--precision", "q4"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: Invalid value for '--precision': 'q4' is not one of")


def test_sidecar_yaml_gives_the_configuration(tmp_path: Path) -> None:
    copies = []
    for path in K8S[:2]:
        copy = tmp_path / path.name
        copy.write_text(path.read_text())
        (tmp_path / (path.name + ".yaml")).write_text(
            "model: meta-llama/Llama-3.3-70B-Instruct\ngpu: A100-SXM-40GB\ntensor_parallel: 8\n")
        copies.append(copy)
    obs = read_evidence(copies[0], ServerConfig())
    assert (obs.config.gpu, obs.config.tensor_parallel) == ("A100-SXM-40GB", 8)
    assert math.isclose(obs.input_tokens, obs.input_tokens)


def test_fit_solve_and_plan_read_the_gpu_through_the_profile_and_say_so(tmp_path: Path) -> None:
    out = tmp_path / "profile.yaml"
    out.write_text(PROFILE)
    fit_args = ["fit", "--model", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "A100-SXM-40GB", "--tp", "8",
                "--input-tokens", "200", "--output-tokens", "200", "--concurrency", "4", "--json"]
    try:
        plain = CliRunner().invoke(cli, fit_args)
        calibrated = CliRunner().invoke(cli, [*fit_args, "--profile", str(out)])
        assert plain.exit_code == calibrated.exit_code == 0, calibrated.stderr
        assert f"calibration profile {out}: A100-SXM-40GB" in calibrated.stderr
        # 80 % of the bandwidth: longer decode steps (not 1/0.8 exactly: fixed overheads do not scale)
        assert json.loads(calibrated.stdout)["tpot_ms"] > json.loads(plain.stdout)["tpot_ms"] * 1.05
        solved = CliRunner().invoke(cli, ["solve", "examples/two-models.yaml", "--provider", "aws", "--format", "json",
                                          "--candidates", "none", "--profile", str(out)])
        assert solved.exit_code == 0, solved.stderr
        assert json.loads(solved.stdout)["profile"] == str(out)
        capacity = CliRunner().invoke(cli, ["plan", "examples/capacity-global.yaml", "--format", "json",
                                            "--profile", str(out)])
        assert capacity.exit_code == 0, capacity.stderr
        assert json.loads(capacity.stdout)["profile"] == str(out)
    finally:
        use_calibrated({})


def test_the_real_runs_resent_the_same_prompts_in_order() -> None:
    """What docs/calibrate.md says of the llm-k8s files: the same 200 ShareGPT prompts (same prompt-token
    total, same first lengths) sent at 1, 4, 16 and inf requests/s, in that order, to one server."""
    runs = [json.loads(p.read_text()) for p in K8S]
    assert [r["request_rate"] for r in runs] == [1.0, 4.0, 16.0, "inf"]
    assert {r["total_input_tokens"] for r in runs} == {42659}
    assert {tuple(r["input_lens"][:3]) for r in runs} == {(13, 25, 27)}
    assert [r["date"] for r in runs] == sorted(r["date"] for r in runs)


BENCH = Path(__file__).resolve().parent / "fixtures" / "evidence"  # copies of shared/data/fixtures/bench
HIKARIOYAMA = sorted(BENCH.glob("hikarioyama_*_random-*-run1.json"))


@pytest.mark.parametrize("path", HIKARIOYAMA, ids=lambda p: p.name)
def test_hikarioyama_runs_read_as_closed_loops_of_their_cap(path: Path) -> None:
    """`vllm bench serve --request-rate inf --max-concurrency C --num-prompts max(16, 4C)` (recipes/bench.sh),
    random lengths with --ignore-eos: a closed loop of C at the exact requested lengths."""
    cap = int(re.search(r"-c(\d+)-", path.name).group(1))  # type: ignore[union-attr]
    inp, outp = (int(v) for v in re.search(r"in(\d+)-out(\d+)", path.name).groups())  # type: ignore[union-attr]
    obs = read_evidence(path, ServerConfig(model="Qwen/Qwen3-8B", gpu="RTX-PRO-6000-MaxQ-96GB"))
    assert isinstance(obs, LatencyObservation)
    assert (obs.protocol, obs.concurrency, obs.request_rate, obs.num_prompts) == ("closed-loop", cap, None,
                                                                                 max(16, 4 * cap))
    assert (obs.input_tokens, obs.output_tokens) == (inp, outp)
    assert obs.mean_tpot_ms is not None and obs.mean_ttft_ms is not None


def test_a_model_gpuopt_does_not_know_is_exit_2_naming_the_file_and_the_model() -> None:
    """The hikarioyama server ran unsloth/Qwen3.8-27B-NVFP4, whose config is not in gpuopt's registry: the
    command says so (it used to call the runs 'shown but not fitted: no steady state')."""
    result = CliRunner().invoke(cli, ["calibrate", *map(str, HIKARIOYAMA[:2]), "--model", "unsloth/Qwen3.8-27B-NVFP4",
                                      "--gpu", "RTX-PRO-6000-MaxQ-96GB", "--vllm-version", "0.27.1"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {HIKARIOYAMA[0]}: unknown model 'unsloth/Qwen3.8-27B-NVFP4'")


def test_check_replays_the_runs_without_a_steady_state_too(tmp_path: Path) -> None:
    """--check scores a profile on every run, the all-at-once one through the simulator: 80 % of the
    bandwidth makes its replayed TPOT longer and its throughput lower."""
    out = tmp_path / "profile.yaml"
    out.write_text(PROFILE)
    check = CliRunner().invoke(cli, ["calibrate", str(K8S[-1]), *K8S_FLAGS, "--check", str(out), "--json"])
    assert check.exit_code == 0, check.stderr
    rows = {r["metric"]: r for r in json.loads(check.stdout)["comparisons"]}
    assert {r["method"] for r in rows.values()} == {"replayed"}
    # 73.37 ms (73.70 before ShareGPT-shaped replays kept each request within 5 x the means, 2026-12-04)
    assert rows["mean_tpot_ms"]["after"] > rows["mean_tpot_ms"]["before"] == pytest.approx(73.37, abs=0.01)
    assert rows["output_throughput"]["after"] < rows["output_throughput"]["before"]


def test_a_log_whose_arguments_hold_a_config_object_still_reads_the_literal_ones(tmp_path: Path) -> None:
    """vLLM prints its non-default arguments as a Python repr; a compilation config in it is an object with an
    enum inside, which no literal parser reads -- the literal pairs are read one by one, and the CUDA-graph mode
    however it prints."""
    log = tmp_path / "server.log"
    log.write_text(
        "INFO 12-01 10:00:00 [utils.py:253] non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'max_model_len': 8192, "
        "'gpu_memory_utilization': 0.85, 'enforce_eager': False, 'compilation_config': CompilationConfig(level=None, "
        "cudagraph_mode=<CUDAGraphMode.PIECEWISE: 1>, cudagraph_capture_sizes=None)}\n"
        "INFO 12-01 10:00:30 [gpu_worker.py:298] Available KV cache memory: 10.50 GiB\n", encoding="utf-8")
    config = read_log(log, log.read_text()).config
    assert (config.model, config.max_model_len, config.gpu_memory_utilization, config.enforce_eager) == \
        ("Qwen/Qwen3-8B", 8192, 0.85, False)
    assert config.cudagraphs is not None and config.cudagraphs.mode == "PIECEWISE"
    assert config.cudagraphs.compilation_mode is None  # `level=None`: not the mode
    # a compilation mode other than VLLM_COMPILE, as the config object prints it: the graphs follow from it
    log.write_text(
        "INFO non-default args: {'model': 'Qwen/Qwen3-8B', 'compilation_config': CompilationConfig(level=None, "
        "mode=<CompilationMode.NONE: 0>, cudagraph_mode=None)}\n"
        "INFO Available KV cache memory: 10.50 GiB\n", encoding="utf-8")
    settings = read_log(log, log.read_text()).config.cudagraphs
    assert settings is not None and (settings.mode, settings.compilation_mode) == (None, "NONE")
    log.write_text("INFO non-default args: {'compilation_config': {'mode': 2}, 'logprobs_mode': 'raw_logits'}\n"
                   "INFO Available KV cache memory: 10.50 GiB\n", encoding="utf-8")
    settings = read_log(log, log.read_text()).config.cudagraphs
    assert settings is not None and settings.compilation_mode == "DYNAMO_TRACE_ONCE"
    # a `'mode':` of a later argument is not the compilation config's
    log.write_text("INFO non-default args: {'compilation_config': {'cudagraph_mode': 'PIECEWISE'}, "
                   "'speculative_config': {'mode': 0}}\nINFO Available KV cache memory: 10.50 GiB\n", encoding="utf-8")
    settings = read_log(log, log.read_text()).config.cudagraphs
    assert settings is not None and (settings.mode, settings.compilation_mode) == ("PIECEWISE", None)


def _bench(tmp_path: Path, **fields: object) -> Path:
    """A `vllm bench serve --save-result` file of 200 requests of 200 / 100 tokens, with `fields` changed."""
    data: dict[str, object] = {"completed": 200, "num_prompts": 200, "request_rate": 4.0, "max_concurrency": None,
                               "total_input_tokens": 40_000, "total_output_tokens": 20_000, "mean_ttft_ms": 120.0,
                               "mean_tpot_ms": 30.0, "input_lens": [200] * 200, "output_lens": [100] * 200}
    data.update(fields)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("fields", "message"), [
    ({"completed": True}, "completed: expected a whole number >= 0, got True"),
    ({"completed": 1},
     "completed: 1 requests would carry 40,000 prompt tokens each, where input_lens' 200 average 200"),
    ({"completed": 201}, "completed: 201 requests, more than num_prompts (200)"),
    ({"request_rate": "fast"}, 'request_rate: expected a positive number or "inf", got \'fast\''),
    ({"mean_ttft_ms": -5}, "mean_ttft_ms: expected a number >= 0, got -5"),
    ({"total_output_tokens": -100}, "total_output_tokens: expected a whole number >= 0, got -100"),
    ({"max_concurrency": 0}, "max_concurrency: expected a whole number of clients >= 1, got 0"),
    ({"duration": -3}, "duration: expected a positive number, got -3"),
    ({"duration": 0}, "duration: expected a positive number, got 0"),
    ({"burstiness": 0}, "burstiness: expected a positive number, got 0"),  # vLLM: --burstiness must be > 0
    ({"total_output_tokens": 0, "output_throughput": 673.9, "output_lens": [0] * 200},
     "total_output_tokens: 0 output tokens for 200 completed requests, where output_throughput says 673.9 tokens/s"),
    # QA: per-request lengths that contradict the totals were replayed (4,000-token prompts where the file's mean is
    # 213: 24,000 % error), and malformed ones were ignored
    ({"input_lens": [4000] * 200}, "input_lens: its 200 requests sum to 800,000 tokens, where total_input_tokens "
                                   "says 40,000"),
    ({"output_lens": [99] * 200}, "output_lens: its 200 requests sum to 19,800 tokens, where total_output_tokens "
                                  "says 20,000"),
    ({"input_lens": "x"}, "input_lens: expected a list of whole numbers >= 1, one per request"),
    ({"total_output_tokens": 10**30, "output_lens": []},
     "total_output_tokens: 1e+30 tokens over 200 requests, 5e+27 a request: more than gpuopt models (10,000,000)"),
    ({"input_lens": [-1] * 200}, "input_lens: expected a list of whole numbers >= 1, one per request"),
    ({"output_lens": [1.5] * 200}, "output_lens: expected a list of whole numbers >= 0, one per request"),
])
def test_a_bench_file_that_could_not_have_been_written_is_one_error_per_field(tmp_path, fields, message):
    """Replayed, such a file is a load that never ran: `"completed": true` (read as 1) made 200 requests of
    42,597 tokens each and calibrate ran for minutes; a text rate was exit 70."""
    from gpuopt.inputs.evidence import read_bench

    path = _bench(tmp_path, **fields)
    with pytest.raises(InputError) as info:
        read_bench(path, path.read_text())
    assert info.value.problems == (f"{path}: {message}",)


def test_a_closed_loop_of_more_clients_than_prompts_is_one_of_the_prompts(tmp_path):
    from gpuopt.inputs.evidence import read_bench

    path = _bench(tmp_path, max_concurrency=10**12, request_rate="inf")
    observation = read_bench(path, path.read_text())
    assert (observation.protocol, observation.concurrency, observation.input_tokens) == ("closed-loop", 200.0, 200.0)


def test_with_two_runs_of_a_factor_there_is_no_left_out_figure() -> None:
    """Leaving one of two start-up logs out leaves one, too few to refit the memory offset: the 'left out'
    column has no figure (it showed the uncalibrated error as if it were one)."""
    memory = [o for o in _synthetic((1.0, 1.0, -0.4)) if isinstance(o, MemoryObservation)]
    assert len(memory) == 2
    result = calibrate(memory)
    [entry] = result.profile.entries
    assert entry.memory_offset_gib is not None and entry.memory_offset_gib.leave_one_out_error_pct is None
    assert all(c.leave_one_out is None for c in result.comparisons)


def test_a_closed_loop_of_equal_length_requests_is_replayed_and_gpuopts_own_runs_fit_nothing(tmp_path) -> None:
    """Equal-length clients run in convoys (their prompts share prefill steps): the steady state read 75 ms of
    TTFT where the simulator's loop of 8 clients of 1,024/128 tokens has 180, and calibrating on gpuopt's own
    runs fitted a prefill factor of 0.31 and a bandwidth of 3.48 for the 1 and 1 that made them. Replayed, the
    runs are matched exactly, so no factor is fitted (exit 2 says why)."""
    runs = []
    for clients in (8, 16):
        saved = tmp_path / f"c{clients}.json"
        made = CliRunner().invoke(cli, ["simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                                        "H100-SXM-80GB", "--num-prompts", "64", "--max-concurrency", str(clients),
                                        "--random-input-len", "1024", "--random-output-len", "128",
                                        "--save-result", str(saved)])
        assert made.exit_code == 0, made.stderr
        runs.append(str(saved))
    result = CliRunner().invoke(cli, ["calibrate", *runs, "--gpu", "H100-SXM-80GB", "--json"])
    assert result.exit_code == 2
    assert "decode_bandwidth not fitted: no value lowers the median error of its figures by enough" in result.stderr
    assert "prefill_compute not fitted: no value lowers the median error of its figures by enough" in result.stderr
    gpu = get_gpu("H100-SXM-80GB")
    for r in runs:
        o = read_evidence(Path(r), ServerConfig(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB"))
        assert isinstance(o, LatencyObservation) and method(o, gpu) == "replayed"
        figures, seen = replay(o, gpu), observed(o)
        assert all(figures[m] == pytest.approx(seen[m], rel=1e-3) for m in seen)


@pytest.mark.parametrize(("protocol", "clients", "lengths", "means", "expected"), [
    ("closed-loop", 8, (), (1024.0, 128.0), True),  # the random dataset's default: every request alike
    ("closed-loop", 1, (), (1024.0, 128.0), False),  # one client: nothing to convoy with
    ("closed-loop", 8, (), (213.4, 212.1), False),  # ShareGPT-shaped means
    ("closed-loop", 8, ((100, 10), (100, 10)), (100.0, 10.0), True),
    ("closed-loop", 8, ((100, 10), (300, 30)), (200.0, 20.0), False),  # listed lengths that differ
    ("poisson", None, (), (1024.0, 128.0), False),
])
def test_which_runs_convoy(protocol, clients, lengths, means, expected) -> None:
    from gpuopt.planner.calibrate import convoys

    o = LatencyObservation(id="x", source="x", config=ServerConfig(), protocol=protocol, input_tokens=means[0],
                           output_tokens=means[1], num_prompts=100, concurrency=clients,
                           request_rate=2.0 if protocol == "poisson" else None, lengths=lengths, mean_ttft_ms=100.0,
                           mean_tpot_ms=10.0, mean_itl_ms=10.0, output_throughput=None)
    assert convoys(o) is expected


def test_a_factor_must_lower_the_error_materially() -> None:
    from gpuopt.planner.calibrate import material_gain

    assert material_gain(10.78) == 0.539  # 5 % of the error: 10.78 -> 10.76 is not a fit
    assert material_gain(4.0) == 0.5  # half a point at least


@pytest.mark.parametrize(("edit", "needle"), [
    ("value: 0.8", "profile.yaml:5: entries.0.decode_bandwidth.value: expected a valid number, got string '0.8'"),
    ("value: 0.8", "profile.yaml:5: entries.0.decode_bandwidth.value: expected a finite number, got nan"),
    ("value: 0.8", "entries.0.decode_bandwidth.value: 1000 is outside 0.05-2 x the datasheet"),
    ("schema_version: 1", "profile.yaml:2: schema_version: expected 1, got integer 7"),  # at its line (QA)
])
def test_a_profile_no_gpu_could_have_is_refused(tmp_path: Path, edit: str, needle: str) -> None:
    """A hand-edited or mis-fitted profile reached the GPU's specification: NaN or 1e300 ended in exit 70, a
    string "5" was read as 5, and any factor was applied."""
    new = {"valid number": 'value: "0.8"', "finite": "value: .nan",
           "outside": "value: 1000", "schema_version": "schema_version: 7"}
    replacement = next(v for k, v in new.items() if k in needle)
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE.replace(edit, replacement))
    result = CliRunner().invoke(cli, ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-SXM-40GB",
                                      "--profile", str(path)])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr and "Traceback" not in result.stderr


def test_a_profile_entry_that_would_apply_to_nothing_or_twice_is_refused(tmp_path: Path) -> None:
    """QA: an entry for a misspelt GPU applied to nothing and a second entry for the same GPU and release was
    ignored, both silently; `vllm_version: abc` and `fitted: yesterday` were read. One line each."""
    second = PROFILE.split("entries:\n", 1)[1]
    text = (PROFILE + second.replace("A100-SXM-40GB", "NOPE-GPU") + second
            + second.replace("A100-SXM-40GB", "a100-sxm-40gb").replace("'2026-12-01'", "yesterday")
            + second.replace("- gpu: A100-SXM-40GB", "- gpu: A100-SXM-40GB\n  vllm_version: abc"))
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-SXM-40GB",
                                      "--profile", str(path)])
    assert result.exit_code == 2, result.output
    lines = [line.split(": ", 3)[2:] for line in result.stderr.splitlines()]  # error, --profile PATH, where, what
    assert [where for where, _ in lines] == ["entries.1.gpu", "entries.2", "entries.3.gpu", "entries.3.fitted",
                                             "entries.4.vllm_version"]
    assert lines[1][1] == ("entries.0 (A100-SXM-40GB, any release) applies first to A100-SXM-40GB on any release: "
                           "this entry would never apply")
    assert lines[2][1] == "write it as 'A100-SXM-40GB' (the entry applies to the GPU of that name)"


def test_a_memory_offset_past_the_cards_memory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE.replace("decode_bandwidth: {value: 0.8", "memory_offset_gib: {value: 972.0"))
    result = CliRunner().invoke(cli, ["fit", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--gpu",
                                      "A100-SXM-40GB", "--profile", str(path)])
    assert result.exit_code == 2
    assert "memory_offset_gib.value: 972 GiB would make the A100-SXM-40GB report 1,011.50 GiB" in result.stderr


def test_start_up_logs_of_a_kv_cache_no_such_card_holds_are_refused(tmp_path: Path) -> None:
    """Two logs of 1,000 and 900 GiB of KV cache "on an H100" fitted a memory offset that had an 80 GB card hold
    a 405B model in BF16."""
    logs = []
    for name, gib in (("a.log", 1000), ("b.log", 900)):
        log = tmp_path / name
        log.write_text(f"INFO Available KV cache memory: {gib} GiB\n", encoding="utf-8")
        logs.append(str(log))
    result = CliRunner().invoke(cli, ["calibrate", *logs, "--model", "Qwen/Qwen2.5-Coder-7B-Instruct", "--gpu",
                                      "H100-SXM-80GB", "--tp", "1", "-o", str(tmp_path / "p.yaml")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 2 and all("would need the H100-SXM-80GB to report" in line for line in lines)
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("figure", [". GiB", "1.2.3 GiB"])
def test_a_malformed_figure_in_a_log_is_no_start_up_line(tmp_path: Path, figure: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(f"INFO Available KV cache memory: {figure}\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["calibrate", str(log), str(log), "--model", "Qwen/Qwen3-8B", "--gpu",
                                      "H100-SXM-80GB", "--tp", "1"])
    assert result.exit_code == 2 and "no vLLM start-up lines" in result.stderr


@pytest.mark.parametrize(("field", "value", "message"), [
    ("mean_ttft_ms", 0, "mean_ttft_ms: 0 for 200 completed requests"),  # was a ZeroDivisionError in the fit
    ("max_concurrency", 2.5, "max_concurrency: expected a whole number of clients >= 1, got 2.5"),
    ("num_prompts", 10**12, "num_prompts: 1,000,000,000,000 requests, more than gpuopt replays (1,000,000)"),
    ("total_input_tokens", 0, "total_input_tokens: 0 prompt tokens for 200 completed requests"),  # QA: TTFT 30 ms
])
def test_a_bench_file_no_run_wrote_is_one_error_line(tmp_path: Path, field: str, value: object, message: str) -> None:
    data = json.loads(K8S[0].read_text())
    data[field] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["calibrate", str(bad), str(K8S[1]), *K8S_FLAGS])
    assert result.exit_code == 2
    assert result.stderr == f"error: {bad}: {message}\n"


def test_calibrate_keeps_no_factor_a_profile_would_refuse() -> None:
    """Runs that look 2.6x faster than the datasheet's bandwidth: the fit finds 2.6, inside its search range
    (0.2-5x) but outside the 0.05-2x a profile may hold, which `--profile` refuses -- calibrate wrote such
    profiles. It leaves the bandwidth out and says why, and what it writes reads back."""
    from gpuopt.inputs.profile_file import profile_problems

    result = calibrate(_synthetic((2.6, 1.3, 0.0)))
    [entry] = result.profile.entries
    assert entry.decode_bandwidth is None
    assert profile_problems(result.profile) == []
    assert any("decode_bandwidth not fitted: the best value (2.60) is outside the 0.05-2x of the datasheet"
               in line for line in result.skipped)


def test_a_broken_profile_is_named_by_where_it_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken $GPUOPT_PROFILE file was reported as `--profile FILE`, a flag the user never typed; the one
    `calibrate --check` reads likewise."""
    path = tmp_path / "profile.yaml"
    path.write_text("x: [\n")
    fit = ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-SXM-40GB"]
    monkeypatch.setenv("GPUOPT_PROFILE", str(path))
    from_env = CliRunner().invoke(cli, fit)
    assert from_env.exit_code == 2 and from_env.stderr.startswith(f"error: GPUOPT_PROFILE {path}:2: invalid YAML")
    flag = CliRunner().invoke(cli, [*fit, "--profile", str(path)])
    assert flag.exit_code == 2 and flag.stderr.startswith(f"error: --profile {path}:2: invalid YAML")
    monkeypatch.delenv("GPUOPT_PROFILE")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "gpuopt").mkdir(parents=True)
    default = tmp_path / "config" / "gpuopt" / "profile.yaml"
    default.write_text("kind: other\n")
    result = CliRunner().invoke(cli, fit)
    assert result.exit_code == 2
    assert result.stderr == f"error: default profile {default}: not a gpuopt profile (no `kind: gpuopt-profile`)\n"
    checked = CliRunner().invoke(cli, ["calibrate", str(K8S[0]), str(K8S[1]), *K8S_FLAGS, "--check", str(path)])
    assert checked.exit_code == 2 and checked.stderr.startswith(f"error: --check {path}:2: invalid YAML")


def test_a_profile_of_one_release_applies_to_plans_of_that_release_only(tmp_path: Path) -> None:
    """QA: an entry fitted on vLLM 0.19 applied to a 0.33 plan when --vllm-version was left out (0.33 is the
    default) but not when `--vllm-version 0.33` was given: one release, two answers."""
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE.replace("  fitted: '2026-12-01'", "  fitted: '2026-12-01'\n  vllm_version: '0.19'"))
    fit = ["fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-SXM-40GB", "--profile", str(path)]
    plain = CliRunner().invoke(cli, fit[:5])
    default, named = CliRunner().invoke(cli, fit), CliRunner().invoke(cli, [*fit, "--vllm-version", "0.33"])
    assert default.exit_code == named.exit_code == plain.exit_code == 0
    assert default.stdout == named.stdout == plain.stdout  # the 0.19 entry applies to neither
    assert (f"note: calibration profile {path}: not applied to A100-SXM-40GB (vLLM 0.19): this command plans for "
            f"vLLM 0.33 (--vllm-version)") in default.stderr
    old = CliRunner().invoke(cli, [*fit, "--vllm-version", "0.19"])
    assert old.exit_code == 0 and f"note: calibration profile {path}: A100-SXM-40GB" in old.stderr
    # review: calibrate writes the release a log prints (0.33.0); it applies to the default 0.33's plans
    logged = tmp_path / "logged.yaml"
    logged.write_text(PROFILE.replace("  fitted: '2026-12-01'", "  fitted: '2026-12-01'\n  vllm_version: '0.33.0'"))
    for extra in ([], ["--vllm-version", "0.33"], ["--vllm-version", "0.33.1"]):
        applied = CliRunner().invoke(cli, [*fit[:-1], str(logged), *extra])
        assert applied.exit_code == 0 and f"note: calibration profile {logged}: A100-SXM-40GB\n" in applied.stderr
    other = CliRunner().invoke(cli, [*fit[:-1], str(logged), "--vllm-version", "0.28"])
    assert "not applied to A100-SXM-40GB (vLLM 0.33.0)" in other.stderr


def test_one_run_given_twice_is_one_observation(tmp_path: Path) -> None:
    """QA: one bench file given twice (or a copy of it) met the two-observation rule and wrote a profile from a
    single run. A repeat is counted once, with a note, and one run fits nothing."""
    copy = tmp_path / "copy.json"
    copy.write_bytes(K8S[0].read_bytes())
    for files in ([K8S[0], K8S[0]], [K8S[0], copy]):
        result = CliRunner().invoke(cli, ["calibrate", *map(str, files), *K8S_FLAGS, "-o", str(tmp_path / "p.yaml")])
        assert result.exit_code == 2, result.output
        repeat = "given twice" if files[1] == files[0] else f"a copy of {K8S[0]}"
        assert f"note: {files[1]}: {repeat}; counted once" in result.stderr
        assert "calibration on 1 file(s)" in result.stdout
        assert "decode_bandwidth not fitted: 1 of the 2 runs with TPOT, ITL or throughput it needs" in result.stderr
        assert not (tmp_path / "p.yaml").exists()


def test_a_bench_file_saved_with_a_byte_order_mark_is_read_as_one(tmp_path: Path) -> None:
    """A bench result saved by a Windows editor (UTF-8 with a BOM) was read as a server log: "no vLLM start-up
    lines". It reads as the same run without the mark."""
    from gpuopt.inputs.evidence import ServerConfig, read_evidence

    marked = tmp_path / "run.json"
    marked.write_bytes(b"\xef\xbb\xbf" + K8S[0].read_bytes())
    defaults = ServerConfig(model="meta-llama/Llama-3.3-70B-Instruct", gpu="A100-SXM-40GB", tensor_parallel=8)
    with_mark, plain = read_evidence(marked, defaults), read_evidence(K8S[0], defaults)
    assert (with_mark.protocol, with_mark.mean_tpot_ms) == (plain.protocol, plain.mean_tpot_ms)
    assert with_mark.mean_tpot_ms is not None



def test_a_profile_calibrate_writes_loads_whatever_patch_releases_its_logs_name(tmp_path: Path) -> None:
    """Review: logs of vLLM 0.19 and 0.19.1 on one GPU made two entries, which apply by minor series, so the
    profile was refused on load; and runs without a release before ones with it shadowed them. One entry per
    GPU and release series, named by the first version seen, the release's before the any-release one."""
    from dataclasses import replace as dc_replace

    from gpuopt.inputs.profile_file import load_profile
    from gpuopt.physics.profile import dump_profile
    from gpuopt.planner.calibrate import calibrate

    base = _synthetic((0.8, 1.1, 0.0))
    patch = [dc_replace(o, id=o.id + "b", config=dc_replace(o.config, vllm_version="0.19.1")) for o in base]
    unversioned = [dc_replace(o, id=o.id + "c", config=dc_replace(o.config, vllm_version=None)) for o in base]
    result = calibrate(unversioned + base + patch)
    assert [(e.gpu, e.vllm_version) for e in result.profile.entries] == [("H100-SXM-80GB", "0.19"),
                                                                         ("H100-SXM-80GB", None)]
    path = tmp_path / "profile.yaml"
    path.write_text(dump_profile(result.profile), encoding="utf-8")
    assert load_profile(path).entries == result.profile.entries
