"""docs/calibrate.md runs: every `gpuopt` command of its worked example is run here, and every line of the
output shown after it must be a line the commands print (in order), so the doc's figures cannot rot.

The doc's ```bash blocks are read as written: `gpuopt ...` lines (with `\\` continuations and globs), a
one-line `for X in a b; do gpuopt ... $X ...; done`, and `cat > FILE <<'EOF'` here-documents (a `> FILE`
redirection is ignored). The ```text block that follows a ```bash block is the output shown for it.
Commands run in a scratch directory that sees the repository's tests/ and examples/, at 120 columns (the
doc says so).

GPUOPT_SHOW_DOC_OUTPUT=1 prints each block's full output (to rewrite the doc after a model change)."""

from __future__ import annotations

import glob
import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuopt.cli.main import cli
from gpuopt.hardware import use_calibrated

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "calibrate.md"
FOR = re.compile(r"for (\w+) in ([^;]+); do (.+); done")


def _blocks(text: str) -> list[tuple[str, str | None]]:
    """(bash block, the text block right after it or None)."""
    fences = list(re.finditer(r"```(\w*)\n(.*?)```", text, re.S))
    out = []
    for i, m in enumerate(fences):
        if m.group(1) != "bash":
            continue
        nxt = fences[i + 1] if i + 1 < len(fences) else None
        between = text[m.end():nxt.start()] if nxt else ""
        shown = nxt.group(2) if nxt and nxt.group(1) == "text" and "```" not in between else None
        out.append((m.group(2), shown))
    return out


def _commands(script: str) -> list[list[str] | tuple[str, str]]:
    """argv lists (without `gpuopt`) and (file, content) here-documents, in order."""
    lines = script.replace("\\\n", " ").splitlines()
    out: list[list[str] | tuple[str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i].split(" #")[0].strip()
        heredoc = re.match(r"cat > (\S+) <<'EOF'$", line)
        loop = FOR.fullmatch(line)
        if heredoc:
            end = lines.index("EOF", i)
            out.append((heredoc.group(1), "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        elif loop:
            for value in loop.group(2).split():
                out.append(_argv(loop.group(3).replace(f"${loop.group(1)}", value)))
        elif line.startswith("gpuopt "):
            out.append(_argv(line))
        i += 1
    return out


def _argv(line: str) -> list[str]:
    words = shlex.split(line)[1:]
    if ">" in words:  # a redirection: the test reads what the command prints either way
        words = words[:words.index(">")]
    return words


def _expand(words: list[str]) -> list[str]:
    """Globs, as the shell expands them when the command runs (sorted)."""
    expanded: list[str] = []
    for w in words:
        expanded += sorted(glob.glob(w)) if any(c in w for c in "*?[") else [w]
    return expanded


def test_every_output_the_doc_shows_is_what_its_commands_print(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("tests", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUOPT_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user profile
    blocks = _blocks(DOC.read_text(encoding="utf-8"))
    try:
        for script, shown in blocks:
            printed: list[str] = []
            for command in _commands(script):
                if isinstance(command, tuple):
                    Path(command[0]).write_text(command[1], encoding="utf-8")
                    continue
                result = CliRunner().invoke(cli, _expand(command), env={"COLUMNS": "120"})
                printed += (result.stderr + result.stdout).splitlines()
                use_calibrated({})  # a --profile applies for one command, as in a shell
            if os.environ.get("GPUOPT_SHOW_DOC_OUTPUT"):
                print(f"\n$ {script}\n" + "\n".join(line.rstrip() for line in printed))
            if shown is None:
                continue
            lines = [line.rstrip() for line in printed]
            at = 0
            for want in (w.rstrip() for w in shown.splitlines() if w.strip()):
                assert want in lines[at:], f"docs/calibrate.md shows a line the commands do not print: {want!r}"
                at = lines.index(want, at) + 1
    finally:
        use_calibrated({})
    assert len([b for b in blocks if b[1] is not None]) >= 4
