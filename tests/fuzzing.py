"""Generators and oracles for fuzzing gpuopt's input boundary (used by tests/test_fuzz.py, a few hundred
examples in CI, and benchmarks/fuzz.py, tens of thousands).

Documents start from the JSON Schemas of the workload and capacity files (from_schema below: the subset of
JSON Schema that pydantic emits; hypothesis-jsonschema 0.23 no longer runs on current hypothesis), so they
reach past the first type check, and are then mutated the way real files go wrong: a value of the wrong type,
non-finite, huge or negative numbers, unicode, a key dropped or added, a key repeated, deep nesting, the file
cut short, stray bytes. Overlays are CSV rows taken from the shipped catalog and mutated cell by cell. Flag
combinations are drawn from the click parameters of each command.

The oracle is the CLI contract: every run ends with exit 0, 1, 2 or 3, never a traceback (70 is the internal
error line: a bug), and a bad input (exit 2) prints only `error:` lines on stderr.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import click
import yaml
from click.testing import CliRunner, Result
from hypothesis import strategies as st

from gpuopt.cli.main import COMMANDS, cli
from gpuopt.inputs.capacity import CapacityFile
from gpuopt.inputs.workload import WorkloadFile
from gpuopt.vocabulary import PROVIDERS

ALLOWED_EXITS = frozenset({0, 1, 2, 3})

# A few registry ids (small and large, dense and MoE) so generated documents get past the model lookup.
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "meta-llama/Llama-3.1-70B-Instruct")

NASTY_SCALARS: tuple[object, ...] = (
    True, False, None, "", "1", "2.5", "nan", "inf", "1e400", float("nan"), float("inf"), float("-inf"), 1e308,
    -1e308, 5e-324, 0, -1, -0.0, 2**63, 10**30, -(10**30), 2**1000, "ünï©ødé ☃", "\u202egnp.", "\x00", "a\nb",
    "x" * 5000, [], {}, [[[]]], {"a": {"b": {"c": None}}}, "2027Q5", "../../etc/passwd", "-", "~", "null",
)
"""Values that broke or nearly broke some parser once: wrong types, non-finite and extreme numbers, control
and bidi characters, empty and nested containers."""


# ---- documents from the schemas ----------------------------------------------------------------------


NARROWED: dict[str, Any] = {
    "providers": {"anyOf": [{"type": "array", "items": {"enum": list(PROVIDERS)}, "minItems": 1}, {"type": "null"}]},
    "provider": {"enum": list(PROVIDERS)},
    "price_kinds": {"type": "array", "items": {"enum": ["on-demand", "spot", "reserved-1y", "subscription-monthly"]},
                    "minItems": 1},
    "residency": {"anyOf": [{"enum": ["cn", "global", "us", "eu", "apac", "us-east-1"]}, {"type": "null"}]},
    "discounts": {"type": "object", "properties": {"aws": {"type": "number", "minimum": 0, "maximum": 0.5},
                                                   "alibaba": {"type": "number", "minimum": 0, "maximum": 0.5}}},
    "start": {"anyOf": [{"enum": ["2027Q1", "2027-01"]}, {"type": "null"}]},
    "config": {"enum": ["config.json", "config.json", ".", "missing.json"]},
    "sku": {"anyOf": [{"enum": ["p5.48xlarge", "g6e.xlarge"]}, {"type": "null"}]},
    "region": {"anyOf": [{"enum": ["us-east-1", "cn-beijing"]}, {"type": "null"}]},
}
"""Free-text fields of the schemas that name things in registries: drawn from the registries (the mutations
still put arbitrary text there)."""


def _narrow_models(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with `model` limited to registry ids or a config reference, names kept short and the
    NARROWED fields drawn from the registries, so most documents are valid enough to reach the deeper checks."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            props = out.get("properties")
            if isinstance(props, dict):
                for name, narrowed_prop in NARROWED.items():
                    if name in props:
                        props[name] = narrowed_prop
            if isinstance(props, dict) and "model" in props and "input_tokens" in props:
                props["model"] = {"anyOf": [{"enum": list(MODELS)}, {"$ref": "#/$defs/ModelConfigRef"}]}
                props["input_tokens"] = {"type": "integer", "minimum": 1, "maximum": 200_000}
                props["output_tokens"] = {"type": "integer", "minimum": 1, "maximum": 50_000}
                props["name"] = {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,11}$"}
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    narrowed: dict[str, Any] = walk(schema)
    return narrowed


@cache
def workload_schema() -> dict[str, Any]:
    return _narrow_models(WorkloadFile.model_json_schema())


@cache
def capacity_schema() -> dict[str, Any]:
    schema = _narrow_models(CapacityFile.model_json_schema())
    schema["$defs"]["Horizon"]["properties"]["periods"]["maximum"] = 8  # keep solves small
    return schema


def from_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    """Values of a JSON Schema node: $ref, anyOf/oneOf, enum/const, object (required keys plus a random subset
    of the optional ones; additionalProperties as a mapping), array, integer/number bounds, string pattern."""
    root = root if root is not None else schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(root["$defs"][name], root))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, root) for s in schema[key]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "object":
        return _object(schema, root)
    if kind == "array":
        items = from_schema(schema.get("items", {}), root)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=max(schema.get("minItems", 0), 3))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if kind == "integer":
            low_i = None if low is None else int(low) + (1 if "exclusiveMinimum" in schema else 0)
            return st.integers(min_value=low_i, max_value=None if high is None else int(high))
        return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False,
                         exclude_min="exclusiveMinimum" in schema)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=20)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return st.none()


def _object(schema: dict[str, Any], root: dict[str, Any]) -> st.SearchStrategy[Any]:
    props: dict[str, Any] = schema.get("properties", {})
    if not props:
        values = schema.get("additionalProperties")
        value_strategy = from_schema(values, root) if isinstance(values, dict) else st.none()
        return st.dictionaries(st.text(min_size=1, max_size=8), value_strategy, max_size=4)
    required = set(schema.get("required", ()))

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        out = {}
        for name, sub in props.items():
            if name in required or draw(st.booleans()):
                out[name] = draw(from_schema(sub, root))
        return out

    return build()


@st.composite
def documents(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    """Documents of the schema made valid where the schema cannot say it (schema_version 1, exactly one load
    unit, a long enough context, one demand value per period), so unmutated ones load and reach the planner."""
    doc = draw(from_schema(schema))
    doc["schema_version"] = 1
    periods = doc.get("horizon", {}).get("periods", 1)
    for w in doc.get("workloads", []):
        if "demand" in w:
            w["demand"] = {"requests_per_second": draw(st.lists(st.floats(0.1, 20), min_size=periods,
                                                                max_size=periods))}
        else:
            w.pop("concurrency", None)
            w["requests_per_second"] = draw(st.floats(0.01, 50))
        if w.get("max_model_len") is not None and w["max_model_len"] < w["input_tokens"] + w["output_tokens"]:
            w.pop("max_model_len")
        if "spot" in w.get("price_kinds", ()):
            w["interruptible"] = True
    return doc


LLAMA_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
"""Llama-3.1-8B's Hugging Face config.json (the fields gpuopt reads), for `model: {config: config.json}`."""


