"""The `gpuopt` command: a lazy click group whose subcommands live in their own modules.

Start-up: `gpuopt --help` and `gpuopt solve` import only what they use. The group lists its commands from
COMMANDS below (name, module, short help) and imports a subcommand's module only when that subcommand runs
(or its own --help is asked for), so pandas, PuLP, matplotlib and rich load only for the commands that need
them. benchmarks/startup.py measures it against a bare click program.

Endings (exit codes documented in gpuopt.errors):
- an expected failure (GpuoptError) is one `error:` line per problem on stderr, exit 1/2/3;
- a click usage error (bad flag, bad value) is one `error:` line too, exit 2;
- anything else is a bug: one `error: internal error ...` line asking for a report, exit 70 (EX_SOFTWARE);
  `--debug` or GPUOPT_DEBUG=1 shows the traceback instead.
stdout carries only results.
"""

from __future__ import annotations

import errno
import importlib
import os
import re
from typing import IO, Any, NamedTuple

import click

from gpuopt import __version__
from gpuopt.cli.terminal import printable
from gpuopt.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, GpuoptError, InputError


class CommandEntry(NamedTuple):
    module: str
    attribute: str
    short_help: str


# Registering a subcommand is ONE entry here: name -> (module, click command object in it, short help for
# `gpuopt --help`). The module is imported only when the command runs; tests/test_cli_main.py checks that
# every entry names a click command of that name.
COMMANDS: dict[str, CommandEntry] = {
    "solve": CommandEntry("gpuopt.cli.solve", "solve", "Find the cheapest deployment of the workloads in a file."),
    "plan": CommandEntry("gpuopt.cli.plan", "plan", "What to commit to in which period and what to rent."),
    "report": CommandEntry("gpuopt.cli.report", "report", "Render a saved plan without solving again."),
    "diff": CommandEntry("gpuopt.cli.report", "diff", "Monthly cost before and after, of two saved plans."),
    "catalog": CommandEntry("gpuopt.cli.catalog", "catalog", "The price catalog: snapshot, cache, overlays."),
    "fit": CommandEntry("gpuopt.cli.fit", "fit", "Check that a model fits on a GPU under vLLM."),
    "models": CommandEntry("gpuopt.cli.models", "models", "The model architecture registry."),
    "matrix": CommandEntry("gpuopt.cli.matrix", "matrix", "Sizing table: models x GPUs x precisions."),
    "init": CommandEntry("gpuopt.cli.init", "init", "Ask the sizing questions; write a workload file."),
    "deploy": CommandEntry("gpuopt.cli.deploy", "deploy", "Kubernetes, SkyPilot, PAI-EAS or Compose from a plan."),
    "calibrate": CommandEntry("gpuopt.cli.calibrate", "calibrate", "Fit a profile on your own vLLM runs."),
    "simulate": CommandEntry("gpuopt.cli.simulate", "simulate", "What `vllm bench serve` would measure, simulated."),
}

DEBUG_ENV = "GPUOPT_DEBUG"
REPORT_HINT = ("please report it with the command line and input files (`gpuopt --debug COMMAND ...` or GPUOPT_DEBUG=1 "
               "shows the traceback)")


class ProblemsError(click.ClickException):
    """A GpuoptError on its way out through click: one `error:` line per problem."""

    def __init__(self, error: GpuoptError) -> None:
        super().__init__("; ".join(error.problems))
        self.exit_code: int = error.exit_code  # type: ignore[misc]
        self.problems = error.problems

    def show(self, file: IO[Any] | None = None) -> None:
        for problem in self.problems:
            click.echo(f"error: {printable(problem)}", err=True)


class OneLineUsageError(click.ClickException):
    """A click usage error (unknown option, bad value) as one `error:` line with where to find help, instead
    of click's three-line usage block, so every bad input reads the same."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, error: click.UsageError) -> None:
        # click lays choices out one per line ("Choose from:\n\tk8s,\n\tskypilot"): joined into the line
        super().__init__(re.sub(r"\s*\n\s*", " ", error.format_message()))
        ctx = error.ctx
        self.help_hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {printable(self.format_message())}{self.help_hint}", err=True)


def _shown_name(name: object) -> str:
    """A file name for a one-line message: in full up to 80 characters, else its start and its length."""
    text = os.fsdecode(name) if isinstance(name, str | bytes) else str(name)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


class InternalError(click.ClickException):
    """An exception gpuopt did not expect: a bug, shown as one line with a request to report it."""

    exit_code = EXIT_INTERNAL

    def __init__(self, exc: BaseException) -> None:
        detail = str(exc).splitlines()[0] if str(exc) else ""
        super().__init__(f"{type(exc).__name__}{': ' + detail if detail else ''}")

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: internal error ({printable(self.format_message())}); {REPORT_HINT}", err=True)


def debug_enabled(ctx: click.Context | None) -> bool:
    if ctx is not None and ctx.find_root().params.get("debug"):
        return True
    # one reader of the variable, with click's words for true (QA: this took `off` and `n` for on while click's
    # own envvar parsing refused `maybe` and `2` for every command, even `models list`, as a bad --debug)
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on", "y", "t")


class GpuoptGroup(click.Group):
    """Lazy subcommands from COMMANDS, and the three endings described in the module docstring."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - a broken table entry
            raise TypeError(f"{entry.module}.{entry.attribute} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table's short help, without importing any subcommand module."""
        rows = [(name, COMMANDS[name].short_help if name in COMMANDS else self.commands[name].get_short_help_str())
                for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        from gpuopt.cli.streams import escaped_results

        try:
            with escaped_results():
                return super().invoke(ctx)
        except GpuoptError as exc:
            raise ProblemsError(exc) from None
        except click.UsageError as exc:
            raise OneLineUsageError(exc) from None
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # click ends quietly when the reader of stdout went away (| head)
            if exc.errno == errno.ENAMETOOLONG:  # a name the user gave cannot be a path on this system: input
                raise ProblemsError(InputError(f"{_shown_name(exc.filename)}: {exc.strerror}")) from None
            if debug_enabled(ctx):
                raise
            raise InternalError(exc) from exc
        except Exception as exc:
            if debug_enabled(ctx):
                raise
            raise InternalError(exc) from exc


@click.group(cls=GpuoptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuopt")
@click.option("--debug", is_flag=True,
              help=f"Show the traceback of an internal error (also {DEBUG_ENV}=1, true, yes or on).")
def cli(debug: bool) -> None:
    """Size, price and plan GPUs for LLM inference on vLLM."""
    from gpuopt.files_read import forget

    forget()  # what "this command read" means: one invocation's reads (tests run many in one process)


def main() -> None:
    cli(prog_name="gpuopt")
