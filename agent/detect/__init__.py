"""Hardware detection for the operator agent.

``detect_capabilities()`` describes the machine once, at registration and whenever it may have
changed; ``Capabilities.to_dict()`` is the capabilities JSON the hub stores. ``detect_gpu_state()``
is the cheap per-GPU sample sent with every heartbeat.

GPUs are looked for in a fixed order, and the first source that finds one wins:

1. NVML through ``pynvml`` (package nvidia-ml-py): every field, including compute capability;
2. GPUtil: names, VRAM, driver, load, temperature;
3. ``nvidia-smi``: ``--query-gpu`` CSV, then ``-q -x``, ``-q``, then the table with ``-L``;
4. ``rocm-smi`` (AMD): JSON, then CSV, then ``--showproductname``;
5. macOS ``system_profiler SPDisplaysDataType``;
6. none: a CPU-only node, ``gpu_source`` "none".

Every step that was skipped or failed leaves a line in ``detection.notes``. Every value no tool
reported is null: the hub gates work on these figures, so nothing is guessed.

Modules: ``model`` (the dataclasses), ``nvidia_smi``, ``rocm_smi``, ``macos`` and ``cpu`` (pure
parsers from tool text), ``values`` (placeholders and units), ``tools`` (the injectable ``Host``:
process runner with timeouts, ``which``, module import), ``sources`` (one function per GPU
source), ``system`` (CPU, RAM, disk, OS, sandboxes) and ``capabilities`` (the two entry points).
"""

from agent.detect.capabilities import detect_capabilities, detect_gpu_state
from agent.detect.model import CPU, GPU, Capabilities, OSInfo
from agent.detect.tools import Host, ToolFailed, ToolOutput

__all__ = [
    "CPU",
    "GPU",
    "Capabilities",
    "Host",
    "OSInfo",
    "ToolFailed",
    "ToolOutput",
    "detect_capabilities",
    "detect_gpu_state",
]
