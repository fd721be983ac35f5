"""`gpuopt deploy PLAN.json --target k8s|skypilot|pai-eas|compose [-o DIR]`: ready-to-apply artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuopt.cli.options import SafePath
from gpuopt.errors import InputError

if TYPE_CHECKING:
    from gpuopt.reports.deploy import Artifact

TARGET_NAMES = ("k8s", "skypilot", "pai-eas", "compose")


def _check_output_dir(directory: Path, force: bool) -> None:
    """Before any work: the directory is new (or --force), not a file, and its parent exists."""
    if directory.exists() and not force:
        raise InputError(f"-o {directory}: already exists (use --force to replace its files)")
    if directory.exists() and not directory.is_dir():
        raise InputError(f"-o {directory}: exists and is not a directory")
    parent = directory.resolve().parent
    if not parent.is_dir():
        raise InputError(f"-o {directory}: the parent directory {parent} does not exist")


def _write_dir(directory: Path, artifacts: list[Artifact]) -> None:
    """Each file written atomically (the input boundary's writer: temp file beside it, then rename). Names are
    unique across a plan (common.artifact_names); two artifacts of one name would be a renderer's bug, and
    writing the second over the first would lose a deployment while reporting success, so nothing is written
    then (an internal error, exit 70)."""
    from gpuopt.inputs.loader import write_output_file

    names = [a.filename for a in artifacts]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise RuntimeError(f"deploy made two artifacts named {', '.join(twice)}: nothing written")
    directory.mkdir(exist_ok=True)
    for a in artifacts:
        write_output_file(directory / a.filename, a.text)


@click.command()
@click.argument("plan_file", type=SafePath(path_type=Path))
@click.option("--target", type=click.Choice(TARGET_NAMES), required=True,
              help="k8s (Deployment/LeaderWorkerSet + Service), skypilot (task / SkyServe YAML), "
                   "pai-eas (Alibaba service JSON), compose (Docker Compose, single-node plans).")
@click.option("-o", "--output", "output_dir", type=SafePath(path_type=Path),
              help="Directory to write the files into (must not exist unless --force).")
@click.option("--force", is_flag=True, help="Write into an existing directory, replacing files of the same name.")
@click.option("--image", help="Container image with vLLM (default: vllm/vllm-openai:v<the plan's vLLM release>).")
@click.option("--namespace", default="default", show_default=True, help="Kubernetes namespace (k8s only).")
def deploy(plan_file: Path, target: str, output_dir: Path | None, force: bool, image: str | None,
           namespace: str) -> None:
    """One ready-to-apply artifact per deployment of a saved plan, labelled with the plan's id, cost and SLO.

    Without -o, Kubernetes manifests go to stdout as one multi-document stream (`| kubectl apply -f -`);
    the other targets print their file when the plan makes one (one deployment, or deployments sharing one
    SkyPilot cluster or one Compose host), and need -o otherwise."""
    from gpuopt.cli.report import read_plan
    from gpuopt.reports.deploy import DeployOptions, render_deploy

    options = DeployOptions(image=image, namespace=namespace)
    if options.problems():
        raise InputError(*options.problems())
    if output_dir is not None:
        _check_output_dir(output_dir, force)
    plan = read_plan(plan_file)
    artifacts = render_deploy(plan, target, options)
    if output_dir is not None:
        _write_dir(output_dir, artifacts)
        for a in artifacts:
            click.echo(f"wrote {output_dir / a.filename}", err=True)
        return
    if target == "k8s":
        click.echo("---\n".join(a.text for a in artifacts), nl=False)
    elif len(artifacts) == 1:
        click.echo(artifacts[0].text, nl=False)
    else:
        raise InputError(f"--target {target}: the plan's deployments make {len(artifacts)} files: give -o DIR")
