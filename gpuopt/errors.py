"""The exception tree, and the exit codes the CLI maps them to.

    GpuoptError                      base of every *expected* failure (never a bug)
    +-- InputError (exit 2)          bad user input: unknown model/GPU, invalid flag combination, bad file
    |   +-- UnknownNameError         a name not in a registry, with close matches
    |   +-- ConfigError              a config.json / workload file missing or mistyping a field
    |   +-- FieldError               a workload field the model refuses, located in the file by the CLI
    +-- InfeasibleError (exit 1)     valid input with no answer (does not fit, SLO unreachable)
        +-- SloUnreachableError      a latency target even a lone request misses: which one, by how much

Anything else that escapes is a bug: the CLI prints one `error: internal error ...` line asking for a report
and exits 70 (EX_SOFTWARE from sysexits.h); `gpuopt --debug` or GPUOPT_DEBUG=1 shows the traceback.
Exit codes (documented once, here): 0 ok, 1 infeasible, 2 bad input, 3 over budget, 70 internal error.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from gpuopt.vocabulary import LatencyTarget

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_BAD_INPUT = 2
EXIT_OVER_BUDGET = 3
EXIT_INTERNAL = 70


class GpuoptError(Exception):
    """Base of expected failures; `problems` holds one line per problem."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems: tuple[str, ...] = problems


class InputError(GpuoptError):
    exit_code = EXIT_BAD_INPUT


class ConfigError(InputError):
    pass


class NotModelledError(InputError):
    """vLLM would start, but on a path gpuopt does not model (its V0 engine): bad input for `fit`, a rejected
    shape for the planner -- not one vLLM refuses."""


class FieldError(InputError):
    """Values of a workload file that only the model shows to be wrong (a length past its limit, a release
    that does not implement it, LoRA it cannot take): each problem with its location in the file (("workloads",
    i, field)), so the command that read the file can name the YAML line (inputs.workload.locate_fields)."""

    def __init__(self, located: Iterable[tuple[tuple[str | int, ...], str]]) -> None:
        self.located = tuple(located)
        super().__init__(*(f"{'.'.join(map(str, loc))}: {message}" for loc, message in self.located))


class UnknownNameError(InputError):
    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        known_list = list(known)
        lowered = {k.lower(): k for k in known_list}
        matches = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
        # also accept substring hits: "llama-3.1-8b" should suggest the full HF id
        suggestions = [lowered[m] for m in matches]
        subs = [k for k in known_list if name.lower() in k.lower() and k not in suggestions]
        suggestions += subs[: max(0, 3 - len(suggestions))]
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} '{name}'{hint}")
        self.suggestions = suggestions


class InfeasibleError(GpuoptError):
    exit_code = EXIT_INFEASIBLE


class SloUnreachableError(InfeasibleError):
    """A latency target no load can meet, because a lone request already misses it. Typed, so callers tell
    a TTFT miss from a TPOT miss and read the margin from fields, never from the message."""

    def __init__(self, target: LatencyTarget, target_ms: float, lone_ms: float, message: str) -> None:
        super().__init__(message)
        self.target: LatencyTarget = target
        self.target_ms = target_ms
        self.lone_ms = lone_ms  # what a request alone on the replica gets

    @property
    def ms_over(self) -> float:
        return self.lone_ms - self.target_ms
