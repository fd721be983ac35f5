"""Which model classes a vLLM release serves, and which of them it serves with LoRA.

vLLM finds a model's implementation by the first entry of its config.json `architectures` (the model class)
in its registry (vllm/model_executor/models/registry.py). gpuopt/data/vllm_architectures.csv records, per
scanned release, what each class gets there -- read from the wheels by tools/extract_vllm_lora_models.py:
  ""                 not registered
  "no"               served, without LoRA: `--enable-lora` fails ("... does not support LoRA yet")
  "lora"             served with LoRA (SupportsLoRA in the class's MRO)
  "lora+embedding"   and the input embedding gets LoRA buffers too (the class declares `embedding_modules`)
  "until X"          no longer served natively: X was the last release with the class
                     (`_PREVIOUSLY_SUPPORTED_MODELS`)
  "plugin"           served only by an out-of-tree plugin (`_OOT_SUPPORTED_MODELS`)

A class that is not registered, or no longer, makes vLLM try its Transformers backend (`model_impl auto`),
and refuse with "was supported in vLLM until vX" when that fails; either way not the implementation whose
memory and kernels gpuopt models, so a plan on such a release is refused with the release that would do. A
class no scanned release implements (custom code) is not refused: the Transformers backend is vLLM's designed
path for it and no release would do better; gpuopt then models it as a native implementation of its config.

A model's class is known when it was read from a config.json, and for the registry models whose class
../shared/data states (gpuopt/data/model_hf_architectures.csv); for the others nothing is checked.
"""

from __future__ import annotations

from functools import cache

from gpuopt.datafiles import data_csv
from gpuopt.physics.architecture import ModelArchitecture
from gpuopt.physics.vllm_profile import profiles, release_key, release_or_default


@cache
def _table() -> tuple[tuple[str, ...], dict[str, dict[str, str]]]:
    rows = data_csv("vllm_architectures.csv")
    releases = tuple(k for k in rows[0] if k not in ("architecture", "source", "as_of"))
    return releases, {r["architecture"]: {v: r[v] for v in releases} for r in rows}


@cache
def scanned_release(vllm_version: str) -> str:
    """The scanned release `vllm_version` names -- the first of its line, as the profiles read it: 0.9 is
    0.9.0, 0.10.1 is 0.10.1.1 -- else the newest older one (the oldest scanned for older versions)."""
    releases, _ = _table()
    key = release_key(vllm_version)
    same = [r for r in releases if release_key(r)[:len(key)] == key]
    if same:
        return min(same, key=release_key)
    older = [r for r in releases if release_key(r)[:len(key)] < key]
    return max(older, key=release_key) if older else min(releases, key=release_key)


def status(arch: ModelArchitecture, vllm_version: str | None) -> str | None:
    """What the release (None: the default one) does with the model's class (the codes above); None
    when the class is unknown."""
    if arch.hf_architecture is None:
        return None
    _, table = _table()
    return table.get(arch.hf_architecture, {}).get(scanned_release(release_or_default(vllm_version)), "")


def _modelled_before(last: str) -> str | None:
    """The newest release gpuopt models that is not newer than `last` (vLLM's last release with a class)."""
    fitting = [p.version for p in profiles() if release_key(p.version) <= release_key(last)]
    return fitting[-1] if fitting else None


def release_problem(arch: ModelArchitecture, vllm_version: str | None) -> str | None:
    """Why vLLM `vllm_version` does not serve this model natively, or None (also when its class is unknown)."""
    code = status(arch, vllm_version)
    vllm_version = release_or_default(vllm_version)
    if code is None or code in ("no", "lora", "lora+embedding"):
        return None
    cls = f"{arch.hf_id}'s class {arch.hf_architecture}"
    if code.startswith("until "):
        last = code.removeprefix("until ")
        older = _modelled_before(last)
        fix = f"; plan it with --vllm-version {older} or older" if older else ""
        return (f"vLLM {vllm_version} no longer implements {cls} (vLLM served it until {last}; it now tries its "
                f"Transformers backend, which gpuopt does not model, or refuses){fix}")
    if code == "plugin":
        return f"vLLM {vllm_version} serves {cls} only through an out-of-tree plugin, which gpuopt does not model"
    releases, table = _table()
    served = [r for r in releases if table.get(arch.hf_architecture or "", {}).get(r, "") in
              ("no", "lora", "lora+embedding")]
    if not served:
        # a class no release implements (custom code, or one vLLM never had): the Transformers backend is
        # vLLM's designed path for it and there is no release to send the user to, so it is not refused
        return None
    if release_key(served[-1]) < release_key(vllm_version):  # served once, dropped without a notice
        older = _modelled_before(served[-1])
        fix = f"; plan it with --vllm-version {older} or older" if older else ""
        return (f"vLLM {vllm_version} does not implement {cls} (vLLM registered it from {served[0]} to "
                f"{served[-1]}){fix}")
    return f"vLLM {vllm_version} does not implement {cls} (it is registered from vLLM {served[0]})"


def builds_indexer(arch: ModelArchitecture, index: int, vllm_version: str | None) -> bool:
    """Whether vLLM builds a DSA indexer on decoder layer `index`: on every layer of a DSA model up to 0.23
    (0.21-0.22 skip the top-k only at run time, behind `use_index_cache`; 0.23 applies the freq/offset rule at
    run time but still builds every indexer), from 0.24 only where the config's IndexCache pattern keeps one
    (ModelArchitecture.indexer_skipped; `DeepseekV2MLAAttention.__init__` of the 0.24.0 wheel: "if self.is_v32
    and (not _skip_topk or is_mtp_layer)")."""
    if not arch.indexer_params:
        return False
    return release_key(release_or_default(vllm_version)) < (0, 24) or not arch.indexer_skipped(index)


def lora_problem(arch: ModelArchitecture, vllm_version: str | None) -> str | None:
    """Why --enable-lora fails for this model on this release, or None (also when the class is unknown)."""
    if status(arch, vllm_version) != "no":
        return None
    return (f"vLLM {release_or_default(vllm_version)}'s {arch.hf_architecture} ({arch.hf_id}) does not support LoRA: "
            "--enable-lora fails at start-up ('does not support LoRA yet')")


def lora_embedding_buffers(arch: ModelArchitecture, vllm_version: str | None) -> bool:
    """Whether the input embedding carries LoRA buffers: the class declares `embedding_modules`; counted
    when the class is unknown (the conservative side: at most (vocab + hidden) x rank elements a slot)."""
    code = status(arch, vllm_version)
    return code is None or code == "lora+embedding"
