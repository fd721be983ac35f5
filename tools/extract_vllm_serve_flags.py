"""Read the valid `vllm serve` flags of a vLLM release from its own argument-parser source.

    pip download vllm==X --no-deps -d /tmp/v && unzip /tmp/v/*.whl 'vllm/*.py' -d /tmp/v/src
    python tools/extract_vllm_serve_flags.py X /tmp/v/src "vllm-X-....whl (sha256 ...)"

prints the release's YAML entry for gpuopt/data/vllm_serve_flags.yaml. Static reading (ast), no import of vLLM
(it needs torch and a GPU build). The reader follows what `vllm serve` runs to build its parser:
ServeSubcommand.subparser_init in vllm/entrypoints/cli/serve.py, the make_arg_parser it imports (from
entrypoints/openai/, launchers/ or common/cli_args.py as the release has it), FrontendArgs.add_cli_args and
AsyncEngineArgs/EngineArgs.add_cli_args in vllm/engine/arg_utils.py, and every function those call with the
parser or a get_kwargs() result. A flag is every option string of an add_argument() call met on the way (plus
argparse's own -h/--help). `--no-X` is added where the call's action is argparse.BooleanOptionalAction: written
out, or given by get_kwargs() for a config dataclass field -- which fields get it is read from the release's own
get_kwargs (see KwargsRule), applied to the field's annotation in the config class get_kwargs was called with
(vllm/config/*.py, vllm/config.py up to 0.10.0, FrontendArgs), type aliases and base classes resolved through the
imports. From 0.33 FlexibleArgumentParser registers EnableDisableAction for BooleanOptionalAction, which pairs
`--enable-X` with `--disable-X` (and back); those inverse forms are added too.

The values `--kv-cache-dtype` accepts are the members of the `CacheDType = Literal[...]` alias in
vllm/config/cache.py (the type of CacheConfig.cache_dtype, which EngineArgs.kv_cache_dtype takes; get_kwargs turns
a Literal into argparse choices). The values `--block-size` accepts likewise: the members of
`BlockSize = Literal[...]` in the same file (0.10-0.17); from 0.18 CacheConfig.block_size is a plain int and the
entry has no `block_sizes` (any positive integer passes the parser; the attention backend then decides).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

CACHE_CONFIG = "vllm/config/cache.py"
OLD_CONFIG = "vllm/config.py"
SERVE = "vllm.entrypoints.cli.serve"
ARG_UTILS = "vllm.engine.arg_utils"
BUILTIN_TYPES = {"bool", "str", "int", "float", "bytes", "list", "dict", "tuple", "set", "frozenset", "type",
                 "object", "Any", "Callable"}
PLAIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}  # list[int] is a types.GenericAlias


# --- the release's source tree -------------------------------------------------------------------------------

class Source:
    """The .py files of one vLLM wheel, parsed on demand; `read` keeps the files parsed (the entry's source)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, ast.Module | None] = {}
        self.read: list[str] = []

    def path(self, module: str) -> Path | None:
        base = self.root / module.replace(".", "/")
        return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            path = self.path(module)
            self._trees[module] = None if path is None else ast.parse(path.read_text(encoding="utf-8"))
            if path is not None:
                self.read.append(path.relative_to(self.root).as_posix())
        return self._trees[module]

    def lookup(self, module: str, name: str, depth: int = 0) -> Definition | None:
        """What `name` is bound to at the top of `module` once it has run: a class, a function or the value of a
        module-level assignment (a type alias), following `from X import name` into X. Later bindings win, as
        at run time; the `if TYPE_CHECKING:` side of an import is skipped."""
        tree = self.tree(module)
        if tree is None or depth > 20:
            return None
        found: Definition | None = None
        for node in _top_level(tree.body):
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
                found = Definition(module, node)
            elif (value := _assigned(node, name)) is not None:
                found = Definition(module, value)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = _absolute(module, node, self.path(module))
                        found = self.lookup(source, alias.name, depth + 1) or found
        return found


@dataclass(frozen=True)
class Definition:
    module: str
    node: ast.AST


def _assigned(node: ast.stmt, name: str) -> ast.expr | None:
    """The value `name = value` (or `name: T = value`) binds, if the statement is one."""
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
        return node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
        return node.value
    return None


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements a module runs at import, in order: into if/try blocks, past `if TYPE_CHECKING:` bodies."""
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
        else:
            yield node


def _absolute(module: str, node: ast.ImportFrom, path: Path | None) -> str:
    """The module a (possibly relative) `from ... import` names."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".")
    if path is None or path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _name(node: ast.AST) -> str | None:
    """The last name of `x` or `a.b.x`."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


# --- field types, as Python builds them ----------------------------------------------------------------------

@dataclass(frozen=True)
class Hint:
    """A field type as get_kwargs sees it: `origin` is the class name for a plain class ("bool", "NoneType",
    "ModelConfig"), else the special form ("Union", "UnionType", "Annotated", "Literal", "list" ...); `args` its
    arguments; `dataclass` whether it is a (vLLM config) dataclass."""
    origin: str
    args: tuple[Hint, ...] = ()
    dataclass: bool = False


NONE = Hint("NoneType")
OPAQUE = Hint("?")


def _is_dataclass(cls: ast.ClassDef) -> bool:
    """Decorated with @dataclass (stdlib or pydantic) or vLLM's @config (which makes a pydantic dataclass)."""
    return any(_name(d.func if isinstance(d, ast.Call) else d) in ("dataclass", "config") for d in cls.decorator_list)


def _union(kind: str, members: list[Hint]) -> Hint:
    """typing.Union[...] / X | Y as Python builds it: nested unions flattened, duplicates dropped, one member
    left is that member."""
    flat: list[Hint] = []
    for m in members:
        for inner in (m.args if m.origin in ("Union", "UnionType") else (m,)):
            if inner not in flat:
                flat.append(inner)
    return flat[0] if len(flat) == 1 else Hint(kind, tuple(flat))


def evaluate(src: Source, module: str, expr: ast.expr, depth: int = 0) -> Hint:
    """The type an annotation evaluates to (no `from __future__ import annotations` in vLLM's config modules).
    `X | Y` gives a types.UnionType when both sides are plain classes or builtin generics, a typing.Union when
    either is a typing form (Literal[...] | None) -- get_kwargs before 0.12 unpacked only typing.Union."""
    if depth > 20:
        return OPAQUE
    if isinstance(expr, ast.Constant):
        return NONE if expr.value is None else OPAQUE  # a string is a forward reference get_kwargs leaves alone
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        left, right = evaluate(src, module, expr.left, depth + 1), evaluate(src, module, expr.right, depth + 1)
        plain = all(h.origin not in ("Union", "Annotated", "Literal", "?") and not h.origin.endswith("[]")
                    for h in (left, right))
        return _union("UnionType" if plain else "Union", [left, right])
    if isinstance(expr, ast.Subscript):
        origin = _name(expr.value) or "?"
        items = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        if origin == "Literal":
            return Hint("Literal")
        args = [evaluate(src, module, e, depth + 1) for e in items]
        if origin == "Optional":
            return _union("Union", [args[0], NONE])
        if origin == "Union":
            return _union("Union", args)
        if origin == "SkipValidation":  # pydantic: SkipValidation[X] is Annotated[X, SkipValidation()]
            return Hint("Annotated", (args[0], OPAQUE))
        if origin == "Annotated":
            return Hint("Annotated", (args[0], *[OPAQUE] * (len(args) - 1)))
        return Hint(origin if origin in PLAIN_GENERICS else f"{origin}[]", tuple(args))
    name = _name(expr)
    if name is None:
        return OPAQUE
    if isinstance(expr, ast.Name):
        found = src.lookup(module, name)
        if found is not None:
            if isinstance(found.node, ast.ClassDef):
                return Hint(found.node.name, dataclass=_is_dataclass(found.node))
            if isinstance(found.node, ast.expr):
                return evaluate(src, found.module, found.node, depth + 1)
    return Hint(name) if name in BUILTIN_TYPES else Hint(f"{name}?")


def dataclass_fields(src: Source, module: str, cls: ast.ClassDef) -> dict[str, Hint]:
    """dataclasses.fields(cls) -> {name: type}: the fields of the dataclass bases first, a redefinition keeping
    its place; ClassVar, InitVar and KW_ONLY annotations are not fields."""
    out: dict[str, Hint] = {}
    for base in reversed(cls.bases):
        found = src.lookup(module, _name(base) or "") if isinstance(base, ast.Name) else None
        if found is not None and isinstance(found.node, ast.ClassDef) and _is_dataclass(found.node):
            out.update(dataclass_fields(src, found.module, found.node))
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            wrapper = _name(stmt.annotation.value if isinstance(stmt.annotation, ast.Subscript) else stmt.annotation)
            if wrapper not in ("ClassVar", "InitVar", "KW_ONLY"):
                out[stmt.target.id] = evaluate(src, module, stmt.annotation)
    return out


# --- the release's get_kwargs --------------------------------------------------------------------------------

@dataclass(frozen=True)
class KwargsRule:
    """Which config fields vLLM's get_kwargs (vllm/engine/arg_utils.py, 0.8.5 on) makes a
    BooleanOptionalAction, read from that very function:

    - `unpacks`, `recursive`: how a field's type becomes its set of type hints. 0.8.5: typing.Union's
      arguments, one level (`get_origin(field.type) is Union`); 0.9.0: Union and Annotated, one level;
      0.9.1-0.11: get_type_hints() unpacks Annotated and typing.Union recursively; 0.12 on also types.UnionType
      (`bool | None`).
    - `branches`: the if/elif chain of _compute_kwargs up to the bool branch, in order, each (test, negated?):
      ("dataclass", False) -- a field admitting a config dataclass takes JSON (0.9.0 on); ("equals", {bool, str,
      NoneType}, False) -- from 0.21 `bool | str | None` (hf_token) takes an optional value (nargs="?"), not
      --no-; ("bool", True) -- any other field admitting bool: BooleanOptionalAction."""
    unpacks: frozenset[str]
    recursive: bool
    branches: tuple[tuple[str, frozenset[str], bool], ...]

    def hints(self, hint: Hint) -> set[Hint]:
        """get_type_hints(field.type) (or the 0.8.5/0.9.0 one-level form)."""
        if hint.origin not in self.unpacks:
            return {hint}
        members = hint.args[:1] if hint.origin == "Annotated" and self.recursive else hint.args
        if not self.recursive:
            return set(members)
        return set().union(*(self.hints(m) for m in members))

    def negated(self, hint: Hint) -> bool:
        """Whether get_kwargs gives this field action=BooleanOptionalAction."""
        hints = self.hints(hint)
        for kind, names, negated in self.branches:
            if ((kind == "dataclass" and any(h.dataclass for h in hints))
                    or (kind == "equals" and {h.origin for h in hints} == names and not any(h.args for h in hints))
                    or (kind == "bool" and Hint("bool") in hints)):
                return negated
        return False


def read_kwargs_rule(src: Source) -> KwargsRule | None:
    """The release's get_kwargs rule; None before get_kwargs existed (0.8.0-0.8.4: every flag written out)."""
    tree = src.tree(ARG_UTILS)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)} if tree else {}
    compute = functions.get("_compute_kwargs") or functions.get("get_kwargs")
    if compute is None:
        return None
    unpacker = functions.get("get_type_hints", compute)
    unpacks: set[str] = set()
    for node in ast.walk(unpacker):  # `origin is Annotated`, `origin in {Union, UnionType}`, `... is Union`
        if isinstance(node, ast.Compare) and "origin" in ast.unparse(node.left):
            for comp in node.comparators:
                unpacks.update(n for e in ast.walk(comp) if (n := _name(e)) in ("Union", "UnionType", "Annotated"))
    chain = next((n for n in ast.walk(compute) if isinstance(n, ast.If) and "dataclass_cls" in ast.unparse(n.test)
                  or isinstance(n, ast.If) and "contains_type(type_hints, bool)" in ast.unparse(n.test)), None)
    branches: list[tuple[str, frozenset[str], bool]] = []
    while chain is not None:
        test = ast.unparse(chain.test)
        negated = any("BooleanOptionalAction" in ast.unparse(stmt) for stmt in chain.body)
        if "dataclass_cls" in test:
            branches.append(("dataclass", frozenset(), negated))
        elif isinstance(chain.test, ast.Compare) and isinstance(chain.test.comparators[0], ast.Set):
            names = {"NoneType" if "None" in ast.unparse(e) else ast.unparse(e) for e in chain.test.comparators[0].elts}
            branches.append(("equals", frozenset(names), negated))
        elif test == "contains_type(type_hints, bool)":
            branches.append(("bool", frozenset(), negated))
            break
        else:
            raise SystemExit(f"{ARG_UTILS}.{compute.name}: unknown branch before the bool one: {test}")
        chain = chain.orelse[0] if len(chain.orelse) == 1 and isinstance(chain.orelse[0], ast.If) else None
    if not unpacks or not branches or branches[-1][0] != "bool":
        raise SystemExit(f"{ARG_UTILS}.{compute.name}: not the get_kwargs this reader knows")
    return KwargsRule(frozenset(unpacks), unpacker is not compute, tuple(branches))


