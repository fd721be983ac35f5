"""The benchmarking note's text (planner/bench_advice.py): counts to type, durations to read, the window to judge."""

from __future__ import annotations

from gpuopt.inputs.workload import Slo, Workload
from gpuopt.physics.bench_run import BenchRun
from gpuopt.planner.bench_advice import _duration, _note, _rate_text, _round_up

HEAD = ("workload chat on aws g6e.xlarge (us-east-1): `vllm bench serve` starts from an idle server (its --num-warmups "
        "requests run at once, before the timed run); at the planned 2 requests/s per replica the running batch takes "
        "about 1,800 requests to fill and settle, so the default 1,000 prompts read a mean TPOT about 24% below the "
        "plan's, and a lighter TTFT; ")


def _workload(burstiness: float = 1.0) -> Workload:
    return Workload(name="chat", model="meta-llama/Llama-3.1-8B-Instruct", requests_per_second=4, input_tokens=200,
                    output_tokens=220, burstiness=None if burstiness == 1.0 else burstiness, slo=Slo(tpot_ms=100))


def _runs(settled: int, drained: int, probe_prompts: int, probe_ratio: float) -> tuple[BenchRun, BenchRun]:
    short = BenchRun(prompts=1000, rate=2.0, steady_tpot_s=0.02, mean_tpot_s=0.02 * 0.76, settled_after=settled,
                     light_at_end=drained)
    probe = BenchRun(prompts=probe_prompts, rate=2.0, steady_tpot_s=0.02, mean_tpot_s=0.02 * probe_ratio,
                     settled_after=settled, light_at_end=drained)
    return short, probe


def test_counts_rates_and_durations_read_as_typed() -> None:
    assert [_round_up(n) for n in (57.2, 100, 6630, 6600, 14_930)] == [58, 100, 6700, 6600, 15_000]
    assert [_rate_text(r) for r in (12.345, 2.0, 1234.5, 0.125)] == ["12.3", "2", "1234", "0.125"]
    assert [_duration(s) for s in (30, 420, 7560)] == ["under a minute", "about 7 min", "about 2.1 h"]


def test_a_run_under_an_hour_is_recommended_with_the_window_of_a_longer_one() -> None:
    # deficit = 4,000 x (1 - 0.99) = 40 requests -> 40 / 2 % = 2,000 prompts, but at least twice the fill and drain,
    # 2 x (1,800 + 140) = 3,880 -> 3,900 (1,950 s at 2 requests/s)
    short, probe = _runs(1800, 140, 4000, 0.99)
    assert _note(_workload(), "aws g6e.xlarge (us-east-1)", 2.0, short, probe) == HEAD + (
        "benchmark one replica with at least 3,900 prompts (`--request-rate 2 --num-prompts 3900`, about 32 min), "
        "or judge only the requests after the first 1,800 and before the last 140 of a longer run (`--save-result "
        "--save-detailed` keeps each request's TTFT and ITLs)")


def test_a_run_over_an_hour_becomes_a_window_to_judge_and_a_drainless_run_says_no_last() -> None:
    # deficit = 40,000 x 0.0075 = 300 -> 15,000 prompts at 2 requests/s: 2.1 h; judge after 1,800 of 2 x 1,800
    short, probe = _runs(1800, 0, 40_000, 0.9925)
    assert _note(_workload(0.5), "aws g6e.xlarge (us-east-1)", 2.0, short, probe) == HEAD + (
        "a run within 2% of it on average needs about 15,000 prompts (about 2.1 h): judge only the requests after "
        "the first 1,800 of a run of at least 3,600 (`--request-rate 2 --burstiness 0.5 --num-prompts 3600 "
        "--save-result --save-detailed` keeps each request's TTFT and ITLs)")
