"""The one registry of report formats: every row resolves, every command offers exactly its kind's formats,
and naming the formats imports no renderer."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from gpuopt.cli.plan import plan
from gpuopt.cli.report import diff, report
from gpuopt.cli.solve import solve
from gpuopt.reports.registry import REGISTRY, formats, renderer


@pytest.mark.parametrize(("kind", "fmt"), [(k, f) for k, rows in REGISTRY.items() for f in rows])
def test_every_registered_renderer_loads(kind: str, fmt: str) -> None:
    entry = REGISTRY[kind][fmt]  # type: ignore[index]
    loaded = renderer(kind, fmt)  # type: ignore[arg-type]
    assert callable(loaded)
    assert loaded.__module__ == entry.module and loaded.__name__ == entry.function


@pytest.mark.parametrize(("command", "default"), [(solve, "table"), (report, "markdown"), (plan, "table"),
                                                  (diff, "table")])
def test_each_command_default_is_one_of_its_formats(command: click.Command, default: str) -> None:
    option = next(p for p in command.params if p.name == "fmt")
    assert option.default == default and default in _choices(command)


def _choices(command: click.Command) -> tuple[str, ...]:
    option = next(p for p in command.params if p.name == "fmt")
    assert isinstance(option.type, click.Choice)
    return tuple(option.type.choices)


@pytest.mark.parametrize(("command", "kind"), [(solve, "plan"), (report, "plan"), (plan, "capacity"),
                                               (diff, "diff")])
def test_each_command_offers_the_registry_formats(command: click.Command, kind: str) -> None:
    assert _choices(command) == formats(kind)  # type: ignore[arg-type]


def test_unknown_format_names_the_kind_and_its_formats() -> None:
    with pytest.raises(KeyError, match="no 'focus' renderer for a diff \\(formats: table, markdown, json\\)"):
        renderer("diff", "focus")


def test_naming_formats_imports_no_renderer() -> None:
    code = ("import sys; from gpuopt.reports.registry import formats; formats('plan'); "
            "print(sorted(m for m in sys.modules if m.startswith(('gpuopt.reports.', 'rich', 'pandas', "
            "'matplotlib', 'gpuopt.planner'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['gpuopt.reports.registry']"
