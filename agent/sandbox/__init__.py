"""Running one job in isolation: Docker (runc or gVisor), bubblewrap, or, only when the operator
insists, nothing at all. See `select_sandbox`."""

from agent.sandbox.base import (
    OutputFile,
    RunRequest,
    RunResult,
    Sandbox,
    SandboxError,
    SandboxRefused,
    SandboxUnavailable,
)
from agent.sandbox.selection import available_sandboxes, select_sandbox

__all__ = [
    "OutputFile",
    "RunRequest",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxRefused",
    "SandboxUnavailable",
    "available_sandboxes",
    "select_sandbox",
]
