"""The planner's modules import each other without a cycle, counting imports inside functions (a cycle
dodged by a late import is still a cycle): sensitivity runs after solving, so it imports solve and capacity
and they never import it."""

from __future__ import annotations

import ast
from pathlib import Path

import gpuopt.planner

PLANNER = Path(gpuopt.planner.__file__).parent


def planner_imports(source: str) -> set[str]:
    """Planner modules (short names) that `source` imports anywhere, at the top or in a function."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n.split(".")[2] for n in names if n.startswith("gpuopt.planner.") and n.count(".") == 2}
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed graph as a path that returns to its start, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [])):
            return found
    return None


def test_find_cycle_finds_a_planted_cycle_and_accepts_a_chain():
    assert find_cycle({"solve": {"program"}, "program": {"plan"}, "sensitivity": {"solve"}}) is None
    cycle = find_cycle({"solve": {"program", "sensitivity"}, "program": set(), "sensitivity": {"solve"}})
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"solve", "sensitivity"}


def test_planted_late_import_is_seen():
    assert planner_imports("def f():\n    from gpuopt.planner.sensitivity import analyse\n") == {"sensitivity"}
    assert planner_imports("from gpuopt.planner import solve\nimport gpuopt.planner.plan\n") == {"solve", "plan"}


def test_the_planner_has_no_import_cycle_and_sensitivity_comes_after_solving():
    graph = {p.stem: planner_imports(p.read_text(encoding="utf-8")) - {p.stem} for p in PLANNER.glob("*.py")}
    assert find_cycle(graph) is None
    assert {"solve", "capacity"} <= graph["sensitivity"]
    assert not any("sensitivity" in imports for imports in graph.values())