def read_inverse_prefixes(src: Source, module: str) -> dict[str, str]:
    """{"--enable-": "--disable-", ...} where FlexibleArgumentParser.__init__ registers a BooleanOptionalAction
    subclass with `_inverse_prefixes` for action=BooleanOptionalAction (EnableDisableAction, 0.33 on), else {}."""
    found = src.lookup(module, "FlexibleArgumentParser")
    if found is None or not isinstance(found.node, ast.ClassDef):
        raise SystemExit(f"{module}: no FlexibleArgumentParser")
    for call in (n for n in ast.walk(found.node) if isinstance(n, ast.Call) and _name(n.func) == "register"):
        if len(call.args) == 3 and _name(call.args[1]) == "BooleanOptionalAction":
            action = src.lookup(found.module, _name(call.args[2]) or "")
            for stmt in action.node.body if action and isinstance(action.node, ast.ClassDef) else []:
                if (isinstance(stmt, ast.AnnAssign | ast.Assign) and "_inverse_prefixes" in ast.unparse(stmt)
                        and isinstance(stmt.value, ast.Dict)):
                    return {ast.literal_eval(k): ast.literal_eval(v) for k, v in zip(stmt.value.keys, stmt.value.values,
                                                                                     strict=True) if k is not None}
            raise SystemExit(f"{found.module}: {ast.unparse(call)} registers an action this reader does not know")
    return {}


