"""Reading a calibration profile (`--profile FILE`, `calibrate --check`): the YAML read as every input file is
(YAML 1.2 scalars, duplicate keys refused), the model checked strictly, and the factors checked against what
the GPU they name could be (physics/profile.py holds the profile and how it adjusts a GPU)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gpuopt.clock import iso_date
from gpuopt.errors import InputError, UnknownNameError
from gpuopt.files_read import NotText, read_text_bytes
from gpuopt.hardware import get_gpu
from gpuopt.inputs.loader import parse_yaml
from gpuopt.inputs.workload import format_errors
from gpuopt.physics.profile import PROFILE_KIND, SPEC_FACTOR_RANGE, Profile, memory_offset_possible
from gpuopt.physics.vllm_profile import release_key


def profile_problems(profile: Profile) -> list[str]:
    """What no GPU could be: a speed factor outside SPEC_FACTOR_RANGE, or a memory offset that leaves the GPU
    reporting no memory or more than its datasheet (calibrate on logs of another GPU, or a hand edit: a 1,000 GiB
    KV cache on an H100 made it hold a 405B model in BF16)."""
    problems = []
    scopes: dict[tuple[str, tuple[int, ...] | None], int] = {}
    for i, e in enumerate(profile.entries):
        where = f"entries.{i}"
        # QA: an entry for a misspelt GPU applied to nothing, silently; two entries for one GPU and release
        # applied the first, silently; `vllm_version: abc` and `fitted: yesterday` were read
        try:
            canonical = get_gpu(e.gpu).gpu
        except UnknownNameError as exc:
            problems += [f"{where}.gpu: {p}" for p in exc.problems]
        else:
            if canonical != e.gpu:
                problems.append(f"{where}.gpu: write it as {canonical!r} (the entry applies to the GPU of that name)")
        release = None if e.vllm_version is None else release_key(e.vllm_version)[:2]
        shadow = scopes.get((e.gpu, None))  # an earlier entry for every release of this GPU applies first
        if release is not None and len(release) < 2:
            problems.append(f"{where}.vllm_version: {e.vllm_version!r} is not a vLLM release (e.g. 0.33 or 0.33.0)")
        elif (same := scopes.setdefault((e.gpu, release), i)) != i or shadow is not None:
            first = same if same != i else (shadow or 0)
            earlier = profile.entries[first].vllm_version
            problems.append(f"{where}: entries.{first} ({e.gpu}, {earlier or 'any release'}) applies first to "
                            f"{e.gpu} on {e.vllm_version or 'any release'}: this entry would never apply")
        if not iso_date(e.fitted):
            problems.append(f"{where}.fitted: {e.fitted!r} is not a date YYYY-MM-DD")
        for name in ("decode_bandwidth", "prefill_compute"):
            fit = getattr(e, name)
            if fit is not None and not SPEC_FACTOR_RANGE[0] <= fit.value <= SPEC_FACTOR_RANGE[1]:
                problems.append(f"{where}.{name}.value: {fit.value:g} is outside {SPEC_FACTOR_RANGE[0]:g}-"
                                f"{SPEC_FACTOR_RANGE[1]:g} x the datasheet")
        if e.memory_offset_gib is not None:
            try:
                gpu = get_gpu(e.gpu)
            except UnknownNameError:  # reported by whoever looks the entry up
                continue
            offset = e.memory_offset_gib.value
            if not memory_offset_possible(gpu, offset):
                problems.append(f"{where}.memory_offset_gib.value: {offset:g} GiB would make the {gpu.gpu} report "
                                f"{gpu.memory_gib_reported + offset:,.2f} GiB (its memory: {gpu.memory_gib:g})")
    return problems


def load_profile(path: Path, source: str = "--profile") -> Profile:
    """The profile at `path`, validated; every problem names where the path came from (`source`: the flag, or
    the GPUOPT_PROFILE variable or default location a command fell back on), so the user knows what to fix."""
    try:
        text = read_text_bytes(path).decode("utf-8")
    except NotText as exc:
        raise InputError(f"{source} {path}: {exc}, not a profile") from None
    except FileNotFoundError:
        raise InputError(f"{source} {path}: file not found") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise InputError(f"{source} {path}: not a readable text file") from None
    except OSError as exc:
        raise InputError(f"{source} {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data, root = parse_yaml(text, path)
    except InputError as exc:
        raise InputError(*(f"{source} {p}" for p in exc.problems)) from None
    if not isinstance(data, dict) or data.get("kind") != PROFILE_KIND:
        raise InputError(f"{source} {path}: not a gpuopt profile (no `kind: {PROFILE_KIND}`)")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        # at the YAML line, as workload and capacity files are (QA: "--profile p.yaml: entries.0.bogus: ..." left
        # the line to be found)
        raise InputError(*(f"{source} {line}" for line in format_errors(path, exc, root))) from None
    problems = profile_problems(profile)
    if problems:
        raise InputError(*(f"{source} {path}: {p}" for p in problems))
    return profile