def prepare_folder(folder: Path) -> None:
    """The files generated documents refer to: config.json beside the workload file."""
    import json

    (folder / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG), encoding="utf-8")


# ---- mutations -----------------------------------------------------------------------------------------


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


def _replace(data: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        copy = dict(data)
        if delete and not rest:
            copy.pop(head, None)
        else:
            copy[head] = _replace(copy.get(head), rest, value, delete)
        return copy
    copy_list = list(data)
    if delete and not rest:
        del copy_list[head]
    else:
        copy_list[head] = _replace(copy_list[head], rest, value, delete)
    return copy_list


def nasty_values() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(NASTY_SCALARS), st.floats(), st.integers(), st.text(max_size=40),
                     st.lists(st.integers(), max_size=3))


@st.composite
def mutated_data(draw: st.DrawFn, base: st.SearchStrategy[Any]) -> Any:
    """A document with 0-3 structural mutations: a value replaced, a key deleted or an unknown key added."""
    data = draw(base)
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(data)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "delete" and path:
            data = _replace(data, path, None, delete=True)
        elif action == "add":
            target = path if isinstance(_get(data, path), dict) else ()
            if isinstance(_get(data, target), dict):
                key = draw(st.sampled_from(["colour", "requests_per_second", "Q1", "base", "ünï", "0"]))
                data = _replace(data, (*target, key), draw(nasty_values()))
        else:
            data = _replace(data, path, draw(nasty_values()))
    return data


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