SERVE_ARGV = ("serve", "MODEL")  # sys.argv[1:] of a `vllm serve MODEL ...` that does not ask for --help


def serve_condition(test: ast.expr) -> bool | None:
    """The value of an `if` on sys.argv for `vllm serve MODEL ...` (0.9.0 adds --model only when 'serve' is not in
    sys.argv; 0.9.1 on whenever --help is not asked for), None for any other test (then both sides are kept: a
    flag added on one side exists where that side runs)."""
    if isinstance(test, ast.BoolOp):
        values = [serve_condition(v) for v in test.values]
        if None in values:
            return None
        return all(values) if isinstance(test.op, ast.And) else any(values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = serve_condition(test.operand)
        return None if inner is None else not inner
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In | ast.NotIn)
            and isinstance(test.left, ast.Constant) and ast.unparse(test.comparators[0]) == "sys.argv[1:]"):
        return (test.left.value in SERVE_ARGV) == isinstance(test.ops[0], ast.In)
    return None


# --- the walk from `vllm serve` to every add_argument ---------------------------------------------------------

@dataclass(frozen=True)
class ClassRef:
    module: str
    node: ast.ClassDef


@dataclass(frozen=True)
class Parser:
    """A parser or argument group (what add_argument is called on)."""


@dataclass(frozen=True)
class KwargsOf:
    """The result of one get_kwargs(cls) call, one kwargs dict per dataclass field (`call` tells calls apart:
    each returns its own copy, so a change to one does not reach another)."""
    cls: ClassRef
    call: int


