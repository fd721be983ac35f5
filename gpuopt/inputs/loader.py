"""The input boundary: every file gpuopt reads or writes passes through here.

Why one module: a user's file can be a directory, a binary, unreadable, truncated, nested 5,000 levels deep or
carry the same key twice, and an output path can point into a missing folder or a full device. Each case gets
its own one-line message (exit 2) here, before any solving starts, instead of a traceback from deep inside
pathlib, PyYAML or PuLP after minutes of work.

    read_text(path, what)      a UTF-8 text file, or an InputError naming what is wrong with the path
    check_input_file(path)     the same checks without reading (config.json paths inside workload files)
    load_yaml(path)            (data, root node): safe YAML, duplicate keys and deep nesting rejected,
                               the node tree kept so validation messages can carry YAML line numbers
    check_output_path(path)    before the solve: the parent folder exists and is writable
    write_output_file(path, s) atomically (temp file in the same folder + rename), so an interrupted or
                               failed write never leaves half a report behind
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

import yaml

from gpuopt.errors import ConfigError, InputError
from gpuopt.files_read import NotText, read_as, read_text_bytes

MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings/sequences a gpuopt file may have. Real files use 4 levels; PyYAML's composer
recurses once per level, so an unbounded depth ends in RecursionError instead of a message."""
MAX_YAML_VALUES = 100_000
"""Most values a file may hold once its aliases are expanded. An alias is a reference, so nine levels of nine
aliases each (a 20-line "billion laughs" file) are 387 million values to anything that walks them: a message
quoting the value took minutes and gigabytes (QA). Real files hold a few hundred."""



def _describe_os_error(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _path_problem(path: Path, what: str) -> str | None:
    """Why `path` cannot be read as a file (None when it can be opened)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        parent = path.parent
        if not parent.exists():
            return f"{path}: {what} not found (folder {parent} does not exist)"
        if str(path) == "-":  # QA: the usual spelling of stdin; the readers take a path, which /dev/stdin is
            return f"{path}: {what} not found (to read standard input, name /dev/stdin)"
        return f"{path}: {what} not found"
    except NotADirectoryError:
        return f"{path}: {what} not found (a part of the path is a file, not a folder)"
    except OSError as exc:
        return f"{path}: cannot access {what}: {_describe_os_error(exc)}"
    except ValueError:  # os.stat refuses a path with a NUL byte before asking the system
        return f"{str(path)!r}: not a valid path (contains a NUL byte)"
    if stat.S_ISDIR(st.st_mode):
        return f"{path}: is a directory, not a {what}"
    if not os.access(path, os.R_OK):
        return f"{path}: {what} is not readable (permission denied)"
    return None


def check_input_file(path: Path, what: str = "file") -> None:
    """Raise an InputError when `path` is missing, a directory or unreadable (one message per case)."""
    problem = _path_problem(path, what)
    if problem:
        raise InputError(problem)


def read_text(path: Path, what: str = "file") -> str:
    """Read a UTF-8 text file; a directory, a missing or unreadable file and a binary file each get their
    own message."""
    check_input_file(path, what)
    try:
        raw = read_text_bytes(path)
    except NotText as exc:
        raise InputError(f"{path}: {exc}, not a {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {_describe_os_error(exc)}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                         f"a {what} must be UTF-8") from None


# ---- YAML ---------------------------------------------------------------------------------------------


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """The values under `node` with every alias expanded, counted once per node (an aliased node is one object
    in the composed graph, so `sizes` keeps this linear in the file); refused past MAX_YAML_VALUES at the
    first node that passes it."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    size = 1
    if isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(item, sizes) for item in node.value)
    if size > MAX_YAML_VALUES:
        raise yaml.composer.ComposerError(None, None, f"this value expands to more than {MAX_YAML_VALUES:,} values "
                                                      "through its aliases (*name): refused", node.start_mark)
    sizes[id(node)] = size
    return size


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader with two refusals: a key given twice in one mapping (PyYAML keeps the last value
    silently, so `requests_per_second: 2` then `: 200` plans for 200) and nesting deeper than MAX_YAML_DEPTH."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None:
            _expanded_size(node, {})
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges are YAML's own override mechanism, not a repetition
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value, not a list or mapping",
                    key_node.start_mark) from None
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                # every key of gpuopt's files is a name; `null:`, `1:` and `true:` are read as None, 1 and True
                # (and 1 == True in a mapping: "duplicate key 'True'" for two different keys; QA)
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key_node.value!r} is read as "
                    f"{'null' if key is None else f'the {type(key).__name__} {key!r}'}: keys are names; quote it "
                    f"('{key_node.value}') if it is meant", key_node.start_mark)
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (first on line {first}, again on line {line})",
                    key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# Scalars are resolved by YAML 1.2's core schema, not PyYAML's YAML 1.1 one: 1.1 reads `0100` as 64 (octal),
# `1:30.5` as 90.5 and `3:20` as 200 (base 60), `yes`/`no`/`on`/`off` as booleans, and `1e3` as a string (it
# wants a dot before the exponent) -- a file planned for 64 input tokens where it says 100, silently. Under the
# core schema those are 100, the strings "1:30.5" and "3:20" (refused where a number goes), the strings "yes"
# and "on", and 1000.0; `0o17` and `0x1F` are octal and hexadecimal as YAML 1.2 writes them. The core schema has
# no timestamps either: `tags: {when: 2026-01-01}` is the string it looks like (1.1 made it a date, refused as
# "expected a valid string, got date datetime.date(2026, 1, 1)", and a profile's unquoted `fitted:` likewise);
# an explicit `!!timestamp` still reads one.
_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_YAML11_TAGS = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                "tag:yaml.org,2002:timestamp")
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML11_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _CORE_BOOL, list("tTfF"))
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:int", _CORE_INT, list("-+0123456789"))
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _CORE_FLOAT, list("-+0123456789."))


