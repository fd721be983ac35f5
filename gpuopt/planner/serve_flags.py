"""Which `vllm serve` flags a release has, for the commands the planner prints (the data and its reader are
in physics/serve_flags.py, read from each release's own argument parser)."""

from __future__ import annotations

import shlex

from gpuopt.physics.serve_flags import flags, release_for, releases

__all__ = ["flags", "release_for", "releases", "supports", "unknown_flags"]


def supports(version: str, flag: str) -> bool:
    return flag in flags(version)


def unknown_flags(command: str, version: str) -> list[str]:
    """Flags of a `vllm serve ...` line that the release's parser does not define (empty: it parses)."""
    words = shlex.split(command, comments=True)
    if words[:2] != ["vllm", "serve"]:
        raise ValueError(f"not a vllm serve command: {command}")
    known = flags(version)
    return [w.split("=", 1)[0] for w in words[2:] if w.startswith("-") and w.split("=", 1)[0] not in known]
