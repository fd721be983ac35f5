"""Shared test helpers. Golden files are regenerated with: GPUOPT_UPDATE_GOLDEN=1 pytest (review the diff)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import settings

from gpuopt.cli.main import cli

GOLDEN = Path(__file__).parent / "golden"
LLAMA_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
"""Llama-3.1-8B's shape as a config.json without head_dim: tests that need a local checkpoint write it."""

# Property tests draw the same examples on every run ("deterministic" profile): a CI run on a clean checkout must
# not turn red on a draw no one has seen before (36c7dfd did, once). Exploring new draws is a developer's job:
# `HYPOTHESIS_PROFILE=explore pytest` draws at random and keeps failures in .hypothesis/ to replay them, and
# benchmarks/fuzz.py hammers the CLI at random. A test's own @settings override the profile field by field.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(autouse=True, scope="session")
def default_solver() -> Iterator[None]:
    """Goldens are written with CBC: HiGHS, when installed, may choose another plan of the same cost. And one day
    for the whole session (review: modules that pinned GPUOPT_TODAY for their plans left it set for every later
    module, so a test's result hung on the order the modules ran in); a test that needs another sets its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUOPT_SOLVER", "cbc")
        patch.setenv("GPUOPT_TODAY", os.environ.get("GPUOPT_TODAY", "2026-11-29"))
        yield


@pytest.fixture(autouse=True, scope="session")
def no_network_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests never touch the Hugging Face Hub, nor the developer's own cache: offline, with an empty HF_HOME
    (tests that need a cache build one in tmp_path and point HF_HUB_CACHE at it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        patch.delenv("HF_HUB_CACHE", raising=False)
        patch.delenv("HF_TOKEN", raising=False)
        yield


@pytest.fixture(autouse=True)
def no_profile_left_applied() -> Iterator[None]:
    """A command run with --profile installs the calibrated GPUs for the process (a shell runs one command per
    process): cleared after each test, so no later test reads a GPU another test calibrated."""
    yield
    from gpuopt.hardware import use_calibrated

    use_calibrated({})


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GPUOPT_UPDATE_GOLDEN"):
        path.write_text(actual, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"golden file {path} missing: run GPUOPT_UPDATE_GOLDEN=1 pytest and review it")
    assert actual == path.read_text(encoding="utf-8")


def run(*args: object) -> Result:
    """Invoke the CLI in-process with `args` (paths and numbers as text)."""
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def fixed_day(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Today pinned (price ages and plan dates in goldens) and an empty price cache (no refreshed rows of the
    developer's own leak into a plan). Modules that compare plans use it with
    `pytestmark = pytest.mark.usefixtures("fixed_day")`."""
    monkeypatch.setenv("GPUOPT_TODAY", "2026-11-29")
    monkeypatch.setenv("GPUOPT_CACHE_DIR", str(tmp_path / "cache"))
