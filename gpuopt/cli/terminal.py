"""Diagnostics on stderr as single terminal lines.

A message can carry what a user wrote (a workload name, a `--server-args` flag, a YAML value); control
characters, Unicode line and paragraph separators and bidi overrides in it are shown escaped (gpuopt/text.py),
so each `error:`, `warning:` or `note:` is exactly one line (str.splitlines() and terminals agree) and cannot
rewrite the screen.
"""

from __future__ import annotations

import click

from gpuopt.text import printable

__all__ = ["printable", "say"]


def say(kind: str, text: str) -> None:
    """One diagnostic line on stderr: `kind: text` (kind is error, warning or note)."""
    click.echo(f"{kind}: {printable(text)}", err=True)
