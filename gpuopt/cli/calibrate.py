"""`gpuopt calibrate FILE...`: fit a profile on your own vLLM runs, or score one (`--check`)."""

from __future__ import annotations

from pathlib import Path

import click

from gpuopt.cli.options import ASCII_INT, VLLM_VERSION, SafePath, output_option
from gpuopt.cli.terminal import say
from gpuopt.errors import InputError
from gpuopt.vocabulary import WEIGHT_FORMATS


@click.command()
@click.argument("files", nargs=-1, required=True, type=SafePath(path_type=Path))
@click.option("--model", help="Model the runs served (overrides what the files say).")
@click.option("--gpu", help="GPU the runs used (bench results and metrics do not say).")
@click.option("--tp", "tensor_parallel", type=ASCII_INT, help="Tensor-parallel size of the server.")
@click.option("--pp", "pipeline_parallel", type=ASCII_INT, help="Pipeline-parallel size of the server.")
@click.option("--precision", type=click.Choice(WEIGHT_FORMATS),
              help="Weight format that ran, when not the checkpoint's own.")
@click.option("--server-args", help='The `vllm serve` flags of the runs, e.g. "--max-model-len 8192".')
@click.option("--vllm-version", type=VLLM_VERSION, help="vLLM release of the runs (logs say it; bench files do not).")
@output_option("Write the fitted profile (YAML) here.")
@click.option("--check", "check_profile", type=SafePath(path_type=Path),
              help="Score this profile on the files instead of fitting one.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparisons (and profile) as JSON.")
def calibrate(files: tuple[Path, ...], model: str | None, gpu: str | None, tensor_parallel: int | None,
              pipeline_parallel: int | None, precision: str | None, server_args: str | None,
              vllm_version: str | None, output: Path | None, check_profile: Path | None, as_json: bool) -> None:
    """Learn from your own vLLM: `vllm bench serve --save-result` files, server logs (start-up lines) and
    /metrics scrapes. Prints each observed figure predicted before and after fitting, and left out of the
    fit; writes a profile for --profile on fit, simulate, solve and plan."""
    from dataclasses import replace

    from gpuopt.errors import GpuoptError
    from gpuopt.hardware import get_gpu
    from gpuopt.inputs.evidence import ServerConfig, read_evidence, server_flags
    from gpuopt.inputs.profile_file import load_profile
    from gpuopt.physics.profile import dump_profile
    from gpuopt.planner.calibrate import calibrate as fit
    from gpuopt.planner.calibrate import check, refusal
    from gpuopt.reports.calibrate import render_comparisons, render_json, render_profile_summary

    for value, flag in ((tensor_parallel, "--tp"), (pipeline_parallel, "--pp")):
        if value is not None and value < 1:
            raise InputError(f"{flag} must be at least 1 (got {value})")
    defaults = server_flags(server_args, "--server-args", vllm_version) if server_args else ServerConfig()
    defaults = replace(defaults, model=model or defaults.model, gpu=get_gpu(gpu).gpu if gpu else None,
                       tensor_parallel=tensor_parallel or defaults.tensor_parallel,
                       pipeline_parallel=pipeline_parallel or defaults.pipeline_parallel,
                       precision=precision, vllm_version=vllm_version)
    problems: list[str] = []
    observations = []
    runs = _distinct_runs(files)
    for path in runs:
        try:
            observations.append(read_evidence(path, defaults))
        except GpuoptError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(*problems)
    if check_profile is not None:
        profile = load_profile(check_profile, "--check")
        rows = check(profile, observations)
        click.echo(render_json(None, rows, []) if as_json else
                   render_comparisons(rows, f"profile {check_profile} on {len(runs)} file(s)", "profile"), nl=False)
        return
    result = fit(observations)
    refused = refusal(result)
    if refused is None:
        for line in result.skipped:
            say("note", line)
    if as_json:
        click.echo(render_json(result.profile if refused is None else None, result.comparisons, result.skipped),
                   nl=False)
    else:  # the comparisons are shown even when nothing is kept: they are the evidence of why
        click.echo(render_comparisons(result.comparisons, f"calibration on {len(runs)} file(s)"), nl=False)
        click.echo(render_profile_summary(result.profile), nl=False)
    if refused is not None:
        raise refused
    if output is None:
        click.echo("note: give -o PROFILE.yaml to save the profile", err=True)
        return
    from gpuopt.inputs.loader import write_output_file

    write_output_file(output, dump_profile(result.profile))
    click.echo(f"wrote {output}", err=True)


def _distinct_runs(files: tuple[Path, ...]) -> list[Path]:
    """The files less repeats: a path given twice, or a byte-for-byte copy of one given before, is one run
    (a bench result carries its own date and figures, a log its own timestamps), and counting it twice met the
    fit's two-observation rule with a single run (QA: one bench file given twice wrote a 0.34x bandwidth
    profile). Each repeat is named in a note."""
    import hashlib

    seen: dict[bytes, Path] = {}
    kept: list[Path] = []
    for path in files:
        try:
            digest = hashlib.sha256(path.read_bytes()).digest()
        except OSError:
            kept.append(path)  # read_evidence says what is wrong with it
            continue
        if digest in seen:
            first = seen[digest]
            say("note", f"{path}: {'given twice' if path == first else f'a copy of {first}'}; counted once")
            continue
        seen[digest] = path
        kept.append(path)
    return kept
