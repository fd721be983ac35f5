"""`gpuopt init`: the sizing questionnaire, written out as a commented workload file.

The guides gpuopt grew from start sizing with five questions — context length, concurrency, latency
target, quality sensitivity, budget versus speed — plus the model, the traffic and where the data may
live. `init` asks them in a terminal (each with the preset's answer as the default) or takes them as flags
(`--non-interactive`), and writes a workload file that `gpuopt solve` accepts as is.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import click

from gpuopt.cli.options import ASCII_INT, FINITE_FLOAT, SafePath
from gpuopt.cli.terminal import say
from gpuopt.errors import ConfigError, InputError

PRESET_NAMES = ("chat", "rag", "batch", "code", "agent")


# the field of the written file each answer lands in, and the flag that gives it
ANSWER_FLAGS = {"name": "--name", "model": "--model", "requests_per_second": "--requests-per-second",
                "concurrency": "--concurrency", "input_tokens": "--input-tokens", "output_tokens": "--output-tokens",
                "max_model_len": "--context", "slo.ttft_ms": "--ttft-ms", "slo.tpot_ms": "--tpot-ms"}
_FIELD_AT = re.compile(r"^(?P<file>.+?):\d+: (?:workloads\.0(?:\.(?P<field>[\w.]+))?|(?P<top>\w+)): ")


def _answer(problem: str, output: Path) -> str:
    """A problem of the file about to be written, said of the flag whose answer it is ("--name: ..."), not of a
    line of a file that does not exist; a field no flag gives keeps its place in the file."""
    found = _FIELD_AT.match(problem)
    if found is None or found["file"] != str(output):
        return problem
    field = found["field"] or found["top"]
    message = problem[found.end():]
    if field is None:  # the workload as a whole: its lengths against the context
        flag = "--context" if "max_model_len" in message else None
    else:
        flag = ANSWER_FLAGS.get(field) or next((f for k, f in ANSWER_FLAGS.items() if field.startswith(k + ".")),
                                               None)
    return f"{flag}: {message}" if flag else problem


def _positive(value: float | None, flag: str) -> list[str]:
    if value is not None and not (value > 0 and value != float("inf")):
        return [f"{flag} must be a positive finite number (got {value})"]
    return []


def _ask(question: str, default: float, whole: bool = False) -> float:
    """A positive number asked for, asked again with the reason until one comes (review: `nan`, `-5` and `0` ended
    the run with an error naming a flag nobody gave, and `1_500` was read as 1,500)."""
    from gpuopt.decimals import parse_decimal

    def answer(text: object) -> float:
        if isinstance(text, (int, float)):  # the default
            return float(text)
        value = parse_decimal(str(text))
        if value is None or value <= 0 or (whole and value != int(value)):
            kind = "positive whole number" if whole else "positive number"
            raise click.BadParameter(f"{text!r} is not a {kind} (ASCII digits)")
        return value

    result: float = click.prompt(question, default=default, err=True, value_proc=answer)
    return result


def _budget_answer(answer: str) -> float | None:
    """The budget prompt's answer: blank for none, else a number (click asks again, saying why, when it is
    not one: QA, `abc` was an internal error)."""
    from gpuopt.pricing.catalog import parse_price

    if not answer.strip():
        return None
    value = parse_price(answer)  # a positive ASCII decimal, as every money figure (review: -5, nan ended the run)
    if value is None:
        raise click.BadParameter(f"{answer!r} is not a positive number (blank: no budget)")
    return value


@click.command()
@click.option("--preset", type=click.Choice(PRESET_NAMES), default="chat", show_default=True,
              help="Starting point: lengths, SLOs and precisions of this kind of workload.")
@click.option("--model", help="Model to serve (a registry id, e.g. meta-llama/Llama-3.1-8B-Instruct).")
@click.option("--name", help="Workload name (default: the preset's name).")
@click.option("--requests-per-second", type=FINITE_FLOAT, help="Traffic as a request rate.")
@click.option("--concurrency", type=ASCII_INT, help="Traffic as concurrent requests (closed loop).")
@click.option("--input-tokens", type=ASCII_INT, help="Mean prompt tokens.")
@click.option("--output-tokens", type=ASCII_INT, help="Mean output tokens.")
@click.option("--context", "max_model_len", type=ASCII_INT, help="Context length to serve (max_model_len).")
@click.option("--ttft-ms", type=FINITE_FLOAT, help="Time-to-first-token target (ms).")
@click.option("--tpot-ms", type=FINITE_FLOAT, help="Time-per-output-token target (ms).")
@click.option("--quality", type=click.Choice(["high", "medium", "low"]),
              help="Quality sensitivity: high/medium keep BF16/FP8; low also allows INT4.")
@click.option("--residency", default=None, help="Where the data may live: global, us, eu, apac, cn or region ids.")
@click.option("--currency", type=click.Choice(["USD", "CNY"]), help="Currency of the plan (default: CNY for cn).")
@click.option("--budget-monthly", type=FINITE_FLOAT,
              help="Monthly budget (the file's budget.max_monthly): `gpuopt solve` prints a plan above it and "
                   "exits 3.")
@click.option("-o", "--output", type=SafePath(path_type=Path), default=Path("workload.yaml"), show_default=True)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option("--interactive/--non-interactive", default=None,
              help="Ask the questions (default: when stdin is a terminal), or never ask: flags and the preset "
                   "give every answer.")
def init(preset: str, model: str | None, name: str | None, requests_per_second: float | None,
         concurrency: int | None, input_tokens: int | None, output_tokens: int | None, max_model_len: int | None,
         ttft_ms: float | None, tpot_ms: float | None, quality: str | None, residency: str | None,
         currency: str | None, budget_monthly: float | None, output: Path, force: bool,
         interactive: bool | None) -> None:
    """Ask the sizing questions and write a commented workload file for `gpuopt solve`."""
    from gpuopt.inputs.loader import check_output_path, write_output_file
    from gpuopt.inputs.presets import Answers, presets, render_workload
    from gpuopt.inputs.workload import load_workload
    from gpuopt.pricing.regions import Residency

    empty = [flag for flag, value in (("--name", name), ("--residency", residency), ("--model", model))
             if value is not None and not value.strip()]
    if empty:  # QA: --name '' wrote the preset's name and --residency '' wrote global, as if neither were given
        raise InputError(*(f"{flag}: empty (leave the flag out for the default)" for flag in empty))
    if output.exists() and not output.is_dir() and not force:
        raise InputError(f"-o {output}: already exists (use --force to overwrite it)")
    check_output_path(output)  # a directory, a missing or unwritable folder: the input boundary's messages
    p = presets()[preset]
    ask = sys.stdin.isatty() if interactive is None else interactive
    try:
        if ask:
            click.echo(f"gpuopt init — {p['summary']} (press Enter to keep the [default])", err=True)
            model = model or click.prompt("Model to serve (registry id)", err=True)
            load_key = next(iter(p["load"]))
            if requests_per_second is None and concurrency is None:
                if load_key == "concurrency":
                    concurrency = int(_ask("Concurrent requests", p["load"][load_key], whole=True))
                else:
                    requests_per_second = _ask("Requests per second", p["load"][load_key])
            max_model_len = max_model_len or int(_ask("Context length (tokens)", p["max_model_len"]["value"],
                                                      whole=True))
            input_tokens = input_tokens or int(_ask("Mean prompt tokens", p["input_tokens"]["value"], whole=True))
            output_tokens = output_tokens or int(_ask("Mean output tokens", p["output_tokens"]["value"], whole=True))
            ttft_ms = ttft_ms or _ask("Time-to-first-token target (ms)", p["ttft_ms"]["value"])
            tpot_ms = tpot_ms or _ask("Time-per-output-token target (ms)", p["tpot_ms"]["value"])
            quality = quality or click.prompt("Quality sensitivity", type=click.Choice(["high", "medium", "low"]),
                                              default="high" if "int4" not in p["precisions"]["value"] else "low",
                                              err=True)
            residency = residency or click.prompt("Where may the data live", default="global", err=True)
            if budget_monthly is None:
                budget_monthly = click.prompt("Monthly budget (blank: none)", default="", show_default=False, err=True,
                                              value_proc=_budget_answer)
    except click.exceptions.Abort:
        # EOF on a piped stdin ends click's prompt with Abort ("Aborted!", exit 1: the infeasible code); on a
        # terminal it is Ctrl-C or Ctrl-D, which stay click's
        if sys.stdin.isatty():
            raise
        raise InputError("init: stdin ended before every question was answered (give the answers as flags, "
                         "or --non-interactive)") from None
    if not model:
        raise InputError("--model is required with --non-interactive (or when stdin is not a terminal)")
    if requests_per_second is not None and concurrency is not None:
        raise InputError("give one of --requests-per-second or --concurrency, not both")
    problems = [problem for value, flag in (
        (requests_per_second, "--requests-per-second"), (ttft_ms, "--ttft-ms"), (tpot_ms, "--tpot-ms"),
        (budget_monthly, "--budget-monthly"), (concurrency, "--concurrency"), (input_tokens, "--input-tokens"),
        (output_tokens, "--output-tokens"), (max_model_len, "--context")) for problem in _positive(value, flag)]
    try:
        Residency(residency or "global")  # an unknown selector is exit 2 here, not in the written file
    except InputError as exc:
        problems += exc.problems
    if problems:  # every answer's problem at once, a line each
        raise InputError(*problems)
    limit, basis = _context_limit(model, max_model_len)
    request = (input_tokens or p["input_tokens"]["value"]) + (output_tokens or p["output_tokens"]["value"])
    if limit is not None and max_model_len is None and request > limit:
        raise InputError(f"the {preset} preset's requests ({request:,} tokens of prompt and output) exceed the "
                         f"{limit:,} tokens of context {model} supports ({basis}): give shorter --input-tokens / "
                         f"--output-tokens or another model (nothing written)")
    text = render_workload(Answers(
        preset=preset, model=model, name=name, requests_per_second=requests_per_second, concurrency=concurrency,
        input_tokens=input_tokens, output_tokens=output_tokens, max_model_len=max_model_len, ttft_ms=ttft_ms,
        tpot_ms=tpot_ms, quality=quality, residency=residency or "global", currency=currency,
        budget_monthly=budget_monthly, model_limit=limit, limit_basis=basis))
    # parse what we are about to write, in a scratch folder (the model is an id, so nothing in the file is
    # relative to it): a file `solve` would reject is never written; then the one -o writer every command uses
    # (devices and FIFOs in place, symlinks written through; QA: init had its own rename, which replaced
    # /dev/full and a FIFO, and a folder it could not write was exit 70)
    with tempfile.TemporaryDirectory(prefix="gpuopt-init-") as scratch:
        tmp = str(Path(scratch) / output.name)
        Path(tmp).write_text(text, encoding="utf-8")
        try:
            load_workload(Path(tmp))
        except ConfigError as exc:  # name the answer (the flag that gave it), not a line of an unwritten file
            raise ConfigError(*(f"{_answer(problem.replace(tmp, str(output)), output)} (nothing written)"
                                for problem in exc.problems)) from None
    write_output_file(output, text)
    _note_unknown_model(model)
    click.echo(f"wrote {output}: check it with `gpuopt solve {output}`", err=True)


def _context_limit(model: str, context: int | None) -> tuple[int | None, str]:
    """The registry model's context limit and its basis ((None, "") for a model the registry does not know:
    `solve` checks it once it resolves). A --context above the limit is exit 2: vLLM refuses to start there."""
    from gpuopt.errors import UnknownNameError
    from gpuopt.physics.architecture import get_model
    from gpuopt.physics.context_limit import limit_basis, max_model_len_problem, model_max_len

    try:
        arch = get_model(model)
    except UnknownNameError:
        return None, ""
    if context is not None and (problem := max_model_len_problem(arch, context, "--context")):
        raise InputError(f"{problem} (nothing written)")
    return model_max_len(arch), limit_basis(arch)


def _note_unknown_model(model: str) -> None:
    from gpuopt.errors import UnknownNameError
    from gpuopt.physics.architecture import get_model

    try:
        get_model(model)
    except UnknownNameError as exc:
        say("note", f"{exc.problems[0]}; solve will need it resolvable")