def _core_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    """An integer as YAML 1.2 writes it: decimal (a leading 0 is still decimal), 0o octal, 0x hexadecimal."""
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _core_bool(loader: yaml.SafeLoader, node: yaml.Node) -> bool:
    return str(loader.construct_scalar(node)).lower() == "true"  # type: ignore[arg-type]


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _core_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _core_bool)


def parse_yaml(text: str, path: Path) -> tuple[Any, yaml.Node | None]:
    """Parse YAML text once into (Python data, root node); a syntax error, a duplicate key or too deep a
    nesting becomes one ConfigError with the line."""
    try:
        loader = _StrictLoader(text)  # the reader rejects control characters before any parsing
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise ConfigError(f"{path}:{line}: invalid YAML: control character #x{exc.character:04x} is not allowed "
                          "(write it as an escape inside a double-quoted string)") from None
    root: yaml.Node | None = None
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    except (ValueError, OverflowError, AttributeError):
        # PyYAML lets a few hostile values escape as plain exceptions: an escape past Unicode ("\U00110000":
        # chr) or past a C int ("\UFFFFFFFF") while reading, an impossible !!timestamp (month 13, a 99-hour
        # offset) while constructing
        if root is None:  # still reading: the line is where the reader stopped
            raise ConfigError(f"{path}:{loader.get_mark().line + 1}: invalid YAML: an escape sequence names no "
                              "Unicode character (above \\U0010FFFF)") from None
        line, value, tag = _unreadable_scalar(loader, root)
        raise ConfigError(f"{path}:{line}: invalid YAML: '{value}' is not a valid {tag}") from None
    except RecursionError:  # pragma: no cover - MAX_YAML_DEPTH keeps PyYAML far from the limit
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return data, root


def _unreadable_scalar(loader: _StrictLoader, root: yaml.Node) -> tuple[int, str, str]:
    """(line, text, tag name) of the first scalar under `root` the loader cannot construct (parse_yaml). The
    failed node is still marked as under construction, so constructing it again raises a ConstructorError."""
    stack = deque([root])  # breadth first: the document's order within each level
    while stack:
        node = stack.popleft()
        if isinstance(node, yaml.ScalarNode):
            try:
                loader.construct_object(node)
            except (ValueError, OverflowError, AttributeError, yaml.YAMLError):
                return node.start_mark.line + 1, str(node.value)[:80], str(node.tag).rsplit(":", 1)[-1]
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
    return root.start_mark.line + 1, "", "value"


def load_yaml(path: Path, what: str = "YAML file") -> tuple[Any, yaml.Node | None]:
    """Read and parse a YAML file (see read_text and parse_yaml)."""
    return parse_yaml(read_text(path, what), path)


# ---- output --------------------------------------------------------------------------------------------


def _is_special(path: Path) -> bool:
    """A device, FIFO or socket (/dev/stdout, /dev/null, /dev/full): written in place, never replaced."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


PSEUDO_FILESYSTEMS = ("/dev", "/proc", "/sys")


def _pseudo_fs(path: Path) -> bool:
    """Under /dev, /proc or /sys: entries the kernel provides, written in place, never renamed over."""
    return any(path == Path(root) or Path(root) in path.parents for root in PSEUDO_FILESYSTEMS)


def check_output_path(path: Path, flag: str = "-o") -> None:
    """Fail before any work when the result could not be written to `path` (given with `flag`)."""
    parent = path.parent
    if "\x00" in str(path):
        raise InputError(f"{flag} {str(path)!r}: not a valid path (contains a NUL byte)")
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a directory; expected a file name")
    if not parent.exists():
        raise InputError(f"{flag} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: {parent} is not a folder")
    if _is_special(path):
        if not os.access(path, os.W_OK):
            raise InputError(f"{flag} {path}: not writable (permission denied)")
        return
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: folder {parent} is not writable (permission denied)")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{flag} {path}: file is not writable (permission denied)")


def new_file_mode(path: Path) -> int:
    """The mode a file written over `path` by renaming a temp file keeps: the file's own when it exists, else what
    the user's umask gives a new file (mkstemp makes 0600: an `init` workload or a report a teammate could not
    read)."""
    if path.exists():
        return stat.S_IMODE(path.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_output_file(path: Path, text: str, flag: str = "-o") -> None:
    """Write `text` to `path` atomically: a temp file beside it, flushed, then renamed over it. Devices and
    FIFOs are written in place (renaming over /dev/full would replace the device). A failure (disk full,
    permission) is an InputError naming the path; the target is left as it was."""
    data = text.encode("utf-8")
    # a symlink is written through, its target replaced and the link kept (QA: the link itself was replaced,
    # and `-o /dev/stdout` with stdout redirected to a file replaced /dev/stdout); a path in /dev, /proc or /sys,
    # or that resolves there, is written in place like a device
    target = Path(os.path.realpath(path))
    if _is_special(path) or _is_special(target) or _pseudo_fs(Path(os.path.abspath(path))) or _pseudo_fs(target):
        try:
            with open(path, "wb") as handle:
                handle.write(data)
                handle.flush()
        except OSError as exc:
            raise InputError(f"{flag} {path}: cannot write: {_describe_os_error(exc)}") from None
        return
    # a regular file this command read is never replaced by its result (a device or FIFO is written in place,
    # above: `solve /dev/stdin -o /dev/stdout` on a terminal names one device twice, and is fine)
    if (source := read_as(path)) is not None:
        raise InputError(f"{flag} {path}: is {source}, a file this command read; writing the result there would "
                         "replace it: name another file")
    tmp_name: str | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, new_file_mode(target))
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write: {_describe_os_error(exc)}") from None
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
