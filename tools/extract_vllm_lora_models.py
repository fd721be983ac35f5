"""Read which model architectures a vLLM release serves with LoRA, from the release's own model source.

    pip download vllm==X --no-deps -d /tmp/v && unzip /tmp/v/vllm-X-*.whl 'vllm/model_executor/models/*' \\
        'vllm/models/*' -d /tmp/v/X
    python tools/extract_vllm_lora_models.py 0.11.0=/tmp/v/0.11.0 0.27.1=/tmp/v/0.27.1 ... > \\
        gpuopt/data/vllm_architectures.csv

prints gpuopt/data/vllm_architectures.csv: one row per architecture name any of the releases registers (the keys
of the `_*_MODELS` dicts in vllm/model_executor/models/registry.py, i.e. a config.json `architectures` entry),
and one column per release:
  ""                 the release does not register the architecture
  "no"               registered, its class does not implement SupportsLoRA (vLLM then refuses --enable-lora:
                     "<class> does not support LoRA yet")
  "lora"             SupportsLoRA is in the class's MRO (or the class sets `supports_lora = True`)
  "lora+embedding"   and the class (or the nearest base that sets it) declares a non-empty
                     `embedding_modules`: only then does vLLM wrap the input embedding with LoRA buffers
  "until X"          no longer served: vLLM's `_PREVIOUSLY_SUPPORTED_MODELS` names X as the last release
  "plugin"           served only by an out-of-tree plugin (`_OOT_SUPPORTED_MODELS`)

Static reading (ast), no import of vLLM. Bases are resolved by name: the defining file first, then its
imports, then any class of that name in the model tree.
"""

from __future__ import annotations

import ast
import csv
import sys
from collections.abc import Iterator
from pathlib import Path

AS_OF = "2026-12-02"


class ClassInfo:
    """One class definition: its base names, whether it sets supports_lora, its embedding_modules literal."""

    def __init__(self, node: ast.ClassDef, file: Path, imports: dict[str, str]) -> None:
        self.name = node.name
        self.file = file
        self.imports = imports
        self.bases = [_base_name(b) for b in node.bases]
        self.sets_lora = False
        self.embedding: bool | None = None  # None: not assigned in this class
        for stmt in node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
                if isinstance(stmt, ast.AnnAssign) else []
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = getattr(stmt, "value", None)
            if "supports_lora" in names:
                self.sets_lora = True
            if "embedding_modules" in names and value is not None:
                self.embedding = isinstance(value, ast.Dict) and bool(value.keys)


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _base_name(node.value)
    return ""


def index(root: Path) -> tuple[dict[str, list[ClassInfo]], dict[str, tuple[str, str]], dict[str, str]]:
    """Every class of the model tree by name; the registry's architecture -> (module, class name); and the
    architectures the release no longer serves -> why (`_PREVIOUSLY_SUPPORTED_MODELS`: the last release that
    did; `_OOT_SUPPORTED_MODELS`: an out-of-tree plugin)."""
    classes: dict[str, list[ClassInfo]] = {}
    files = [*sorted((root / "vllm/model_executor/models").rglob("*.py")),
             *sorted((root / "vllm/models").rglob("*.py"))]
    for file in files:
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        imports = {a.asname or a.name: a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                   for a in n.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(ClassInfo(node, file, imports))
    archs: dict[str, tuple[str, str]] = {}
    gone: dict[str, str] = {}
    for table, arch, entry in registry_entries(root):
        if table == "_PREVIOUSLY_SUPPORTED_MODELS" and isinstance(entry, ast.Constant):
            gone[arch] = f"until {entry.value!s}"
        elif table == "_OOT_SUPPORTED_MODELS":
            gone[arch] = "plugin"
        elif (where := model_class(entry)) is not None:
            archs.setdefault(arch, where)
    return classes, archs, gone


def registry_entries(root: Path) -> Iterator[tuple[str, str, ast.expr]]:
    """(dict name, architecture, value) of every string-keyed entry of registry.py's `_*_MODELS` dicts."""
    registry = ast.parse((root / "vllm/model_executor/models/registry.py").read_text(encoding="utf-8"))
    for node in registry.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target \
            if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if not (isinstance(target, ast.Name) and target.id.endswith("_MODELS") and isinstance(value, ast.Dict)):
            continue
        for key, entry in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant):
                yield target.id, str(key.value), entry


