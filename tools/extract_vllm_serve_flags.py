"""Read the valid `vllm serve` flags of a vLLM release from its own argument-parser source.

    pip download vllm==X --no-deps -d /tmp/v && unzip /tmp/v/*.whl 'vllm/engine/arg_utils.py' \\
        'vllm/entrypoints/*/cli_args.py' 'vllm/config/cache.py' -d /tmp/v/src
    python tools/extract_vllm_serve_flags.py X /tmp/v/src "vllm-X-....whl (sha256 ...)"

prints the release's YAML entry for gpuopt/data/vllm_serve_flags.yaml. Static reading (ast), no import of
vLLM (it needs torch and a GPU build). A flag is every string starting with '-' passed to an add_argument()
call, plus the flags FrontendArgs generates from its dataclass fields (f"--{field}"); `--no-X` is added
where the call uses BooleanOptionalAction or its kwargs come from a bool field (vLLM's get_kwargs makes
every bool field a BooleanOptionalAction). The values `--kv-cache-dtype` accepts are the members of the
`CacheDType = Literal[...]` alias in vllm/config/cache.py (the type of CacheConfig.cache_dtype, which
EngineArgs.kv_cache_dtype takes; get_kwargs turns a Literal into argparse choices). The values `--block-size`
accepts likewise: the members of `BlockSize = Literal[...]` in the same file (0.10-0.17); from 0.18
CacheConfig.block_size is a plain int and the entry has no `block_sizes` (any positive integer passes the
parser; the attention backend then decides).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# the front end's flags moved: openai/cli_args.py (<= 0.27), launchers/cli_args.py (0.29), common/cli_args.py (0.33)
FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/common/cli_args.py",
         "vllm/entrypoints/launchers/cli_args.py")
CACHE_CONFIG = "vllm/config/cache.py"
OLD_CONFIG = "vllm/config.py"


def literal_members(path: Path, alias: str) -> list[object] | None:
    """The members of `alias = Literal[...]` at the top of the file (in source order); None without one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == alias for t in node.targets)
                and isinstance(node.value, ast.Subscript)):
            members = node.value.slice.elts if isinstance(node.value.slice, ast.Tuple) else [node.value.slice]
            return [m.value for m in members if isinstance(m, ast.Constant)]
    return None


def argument_choices(path: Path, flag: str) -> list[object] | None:
    """The `choices=[...]` of the add_argument() call for `flag` (0.8.0-0.8.4 listed them there)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
                and any(isinstance(a, ast.Constant) and a.value == flag for a in node.args)):
            for kw in node.keywords:
                if kw.arg == "choices" and isinstance(kw.value, ast.List):
                    return [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
    return None


def kv_cache_dtypes(path: Path, arg_utils: Path | None = None) -> list[str]:
    """The members of `CacheDType = Literal[...]` (in source order), else the --kv-cache-dtype choices."""
    members = literal_members(path, "CacheDType")
    if members is None and arg_utils is not None:
        members = argument_choices(arg_utils, "--kv-cache-dtype")
    if members is None:
        raise SystemExit(f"{path}: no CacheDType = Literal[...]")
    return [m for m in members if isinstance(m, str)]


def block_sizes(path: Path, arg_utils: Path | None = None) -> list[int] | None:
    """The members of `BlockSize = Literal[...]` (else the --block-size choices); None where the block size is
    a plain int (0.18 on)."""
    members = literal_members(path, "BlockSize")
    if members is None and arg_utils is not None:
        members = argument_choices(arg_utils, "--block-size")
    return None if members is None else [m for m in members if isinstance(m, int)]


def _bool_fields(tree: ast.Module) -> dict[str, set[str]]:
    """Fields annotated with a bool type (bool, bool | None, Optional[bool]) per class."""
    out: dict[str, set[str]] = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        out[cls.name] = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)
                         and isinstance(s.target, ast.Name) and "bool" in ast.unparse(s.annotation)}
    return out


def _fields(cls: ast.ClassDef) -> list[tuple[str, bool]]:
    return [(s.target.id, "bool" in ast.unparse(s.annotation)) for s in cls.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and not s.target.id.startswith("_")]


def flags_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bools = set().union(*_bool_fields(tree).values()) if _bool_fields(tree) else set()
    flags: set[str] = set()
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                 and a.value.startswith("-")]
        text = ast.unparse(call)
        negatable = "BooleanOptionalAction" in text or any(
            isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and sub.slice.value in bools
            for k in call.keywords if k.arg is None for sub in ast.walk(k.value))
        flags.update(names)
        if negatable:
            flags.update("--no-" + n[2:] for n in names if n.startswith("--"))
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for name, cls in classes.items():  # FrontendArgs: one flag per dataclass field, its bases' fields too
        if not name.endswith("FrontendArgs"):
            continue
        chain = [cls] + [classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in classes]
        for c in chain:
            for field, is_bool in _fields(c):
                flag = "--" + field.replace("_", "-")
                flags.add(flag)
                if is_bool:
                    flags.add("--no-" + flag[2:])
    return flags


def main(version: str, root: Path, wheel: str) -> None:
    found: set[str] = set()
    read = []
    for rel in FILES:
        path = root / rel
        if path.exists():
            found |= flags_in(path)
            read.append(rel)
    print(f'  - version: "{version}"')
    files = ", ".join(read)
    # CacheConfig moved from vllm/config.py (<= 0.10.0) to vllm/config/cache.py
    cache_config = next((rel for rel in (CACHE_CONFIG, OLD_CONFIG) if (root / rel).exists()), None)
    if cache_config is not None:
        files += ", " + cache_config
    print(f'    source: "{wheel} from PyPI: {files} (read by tools/extract_vllm_serve_flags.py)"')
    if cache_config is not None:
        arg_utils = root / FILES[0]
        print(f"    kv_cache_dtypes: [{', '.join(kv_cache_dtypes(root / cache_config, arg_utils))}]")
        sizes = block_sizes(root / cache_config, arg_utils)
        if sizes is not None:
            print(f"    block_sizes: [{', '.join(map(str, sizes))}]")
    print("    flags:")
    for flag in sorted(found):
        print(f"      - \"{flag}\"")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else f"vllm=={sys.argv[1]} wheel")
