"""Diagnostics on stderr as single terminal lines.

A message can carry what a user wrote (a workload name, a `--server-args` flag, a YAML value); control
characters, Unicode line and paragraph separators and bidi overrides in it are shown escaped, so each
`error:`, `warning:` or `note:` is exactly one line (str.splitlines() and terminals agree) and cannot rewrite
the screen.
"""

from __future__ import annotations

import click

# C0 and C1 controls and DEL (newlines, ANSI escapes, \x1c-\x1e and \x85 split lines too); U+2028/U+2029 are
# line breaks for str.splitlines() and many viewers; U+202A-U+202E and U+2066-U+2069 reorder text (bidi)
_UNSAFE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))} | {
    c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def printable(text: str) -> str:
    """A message as one terminal line, with what could break or rewrite the line shown escaped."""
    return text.translate(_UNSAFE)


def say(kind: str, text: str) -> None:
    """One diagnostic line on stderr: `kind: text` (kind is error, warning or note)."""
    click.echo(f"{kind}: {printable(text)}", err=True)
