"""The known quantized checkpoints (gpuopt/data/quantized_checkpoints.csv): one table, two users.

The planner names one in a `vllm serve` command when a plan picks a precision the model does not ship in
(planner/checkpoints.py). Model resolution uses a row as the description of a checkpoint whose config.json
cannot be read -- offline, not in the Hugging Face cache -- so that `--model Qwen/Qwen3-32B-AWQ` works
without the network: the base model's architecture (a quantized checkpoint keeps its base's config) and the
quantization the row states, parsed by the same reader as a real `quantization_config`
(quantization.described). What the row does not state is the reader's default for that format (AWQ and
GPTQ group size 128, block FP8 128 x 128) and is said in the architecture's notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpuopt.datafiles import data_csv
from gpuopt.physics.quantization import described

# vLLM methods whose kernels need native FP8 tensor cores (ModelOpt FP8 is static W8A8 only: no W8A16
# fallback on Ampere, unlike compressed-tensors FP8, block FP8 and vLLM's own --quantization fp8)
NEEDS_NATIVE_FP8 = ("modelopt",)

TABLE = "gpuopt's table of known quantized checkpoints (gpuopt/data/quantized_checkpoints.csv)"


@dataclass(frozen=True)
class Checkpoint:
    """One row: a real checkpoint, its base model, how it is quantized and the vLLM method it triggers."""

    base_model: str
    checkpoint: str
    method: str  # the table's format: awq, gptq, fp8, int8-w8a8, w4a16, nvfp4, mxfp4, bnb
    weight_bits: int | None  # None where the row says "4/8 mixed"
    group_size: str  # as the row states it ("", "128x128 block", "16 (NVFP4 block)", ...)
    activation: str
    vllm_quantization: str  # the method vLLM detects ("" where unconfirmed)
    use: str  # gpuopt_use: ok, avoid: ..., avoid-multi-gpu: ..., native: ...
    source: str

    def usable(self, fp8_native: bool, gpus: int) -> bool:
        """Whether a plan may name it (on a GPU with native FP8 or not, with this many GPUs): only a checkpoint
        whose quantization gpuopt can state from the row (`readable`), as the plan's memory and speed are those
        of its weight format's checkpoint (serving_config.precision_unsupported, quantization.representative)."""
        if self.use == "ok":
            ok = True
        elif self.multi_gpu_bad:
            ok = gpus == 1
        else:
            return False
        return ok and self.readable and (self.vllm_quantization not in NEEDS_NATIVE_FP8 or fp8_native)

    @property
    def readable(self) -> bool:
        """Whether gpuopt can state how this checkpoint stores its weights from the row alone
        (quantization.described): not for a format whose row cannot say it (FBGEMM FP8, read from a config only;
        Quark), mixed bits, or an unconfirmed method. meta-llama/Llama-3.1-405B-Instruct-FP8 (fbgemm_fp8) is one:
        the row quotes the vLLM blog's "per-channel quantization in the MLP layer", so its attention is not FP8,
        where an fp8 plan sizes every linear layer in FP8 (47.78 GiB per GPU at TP 8 for what would be about 56
        with BF16 attention); which modules stay BF16 is in its config's modules_to_not_convert (vLLM
        fbgemm_fp8.py), which the table does not give."""
        return _readable(self.method, self.weight_bits, self.vllm_quantization, self.group_size)

    @property
    def multi_gpu_bad(self) -> bool:
        """The table marks it bad on more than one GPU per replica (gpuopt_use `avoid-multi-gpu: ...`)."""
        return self.use.startswith("avoid-multi-gpu")

    def caution(self, gpus: int) -> str | None:
        """Why serving this checkpoint with `gpus` GPUs per replica (TP x PP) is a bad idea, quoting the row's
        gpuopt_use (`avoid: <reason>`, or `avoid-multi-gpu: <reason>` with more than one GPU); None when the
        table has nothing against it. Planning with a model the user named is their choice: fit and solve
        warn with this; only the planner's own multi-GPU shapes of an avoid-multi-gpu checkpoint are refused."""
        mark, _, reason = self.use.partition(":")
        mark, reason = mark.strip(), reason.strip() or "no reason given"
        if self.multi_gpu_bad and gpus > 1:
            return (f"{self.checkpoint} is marked avoid-multi-gpu in {TABLE}: {reason}; this shape has {gpus} GPUs "
                    "per replica, serve it on one")
        if mark == "avoid":
            return f"{self.checkpoint} is marked avoid in {TABLE}: {reason}"
        return None


@cache
def _readable(method: str, weight_bits: int | None, vllm_quantization: str, group_size: str) -> bool:
    return described(method, weight_bits, vllm_quantization, group_size) is not None


@cache
def table() -> tuple[Checkpoint, ...]:
    return tuple(Checkpoint(base_model=r["base_model"], checkpoint=r["checkpoint"], method=r["method"],
                            weight_bits=int(r["weight_bits"]) if r["weight_bits"].isdigit() else None,
                            group_size=r["group_size"], activation=r["activation"],
                            vllm_quantization=r["vllm_quantization"], use=r["gpuopt_use"], source=r["source"])
                 for r in data_csv("quantized_checkpoints.csv"))


@cache
def _by_id() -> dict[str, Checkpoint]:
    by_id: dict[str, Checkpoint] = {}
    for c in table():
        by_id.setdefault(c.checkpoint.lower(), c)  # the first row of an id, as a scan would find it
    return by_id


def find(checkpoint_id: str) -> Checkpoint | None:
    """The row of this checkpoint id (Hugging Face ids are case-insensitive), or None. A dict lookup: the memory
    model asks it for every shape it estimates (caution)."""
    return _by_id().get(checkpoint_id.lower())


def caution(model_id: str, gpus: int) -> str | None:
    """Checkpoint.caution of the model's row, or None when the model is not a checkpoint of the table."""
    row = find(model_id)
    return None if row is None else row.caution(gpus)
