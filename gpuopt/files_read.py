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


MAX_INPUT_BYTES = 256 * 1024 * 1024
"""The most any input file may hold: no workload, plan, overlay, config or log gpuopt reads comes near it, and a
character device that never ends (/dev/zero, /dev/urandom as an input) would otherwise be read until memory
runs out (QA: it hung)."""
SNIFF_BYTES = 8192  # a NUL byte in these makes a file binary, not text


class NotText(OSError):
    """An input that is binary (a NUL byte near its start) or larger than MAX_INPUT_BYTES."""


def read_text_bytes(path: Path) -> bytes:
    """A text file's bytes, noted as read: NotText for a binary file (judged on its first SNIFF_BYTES, so a
    device of zeros is refused without reading on) or one past MAX_INPUT_BYTES."""
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
        if b"\x00" in head:
            raise NotText("is a binary file (contains NUL bytes)")
        data = head + handle.read(MAX_INPUT_BYTES + 1 - len(head))
    if len(data) > MAX_INPUT_BYTES:
        raise NotText(f"is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, more than any input gpuopt reads")
    note_read(path)
    return data
