"""ComputePool operator agent. Imports nothing of the hub: it speaks HTTP."""

__version__ = "0.1.0"
