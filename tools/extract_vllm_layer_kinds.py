"""Read which model architectures a vLLM release builds as hybrids or attention-free, from the release's own source.

    python -m tools.extract_vllm_layer_kinds --wheels /tmp/v 0.11.0 0.33.0 0.34.0 ... \\
        > gpuopt/data/vllm_layer_kinds.csv

A release is named as VERSION (its wheel `vllm-VERSION-*.whl` in --wheels, else fetched there with `pip download
vllm==VERSION --no-deps`, as for tools/extract_vllm_lora_models.py), VERSION=WHEEL.whl, or VERSION=DIR (an
unpacked tree). A wheel's model and layer sources (vllm/model_executor/**.py, vllm/models/**.py) are unpacked once
into --wheels/src-VERSION and read from there on.

prints gpuopt/data/vllm_layer_kinds.csv: one row per architecture name (a config.json `architectures` entry, a
key of registry.py's `_*_MODELS` dicts) whose class is, in at least one of the releases, built
  "hybrid"           `IsHybrid` in the class's MRO (or the class sets `is_hybrid = True`): layers that keep a
                     per-request state (Mamba, linear attention, short convolutions ...) next to attention
  "attention-free"   `IsAttentionFree` in the MRO (or `is_attention_free = True`): no attention layer at all
and per release that class's code there ("" not registered in it, "no" registered as neither). `kind` is the
union (attention-free where any release says so); `layers` the state layers the class's module builds: the
classes it calls that derive from vLLM's `MambaBase`, by their `mamba_type` (mamba1 "Mamba", mamba2 "Mamba-2",
short_conv "short-convolution", linear / linear_attention "linear-attention" -- MiniMax's "lightning-attention",
gdn_attn "Gated DeltaNet" -- Kimi's "Kimi Delta Attention"), joined by " + ", "" where the module builds none (a
wrapper that builds its language model through the registry).

Static reading (ast), no import of vLLM; bases resolved by name as extract_vllm_lora_models does (the defining
file first, then its imports, then any class of that name in the tree).
"""

from __future__ import annotations

import argparse
import ast
import csv
import subprocess
import sys
import zipfile
from pathlib import Path

from tools.extract_vllm_lora_models import (
    ClassInfo,
    _defined,
    _lookup,
    _module_files,
    model_class,
    registry_entries,
)

AS_OF = "2026-12-03"

HYBRID_BASES = {"IsHybrid": "hybrid", "IsAttentionFree": "attention-free"}
FLAGS = {"is_hybrid": "hybrid", "is_attention_free": "attention-free"}

MAMBA_TYPES = {"mamba1": "Mamba", "mamba2": "Mamba-2", "short_conv": "short-convolution",
               "linear_attention": "linear-attention", "linear": "linear-attention", "gdn_attn": "Gated DeltaNet",
               "gdn_attention": "Gated DeltaNet"}
"""vLLM's mamba_type of a MambaBase layer (a string up to 0.2x, MambaAttentionBackendEnum's member later) -> the
layers' name in gpuopt's messages."""

BY_CLASS_NAME = (("MiniMax", "lightning-attention"), ("Kimi", "Kimi Delta Attention"),
                 ("GatedDeltaNet", "Gated DeltaNet"))
"""A mixer class whose name says more than its mamba_type: MiniMax's linear attention is lightning attention,
Kimi-Linear's Gated DeltaNet variant is KDA, Qwen3-Next's 0.11 Gated DeltaNet reports "linear_attention"."""

SOURCES = ("vllm/model_executor/models/", "vllm/model_executor/layers/", "vllm/models/")
"""The folders a release's model classes and their layers are defined in (unpacked from a wheel, parsed)."""


