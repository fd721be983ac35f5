"""gpuopt: the GPU planner for LLM inference on vLLM.

Data flows one way: workload -> candidates (memory fit + latency) -> integer program -> Plan -> renderers.
"""

__version__ = "0.1.0"
