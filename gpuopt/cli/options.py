"""Option types shared by several commands: finite numbers, known vLLM releases, output paths."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gpuopt.cli.terminal import say
from gpuopt.decimals import written_as_number, written_as_whole
from gpuopt.errors import InputError
from gpuopt.inputs.loader import check_input_file, check_output_path
from gpuopt.planner.plan import DEFAULT_HEADROOM

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:  # click >= 8.2 makes ParamType generic over (value, input); older releases are not subscriptable
    from gpuopt.hardware import GpuSpec
    from gpuopt.physics.architecture import ModelArchitecture
    from gpuopt.physics.serving_config import ResolvedConfig

    _FloatParam = click.ParamType[float, Any]
    _IntParam = click.ParamType[int, Any]
    _StrParam = click.ParamType[str, Any]
else:
    _FloatParam = _IntParam = _StrParam = click.ParamType


class FiniteFloat(_FloatParam):
    """A float flag that refuses nan and ±inf: click's FLOAT accepts them (Python's float() does), and they
    reach the solver as a NaN constraint or an "unbounded" answer instead of a message."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = click.FLOAT.convert(value, param, ctx)  # click's own message for what is no number at all
        if isinstance(value, str) and not written_as_number(value):  # float() reads 1_000 and ٢ (review)
            self.fail(f"expected a number in ASCII digits, got {value!r}", param, ctx)
        if not math.isfinite(number):
            self.fail(f"expected a finite number, got {value!r}", param, ctx)
        return number


FINITE_FLOAT = FiniteFloat()


class AsciiInt(_IntParam):
    """click's INT, in ASCII digits: int() also reads `1_000` and Arabic-Indic or full-width digits (review)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = int(click.INT.convert(value, param, ctx))  # click's own message for what is no number at all
        if isinstance(value, str) and not written_as_whole(value):
            self.fail(f"{value!r} is not a whole number in ASCII digits", param, ctx)
        return number


ASCII_INT = AsciiInt()


class HumanInt(_IntParam):
    """A count as vLLM's own parser reads it (physics.serve_args.human_readable_int: 8G = 8 x 2**30, 8g = 8 x
    10**9), so a value copied from a `vllm serve` line means the same here."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from gpuopt.physics.serve_args import human_readable_int

        if isinstance(value, int):
            return value
        try:
            count = human_readable_int(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if count <= 0:
            self.fail(f"must be positive (got {value})", param, ctx)
        return count


HUMAN_INT = HumanInt()


class Given(_StrParam):
    """A text flag that was given a value: `--region ""` (a script's unset $REGION) was read as no flag at all,
    and the plan placed under the workload file's residency without a word."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            self.fail("is empty; give a value or leave the option out", param, ctx)
        return text


GIVEN = Given()

# the help of every --vllm-version option; the default it names is vllm_versions.yaml's `default_release`
# (a test holds the two together: click help is fixed when the module is imported, before any data is read)
VLLM_VERSION_HELP = "vLLM release whose defaults apply (default: 0.33; 0.34 is modelled from its source only)."

# the help of --model wherever load_architecture resolves it (fit, simulate)
MODEL_HELP = ("Registry id (`gpuopt models list`), local checkpoint directory or config.json, or Hugging Face id "
              "(cache, then Hub; HF_HUB_OFFLINE=1 keeps it offline).")


class SafePath(click.Path):
    """click.Path that refuses a NUL byte as a usage error: click stats every path it converts and catches
    only OSError, while os.stat raises ValueError on an embedded NUL (a traceback otherwise)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str | bytes) and "\x00" in os.fsdecode(value):
            self.fail("a path cannot contain a NUL byte", param, ctx)
        return super().convert(value, param, ctx)


class VllmVersion(_StrParam):
    """--vllm-version X.Y: a release gpuopt models, or one between two modelled releases (it takes the defaults
    of the newest modelled release before it). A release newer than every modelled one is refused: its
    defaults are unknown, and silently using the newest known would price a deployment for another vLLM."""

    name = "X.Y"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from gpuopt.physics.vllm_profile import canonical_release, profiles, unmodelled_release

        text = str(value).strip()
        allowed = f"known releases: {', '.join(p.version for p in profiles())}"
        parts = text.split(".")
        if not (1 < len(parts) <= 3 and all(p.isdigit() and len(p) <= 4 for p in parts)):
            self.fail(f"'{text}' is not a version like 0.19 or 0.11.0 ({allowed})", param, ctx)
        if (problem := unmodelled_release(text)) is not None:
            self.fail(f"{problem} ({allowed})", param, ctx)
        return canonical_release(text)  # "0.019" is the 0.19 it selects, in every output