def model_class(entry: ast.expr) -> tuple[str, str] | None:
    """A registry value's (module, class name), when it is the literal tuple that names them."""
    if isinstance(entry, ast.Tuple) and len(entry.elts) >= 2 and all(isinstance(e, ast.Constant)
                                                                      for e in entry.elts[:2]):
        module, cls = (str(e.value) for e in entry.elts[:2])  # type: ignore[attr-defined]
        return module, cls
    return None


def _lookup(classes: dict[str, list[ClassInfo]], name: str, near: ClassInfo | None) -> ClassInfo | None:
    found = classes.get(name, [])
    if near is not None:
        same = [c for c in found if c.file == near.file]
        if same:
            return same[0]
        original = near.imports.get(name)
        if original and original != name:
            return _lookup(classes, original, None)
    return found[0] if found else None


def _module_files(root: Path, module: str) -> list[Path]:
    """The files a registry module names: 'llama' is vllm/model_executor/models/llama.py, a dotted path
    ('vllm.models.deepseek_v32') a module or package under the root."""
    if "." not in module:
        return [root / "vllm/model_executor/models" / f"{module}.py"]
    path = root / module.replace(".", "/")
    return [path.with_suffix(".py")] if path.with_suffix(".py").exists() else sorted(path.rglob("*.py"))


def _defined(classes: dict[str, list[ClassInfo]], name: str, files: list[Path] | None) -> ClassInfo | None:
    """The class a registry entry loads: defined in the module's files, or bound by the package's
    __init__.py -- its first `from X import C as name` (the CUDA branch comes first in vLLM's platform
    packages, e.g. vllm/models/deepseek_v32 in 0.33)."""
    defined = [c for c in classes.get(name, []) if files is None or c.file in files]
    if defined:
        return defined[0]
    inits = [f for f in files or [] if f.name == "__init__.py"]
    init = min(inits, key=lambda f: len(f.parts)) if inits else None
    if init is not None:
        for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        module = tuple((node.module or "").split("."))
                        near = [c for c in classes.get(alias.name, [])
                                if c.file.with_suffix("").parts[-len(module):] == module]
                        if near:
                            return near[0]
    return _lookup(classes, name, None)


def support(classes: dict[str, list[ClassInfo]], name: str, files: list[Path] | None = None) -> str:
    """'no', 'lora' or 'lora+embedding' for one class name (its MRO walked depth-first, as Python's would
    find the first `embedding_modules` for a single-inheritance chain)."""
    lora, embedding, seen = False, None, set()

    def walk(info: ClassInfo | None) -> None:
        nonlocal lora, embedding
        if info is None or id(info) in seen:
            return
        seen.add(id(info))
        lora = lora or info.sets_lora
        if embedding is None and info.embedding is not None:
            embedding = info.embedding
        for base in info.bases:
            if base == "SupportsLoRA":
                lora = True
            walk(_lookup(classes, base, info))

    walk(_defined(classes, name, files))
    if not lora:
        return "no"
    return "lora+embedding" if embedding else "lora"


def main(argv: list[str]) -> None:
    releases = [tuple(arg.split("=", 1)) for arg in argv]
    table: dict[str, dict[str, str]] = {}
    for version, root in releases:
        classes, archs, gone = index(Path(root))
        for arch, (module, cls) in archs.items():
            table.setdefault(arch, {})[version] = support(classes, cls, _module_files(Path(root), module))
        for arch, why in gone.items():
            if arch not in archs:
                table.setdefault(arch, {})[version] = why
    writer = csv.writer(sys.stdout, lineterminator="\n")
    versions = [v for v, _ in releases]
    writer.writerow(["architecture", *versions, "source", "as_of"])
    source = ("vllm wheels " + ", ".join(versions) + " from PyPI: vllm/model_executor/models/registry.py + the "
              "class's bases (tools/extract_vllm_lora_models.py)")
    for arch in sorted(table):
        writer.writerow([arch, *(table[arch].get(v, "") for v in versions), source, AS_OF])


if __name__ == "__main__":
    main(sys.argv[1:])
