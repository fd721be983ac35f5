"""Which GPU generations a vLLM wheel carries CUDA kernels for.

    pip download vllm==X --no-deps -d /tmp/v && unzip /tmp/v/*.whl 'vllm/_C*.abi3.so' -d /tmp/v/src
    objcopy -O binary --only-section=.nv_fatbin /tmp/v/src/vllm/_C.abi3.so /tmp/v/fatbin
    python tools/extract_vllm_gpu_archs.py /tmp/v/fatbin

prints the SM architectures of the compiled kernels (cubins) and of the PTX in the library's fat binary. A GPU
runs vLLM's custom ops (RMSNorm, the KV-cache writes, activations) only if a cubin of its generation is there, or
PTX of an older one the driver can compile for it; vLLM 0.20.0+'s PyPI wheels (CUDA 13) have neither for sm70,
so a V100 stops at the first custom op ("no kernel image is available for execution on the device").
The result is copied into gpuopt/data/vllm_versions.yaml (`cubin_archs` per release profile).

The fat binary is a sequence of containers (magic 0xBA55ED50, a 16-byte header, then entries); each entry's
header gives its kind (1 PTX, 2 ELF cubin), its size and, at offset 28, the SM version -- the layout CUDA's
`fatbinary.h` and cuobjdump read; no CUDA toolkit is needed here.
"""

from __future__ import annotations

import struct
import sys
from collections import Counter
from pathlib import Path

MAGIC = struct.pack("<I", 0xBA55ED50)
KINDS = {1: "ptx", 2: "cubin"}


def architectures(fatbin: bytes) -> Counter[tuple[str, int]]:
    """(kind, SM version) -> entries, over every container in the fat binary."""
    found: Counter[tuple[str, int]] = Counter()
    at = 0
    while (at := fatbin.find(MAGIC, at)) >= 0:
        _version, header, size = struct.unpack_from("<HHQ", fatbin, at + 4)
        if header != 16 or size > len(fatbin):
            at += 4  # the magic bytes inside other data
            continue
        entry, end = at + header, at + header + size
        while entry < end:
            kind, _, entry_header, entry_size = struct.unpack_from("<HHIQ", fatbin, entry)
            if not entry_header or not entry_size:
                break
            found[(KINDS.get(kind, str(kind)), struct.unpack_from("<I", fatbin, entry + 28)[0])] += 1
            entry += entry_header + entry_size
        at = end
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    for (kind, sm), n in sorted(architectures(Path(argv[0]).read_bytes()).items(), key=lambda kv: kv[0][1]):
        print(f"sm{sm} {kind}: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
