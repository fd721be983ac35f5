"""The files this process has read, so that no result is written over one of them.

`-o` is checked against a command's own path arguments before any work (cli/options.refuse_input_as_output),
but a command also reads files its arguments name: a workload's model config.json, the profile that
GPUOPT_PROFILE names, a simulate --lengths-file. Each reader notes what it read here, and the one writer of
results (inputs/loader.write_output_file) refuses a target that is one of them (QA: `solve w.yaml -o
cfg.json` replaced the workload's model config; GPUOPT_PROFILE=p.yaml with `-o p.yaml` replaced the profile).
On the ground floor, beside clock and decimals: every layer reads files.
"""

from __future__ import annotations

import os
from pathlib import Path

_READ: list[Path] = []


def note_read(path: Path) -> None:
    """Remember that `path` was read (its absolute spelling; the comparison is by inode)."""
    _READ.append(Path(os.path.abspath(path)))


def forget() -> None:
    """Start a command's record afresh (the CLI group does, before each command)."""
    _READ.clear()


def read_as(target: Path) -> Path | None:
    """The path under which `target` was read, if this process read it (links and ../ spellings included)."""
    for path in _READ:
        try:
            if os.path.samefile(path, target):
                return path
        except OSError:
            continue
    return None
