"""The valid `vllm serve` flags and `--kv-cache-dtype` values per vLLM release (gpuopt/data/vllm_serve_flags.yaml,
read from each release's own source by tools/extract_vllm_serve_flags.py).

It lives in physics because the serve-flag reader (physics/serve_args.py) checks values against it; the
planner's uses (which multi-node form a release supports, which flags a printed command may use) import it
from here (planner/serve_flags.py)."""

from __future__ import annotations

from functools import cache
from typing import Any

from gpuopt.datafiles import data_yaml
from gpuopt.physics.vllm_profile import release_key


@cache
def _releases() -> tuple[dict[str, Any], ...]:
    return tuple(data_yaml("vllm_serve_flags.yaml")["releases"])


@cache
def _flag_sets() -> dict[str, frozenset[str]]:
    return {str(r["version"]): frozenset(r["flags"]) for r in _releases()}


def releases() -> dict[str, frozenset[str]]:
    """Each listed release's flags (a copy: callers may not change the cached table)."""
    return dict(_flag_sets())


@cache  # every configuration the planner resolves asks for its release's block sizes: once per version string
def release_for(version: str) -> str:
    """The newest listed release not newer than `version` (0.20 -> 0.20.0); the oldest when all are newer."""
    known = sorted(_flag_sets(), key=release_key)
    wanted = release_key(version)
    eligible = [v for v in known if release_key(v)[: len(wanted)] <= wanted]
    return eligible[-1] if eligible else known[0]


def flags(version: str) -> frozenset[str]:
    return _flag_sets()[release_for(version)]


def kv_cache_dtypes(version: str | None = None) -> tuple[str, ...]:
    """What `--kv-cache-dtype` accepts in `version` (its release's list), or in any listed release (None)."""
    rows = [r for r in _releases() if version is None or str(r["version"]) == release_for(version)]
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(str(v) for v in r.get("kv_cache_dtypes", ())))
    return tuple(seen)


@cache
def block_sizes(version: str) -> tuple[int, ...] | None:
    """What `--block-size` accepts in `version` (its release's BlockSize choices); None from 0.18, where the
    parser takes any positive integer."""
    row = next(r for r in _releases() if str(r["version"]) == release_for(version))
    sizes = row.get("block_sizes")
    return None if sizes is None else tuple(int(v) for v in sizes)