@dataclass(frozen=True)
class FieldKwargs:
    """get_kwargs(cls)[name]: the argparse kwargs of one field."""
    of: KwargsOf
    name: str


Value = str | list[str] | Parser | KwargsOf | FieldKwargs | ClassRef | None


@dataclass
class Frame:
    """A function being run: its module, the class defining it (for super()) and its local names."""
    module: str
    owner: ClassRef | None
    env: dict[str, Value]


@dataclass
class Walk:
    """Runs, as far as option strings go, the code that builds `vllm serve`'s parser: the calls handed the
    parser or a get_kwargs() result, the names bound on the way, and every add_argument."""
    src: Source
    rule: KwargsRule | None
    inverse_prefixes: dict[str, str]
    flags: set[str] = field(default_factory=set)
    actions: dict[FieldKwargs, tuple[str, ast.expr | None]] = field(default_factory=dict)  # kwargs[f]["action"]
    dropped: set[FieldKwargs] = field(default_factory=set)  # del kwargs[f]
    _seen: set[tuple[int, ClassRef | None]] = field(default_factory=set)

    def function(self, module: str, func: ast.FunctionDef, owner: ClassRef | None, cls: ClassRef | None,
                 args: list[Value]) -> None:
        """Run `func` (defined in class `owner`, called on `cls`) with these positional arguments."""
        if (id(func), cls) in self._seen:
            return
        self._seen.add((id(func), cls))
        params = [a.arg for a in func.args.args]
        if params[:1] in (["self"], ["cls"]) and not any(_name(d) == "staticmethod" for d in func.decorator_list):
            params = params[1:]
        self.block(Frame(module, owner, {"cls": cls, **dict(zip(params, args, strict=False))}), func.body)

    def block(self, frame: Frame, body: list[ast.stmt]) -> None:
        """Run statements in order (assignments bind names; nested functions are not run)."""
        for stmt in body:
            if isinstance(stmt, ast.For):
                for bound in self.loop(frame, stmt):
                    self.block(Frame(frame.module, frame.owner, {**frame.env, **bound}), stmt.body)
            elif isinstance(stmt, ast.If):
                taken = serve_condition(stmt.test)
                if taken is not False:
                    self.block(frame, stmt.body)
                if taken is not True:
                    self.block(frame, stmt.orelse)
            elif isinstance(stmt, ast.With | ast.Try):
                self.block(frame, stmt.body)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                value = self.value(frame, stmt.value)
                for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                    if isinstance(target, ast.Name):
                        frame.env[target.id] = value
                    elif isinstance(target, ast.Subscript):
                        self.mutate(frame, target, stmt.value)
            elif isinstance(stmt, ast.Delete):
                for target in stmt.targets:
                    if isinstance(target, ast.Subscript):
                        self.mutate(frame, target, None)
            elif isinstance(stmt, ast.Expr | ast.Return | ast.AugAssign) and stmt.value is not None:
                self.value(frame, stmt.value)

    def loop(self, frame: Frame, stmt: ast.For) -> Iterator[dict[str, Value]]:
        """The names each pass of a loop binds, where the passes decide flags: `for key, value in kwargs.items()`
        (FrontendArgs: one flag per field) and `for a, b in [("--x", str), ...]` (0.11's deprecated flags)."""
        targets = stmt.target.elts if isinstance(stmt.target, ast.Tuple) else [stmt.target]
        names = [e.id for e in targets if isinstance(e, ast.Name)]
        it = stmt.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items":
            kwargs = self.value(frame, it.func.value)
            if isinstance(kwargs, KwargsOf):
                for name in dataclass_fields(self.src, kwargs.cls.module, kwargs.cls.node):
                    if FieldKwargs(kwargs, name) not in self.dropped:
                        yield dict(zip(names, [name, FieldKwargs(kwargs, name)], strict=False))
                return
        if isinstance(it, ast.List | ast.Tuple):
            for item in it.elts:
                elts = item.elts if isinstance(item, ast.Tuple) and len(names) > 1 else [item]
                yield {n: e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None
                       for n, e in zip(names, elts, strict=False)}
            return
        yield {}

    def mutate(self, frame: Frame, target: ast.Subscript, value: ast.expr | None) -> None:
        """`kwargs[f]["action"] = X` (None: `del kwargs[f]["action"]`) and `del kwargs[f]`: the changes to
        get_kwargs's output that decide a flag's names."""
        inner, key = self.value(frame, target.value), self.value(frame, target.slice)
        if isinstance(inner, FieldKwargs) and key == "action":
            self.actions[inner] = (frame.module, value)
        elif isinstance(inner, KwargsOf) and isinstance(key, str) and value is None:
            self.dropped.add(FieldKwargs(inner, key))

    def value(self, frame: Frame, expr: ast.expr) -> Value:
        """What an expression is, as far as the parser goes; calls are run (add_argument recorded)."""
        if isinstance(expr, ast.Constant):
            return expr.value if isinstance(expr.value, str) else None
        if isinstance(expr, ast.Name):
            if expr.id in frame.env:
                return frame.env[expr.id]
            found = self.src.lookup(frame.module, expr.id)
            return ClassRef(found.module, found.node) if found and isinstance(found.node, ast.ClassDef) else None
        if isinstance(expr, ast.JoinedStr):  # f"--{key.replace('_', '-')}"
            parts = [self.value(frame, p.value if isinstance(p, ast.FormattedValue) else p) for p in expr.values]
            text = [p for p in parts if isinstance(p, str)]
            return "".join(text) if len(text) == len(parts) else None
        if isinstance(expr, ast.Subscript):
            inner, key = self.value(frame, expr.value), self.value(frame, expr.slice)
            return FieldKwargs(inner, key) if isinstance(inner, KwargsOf) and isinstance(key, str) else None
        if isinstance(expr, ast.Call):
            return self.call(frame, expr)
        return None

    def call(self, frame: Frame, call: ast.Call) -> Value:
        """Run a call: add_argument is recorded, add_parser/add_argument_group give a parser, get_kwargs its
        kwargs; a vLLM function or method handed a parser or kwargs is run (and gives back what it was handed)."""
        name = _name(call.func)
        if name == "add_argument":
            self.add_argument(frame, call)
            return None
        if name in ("add_parser", "add_argument_group", "add_mutually_exclusive_group"):
            if name == "add_parser" and not any(k.arg == "add_help" for k in call.keywords):
                self.flags.update(("-h", "--help"))  # argparse's own
            return Parser()
        args = [self.value(frame, a) for a in call.args]
        if name == "get_kwargs" and isinstance(args[0], ClassRef):
            return KwargsOf(args[0], id(call))
        if name == "replace" and isinstance(call.func, ast.Attribute) and len(args) == 2:
            base, (old, new) = self.value(frame, call.func.value), args
            if isinstance(base, str) and isinstance(old, str) and isinstance(new, str):
                return base.replace(old, new)
            return None
        if name == "pop" and args[:1] == ["flags"]:
            return []  # value.pop("flags", []): extra option strings, set by run_batch's BatchFrontendArgs only
        if any(isinstance(a, Parser | KwargsOf | FieldKwargs) for a in args):
            target = self.callee(frame, call.func)
            if target is not None:
                self.function(*target, args)
            return next((a for a in args if isinstance(a, Parser | KwargsOf)), None)
        return None

    def callee(self, frame: Frame, func: ast.expr
               ) -> tuple[str, ast.FunctionDef, ClassRef | None, ClassRef | None] | None:
        """(module, function, class defining it, class it is called on) of `make_arg_parser(...)`,
        `X.add_cli_args(...)`, `cls.m(...)` or `super().m(...)` (the method found along the class's bases)."""
        if isinstance(func, ast.Name):
            found = self.src.lookup(frame.module, func.id)
            return (found.module, found.node, None, None) if found and isinstance(found.node, ast.FunctionDef) \
                else None
        if not isinstance(func, ast.Attribute):
            return None
        if isinstance(func.value, ast.Call) and _name(func.value.func) == "super" and frame.owner is not None:
            bound = frame.env.get("cls")
            start, cls, skip = frame.owner, bound if isinstance(bound, ClassRef) else frame.owner, 1
        else:
            value = self.value(frame, func.value)
            if not isinstance(value, ClassRef):
                return None
            start, cls, skip = value, value, 0
        for klass in list(self.mro(start))[skip:]:
            method = next((s for s in klass.node.body if isinstance(s, ast.FunctionDef) and s.name == func.attr), None)
            if method is not None:
                return klass.module, method, klass, cls
        return None

    def mro(self, cls: ClassRef) -> Iterator[ClassRef]:
        """The class and its bases, depth first (vLLM's argument classes have single inheritance)."""
        yield cls
        for base in cls.node.bases:
            found = self.src.lookup(cls.module, _name(base) or "")
            if found is not None and isinstance(found.node, ast.ClassDef):
                yield from self.mro(ClassRef(found.module, found.node))

    def add_argument(self, frame: Frame, call: ast.Call) -> None:
        """Record the call's option strings, with the --no- (and --enable-/--disable-) forms of a
        BooleanOptionalAction; an option string this reader cannot work out stops it (no silent gap)."""
        names: list[str] = []
        for arg in call.args:
            value = self.value(frame, arg.value if isinstance(arg, ast.Starred) else arg)
            if not isinstance(value, str | list):
                raise SystemExit(f"{frame.module}: cannot read the option strings of {ast.unparse(call)}")
            names.extend([value] if isinstance(value, str) else value)
        options = [n for n in names if n.startswith("-")]
        self.flags.update(options)
        if self.boolean_optional(frame, call):
            self.flags.update("--no-" + n[2:] for n in options if n.startswith("--"))
            self.flags.update(inverse + n[len(prefix):] for n in options
                              for prefix, inverse in self.inverse_prefixes.items() if n.startswith(prefix))

    def boolean_optional(self, frame: Frame, call: ast.Call) -> bool:
        """Whether the call's action is BooleanOptionalAction: `action=` written out, or the `action` of the
        get_kwargs entry spread into it (`**kwargs["f"]`, `**{**kwargs["f"], "default": None}`; a later key
        wins, as in a dict display)."""
        negated = False
        for kw in call.keywords:
            if kw.arg == "action":
                negated = self.is_boolean_optional(frame.module, kw.value)
            elif kw.arg is None:
                pairs = list(zip(kw.value.keys, kw.value.values, strict=True)) if isinstance(kw.value, ast.Dict) \
                    else [(None, kw.value)]
                for key, item in pairs:
                    entry = self.value(frame, item) if key is None else None
                    if isinstance(entry, FieldKwargs):
                        negated = self.field_is_boolean_optional(entry)
                    elif isinstance(key, ast.Constant) and key.value == "action":
                        negated = self.is_boolean_optional(frame.module, item)
        return negated

    def field_is_boolean_optional(self, entry: FieldKwargs) -> bool:
        """The action of get_kwargs(cls)[name]: as the release's get_kwargs makes it from the field's type in
        that class, unless the code changed it since (`kwargs[name]["action"] = ...`, `del ...["action"]`)."""
        if entry in self.actions:
            module, action = self.actions[entry]
            return action is not None and self.is_boolean_optional(module, action)
        cls = entry.of.cls
        fields = dataclass_fields(self.src, cls.module, cls.node)
        if entry.name not in fields:
            raise SystemExit(f"{cls.module}: {cls.node.name} has no field {entry.name}")
        return self.rule is not None and self.rule.negated(fields[entry.name])

    def is_boolean_optional(self, module: str, expr: ast.expr) -> bool:
        """argparse.BooleanOptionalAction, or a class deriving from it."""
        if _name(expr) == "BooleanOptionalAction":
            return True
        found = self.src.lookup(module, expr.id) if isinstance(expr, ast.Name) else None
        return bool(found and isinstance(found.node, ast.ClassDef)
                    and any(self.is_boolean_optional(found.module, b) for b in found.node.bases))


