"""Merge imported rows into a package data file, keyed: the package file is the source of truth.

The importers (tools/import_*.py) turn ../shared/data into rows shaped like a package file; this module
merges them in by key, so a rebuild never drops a row added to the package by hand:

- a key only in the import is added (after the package's rows, in import order);
- a key in both takes the imported values (an update), unless `keep_package(old, new)` says the package's
  row wins (the catalog keeps a price newer than the imported one); a blank imported value, or a column the
  import does not have, keeps the package's value (a blank means the import does not know, not that the fact
  is wrong: clear a value by editing the package file);
- columns the package derives itself (`owned`, e.g. the GPU table's CUDA-reported memory, worked out from
  logs the shared table does not carry) keep the package's value on a row it already has;
- a package value that is the imported one plus an annotation (`<imported> | <package's addition>`, how the
  registry notes what gpuopt derived on top of a source row) keeps the annotation while the imported part
  is unchanged;
- a key only in the package is kept as it is;
- the package's columns and their order are kept; columns new in the import are appended.

Nothing is written unless asked: `report()` says what would be added, changed and kept.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Row = dict[str, str]
Key = tuple[str, ...]


@dataclass
class Merge:
    """The merged rows and what the merge did, by key."""

    name: str
    columns: list[str]
    rows: list[Row]
    added: list[Key] = field(default_factory=list)
    changed: list[tuple[Key, dict[str, tuple[str, str]]]] = field(default_factory=list)  # column: (old, new)
    unchanged: list[Key] = field(default_factory=list)
    package_only: list[Key] = field(default_factory=list)  # kept: rows the import does not have
    package_wins: list[Key] = field(default_factory=list)  # kept: keep_package preferred the package's row
    replaced: list[Row] = field(default_factory=list)  # the package rows that `changed` replaced

    def report(self, detail: bool = True) -> str:
        lines = [f"{self.name}: add {len(self.added)}, change {len(self.changed)}, unchanged {len(self.unchanged)}, "
                 f"keep {len(self.package_only)} package-only and {len(self.package_wins)} newer in the package"]
        if detail:
            lines += [f"  add {_show(k)}" for k in self.added]
            for k, diff in self.changed:
                what = "; ".join(f"{c} {old!r} -> {new!r}" for c, (old, new) in diff.items())
                lines.append(f"  change {_show(k)}: {what}")
            lines += [f"  keep (package only) {_show(k)}" for k in self.package_only]
            lines += [f"  keep (newer in the package) {_show(k)}" for k in self.package_wins]
        return "\n".join(lines)


def _show(key: Key) -> str:
    return " / ".join(key)


def _keyed(rows: Sequence[Row], key: Sequence[str], what: str) -> dict[Key, Row]:
    out: dict[Key, Row] = {}
    for row in rows:
        k = tuple(row.get(c, "") for c in key)
        if k in out:
            raise ValueError(f"{what}: two rows with key {_show(k)} ({', '.join(key)})")
        out[k] = row
    return out


ANNOTATION = " | "
"""What separates a package annotation from the imported value it annotates."""


def _merged_value(column: str, package: str, imported: str, owned: Sequence[str]) -> str:
    if not imported or (column in owned and package):
        return package
    if package.startswith(imported + ANNOTATION):
        return package
    return imported


def merge_rows(name: str, package_columns: Sequence[str], package_rows: Sequence[Row], imported: Sequence[Row],
               key: Sequence[str], keep_package: Callable[[Row, Row], bool] | None = None,
               owned: Sequence[str] = ()) -> Merge:
    """Merge `imported` into the package's rows by `key` (see the module docstring for the rule)."""
    columns = list(package_columns)
    for row in imported:
        columns += [c for c in row if c not in columns and not c.startswith("_")]
    old = _keyed(package_rows, key, f"{name} (package)")
    new = _keyed(imported, key, f"{name} (import)")
    result = Merge(name=name, columns=columns, rows=[])
    for k, row in old.items():
        incoming = new.get(k)
        if incoming is None:
            result.package_only.append(k)
            result.rows.append(dict(row))
            continue
        if keep_package is not None and keep_package(row, incoming):
            result.package_wins.append(k)
            result.rows.append(dict(row))
            continue
        merged = {c: _merged_value(c, row.get(c, ""), incoming.get(c, ""), owned) for c in columns}
        diff = {c: (row.get(c, ""), merged[c]) for c in columns if row.get(c, "") != merged[c]}
        if diff:
            result.changed.append((k, diff))
            result.replaced.append(dict(row))
        else:
            result.unchanged.append(k)
        result.rows.append(merged)
    for k, row in new.items():
        if k not in old:
            result.added.append(k)
            result.rows.append({c: row.get(c, "") for c in columns})
    return result


def read_csv(path: Path) -> tuple[list[str], list[Row]]:
    """Header and rows of a package CSV (an absent file is empty)."""
    if not path.exists():
        return [], []
    reader = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))
    return list(reader.fieldnames or []), list(reader)


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[Row]) -> None:
    """The package files' dialect: minimal quoting, \\n line ends, UTF-8."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8", newline="")