VLLM_VERSION = VllmVersion()


def output_option(help_text: str) -> Callable[[F], F]:
    """-o/--output FILE, checked as soon as the flags are parsed (before any solving): its folder exists and
    is writable, and it is not a directory. The command writes it with write_output (atomic)."""

    def check(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
        if value is not None:
            try:
                check_output_path(value)
            except InputError as exc:
                raise click.BadParameter(exc.problems[0].removeprefix(f"-o {value}: "), ctx, param) from None
        return value

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            output = kwargs.get("output")
            if isinstance(output, Path):
                refuse_input_as_output(output, [v for k, v in kwargs.items() if k != "output"])
            return command(*args, **kwargs)

        return click.option("-o", "--output", type=SafePath(path_type=Path, dir_okay=False), callback=check,
                            metavar="FILE", help=help_text)(guarded)  # type: ignore[return-value]

    return decorate


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same inode when both exist (links and ../ spellings included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def refuse_input_as_output(output: Path, values: list[Any]) -> None:
    """-o naming a file the command reads (`gpuopt solve w.yaml -o w.yaml`, a plan report written over the
    plan): the atomic write would replace the input with the result, and the workload or plan is gone. The
    command's own arguments and options are its inputs (a path, or a tuple of them for repeated options)."""
    for value in values:
        for path in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(path, Path) and _same_file(path, output):
                raise InputError(f"-o {output}: is {path}, an input of this command; writing the result there "
                                 f"would replace it: name another file")


JSON_FLAG = click.option("--json", "as_json", is_flag=True, help="Shorthand for --format json (as fit and simulate "
                                                                  "take it).")


def with_json_flag(fmt: str, as_json: bool) -> str:
    """The format asked for: --json is --format json; with another --format given it is a contradiction (the
    default table is no choice the user made against --json)."""
    if not as_json:
        return fmt
    given = click.get_current_context().get_parameter_source("fmt") not in (
        click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP)
    if fmt != "json" and given:
        raise InputError(f"--json and --format {fmt}: give one")
    return "json"


def placement_options(func: F) -> F:
    """--region, --provider, --currency, --headroom, --vllm-version: where and how `solve` and `plan` place
    replicas."""
    options = [
        click.option("--region", metavar="SEL", type=GIVEN,
                     help="Residency: cn, global, us, eu, apac, a region id or a comma list."),
        click.option("--provider", "providers", multiple=True, metavar="P", help="Allowed providers (repeatable)."),
        click.option("--currency", type=GIVEN, help="Report currency: USD or CNY."),
        click.option("--headroom", type=FINITE_FLOAT, default=DEFAULT_HEADROOM, show_default=True,
                     help="Plan each replica for at most this fraction of its sustainable load."),
        click.option("--vllm-version", type=VLLM_VERSION,
                     help=VLLM_VERSION_HELP),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def overlay_problems(overlays: tuple[Path, ...]) -> list[str]:
    """--catalog CSV paths checked before any work: a directory, a missing or unreadable file each say so."""
    problems = []
    for path in overlays:
        try:
            check_input_file(path, "CSV file")
        except InputError as exc:
            problems += [f"--catalog {p}" for p in exc.problems]
    return problems


MIN_HEADROOM = 0.01
"""Below 1 % a plan buys over 100 times the capacity its load needs: a slip, not a policy (QA: matrix priced
1e-300 as 10^299 USD/h, and solve ran it into an unexplained infeasible program)."""


def headroom_problems(headroom: float) -> list[str]:
    """--headroom of solve, plan and matrix: a share of each replica's capacity, in [MIN_HEADROOM, 1]."""
    return [] if MIN_HEADROOM <= headroom <= 1 else [f"--headroom must be in [{MIN_HEADROOM:g}, 1] (got {headroom:g})"]


def placement_problems(overlays: tuple[Path, ...], headroom: float) -> list[str]:
    """What `solve` and `plan` check of their shared flags before any work: the overlays and the headroom."""
    return overlay_problems(overlays) + headroom_problems(headroom)


def _is_dir(path: Path) -> bool:
    """Path.is_dir, except that a path the OS refuses (too long) is not a directory: the file check that
    follows says what is wrong with it, naming the flag."""
    try:
        return path.is_dir()
    except OSError:
        return False


def load_architecture(model: str | None, model_config: Path | None) -> ModelArchitecture:
    """--model ID or --model-config PATH (exactly one). An ID is a registry id, a local checkpoint path, or a
    Hugging Face repo id (cache, then Hub: see physics/resolution.py)."""
    from gpuopt.physics.resolution import (  # the registry loads only when needed
        from_local_path,
        offline_description,
        resolve_model,
    )

    if model and model_config:
        raise InputError("give either --model or --model-config, not both")
    if model_config:
        if not _is_dir(model_config):
            try:
                check_input_file(model_config, "model config.json")
            except InputError as exc:
                raise InputError(*(f"--model-config {p}" for p in exc.problems)) from None
        return from_local_path(model_config, name=model)  # with the quantization files beside it
    if not model:
        raise InputError("missing --model ID (or --model-config PATH)")
    arch = resolve_model(model)
    if (offline := offline_description(arch)) is not None:
        say("note", offline)
    return arch


def check_runs_on(gpu: GpuSpec, arch: ModelArchitecture, resolved: ResolvedConfig,
                  precision_given: bool = True) -> None:
    """Exit 2 when the GPUs are said to be joined by an NVLink they do not have, when vLLM cannot run the model
    in its resolved weight format on the GPU (the format's kernels), or has no attention backend for it there (a
    DSA model's sparse MLA), naming the flag to change -- the GPU when the format is the checkpoint's own
    (`precision_given` False: no --precision was passed)."""
    from gpuopt.physics import sparse_mla
    from gpuopt.physics.serving_config import format_removed_in, precision_unsupported

    if resolved.interconnect == "nvlink" and not gpu.nvlink_gb_s and \
            resolved.tensor_parallel * resolved.pipeline_parallel > 1:
        # NVLink decides custom all-reduce's buffers and NCCL's, and the all-reduce time: a GPU without it would
        # be costed as hardware that does not exist
        raise InputError(f"--interconnect nvlink: {gpu.gpu} has no NVLink (gpus.csv lists no NVLink bandwidth for "
                         "it); its GPUs talk over PCIe: drop the option or use --interconnect pcie")
    gpus = resolved.tensor_parallel * resolved.pipeline_parallel
    if resolved.interconnect == "nvlink" and gpu.nvlink_gb_s and not gpu.nvlink_joins(gpus):
        raise InputError(f"--interconnect nvlink: {gpu.gpu}'s NVLink is a bridge between {gpu.nvlink_bridge_gpus} "
                         f"cards (data/nvlink_bridges.csv), so {gpus} of them talk over PCIe: drop the option, use "
                         f"--interconnect pcie, or {gpu.nvlink_bridge_gpus} GPUs")
    if (unsupported := precision_unsupported(gpu, resolved.precision, arch, resolved.vllm_version)) is not None:
        if precision_given:
            raise InputError(f"--precision {resolved.precision}: {unsupported}")
        # a format the release dropped on every GPU (bitsandbytes from 0.28): no other GPU helps, an older release
        # does (QA: this was blamed on --gpu and advised "a release that has it")
        if (removed := format_removed_in(gpu, resolved.precision, arch, resolved.vllm_version)) is not None:
            major, minor = removed
            before = (f"--vllm-version {major}.{minor - 1} (the last release with it)" if minor > 0
                      else f"a --vllm-version before {major}.0")
            raise InputError(f"--vllm-version: {unsupported}; plan it with {before} or a checkpoint in another "
                             "format")
        raise InputError(f"--gpu {gpu.gpu}: {arch.hf_id} ships {resolved.precision} weights and {unsupported}: "
                         f"pick another GPU, or --precision with a checkpoint in that format")
    if (no_backend := sparse_mla.unsupported(arch, gpu, resolved.vllm_version)) is not None:
        raise InputError(f"--gpu {gpu.gpu}: {no_backend}")
