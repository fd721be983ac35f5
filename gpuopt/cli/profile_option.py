"""`--profile FILE` for fit, simulate, solve and plan: install a calibration profile for the command.

Without the flag, the default profile is `$GPUOPT_PROFILE` or `profile.yaml` in gpuopt's user config
directory (click's app dir: ~/.config/gpuopt on Linux), when it exists. The command reports which profile
it used (plans carry it in their `profile` field)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from gpuopt.cli.options import SafePath
from gpuopt.cli.terminal import say

F = TypeVar("F", bound=Callable[..., object])


def profile_option(f: F) -> F:
    return click.option("--profile", "profile_path", type=SafePath(path_type=Path),
                        help="Calibration profile from `gpuopt calibrate` (default: $GPUOPT_PROFILE or "
                             "profile.yaml in the user config directory, when present).")(f)


def default_profile() -> tuple[Path | None, str]:
    """The profile a command uses without --profile, and where it came from (named in its error lines: a
    broken $GPUOPT_PROFILE file is no `--profile` the user typed)."""
    env = os.environ.get("GPUOPT_PROFILE")
    if env:
        return Path(env), "GPUOPT_PROFILE"
    path = Path(click.get_app_dir("gpuopt")) / "profile.yaml"
    return (path if path.exists() else None), "default profile"


def apply_profile(path: Path | None, vllm_version: str | None) -> str | None:
    """Install the profile's calibrated GPUs; returns the profile path used (None: none)."""
    from gpuopt.hardware import gpu_table, use_calibrated
    from gpuopt.inputs.profile_file import load_profile
    from gpuopt.physics.profile import adjust_gpu
    from gpuopt.physics.vllm_profile import release_or_default

    chosen, source = (path, "--profile") if path else default_profile()
    if chosen is None:
        use_calibrated({})
        return None
    profile = load_profile(chosen, source)
    # the release the command plans for: without --vllm-version that is the default one, never "any" (a profile
    # fitted on 0.19 logs moved a 0.33 plan's KV cache by 2 GiB when the flag was left out, not when it was given)
    release = release_or_default(vllm_version)
    specs = {}
    for name, spec in gpu_table().items():
        entry = profile.entry_for(name, release)
        if entry is not None:
            specs[name] = adjust_gpu(spec, entry)
    use_calibrated(specs)
    if specs:
        say("note", f"calibration profile {chosen}: {', '.join(sorted(specs))}")
    others = sorted({f"{e.gpu} (vLLM {e.vllm_version})" for e in profile.entries
                     if e.gpu not in specs and e.vllm_version is not None})
    if others:
        say("note", f"calibration profile {chosen}: not applied to {', '.join(others)}: this command plans for vLLM "
                    f"{release} (--vllm-version)")
    return str(chosen)
