"""`gpuopt matrix`: the sizing table, with the figures the sizing guides get wrong asserted by hand."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.hardware import get_gpu
from gpuopt.physics.architecture import get_model
from gpuopt.physics.memory import GIB, estimate
from gpuopt.physics.serving_config import ServingConfig
from gpuopt.planner.matrix import MatrixQuery, build_matrix, model_sizes
from gpuopt.pricing.catalog import load_catalog
from gpuopt.pricing.regions import Residency
from gpuopt.reports.matrix import render_matrix
from tests.conftest import LLAMA_8B_CONFIG, check_golden

LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def test_kv_bytes_per_token_count_layers_and_kv_heads_not_attention_heads() -> None:
    """The guides' formula 2 x attention heads x head_dim x 2 B (no layers) gives 32,768 B/token for
    Llama-3.1-70B; the real figure is 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B (10x more)."""
    arch = get_model(LLAMA_70B)
    guide = 2 * arch.num_attention_heads * arch.attn_head_dim * 2
    real = 2 * arch.num_hidden_layers * arch.num_key_value_heads * arch.attn_head_dim * 2
    assert (guide, real) == (32_768, 327_680)
    assert arch.kv_values_per_token_per_layer(1) * arch.num_hidden_layers * 2 == real
    # with TP 2 each GPU holds half the KV heads
    assert arch.kv_values_per_token_per_layer(2) * arch.num_hidden_layers * 2 == real / 2


def test_70b_bf16_on_two_h100_fits_the_weights_but_not_the_kv_of_16_requests() -> None:
    """"A 70B FP16 model fits on 2 x 80 GB": the weights do (65.7 GiB per GPU), but the rest of vLLM's budget
    holds about one request of 8,192 tokens; 16 such requests need TP 4."""
    [cell] = build_matrix(MatrixQuery(models=["70B"], gpus=["H100-SXM-80GB"], precisions=["bf16"],
                                      context=8192, concurrency=16))
    assert cell.model == LLAMA_70B and cell.tensor_parallel == 4
    two = estimate(get_model(LLAMA_70B), get_gpu("H100-SXM-80GB"),
                   ServingConfig(tensor_parallel=2, precision="bf16", max_model_len=8192))
    rank = two.binding_rank
    room_tokens = (rank.budget_gib - rank.weights_gib) * GIB / (327_680 / 2)
    assert two.fits and two.max_concurrency < 16
    assert two.kv_cache_tokens <= room_tokens  # activation, non-torch and graphs come out of the room too
    [single] = build_matrix(MatrixQuery(models=["70B"], gpus=["H100-SXM-80GB"], precisions=["bf16"],
                                        context=8192, concurrency=1))
    assert single.tensor_parallel == 2


def test_sizes_map_to_named_registry_models_and_unknown_names_are_refused() -> None:
    for size, model in model_sizes().items():
        assert get_model(model).hf_id == model, size
    result = CliRunner().invoke(cli, ["matrix", "71B", "--gpus", "H100-SXM-80GB"])
    assert result.exit_code == 2 and "unknown model" in result.stderr


@pytest.mark.parametrize("precision", ["bf16", "fp8", "int4"])
def test_a_cell_is_the_smallest_tp_that_holds_the_concurrency(precision: str) -> None:
    q = MatrixQuery(models=["32B"], gpus=["L40S-48GB", "A100-SXM-80GB"], precisions=[precision],  # type: ignore[list-item]
                    context=16384, concurrency=8)
    arch = get_model(model_sizes()["32B"])
    for cell in build_matrix(q):
        assert cell.fits and cell.tensor_parallel is not None and cell.max_concurrency is not None
        assert cell.max_concurrency >= 8
        if cell.tensor_parallel > 1:
            smaller = estimate(arch, get_gpu(cell.gpu), ServingConfig(
                tensor_parallel=cell.tensor_parallel // 2, precision=precision, max_model_len=16384))  # type: ignore[arg-type]
            assert not smaller.fits or smaller.max_concurrency < 8


def test_a_load_gets_enough_replicas_at_the_cost_of_the_named_offering() -> None:
    catalog = load_catalog()
    q = MatrixQuery(models=["8B"], gpus=["L40S-48GB", "H100-SXM-80GB"], precisions=["bf16", "fp8"],
                    requests_per_second=5, input_tokens=1500, output_tokens=300, ttft_ms=2000, tpot_ms=50)
    for cell in build_matrix(q, catalog, Residency("us"), "USD"):
        assert cell.replicas is not None and cell.replica_requests_per_second is not None
        assert cell.replicas * cell.replica_requests_per_second * 0.8 >= 5 - 1e-9
        assert (cell.replicas - 1) * cell.replica_requests_per_second * 0.8 < 5
        offering = next(o for o in catalog.offerings if o.offering_id == cell.offering)
        per_instance = (offering.gpu_count or 0) // (cell.tensor_parallel or 1)
        price = catalog.price_in(offering, "USD")
        assert price is not None
        assert cell.cost_per_hour == pytest.approx(math.ceil(cell.replicas / per_instance) * price)
        assert cell.cost_per_million_output_tokens == pytest.approx(cell.cost_per_hour / (5 * 300 * 3600) * 1e6,
                                                                    abs=1e-3)


def test_formats_carry_the_same_cells() -> None:
    q = MatrixQuery(models=["7B", "70B"], gpus=["L4-24GB", "H100-SXM-80GB"], precisions=["bf16", "int4"])
    cells = build_matrix(q)
    data = json.loads(render_matrix(q, cells, "json"))
    assert data["kind"] == "gpuopt-matrix" and len(data["cells"]) == 8
    rows = list(csv.DictReader(io.StringIO(render_matrix(q, cells, "csv"))))
    assert [r["tensor_parallel"] for r in rows] == [str(c["tensor_parallel"] or "") for c in data["cells"]]
    page = render_matrix(q, cells, "html")
    assert page.count("<tr>") == 1 + 4 and "background:rgb(" in page and "#e5e7eb" in page
    check_golden("matrix.md", render_matrix(q, cells, "markdown"))


@pytest.mark.parametrize(("args", "needle"), [
    (["--precisions", "fp4"], "--precisions: unknown 'fp4'"),
    (["--context", "0"], "--context must be a positive finite number"),
    (["--requests-per-second", "nan"], "expected a finite number"),
    (["--headroom", "1.5"], "--headroom must be in [0.01, 1]"),
    (["--headroom", "1e-300"], "--headroom must be in [0.01, 1] (got 1e-300)"),  # QA: priced at 10^299 USD/h
    (["--gpus", "H1000"], "unknown GPU"),
])
def test_bad_flags_are_exit_2(args: list[str], needle: str) -> None:
    result = CliRunner().invoke(cli, ["matrix", "8B", *args])
    assert result.exit_code == 2 and needle in result.stderr, result.stderr


def test_a_quantized_checkpoint_is_sized_in_its_own_format_only() -> None:
    # offline (conftest): Qwen/Qwen3-32B-AWQ is described by the known-checkpoint table
    cells = build_matrix(MatrixQuery(models=["Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B"], gpus=["H100-SXM-80GB"],
                                     precisions=["bf16", "int4"]))
    assert [(c.model, c.precision) for c in cells] == [
        ("Qwen/Qwen3-32B-AWQ", "int4"), ("Qwen/Qwen3-32B", "bf16"), ("Qwen/Qwen3-32B", "int4")]
    awq, _, base_int4 = cells
    # the same 4-bit AWQ weights either way: the checkpoint's own, or the representative AWQ of the base
    assert awq.fits
    assert (awq.tensor_parallel, awq.kv_cache_tokens) == (base_int4.tensor_parallel, base_int4.kv_cache_tokens)


def test_a_model_name_is_text_not_rich_markup(tmp_path) -> None:
    """A local checkpoint named "[bold]mk": the table shows the name, rich reads no style in it (a "[/x]" in a
    name raised MarkupError, exit 70)."""
    folder = tmp_path / "[bold]mk"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    result = CliRunner().invoke(cli, ["matrix", str(folder), "--gpus", "H100-SXM-80GB"])
    assert result.exit_code == 0, result.output
    assert "[bold]mk" in result.stdout


def test_a_gpu_precision_or_model_asked_twice_is_one_column_or_row(tmp_path) -> None:
    """QA: `--gpus H100,H100,L4` put the H100's cell under the L4 header; two local checkpoints both named
    `model` were one row of both models' cells. Now: one column per GPU, one row per model and precision,
    checkpoints of one name told apart by their paths."""
    cells = build_matrix(MatrixQuery(models=["8B", "8b", "meta-llama/llama-3.1-8b-instruct"],
                                     gpus=["H100-SXM-80GB", "h100-sxm-80gb", "L4-24GB"], precisions=["bf16", "bf16"]))
    assert [(c.label, c.precision, c.gpu) for c in cells] == [("8B", "bf16", "H100-SXM-80GB"),
                                                             ("8B", "bf16", "L4-24GB")]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
              "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
              "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
    paths = []
    for parent, layers in (("a", 16), ("b", 80)):
        folder = tmp_path / parent / "model"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers}))
        paths.append(str(folder))
    cells = build_matrix(MatrixQuery(models=paths, gpus=["H100-SXM-80GB"], precisions=["bf16"]))
    assert [c.label for c in cells] == paths
    assert cells[0].kv_cache_tokens is not None and cells[1].kv_cache_tokens is not None
    assert cells[0].kv_cache_tokens > cells[1].kv_cache_tokens  # 16 layers hold more tokens than 80


def test_load_flags_without_a_load_are_warned_and_a_load_says_where_its_prices_apply() -> None:
    """QA: `--ttft-ms 100` alone changed nothing, silently; a cn query's caption read "()" when no cell was
    priced, and the JSON query said neither region nor currency."""
    idle = CliRunner().invoke(cli, ["matrix", "8B", "--gpus", "L4-24GB", "--precisions", "bf16", "--ttft-ms", "100",
                                    "--region", "cn"])
    assert idle.exit_code == 0
    assert idle.stderr == ("warning: --ttft-ms, --region without --requests-per-second have no effect: the matrix "
                           "sizes memory only until a load is given\n")
    quiet = CliRunner().invoke(cli, ["matrix", "8B", "--gpus", "L4-24GB", "--precisions", "bf16"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    loaded = CliRunner().invoke(cli, ["matrix", "8B", "--gpus", "H100-SXM-80GB", "--precisions", "bf16",
                                      "--requests-per-second", "1", "--region", "cn", "--format", "json"])
    query = json.loads(loaded.stdout)["query"]
    assert (query["region"], query["currency"]) == ("cn", "CNY")
    memory_only = json.loads(CliRunner().invoke(cli, ["matrix", "8B", "--gpus", "L4-24GB", "--format", "json"]).stdout)
    assert (memory_only["query"]["region"], memory_only["query"]["currency"]) == (None, None)


def test_a_global_offering_priced_for_a_residency_says_where_to_pin_it() -> None:
    """QA: `matrix --region us` priced a RunPod `global` pod without the caveat solve prints for it."""
    result = CliRunner().invoke(cli, ["matrix", "8B", "--requests-per-second", "3", "--region", "us", "--gpus",
                                      "H100-SXM-80GB", "--precisions", "bf16", "--format", "json"])
    [cell] = json.loads(result.stdout)["cells"]
    assert cell["offering"] == "runpod/pod-secure/1x H100 SXM/global/on-demand"  # the shipped catalog's cheapest
    assert cell["pinned_countries"] == ["US"]
    assert result.stderr == (f"warning: {cell['offering']} meets residency 'us' only if pinned to a data centre "
                             "in US: choose one there when creating it\n")
    csv_text = CliRunner().invoke(cli, ["matrix", "8B", "--requests-per-second", "3", "--region", "us", "--gpus",
                                        "H100-SXM-80GB", "--precisions", "bf16", "--format", "csv"]).stdout
    row = next(csv.DictReader(io.StringIO(csv_text)))
    assert row["pinned_countries"] == ";".join(cell["pinned_countries"] or [])
    unpinned = json.loads(CliRunner().invoke(cli, ["matrix", "8B", "--requests-per-second", "3", "--gpus",
                                                   "H100-SXM-80GB", "--precisions", "bf16", "--format", "json"]).stdout)
    assert unpinned["cells"][0]["pinned_countries"] is None  # global: no residency to keep