class Tree:
    """Every class of one release's model and layer sources: the ClassInfo the LoRA extractor resolves bases with,
    and what this tool reads beyond it (the class flags, mamba_type, the names each file calls)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.classes: dict[str, list[ClassInfo]] = {}
        self.flags: dict[int, str] = {}  # id(ClassInfo) -> "hybrid" / "attention-free" set in the class body
        self.mamba_type: dict[int, str] = {}  # id(ClassInfo) -> its mamba_type's return value
        self.built: dict[Path, set[str]] = {}  # file -> the names it calls (the classes it builds)
        files = [f for folder in SOURCES for f in sorted((root / folder).rglob("*.py"))]
        for file in files:
            try:
                tree = ast.parse(file.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            nodes = list(ast.walk(tree))  # once: the file's imports, the names it calls and its classes
            imports = {a.asname or a.name: a.name for n in nodes if isinstance(n, ast.ImportFrom) for a in n.names}
            calls = [n.func for n in nodes if isinstance(n, ast.Call)]
            called = {f.id for f in calls if isinstance(f, ast.Name)} | {f.attr for f in calls
                                                                          if isinstance(f, ast.Attribute)}
            self.built[file] = {imports.get(name, name) for name in called}
            for node in nodes:
                if isinstance(node, ast.ClassDef):
                    info = ClassInfo(node, file, imports)
                    self.classes.setdefault(node.name, []).append(info)
                    self._read_body(node, info)

    def _read_body(self, node: ast.ClassDef, info: ClassInfo) -> None:
        for stmt in node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
                if isinstance(stmt, ast.AnnAssign) else []
            value = getattr(stmt, "value", None)
            for target in targets:
                if isinstance(target, ast.Name) and target.id in FLAGS and isinstance(value, ast.Constant) \
                        and value.value is True:
                    self.flags[id(info)] = FLAGS[target.id]
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "mamba_type":
                for ret in ast.walk(stmt):
                    if isinstance(ret, ast.Return) and ret.value is not None:
                        if isinstance(ret.value, ast.Constant) and isinstance(ret.value.value, str):
                            self.mamba_type[id(info)] = ret.value.value.lower()
                        elif isinstance(ret.value, ast.Attribute):
                            self.mamba_type[id(info)] = ret.value.attr.lower()

    def mro(self, info: ClassInfo | None) -> list[ClassInfo]:
        """The class and its bases, depth first (each once)."""
        out: list[ClassInfo] = []
        seen: set[int] = set()

        def walk(c: ClassInfo | None) -> None:
            if c is None or id(c) in seen:
                return
            seen.add(id(c))
            out.append(c)
            for base in c.bases:
                walk(_lookup(self.classes, base, c))

        walk(info)
        return out

    def kind(self, info: ClassInfo | None) -> str:
        """'attention-free', 'hybrid' or 'no' for a model class."""
        found: set[str] = set()
        for c in self.mro(info):
            found.update(HYBRID_BASES[b] for b in c.bases if b in HYBRID_BASES)
            if id(c) in self.flags:
                found.add(self.flags[id(c)])
        return "attention-free" if "attention-free" in found else "hybrid" if "hybrid" in found else "no"

    def layer_name(self, info: ClassInfo) -> str | None:
        """The layers a MambaBase-derived mixer class builds (None: not such a class)."""
        chain = self.mro(info)
        if not any("MambaBase" in c.bases for c in chain) or info.name == "MambaBase":
            return None
        for word, name in BY_CLASS_NAME:
            if word in info.name:
                return name
        mamba_type = next((self.mamba_type[id(c)] for c in chain if id(c) in self.mamba_type), None)
        return MAMBA_TYPES.get(mamba_type or "", mamba_type or "state")

    def layers(self, info: ClassInfo | None, files: list[Path]) -> set[str]:
        """The state layers the model's module builds: the MambaBase mixers its files (and those of the classes
        in its MRO) build: call by name (an isinstance check or an import alone builds nothing)."""
        scan = {*files, *(c.file for c in self.mro(info))}
        out: set[str] = set()
        for file in scan:
            for name in self.built.get(file, ()):
                for mixer in self.classes.get(name, []):
                    layer = self.layer_name(mixer)
                    if layer is not None:
                        out.add(layer)
        return out


def registered(root: Path) -> dict[str, tuple[str, str]]:
    """The registry's architecture -> (module, class name), from the `_*_MODELS` dicts of registry.py (as
    extract_vllm_lora_models.index reads them; the architectures a release no longer serves are not built)."""
    archs: dict[str, tuple[str, str]] = {}
    for _, arch, entry in registry_entries(root):
        if (where := model_class(entry)) is not None:
            archs.setdefault(arch, where)
    return archs


def scan(root: Path) -> dict[str, tuple[str, set[str]]]:
    """architecture -> (kind code, state layers) for every architecture the release registers."""
    tree = Tree(root)
    archs = registered(root)
    out: dict[str, tuple[str, set[str]]] = {}
    for arch, (module, cls) in archs.items():
        files = _module_files(root, module)
        info = _defined(tree.classes, cls, files)
        kind = tree.kind(info)
        out[arch] = (kind, tree.layers(info, files) if kind != "no" else set())
    return out


def unpack(version: str, where: str | None, wheels: Path) -> Path:
    """The source tree of a release: DIR as given; a wheel (given, found in `wheels`, else downloaded there with
    pip) unpacked once into wheels/src-VERSION."""
    if where is not None and Path(where).is_dir():
        return Path(where)
    target = wheels / f"src-{version}"
    if (target / "vllm/model_executor/models/registry.py").is_file():
        return target
    wheel = Path(where) if where is not None else next(iter(sorted(wheels.glob(f"vllm-{version}-*.whl"))), None)
    if wheel is None:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps", "-d", str(wheels)],
                       check=True, stdout=subprocess.DEVNULL)
        wheel = next(iter(sorted(wheels.glob(f"vllm-{version}-*.whl"))))
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.endswith(".py") and m.startswith(SOURCES)]
        archive.extractall(target, members)
    return target


def table(releases: list[tuple[str, Path]]) -> list[list[str]]:
    """The CSV rows (header first)."""
    scanned = {version: scan(root) for version, root in releases}
    versions = [v for v, _ in releases]
    archs = sorted({a for found in scanned.values() for a, (kind, _) in found.items() if kind != "no"})
    source = ("vllm wheels " + ", ".join(versions) + " from PyPI: vllm/model_executor/models/registry.py, the "
              "class's bases (IsHybrid, IsAttentionFree) and the MambaBase layers its module builds "
              "(tools/extract_vllm_layer_kinds.py)")
    rows = [["architecture", "kind", "layers", *versions, "source", "as_of"]]
    for arch in archs:
        cells = [scanned[v][arch][0] if arch in scanned[v] else "" for v in versions]
        kind = "attention-free" if "attention-free" in cells else "hybrid"
        layers = sorted({layer for v in versions if arch in scanned[v] for layer in scanned[v][arch][1]})
        rows.append([arch, kind, " + ".join(layers), *cells, source, AS_OF])
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--wheels", type=Path, default=Path("/tmp/v"),
                        help="where wheels are found, downloaded and unpacked (default /tmp/v)")
    parser.add_argument("releases", nargs="+", metavar="VERSION[=WHEEL|DIR]")
    args = parser.parse_args(argv)
    releases = []
    for arg in args.releases:
        version, _, where = arg.partition("=")
        releases.append((version, unpack(version, where or None, args.wheels)))
    csv.writer(sys.stdout, lineterminator="\n").writerows(table(releases))


if __name__ == "__main__":
    main()
