"""The workload file's traffic fields: length mixes, SLO percentiles, a shared prefix, checkpoints."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.errors import ConfigError
from gpuopt.inputs.workload import load_workload

HEAD = """schema_version: 1
workloads:
  - name: chat
    model: meta-llama/Llama-3.1-8B-Instruct
    requests_per_second: 2
"""


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(HEAD + body)
    return path


def problems(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_workload(write(tmp_path, body))
    return list(info.value.problems)


def test_a_histogram_with_its_means_loads(tmp_path):
    w = load_workload(write(tmp_path, """    input_tokens: 1400
    output_tokens: 240
    slo: {ttft_ms: 2000, tpot_ms: 50, percentile: 90}
    shared_prefix_tokens: 100
    checkpoints: {int4: hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4}
    lengths:
      histogram:
        - {input_tokens: 200, output_tokens: 100, share: 0.25}
        - {input_tokens: 1800, output_tokens: 286.67, share: 0.75}
""".replace("286.67", "287"))).workloads[0]
    assert w.lengths is not None and w.lengths.histogram is not None
    # 0.25 x 200 + 0.75 x 1800 = 1400; 0.25 x 100 + 0.75 x 287 = 240.25
    assert w.lengths.mean_tokens() == pytest.approx((1400.0, 240.25))
    assert w.slo.percentile == 90 and w.shared_prefix_tokens == 100
    assert w.checkpoints == {"int4": "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"}


def test_defaults_keep_todays_meaning(tmp_path):
    w = load_workload(write(tmp_path, "    input_tokens: 100\n    output_tokens: 50\n")).workloads[0]
    assert w.lengths is None and w.slo.percentile is None and w.shared_prefix_tokens == 0 and w.checkpoints == {}


def test_dataset_shape_takes_the_workload_means(tmp_path):
    w = load_workload(write(tmp_path, "    input_tokens: 100\n    output_tokens: 50\n"
                                      "    lengths: {dataset: sharegpt}\n")).workloads[0]
    assert w.lengths is not None and w.lengths.dataset == "sharegpt" and w.lengths.mean_tokens() is None


@pytest.mark.parametrize("body, line, needle", [
    ("    input_tokens: 100\n    output_tokens: 50\n    lengths:\n      histogram:\n"
     "        - {input_tokens: 100, output_tokens: 50, share: 0.6}\n"
     "        - {input_tokens: 100, output_tokens: 50, share: 0.3}\n",
     9, "workloads.0.lengths: histogram shares must sum to 1 (got 0.9)"),
    ("    input_tokens: 100\n    output_tokens: 50\n    slo: {tpot_ms: 20, percentile: 80}\n",
     8, "workloads.0.slo.percentile: expected 50, 90, 95 or 99, got integer 80"),
    ("    input_tokens: 100\n    output_tokens: 50\n    lengths:\n      histogram:\n"
     "        - {input_tokens: 0, output_tokens: 50, share: 1}\n",
     10, "workloads.0.lengths.histogram.0.input_tokens: Input should be greater than 0"),
    ("    input_tokens: 100\n    output_tokens: 50\n    lengths:\n      histogram:\n"
     "        - {input_tokens: 100, output_tokens: -5, share: 1}\n",
     10, "workloads.0.lengths.histogram.0.output_tokens: Input should be greater than 0"),
    ("    input_tokens: 100\n    output_tokens: 50\n    lengths: {histogram: [{input_tokens: 300, output_tokens: 50, "
     "share: 1}]}\n", 8, "the histogram's mean input_tokens is 300.0, the workload says 100: set input_tokens: 300"),
    ("    input_tokens: 100\n    output_tokens: 50\n    lengths: {dataset: sharegpt, histogram: [{input_tokens: 100, "
     "output_tokens: 50, share: 1}]}\n", 8, "give exactly one of histogram or dataset"),
    ("    input_tokens: 100\n    output_tokens: 50\n    lengths: {dataset: alpaca}\n", 8, "lengths.dataset"),
    ("    input_tokens: 100\n    output_tokens: 50\n    shared_prefix_tokens: 100\n", 8,
     "shared_prefix_tokens (100) must be below every prompt's length (shortest 100)"),
    ("    input_tokens: 100\n    output_tokens: 50\n    checkpoints: {int4: awq}\n", 8,
     "'awq' is not a Hugging Face repository id"),
    ("    input_tokens: 550\n    output_tokens: 50\n    max_model_len: 1024\n    lengths:\n      histogram:\n"
     "        - {input_tokens: 100, output_tokens: 50, share: 0.5}\n"
     "        - {input_tokens: 1000, output_tokens: 50, share: 0.5}\n",
     10, "a histogram bin needs 1050 tokens, above max_model_len (1024)"),
    # QA: 15.6 % of this shape's requests were past max_model_len, planned without a word (5 x 1000 + 5 x 250)
    ("    input_tokens: 1000\n    output_tokens: 250\n    max_model_len: 2048\n    lengths: {dataset: sharegpt}\n",
     9, "dataset sharegpt sends requests of up to 6,250 tokens (5 x the mean prompt and output), above "
        "max_model_len (2048): raise max_model_len to 6,250 or describe the lengths with a histogram"),
])
def test_bad_traffic_is_one_line_naming_field_and_yaml_line(tmp_path, body, line, needle):
    found = problems(tmp_path, body)
    assert len(found) == 1, found
    assert f"w.yaml:{line}: " in found[0] and needle in found[0], found[0]


def test_bad_traffic_exits_2_on_the_cli(tmp_path):
    path = write(tmp_path, "    input_tokens: 100\n    output_tokens: 50\n    slo: {percentile: 42}\n")
    result = CliRunner().invoke(cli, ["solve", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [x for x in result.output.splitlines() if x.startswith("error:")] == [
        f"error: {path}:8: workloads.0.slo.percentile: expected 50, 90, 95 or 99, got integer 42"]


@pytest.mark.parametrize(("lengths", "expected"), [("", 4096), ("    lengths: {dataset: sharegpt}\n", 8192)])
def test_a_sharegpt_shape_gets_a_max_model_len_that_holds_its_longest_request(tmp_path, lengths, expected):
    """2 x (1,000 + 250) rounds up to 4,096, which 3.7 % of a ShareGPT shape's requests exceeded (QA): the
    shape's longest, 6,250 tokens, rounds up to 8,192."""
    from gpuopt.physics.architecture import get_model
    from gpuopt.planner.candidates import default_max_model_len

    w = load_workload(write(tmp_path, f"    input_tokens: 1000\n    output_tokens: 250\n{lengths}")).workloads[0]
    assert default_max_model_len(w, get_model("meta-llama/Llama-3.1-8B-Instruct")) == expected
