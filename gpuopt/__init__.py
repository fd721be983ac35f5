"""gpuopt: the GPU planner for LLM inference on vLLM.

Data flows one way: workload -> candidates (memory fit + latency) -> integer program -> Plan -> renderers.
"""

import os

# The planner's linear algebra is thousands of solves of a few hundred unknowns (physics/step_chain.py):
# OpenBLAS's worker threads spin between them and doubled a 10-workload solve's CPU time on two cores (9.0 s
# against 5.2 single-threaded), for nothing. One thread unless the user asked for more (setdefault); it
# takes effect only if numpy loads after gpuopt, which reads these once (the CLI always; a host program that
# imported numpy first keeps its own).
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

__version__ = "0.1.0"
