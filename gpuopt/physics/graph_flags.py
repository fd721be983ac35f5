"""The CUDA-graph knobs of a `vllm serve` line, read into cuda_graphs.GraphSettings.

Which graphs a server captures decides how much memory they hold -- and from 0.20 how much the KV cache loses
to them -- so the flags that change it are read rather than named "not modelled" (read in the 0.10.1.1-0.34.0
wheels: vllm/engine/arg_utils.py, vllm/config/compilation.py, vllm/utils/argparse_utils.py):

- `--compilation-config` / `-cc` (0.12+; `-O` up to 0.11): a JSON object, or one key at a time in the dotted
  form vLLM's FlexibleArgumentParser accepts (`-cc.cudagraph_mode=PIECEWISE`, `--compilation-config.
  cudagraph_capture_sizes '[1,2,4,8]'`; a value is JSON where it parses, else a string). Its keys
  `cudagraph_mode` (a CUDAGraphMode name, any case), `cudagraph_capture_sizes` and `max_cudagraph_capture_size`
  are honoured, from 0.12 the compilation `mode` (an integer 0-3 or a CompilationMode name: anything but
  VLLM_COMPILE leaves no pieces for piecewise graphs), and up to 0.11 `level` (as `-O<n>`); the others
  (passes, splitting_ops, backend, ...) are named back as not modelled.
- `-O<n>` / `-O <n>` / `--optimization-level n` (0-3): the optimization level from 0.12 (0: no graphs, 1:
  piecewise only); the compilation level before, where only 3 -- the default -- captures graphs.
- `--cuda-graph-sizes` (0.9-0.12, one or more values): 0.9-0.11 read one value as the largest size of the
  grid and several as the list (read in the 0.10.1.1 and 0.11.0 wheels); 0.12 (a deprecated alias) takes the
  list as it is. Later releases refuse it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpuopt.errors import InputError
from gpuopt.physics.cuda_graphs import OPTIMIZATION_LEVEL_FIRST, GraphSettings
from gpuopt.physics.vllm_profile import release_key, release_or_default
from gpuopt.vocabulary import COMPILATION_MODES, CUDAGRAPH_MODES, CompilationMode, CudagraphMode

HONOURED_KEYS = ("cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size", "mode")
LIST_SIZES_FLAG_LAST = (0, 12)  # --cuda-graph-sizes: a flag of 0.9-0.12
MAX_SIZE_KEY_FIRST = (0, 12)  # max_cudagraph_capture_size and the compilation `mode`: keys from 0.12


def _brief(raw: str) -> str:
    """The value as given, cut to 60 characters: an error line names it, it does not echo a megabyte."""
    return repr(raw) if len(raw) <= 60 else repr(raw[:60]) + f"... ({len(raw):,} characters)"


@dataclass
class GraphFlags:
    """The CUDA-graph flags of one command line, gathered as they come (later ones win, as in vLLM)."""

    flag: str  # the option the text came from, for error lines ("" when the flags are options themselves)
    vllm_version: str | None
    config: dict[str, object] = field(default_factory=dict)
    level: int | None = None
    sizes_flag: list[int] | None = None
    not_modelled: list[str] = field(default_factory=list)

    @property
    def release(self) -> tuple[int, ...]:
        return release_key(release_or_default(self.vllm_version))

    def compilation_config(self, name: str, raw: str) -> None:
        """`--compilation-config RAW`: a JSON object; up to 0.11 a bare digit is the compilation level."""
        if raw.strip().isdigit() and self.release < OPTIMIZATION_LEVEL_FIRST:
            self.optimization_level(name, raw)
            return
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than a JSON reader goes
            raise InputError(f"{self._at(name)} takes a JSON object, e.g. '{{\"cudagraph_mode\": \"PIECEWISE\"}}' "
                             f"(got {_brief(raw)})") from None
        if not isinstance(value, dict):
            raise InputError(f"{self._at(name)} takes a JSON object (got {_brief(raw)})")
        for key, item in value.items():
            self._key(name, str(key), item)

    def dotted(self, name: str, key: str, raw: str) -> None:
        """`--compilation-config.KEY RAW`: one key; its value is JSON where it parses, else a string."""
        try:
            value: object = json.loads(raw)
        except (ValueError, RecursionError):
            value = raw
        self._key(name, key, value)

    def optimization_level(self, name: str, raw: str) -> None:
        if raw.strip() not in ("0", "1", "2", "3"):
            raise InputError(f"{self._at(name)} must be 0, 1, 2 or 3 (got {_brief(raw)})")
        self.level = int(raw)

    def cuda_graph_sizes(self, values: list[str]) -> None:
        if self.release > LIST_SIZES_FLAG_LAST:
            raise InputError(f"{self._at('--cuda-graph-sizes')} is not a flag of vLLM "
                             f"{release_or_default(self.vllm_version)} (0.9-0.12 had it): use --compilation-config "
                             "'{\"cudagraph_capture_sizes\": [...]}'")
        if not values:
            raise InputError(f"{self._at('--cuda-graph-sizes')} needs one or more batch sizes")
        self.sizes_flag = [self._size("--cuda-graph-sizes", v) for v in values]

    def settings(self) -> GraphSettings | None:
        """The knobs given (None: none of them)."""
        if not self.config and self.level is None and self.sizes_flag is None:
            return None
        mode = self.config.get("cudagraph_mode")
        sizes = self.config.get("cudagraph_capture_sizes")
        ceiling = self.config.get("max_cudagraph_capture_size")
        if self.sizes_flag is not None and sizes is None:
            if len(self.sizes_flag) == 1 and self.release < LIST_SIZES_FLAG_LAST:
                ceiling = ceiling if ceiling is not None else self.sizes_flag[0]  # the grid up to it
            else:
                sizes = self.sizes_flag
        compilation = self.config.get("mode")
        return GraphSettings(mode=mode if isinstance(mode, str) else None,  # type: ignore[arg-type]
                             capture_sizes=tuple(sizes) if isinstance(sizes, list) else None,
                             max_capture_size=ceiling if isinstance(ceiling, int) else None,
                             optimization_level=self.level,
                             compilation_mode=compilation if isinstance(compilation, str) else None,  # type: ignore[arg-type]
                             )

    def _at(self, name: str) -> str:
        """Where a problem is, for its error line: the flag within the option it came from (`--server-args:
        -cc`), or the flag alone when it is the option itself (`gpuopt fit --compilation-config`)."""
        return name if not self.flag or name.startswith(self.flag) else f"{self.flag}: {name}"

    def _key(self, name: str, key: str, value: object) -> None:
        if key == "level" and self.release < OPTIMIZATION_LEVEL_FIRST:  # 0.10-0.11: the compilation level, as -O<n>
            if value is None:  # JSON null: unset, the default level
                self.level = None
            else:
                self.optimization_level(f"{name} level", str(value))
            return
        if key not in HONOURED_KEYS or (key in ("max_cudagraph_capture_size", "mode")
                                        and self.release < MAX_SIZE_KEY_FIRST):
            self.not_modelled.append(f"{name} {key}")
            return
        if value is None:  # JSON null: vLLM's unset, the default (not the NONE mode)
            self.config.pop(key, None)
        elif key == "mode":
            self.config[key] = self._compilation_mode(name, value)
        elif key == "cudagraph_mode":
            mode = cudagraph_mode(str(value))
            if mode is None:
                raise InputError(f"{self._at(name)} cudagraph_mode must be one of {', '.join(CUDAGRAPH_MODES)} "
                                 f"(got {value!r})")
            self.config[key] = mode
        elif key == "cudagraph_capture_sizes":
            if not isinstance(value, list):
                raise InputError(f"{self._at(name)} cudagraph_capture_sizes takes a list of batch sizes "
                                 f"(got {value!r})")
            self.config[key] = [self._size(f"{name} cudagraph_capture_sizes", v) for v in value]
        else:
            self.config[key] = self._size(f"{name} {key}", value)

    def _compilation_mode(self, name: str, value: object) -> CompilationMode:
        """The compilation config's `mode` as CompilationConfig.validate_mode_before reads it: a name in any case,
        or the enum's integer (0 NONE, 1 STOCK_TORCH_COMPILE, 2 DYNAMO_TRACE_ONCE, 3 VLLM_COMPILE)."""
        named = None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            named = compilation_mode(str(value))
        elif isinstance(value, str) and not value.strip().isdigit():  # "3" is a string vLLM refuses
            named = compilation_mode(value)
        if named is None:
            raise InputError(f"{self._at(name)} mode must be one of {', '.join(COMPILATION_MODES)} or 0-3 "
                             f"(got {value!r})")
        return named

    def _size(self, what: str, value: object) -> int:
        try:
            size = int(str(value)) if not isinstance(value, bool) else -1
        except ValueError:
            size = -1
        if size < 1:
            raise InputError(f"{self._at(what)} takes positive whole batch sizes (got {value!r})")
        return size


def compilation_mode(name: str) -> CompilationMode | None:
    """A CompilationMode as vLLM reads or prints it -- its name in any case, or its integer (0-3) -- else None."""
    if name.strip().isdigit():
        value = int(name)
        return COMPILATION_MODES[value] if value < len(COMPILATION_MODES) else None
    return next((m for m in COMPILATION_MODES if m == name.upper()), None)


def cudagraph_mode(name: str) -> CudagraphMode | None:
    """A CUDAGraphMode name as vLLM reads it (any case: `CUDAGraphMode[value.upper()]`), else None."""
    return next((m for m in CUDAGRAPH_MODES if m == name.upper()), None)
