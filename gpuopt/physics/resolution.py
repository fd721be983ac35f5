"""From what a user types after `--model` to a ModelArchitecture.

Order (first hit wins), so that the shipped registry stays the offline default and the network is the last
resort:

1. a registry id (gpuopt/data/models.csv), case-insensitive, also without the organisation;
2. a local path: a checkpoint directory holding config.json, or a config.json file;
3. the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub): a model
   downloaded once is found again without the network and without the registry;
4. the Hugging Face Hub through `huggingface_hub` (HF_TOKEN for gated/private repos), unless
   HF_HUB_OFFLINE is set; what is fetched lands in the cache, so step 3 finds it next time;
5. offline (HF_HUB_OFFLINE, or the Hub's host does not resolve): a checkpoint of gpuopt's table of known
   quantized checkpoints (physics/checkpoint_table.py) whose base model is in the registry -- the base's
   architecture with the quantization the table states (`from_known_checkpoint`), said in its notes. The
   Hub's own config.json is preferred whenever it can be read: it is exact where the table assumes.

Next to config.json the checkpoint's quantization files are read where the format keeps them
(hf_quant_config.json for ModelOpt, quantize_config.json for AutoGPTQ), and the safetensors index for the
checkpoint's exact size. Every failure is one line saying what to do (exit 2).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from gpuopt.errors import ConfigError, InputError, UnknownNameError
from gpuopt.physics.architecture import ModelArchitecture, from_hf_dict, get_model, read_json_object, registry
from gpuopt.physics.checkpoint_table import Checkpoint, find
from gpuopt.physics.quantization import KNOWN_CHECKPOINT_SOURCE, described

MODELOPT_KV_UNSTATED = (
    "a 16-bit KV cache: the table does not state the checkpoint's kv_cache_quant_algo, and a ModelOpt export that "
    "sets it to FP8 (as all three hf_quant_config.json files in gpuopt's reference data do) runs an FP8 cache under "
    "--kv-cache-dtype auto from vLLM 0.14 -- about twice the KV tokens planned here; `hf download {checkpoint} "
    "hf_quant_config.json` to plan with it")
"""The assumption a ModelOpt row of the table takes for its KV cache (from_known_checkpoint): the conservative
one -- half the tokens the FP8 cache would hold -- said in full, since the cached config would change it."""

CONFIG = "config.json"
SIDE_FILES = ("hf_quant_config.json", "quantize_config.json", "model.safetensors.index.json")


def expand_user(path: Path) -> Path:
    """`~` and `~user` expanded, or the path as written when there is no such user or home (Path.expanduser
    raises RuntimeError there: `~nosuchuser/model` was an internal error, exit 70)."""
    try:
        return path.expanduser()
    except RuntimeError:
        return path


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment at call time (as huggingface_hub does)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return expand_user(Path(home)) / "hub"


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def from_files(config_path: Path, name: str | None, sides: dict[str, Path]) -> ModelArchitecture:
    """An architecture from a config.json and whichever side files the checkpoint has."""
    cfg = read_json_object(config_path)
    extra = {key: read_json_object(path, f"a {key}") for key, path in sides.items()}
    index = extra.get("model.safetensors.index.json", {})
    found = index.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    if not name:  # a bare config file: its own id if it states one, else the checkpoint folder / file name
        stem = config_path.stem
        name = str(cfg.get("_name_or_path") or (config_path.parent.name if stem == "config" else stem))
    return from_hf_dict(cfg, name=name, where=str(config_path),
                        hf_quant_config=extra.get("hf_quant_config.json"),
                        quantize_config=extra.get("quantize_config.json"),
                        checkpoint_bytes=_int_or_none(metadata.get("total_size")),
                        checkpoint_params=_int_or_none(metadata.get("total_parameters")))


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int | float | str) and str(value).isdigit() else None


def side_files(folder: Path) -> dict[str, Path]:
    """The quantization and index files a checkpoint folder has beside its config.json (SIDE_FILES)."""
    return {f: folder / f for f in SIDE_FILES if (folder / f).is_file()}


def from_config_beside_its_files(config: Path, name: str) -> ModelArchitecture:
    """A workload's `{config: PATH, name: ID}`: the config.json with the quantization side files in its folder
    (hf_quant_config.json, quantize_config.json, the safetensors index), served as `name` -- the folder is where
    the config was copied, not the checkpoint the command loads. Read without them, a ModelOpt NVFP4 config
    was planned as fp8 with `--quantization fp8` (QA), which vLLM refuses for a modelopt_fp4 checkpoint."""
    return from_files(config, name, side_files(config.parent))


def _snapshot_repo(folder: Path) -> str | None:
    """The repository a Hugging Face cache snapshot folder holds (.../models--ORG--NAME/snapshots/REVISION):
    ORG/NAME, which reports call it by (QA: a snapshot passed as --model was named by its revision hash)."""
    parent = folder.resolve().parent
    repo = parent.parent.name
    if parent.name != "snapshots" or not repo.startswith("models--") or repo == "models--":
        return None
    return repo.removeprefix("models--").replace("--", "/", 1)  # models--gpt2 (no organisation): gpt2


def from_local_path(path: Path, name: str | None = None) -> ModelArchitecture:
    """A checkpoint directory (config.json and its side files) or a config.json file."""
    if path.is_dir():
        config = path / CONFIG
        if not config.is_file():
            raise ConfigError(f"{path}: directory has no config.json (point --model at a checkpoint directory "
                              "or at its config.json)")
        folder = path
    else:
        config, folder = path, path.parent
    arch = from_files(config, name or _snapshot_repo(folder) or (path.name if path.is_dir() else None),
                      side_files(folder))
    # a directory, or the config.json inside one, is the checkpoint vLLM serves (as an absolute path: the command
    # must not depend on the directory it is run from); another JSON file is a config only
    served = path if path.is_dir() else folder if path.name == CONFIG else None
    return arch.model_copy(update={"local_path": str(served.resolve())}) if served is not None else arch


def _from_cache(repo_id: str) -> ModelArchitecture | None:
    from huggingface_hub import try_to_load_from_cache

    cache = hub_cache_dir()
    found = try_to_load_from_cache(repo_id, CONFIG, cache_dir=cache)
    if not isinstance(found, str):
        return None
    sides: dict[str, Path] = {}
    for f in SIDE_FILES:
        hit = try_to_load_from_cache(repo_id, f, cache_dir=cache)
        if isinstance(hit, str):
            sides[f] = Path(hit)
    return from_files(Path(found), repo_id, sides)


def hub_reachable() -> bool:
    """Whether the Hub's host resolves: without it huggingface_hub would retry for ~25 s before failing."""
    from urllib.parse import urlparse

    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def _from_hub(repo_id: str) -> ModelArchitecture:
    """Fetch config.json (and side files that exist) into the cache; one actionable line on failure."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import logging as hub_logging

    token = os.environ.get("HF_TOKEN") or None
    cache = hub_cache_dir()  # (resolve_model asked hub_reachable first)
    # huggingface_hub's retry warnings are not ours to print: one error line is
    hub_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    try:
        config = hf_hub_download(repo_id, CONFIG, cache_dir=cache, token=token)
    except GatedRepoError:
        raise InputError(f"model '{repo_id}' is gated on the Hugging Face Hub: accept its licence at "
                         f"https://huggingface.co/{repo_id} and set HF_TOKEN") from None
    except RepositoryNotFoundError:
        raise InputError(f"model '{repo_id}' is not on the Hugging Face Hub (or is private: set HF_TOKEN); "
                         "check the id or pass a local checkpoint directory") from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:  # (a subclass of EntryNotFoundError)
        raise _unreachable(repo_id, cache, type(exc).__name__) from None
    except (EntryNotFoundError, RevisionNotFoundError):
        raise InputError(f"model '{repo_id}' has no config.json on the Hugging Face Hub; pass a local "
                         "config.json") from None
    except (HfHubHTTPError, OSError) as exc:
        raise _unreachable(repo_id, cache, type(exc).__name__) from None
    sides: dict[str, Path] = {}
    for f in SIDE_FILES:
        try:
            sides[f] = Path(hf_hub_download(repo_id, f, cache_dir=cache, token=token))
        except (EntryNotFoundError, RevisionNotFoundError, HfHubHTTPError, LocalEntryNotFoundError, OSError):
            continue  # most repositories have none of them
    return from_files(Path(config), repo_id, sides)


def _unreachable(repo_id: str, cache: Path, why: str) -> InputError:
    return InputError(f"model '{repo_id}' is not in the registry or the Hugging Face cache ({cache}) and the Hub "
                      f"could not be reached ({why}): download it with `hf download {repo_id} "
                      "config.json` or pass a local config.json")


def _is_local(path: Path) -> bool:
    """Whether `path` names something on this machine; a name the OS refuses as a path (too long, a NUL byte)
    names nothing here."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _check_repo_id(name: str) -> None:
    """huggingface_hub's own rule for repository ids (characters, length), as one input error."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils._validators import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError as exc:
        raise InputError(f"model '{name}' is not a valid Hugging Face repository id: {exc}") from None


def looks_like_path(name: str) -> bool:
    """A name only a path has: absolute, relative to here or home, or more than one `/` (an id has one)."""
    return name.startswith(("/", "./", "../", "~")) or name.count("/") > 1 or name.endswith(".json")


def looks_like_repo_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~"))


def resolve_model(name: str) -> ModelArchitecture:
    """Registry id -> local path -> Hugging Face cache -> Hub (see the module docstring)."""
    if not name.strip():  # as a path it would be the current directory
        raise InputError("the model name is empty: give a registry or Hugging Face id, or a local checkpoint path")
    try:
        return _with_cached_limit(get_model(name))
    except UnknownNameError as unknown:
        registry_miss = unknown
    path = expand_user(Path(name))
    if _is_local(path):
        return from_local_path(path)
    if not looks_like_repo_id(name):
        if looks_like_path(name):
            raise InputError(f"model '{name}' is not in the registry and no such file or directory exists: "
                             "pass a checkpoint directory or config.json that exists, or a registry or Hugging "
                             "Face id")
        raise registry_miss
    _check_repo_id(name)
    cached = _from_cache(name)
    if cached is not None:
        return cached
    offline = hub_offline()
    if not offline and hub_reachable():
        return _from_hub(name)
    known = from_known_checkpoint(name)
    if known is not None:
        return known
    if offline:
        if (row := find(name)) is not None:  # in the table, but its row cannot stand for the config
            raise InputError(f"model '{name}' is in {KNOWN_CHECKPOINT_SOURCE}, but {_undescribed(row)}, and it "
                             f"is not in the Hugging Face cache ({hub_cache_dir()}) with HF_HUB_OFFLINE set: "
                             f"`hf download {row.checkpoint} config.json` or pass a local path")
        hint = f"; did you mean {', '.join(registry_miss.suggestions)}?" if registry_miss.suggestions else ""
        raise InputError(f"model '{name}' is not in the registry ({len(registry())} models), the table of known "
                         f"quantized checkpoints or the Hugging Face cache ({hub_cache_dir()}) and HF_HUB_OFFLINE "
                         f"is set: download its config.json or pass a local path{hint}")
    raise _unreachable(name, hub_cache_dir(), "no DNS answer for the Hub")


LIMIT_FIELDS = ("max_position_embeddings", "rope_type", "rope_factor", "rope_original_max_position_embeddings")


def _with_cached_limit(arch: ModelArchitecture) -> ModelArchitecture:
    """A registry model whose row lacks the context limit (no max_position_embeddings: Qwen3.5-9B, QwQ-32B,
    Yi-1.5-34B...) takes it, and its rope scaling, from its config.json when the Hugging Face cache has it:
    the registry is tried first, so a cached config was never read and a max_model_len past the checkpoint's
    limit was planned without a word (QA: Qwen3.5-9B at 300,000 tokens, which its 262,144 refuses). Only the
    limit is taken; the rest of the row stands. A cached config that does not read is left alone (the row
    serves as before)."""
    if arch.max_position_embeddings or not looks_like_repo_id(arch.hf_id):
        return arch
    try:
        cached = _from_cache(arch.hf_id)
    except InputError:
        return arch
    if cached is None or not cached.max_position_embeddings:
        return arch
    return arch.model_copy(update={f: getattr(cached, f) for f in LIMIT_FIELDS})


def _undescribed(row: Checkpoint) -> str:
    """Why a table row cannot describe its checkpoint without the checkpoint's own config (from_known_checkpoint
    returned None for it)."""
    if row.base_model not in registry():
        return f"its base model {row.base_model} is not in the registry"
    if not row.vllm_quantization.strip():
        return f"the vLLM method its {row.method} weights trigger is not confirmed there"
    if row.weight_bits is None:
        return f"its row states mixed bit widths ({row.method}), which only the checkpoint's config resolves"
    return (f"gpuopt cannot size {row.method} weights read by vLLM's {row.vllm_quantization} without the "
            "checkpoint's config")


def offline_description(arch: ModelArchitecture) -> str | None:
    """What a plan or command should say about a model resolved from the known-checkpoint table (its
    assumptions and how to get the exact config), else None."""
    q = arch.quantization
    return arch.notes if q is not None and q.source.startswith(KNOWN_CHECKPOINT_SOURCE) else None


def from_known_checkpoint(name: str) -> ModelArchitecture | None:
    """A known quantized checkpoint described by its table row (step 5 of the module docstring): the base
    model's registry architecture -- a quantized export keeps its base's config.json -- with the row's
    quantization (quantization.described), under the checkpoint's own id, so plans and commands name it.
    None when the row is missing, its base is not in the registry, or the row cannot state the
    quantization (the vLLM method unconfirmed, mixed bits, FBGEMM FP8 -- its config's modules_to_not_convert
    says what stays 16-bit --, Quark)."""
    row = find(name)
    if row is None:
        return None
    try:
        base = get_model(row.base_model)
    except UnknownNameError:
        return None
    found = described(row.method, row.weight_bits, row.vllm_quantization, row.group_size)
    if found is None:
        return None
    quant, assumed = found
    if row.vllm_quantization in ("modelopt", "modelopt_fp4"):
        assumed.append(MODELOPT_KV_UNSTATED.format(checkpoint=row.checkpoint))
    quant = quant.model_copy(update={"source": f"{KNOWN_CHECKPOINT_SOURCE} (offline)"})
    native = "mxfp4-experts" if quant.method == "mxfp4" else "fp8-block" if quant.scheme == "fp8-block" else None
    notes = (f"resolved offline from {KNOWN_CHECKPOINT_SOURCE}: {base.hf_id}'s architecture with "
             f"{row.method} {row.weight_bits}-bit weights as vLLM's {row.vllm_quantization} reads them"
             + (f"; assumed: {'; '.join(assumed)}" if assumed else "")
             + f"; for the checkpoint's exact config: hf download {row.checkpoint} config.json")
    return base.model_copy(update={
        "hf_id": row.checkpoint, "quantization": quant, "native_quantization": native or base.native_quantization,
        "checkpoint_bytes": None, "checkpoint_params": None,
        "source": f"{KNOWN_CHECKPOINT_SOURCE} (gpuopt/data/quantized_checkpoints.csv; cited: {row.source})",
        "notes": notes})