def to_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 16)


@st.composite
def mutated_text(draw: st.DrawFn, base: st.SearchStrategy[Any]) -> bytes:
    """YAML bytes of a mutated document, then 0-1 text-level mutation: a line repeated (a duplicate key),
    a value nested thousands of levels deep, the file cut short, stray bytes (NUL, invalid UTF-8, BOM)."""
    text = to_yaml(draw(mutated_data(base)))
    lines = text.splitlines(keepends=True)
    action = draw(st.sampled_from(["none", "none", "duplicate", "deep", "truncate", "bytes", "unicode"]))
    if action == "duplicate" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i + 1, lines[i])
        text = "".join(lines)
    elif action == "deep":
        depth = draw(st.sampled_from([10, 63, 64, 65, 200, 5000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        text += f"deep: {opener * depth}1{closer * depth}\n"
    elif action == "truncate" and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif action == "unicode":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(min_size=1, max_size=5)) + text[at:]
    raw = text.encode("utf-8", errors="surrogatepass")
    if action == "bytes":
        at = draw(st.integers(0, len(raw)))
        stray = draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\xe9", b"\xef\xbb\xbf", b"\r", b"\t"]))
        raw = raw[:at] + stray + raw[at:]
    return raw


# ---- overlays -------------------------------------------------------------------------------------------


@cache
def catalog_rows() -> tuple[dict[str, str], ...]:
    from importlib import resources

    text = resources.files("gpuopt.pricing").joinpath("data/catalog.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    return tuple(r for r in rows if r["price_per_hour"])[:400]


FINITE_PRICE_TEXT = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(repr),
    st.sampled_from(["", "0", "-1", "abc", "1,5", "１２", "0x10", "1_000", " 3.5 ", "1e-300", "1e300"]),
)
NON_FINITE_PRICE_TEXT = st.sampled_from(["nan", "NaN", "inf", "-inf", "1e400", "Infinity"])


@st.composite
def overlay_csv(draw: st.DrawFn, non_finite_prices: bool = False) -> bytes:
    """An overlay CSV: rows of the shipped catalog with prices and other cells mutated, columns dropped or
    renamed, sometimes cut short. `non_finite_prices` adds nan/inf/1e400 prices, which pricing/ refuses (exit 2:
    test_fuzz.py test_non_finite_overlay_prices_are_refused)."""
    rows = draw(st.lists(st.sampled_from(catalog_rows()), min_size=1, max_size=4))
    columns = ["provider", "service", "sku", "region", "gpu", "gpu_count", "price_per_hour", "currency", "price_kind"]
    if draw(st.booleans()):
        columns.remove(draw(st.sampled_from(columns)))
    prices = st.one_of(FINITE_PRICE_TEXT, NON_FINITE_PRICE_TEXT) if non_finite_prices else FINITE_PRICE_TEXT
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        cells = {c: row.get(c, "") for c in columns}
        if "price_per_hour" in cells:
            cells["price_per_hour"] = draw(prices)
        if draw(st.booleans()):
            column = draw(st.sampled_from(columns))
            cells[column] = draw(st.one_of(st.text(max_size=12), st.sampled_from(["", "EUR", "spot", "azure", "0"])))
        writer.writerow([cells[c] for c in columns])
    text = out.getvalue()
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text.encode("utf-8", errors="surrogatepass")


def has_non_finite_price(raw: bytes) -> bool:
    """Whether any cell of the CSV parses as a non-finite float (the cases pricing/ owns)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            try:
                value = float(cell)
            except ValueError:
                continue
            if not math.isfinite(value):
                return True
    return False


# ---- flags ----------------------------------------------------------------------------------------------


def _value_for(param: click.Parameter) -> st.SearchStrategy[str]:
    """Text for one option, from its click type: mostly plausible, sometimes hostile."""
    kind = param.type
    hostile = st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "0", "", "ünï", "99.0", "x" * 300])
    if isinstance(kind, click.Choice):
        plausible: st.SearchStrategy[str] = st.sampled_from([str(c) for c in kind.choices])
    elif kind.name in ("integer", "int"):
        plausible = st.integers(-5, 10**6).map(str) | st.sampled_from([str(2**63), str(10**40)])
    elif kind.name in ("float",):
        plausible = st.floats(allow_nan=True, allow_infinity=True).map(repr) | st.floats(0.01, 100).map(repr)
    elif kind.name == "X.Y":
        plausible = st.sampled_from(["0.11", "0.19", "0.33", "0.33.9", "0.34", "1.0", "0.10", "0", "v0.11"])
    elif isinstance(param, click.Option) and param.name == "gpu":
        plausible = st.sampled_from(["H100-SXM-80GB", "L4-24GB", "A100-SXM-40GB", "h100", "B200-180GB", "T4-16GB"])
    elif isinstance(param, click.Option) and param.name == "model":
        plausible = st.sampled_from([*MODELS, "llama", "Qwen/Qwen3-235B-A22B"])
    elif isinstance(param, click.Option) and param.name in ("region",):
        plausible = st.sampled_from(["cn", "global", "us", "eu", "apac", "us-east-1", "cn,us", "mars"])
    elif isinstance(param, click.Option) and param.name in ("providers",):
        plausible = st.sampled_from(["aws", "alibaba", "azure", "runpod"])
    elif isinstance(param, click.Option) and param.name in ("currency",):
        plausible = st.sampled_from(["USD", "cny", "EUR", ""])
    elif isinstance(param, click.Option) and param.name == "server_args":
        plausible = st.lists(st.sampled_from(SERVER_FLAGS), max_size=4).map(" ".join)
    elif isinstance(param, click.Option) and param.name == "compilation_config":
        plausible = st.sampled_from(['{"cudagraph_mode": "PIECEWISE"}', '{"cudagraph_mode": "none"}',
                                     '{"cudagraph_capture_sizes": [1, 2, 4, 8]}', '{"cudagraph_capture_sizes": []}',
                                     '{"max_cudagraph_capture_size": 8, "cudagraph_capture_sizes": [16]}',
                                     '{"cudagraph_mode": 3}', '{"pass_config": {}}', '[1, 2]', '{', '3',
                                     '{"mode": 0}', '{"mode": "none", "cudagraph_mode": "FULL"}', '{"mode": 7}',
                                     '{"mode": true}', '{"mode": null}'])
    elif isinstance(param, click.Option) and param.name in ("discounts",):
        plausible = st.sampled_from(["aws=0.1", "aws=1.5", "aws", "azure=0.1", "aws=-0.2", "aws=abc"])
    else:
        plausible = st.text(max_size=12)
    return st.one_of(plausible, plausible, plausible, hostile)


SERVER_FLAGS = ("--max-num-seqs 8", "--max-num-batched-tokens 16", "--no-enable-chunked-prefill", "--block-size 7",
                "--block-size 32", "--performance-mode throughput", "--performance-mode fast", "--kv-cache-dtype fp8",
                "--kv-cache-dtype bf16", "--async-scheduling", "--no-async-scheduling", "--data-parallel-size 2",
                "--enable-expert-parallel", "--max-model-len 512", "--gpu-memory-utilization 0.3", "--tp 2",
                "--attention-backend FLASHINFER", "--max-num-seqs 'x", "--max-num-seqs", "serve", "--dp=0",
                "--enable-lora", "--max-loras 3", "--max-lora-rank 1", "--max-lora-rank 7", "--fully-sharded-loras",
                "--enable-extensible-kv-cache", "--no-enable-extensible-kv-cache", "--kv-cache-memory-bytes 2G",
                "--kv-cache-memory-bytes 1.5G", "--kv-cache-memory-bytes -1",
                # the CUDA-graph flags (physics/graph_flags.py) and vLLM's single-dash forms
                "--enforce-eager", "--no-enforce-eager", "-O0", "-O1", "-O3", "-O=2", "-O 7", "-O", "-Ox", "-tp 2",
                "-tp", "-pp 2", "-ep", "-q awq", "-x", "-1", "-cc.cudagraph_mode=PIECEWISE", "-cc.cudagraph_mode=full",
                "-cc.cudagraph_mode=HALF", "-cc.cudagraph_mode", """-cc '{"cudagraph_capture_sizes": [1, 2, 4]}'""",
                """-cc '{"cudagraph_capture_sizes": []}'""", """-cc '{"cudagraph_capture_sizes": [true, -3]}'""",
                """-cc '{"cudagraph_capture_sizes": [8], "max_cudagraph_capture_size": 16}'""",
                """--compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY", "level": 0, "mode": 3}'""",
                "-cc.mode=0", "-cc.mode=dynamo_trace_once", "-cc.mode=-1", "-cc.mode",
                "--compilation-config '[1]'", "--compilation-config {bad", "--compilation-config 3",
                "-cc.max_cudagraph_capture_size=0", "-cc.max_cudagraph_capture_size=1e9", "--cuda-graph-sizes 8",
                "--cuda-graph-sizes 1 2 4", "--cuda-graph-sizes", "--optimization-level 9")
"""Pieces of `vllm serve` flag strings for `simulate --server-args`: honoured, refused and not modelled ones."""

FLAGS_NOT_FUZZED = frozenset({"help", "output", "overlays", "fx_rates", "version", "debug"})
"""-o is fuzzed by its own tests (writing files), --catalog by the overlay fuzz; --fx-rate belongs to pricing/
(its nan/inf fix is the pricing helper's)."""


def command_options(command: str) -> list[click.Option]:
    """The fuzzed options of a subcommand, read from its click parameters (imports the command's module)."""
    import importlib

    entry = COMMANDS[command]
    cmd = getattr(importlib.import_module(entry.module), entry.attribute)
    return [p for p in cmd.params if isinstance(p, click.Option) and p.name not in FLAGS_NOT_FUZZED]


def flag_combination(command: str, fixed: Sequence[str] = (), max_flags: int = 5,
                     exclude: Sequence[str] = ()) -> st.SearchStrategy[list[str]]:
    """`command FIXED... --flag value ...`: 0..max_flags options of the command (but `exclude`), values from their
    types."""
    options = [p for p in command_options(command) if p.name not in exclude]  # imported here, outside the
    # strategy: imports may touch `random`

    @st.composite
    def combination(draw: st.DrawFn) -> list[str]:
        chosen = draw(st.lists(st.sampled_from(options), max_size=max_flags, unique_by=lambda p: p.name))
        args = [command, *fixed]
        for option in chosen:
            flag = max(option.opts, key=len)
            if option.is_flag:
                args.append(flag)
            else:
                args += [flag, draw(_value_for(option))]
        return args

    return combination()


# ---- the oracle -----------------------------------------------------------------------------------------


def invoke(args: Sequence[str]) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, prog_name="gpuopt")


def check_contract(result: Result, args: Sequence[str]) -> None:
    """Exit 0-3, no traceback, and a bad input explained only with `error:` lines on stderr."""
    shown = f"gpuopt {' '.join(args)}\n--- stdout\n{result.stdout[-2000:]}\n--- stderr\n{result.stderr[-2000:]}"
    assert result.exit_code in ALLOWED_EXITS, f"exit {result.exit_code}: {shown}"
    assert "Traceback" not in result.output, shown
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert lines and all(line.startswith(("error: ", "note: ", "warning: ")) for line in lines), shown
        assert any(line.startswith("error: ") for line in lines), shown


def run_file_case(folder: Path, name: str, raw: bytes, make_args: Callable[[Path], list[str]]) -> Result:
    path = folder / name
    path.write_bytes(raw)
    args = make_args(path)
    result = invoke(args)
    check_contract(result, args)
    return result
