"""The valid `vllm serve` flags per vLLM release (gpuopt/data/vllm_serve_flags.yaml, read from each
release's own argument parser by tools/extract_vllm_serve_flags.py)."""

from __future__ import annotations

import shlex
from functools import cache
from importlib import resources

import yaml


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@cache
def releases() -> dict[str, frozenset[str]]:
    text = resources.files("gpuopt").joinpath("data/vllm_serve_flags.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    return {str(r["version"]): frozenset(r["flags"]) for r in data["releases"]}


def release_for(version: str) -> str:
    """The newest listed release not newer than `version` (0.20 -> 0.20.0); the oldest when all are newer."""
    known = sorted(releases(), key=_key)
    eligible = [v for v in known if _key(v)[: len(_key(version))] <= _key(version)]
    return eligible[-1] if eligible else known[0]


def flags(version: str) -> frozenset[str]:
    return releases()[release_for(version)]


def supports(version: str, flag: str) -> bool:
    return flag in flags(version)


def unknown_flags(command: str, version: str) -> list[str]:
    """Flags of a `vllm serve ...` line that the release's parser does not define (empty: it parses)."""
    words = shlex.split(command, comments=True)
    if words[:2] != ["vllm", "serve"]:
        raise ValueError(f"not a vllm serve command: {command}")
    known = flags(version)
    return [w.split("=", 1)[0] for w in words[2:] if w.startswith("-") and w.split("=", 1)[0] not in known]
