"""The import direction, guarded: imports only go down the layers, and physics and pricing never meet.

    ground (errors, hardware, vocabulary, datafiles, text, decimals, clock, files_read, the package __init__)
      -> physics | pricing        (siblings: neither imports the other)
      -> inputs -> planner -> reports -> cli
      -> __main__                 (the `python -m gpuopt` entry point runs the CLI, so it sits on top)

Every import counts: module-level, inside functions, under TYPE_CHECKING, relative, and
`importlib.import_module("gpuopt....")` with a literal name. A module may import its own layer and any
layer below; a new top-level module or folder must be given a layer here before it can be imported.
The checker is run on the real package and on small packages written to tmp_path with a planted
back-arrow, so it is known to fail when it should.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuopt

LAYERS: dict[str, int] = {
    "__init__": 0, "errors": 0, "hardware": 0, "vocabulary": 0, "datafiles": 0, "text": 0, "decimals": 0, "clock": 0,
    "files_read": 0,
    "physics": 1, "pricing": 1,
    "inputs": 2,
    "planner": 3,
    "reports": 4,
    "cli": 5,
    "__main__": 6,
}
SIBLINGS = {frozenset({"physics", "pricing"})}
"""Layers of the same rank that must not import each other."""


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the package folder `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _room(module: str, package: str) -> str:
    """The layer a dotted module belongs to: its first component under the package (`__init__` for the
    package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == package else "__init__"


def _imported(tree: ast.AST, module: str, is_package: bool, package: str, known: set[str]) -> list[tuple[int, str]]:
    """(line, dotted name) of every import of the package inside one module's syntax tree."""
    found: list[tuple[int, str]] = []
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # `from gpuopt import cli` imports the subpackage; `from gpuopt import __version__` the package
                candidate = f"{base}.{alias.name}"
                found.append((node.lineno, candidate if candidate in known else base))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
                   or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"))):
            found.append((node.lineno, node.args[0].value))
    return [(line, name) for line, name in found if name == package or name.startswith(package + ".")]


def back_arrows(root: Path, package: str = "gpuopt") -> list[str]:
    """Every import in the package folder `root` that goes up a layer or across to a sibling, plus every
    module that belongs to no layer; one line each, `path:line: what`."""
    modules = _modules(root, package)
    known = set(modules)
    problems = []
    unplaced = sorted({_room(module, package) for module in modules} - set(LAYERS))
    problems += [f"{package}.{room} is in no layer (add it to LAYERS in tests/test_layers.py)" for room in unplaced]
    for module, path in modules.items():
        room = _room(module, package)
        where = path.relative_to(root.parent)
        if room in unplaced:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in _imported(tree, module, path.name == "__init__.py", package, known):
            target = _room(name, package)
            if target not in LAYERS:
                problems.append(f"{where}:{line}: imports {name}, which is in no layer")
            elif LAYERS[target] > LAYERS[room]:
                problems.append(f"{where}:{line}: {room} imports {name} ({target} is a higher layer)")
            elif frozenset({room, target}) in SIBLINGS:
                problems.append(f"{where}:{line}: {room} imports {name} ({target} is a sibling layer)")
    return problems


def test_gpuopt_imports_only_go_down() -> None:
    assert back_arrows(Path(gpuopt.__file__).parent) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    """A package `gpuopt` under root with the given modules (folders get an __init__.py)."""
    pkg = root / "gpuopt"
    for rel, text in {"__init__.py": "", **files}.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(pkg).parents:
            (pkg / parent / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return pkg


CLEAN = {
    "errors.py": "class GpuoptError(Exception): ...\n",
    "vocabulary.py": "",
    "physics/memory.py": "from gpuopt.errors import GpuoptError\nfrom gpuopt import vocabulary\n",
    "pricing/catalog.py": "from ..errors import GpuoptError\n",
    "planner/solve.py": "from gpuopt.physics.memory import GpuoptError\nfrom gpuopt.pricing import catalog\n",
    "reports/render.py": "from gpuopt.planner.solve import GpuoptError\n",
    "cli/main.py": "import gpuopt.reports.render\nfrom gpuopt import __version__\n",
    "__main__.py": "from gpuopt.cli.main import GpuoptError\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert back_arrows(_write(tmp_path, CLEAN)) == []


@pytest.mark.parametrize(("rel", "text", "problem"), [
    # module level, absolute
    ("physics/memory.py", "from gpuopt.planner.solve import x\n",
     "gpuopt/physics/memory.py:1: physics imports gpuopt.planner.solve (planner is a higher layer)"),
    # inside a function: a lazy import is still an arrow
    ("reports/render.py", "def f():\n    from gpuopt.cli.main import main\n",
     "gpuopt/reports/render.py:2: reports imports gpuopt.cli.main (cli is a higher layer)"),
    # relative, two levels up
    ("planner/solve.py", "from ..reports import render\n",
     "gpuopt/planner/solve.py:1: planner imports gpuopt.reports.render (reports is a higher layer)"),
    # plain `import a.b`, from the ground floor
    ("vocabulary.py", "import gpuopt.physics.memory\n",
     "gpuopt/vocabulary.py:1: vocabulary imports gpuopt.physics.memory (physics is a higher layer)"),
    # under TYPE_CHECKING
    ("physics/memory.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuopt.inputs import w\n",
     "gpuopt/physics/memory.py:3: physics imports gpuopt.inputs (inputs is a higher layer)"),
    # siblings: pricing and physics never meet
    ("pricing/catalog.py", "from gpuopt.physics.memory import GpuoptError\n",
     "gpuopt/pricing/catalog.py:1: pricing imports gpuopt.physics.memory (physics is a sibling layer)"),
    ("physics/memory.py", "from gpuopt import pricing\n",
     "gpuopt/physics/memory.py:1: physics imports gpuopt.pricing (pricing is a sibling layer)"),
    # importlib with a literal name
    ("inputs/workload.py", "import importlib\nm = importlib.import_module('gpuopt.planner.solve')\n",
     "gpuopt/inputs/workload.py:2: inputs imports gpuopt.planner.solve (planner is a higher layer)"),
    # the package __init__ is ground floor too
    ("__init__.py", "from gpuopt.cli.main import main\n",
     "gpuopt/__init__.py:1: __init__ imports gpuopt.cli.main (cli is a higher layer)"),
    # a folder nobody placed
    ("simulator/engine.py", "",
     "gpuopt.simulator is in no layer (add it to LAYERS in tests/test_layers.py)"),
])
def test_a_planted_back_arrow_fails(tmp_path: Path, rel: str, text: str, problem: str) -> None:
    files = {**CLEAN, rel: text}
    assert back_arrows(_write(tmp_path, files)) == [problem]


def test_a_back_arrow_planted_in_a_copy_of_gpuopt_fails(tmp_path: Path) -> None:
    """The real tree, copied, with one lazy import from physics up into the planner."""
    import shutil

    pkg = tmp_path / "gpuopt"
    shutil.copytree(Path(gpuopt.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__", "data"))
    latency = pkg / "physics" / "latency.py"
    lines = latency.read_text(encoding="utf-8").count("\n")
    latency.write_text(latency.read_text(encoding="utf-8") + "\n\ndef _planted() -> None:\n"
                       "    from gpuopt.planner.plan import Plan  # noqa: F401\n", encoding="utf-8")
    assert back_arrows(pkg) == [f"gpuopt/physics/latency.py:{lines + 4}: physics imports gpuopt.planner.plan "
                                "(planner is a higher layer)"]