def serve_flags(src: Source) -> set[str]:
    """Every option string `vllm serve`'s parser accepts, from ServeSubcommand.subparser_init down."""
    serve = src.tree(SERVE)
    if serve is None:
        raise SystemExit(f"{src.root}: no {SERVE}")
    init = next((f for c in serve.body if isinstance(c, ast.ClassDef) for f in c.body
                 if isinstance(f, ast.FunctionDef) and f.name == "subparser_init"), None)
    if init is None:
        raise SystemExit(f"{SERVE}: no subparser_init")
    parser_module = next((_absolute(SERVE, n, src.path(SERVE)) for n in ast.walk(serve)
                          if isinstance(n, ast.ImportFrom) and any(a.name == "FlexibleArgumentParser"
                                                                   for a in n.names)), "")
    walk = Walk(src, read_kwargs_rule(src), read_inverse_prefixes(src, parser_module))
    walk.function(SERVE, init, None, None, [None])
    return walk.flags


# --- the release's --kv-cache-dtype and --block-size values ----------------------------------------------------

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


def files_read(paths: list[str]) -> str:
    """The files read, one directory's together: vllm/config/{cache,model}.py."""
    by_dir: dict[str, list[str]] = {}
    for p in sorted(set(paths)):
        folder, _, name = p.rpartition("/")
        by_dir.setdefault(folder, []).append(name.removesuffix(".py"))
    return ", ".join(f"{d}/{names[0]}.py" if len(names) == 1 else f"{d}/{{{','.join(names)}}}.py"
                     for d, names in by_dir.items())


def main(version: str, root: Path, wheel: str) -> None:
    src = Source(root)
    found = serve_flags(src)
    # CacheConfig moved from vllm/config.py (<= 0.10.0) to vllm/config/cache.py
    cache_config = next((rel for rel in (CACHE_CONFIG, OLD_CONFIG) if (root / rel).exists()), None)
    read = src.read + ([cache_config] if cache_config else [])
    print(f'  - version: "{version}"')
    print(f'    source: "{wheel} from PyPI: {files_read(read)} (read by tools/extract_vllm_serve_flags.py)"')
    if cache_config is not None:
        arg_utils = root / "vllm/engine/arg_utils.py"
        print(f"    kv_cache_dtypes: [{', '.join(kv_cache_dtypes(root / cache_config, arg_utils))}]")
        sizes = block_sizes(root / cache_config, arg_utils)
        if sizes is not None:
            print(f"    block_sizes: [{', '.join(map(str, sizes))}]")
    print("    flags:")
    for flag in sorted(found):
        print(f"      - \"{flag}\"")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else f"vllm=={sys.argv[1]} wheel")
