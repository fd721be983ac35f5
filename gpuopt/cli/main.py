"""The `gpuopt` command: a click group whose subcommands live in their own modules.

Expected failures (GpuoptError) become one line per problem on stderr and the documented exit code
(0 ok, 1 infeasible, 2 bad input, 3 over budget; see gpuopt.errors). stdout carries only results.
"""

from __future__ import annotations

from typing import IO, Any

import click

from gpuopt import __version__
from gpuopt.errors import GpuoptError


class ProblemsError(click.ClickException):
    """A GpuoptError on its way out through click: one `error:` line per problem."""

    def __init__(self, error: GpuoptError) -> None:
        super().__init__("; ".join(error.problems))
        self.exit_code: int = error.exit_code  # type: ignore[misc]
        self.problems = error.problems

    def show(self, file: IO[Any] | None = None) -> None:
        for problem in self.problems:
            click.echo(f"error: {problem}", err=True)


class GpuoptGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GpuoptError as exc:
            raise ProblemsError(exc) from None


@click.group(cls=GpuoptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuopt")
def cli() -> None:
    """Size, price and plan GPUs for LLM inference on vLLM."""


def _register() -> None:
    from gpuopt.cli import catalog, fit, models, plan, report, solve

    cli.add_command(solve.solve)
    cli.add_command(plan.plan)
    cli.add_command(report.report)
    cli.add_command(report.diff)
    cli.add_command(catalog.catalog)
    cli.add_command(fit.fit)
    cli.add_command(models.models)
    cli.add_command(__import__("gpuopt.cli.simulate", fromlist=["simulate"]).simulate)


_register()


def main() -> None:
    cli(prog_name="gpuopt")
