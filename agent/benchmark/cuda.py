"""The NVIDIA driver API through ctypes: enough to load PTX, launch it, time it and allocate.

Why the driver and not a toolkit: every machine with an NVIDIA GPU has `libcuda` (it comes with
the driver), and the driver compiles PTX text itself. So the benchmark needs no CUDA toolkit, no
compiler and no image pull, and measures the same on a laptop as in a container given the GPU.
Only the calls the benchmark makes are declared; each failure raises CudaError with the
driver's own name for it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# CUdevice_attribute values (cuda.h); stable since they were introduced.
_ATTR_CLOCK_RATE_KHZ = 13
_ATTR_MULTIPROCESSOR_COUNT = 16
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76
# CUjit_option values for the JIT's error log.
_JIT_ERROR_LOG_BUFFER = 5
_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CUDA_ERROR_OUT_OF_MEMORY = 2


class CudaError(Exception):
    """A driver call failed; `code` is its CUresult."""

    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__(f"{call} failed: {name} ({code})")
        self.call = call
        self.code = code


class NoDriver(Exception):
    """No NVIDIA driver library can be loaded here."""


@dataclass(frozen=True)
class Device:
    ordinal: int
    name: str
    total_bytes: int
    multiprocessors: int
    compute_capability: tuple[int, int]
    clock_khz: int


class Driver:
    """One loaded `libcuda`, initialised."""

    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as exc:
            raise NoDriver(f"no NVIDIA driver library ({library}): {exc}") from exc
        self._call("cuInit", ctypes.c_uint(0))

    def _name_of(self, code: int) -> str:
        text = ctypes.c_char_p()
        if self._lib.cuGetErrorName(code, ctypes.byref(text)) == 0 and text.value:
            return text.value.decode()
        return "CUDA_ERROR_UNKNOWN"

    def _call(self, name: str, *args: object) -> None:
        code = getattr(self._lib, name)(*args)
        if code != 0:
            raise CudaError(name, code, self._name_of(code))

    # -- devices ----------------------------------------------------------------------------

    def device_count(self) -> int:
        count = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def _attribute(self, handle: ctypes.c_int, attribute: int) -> int:
        value = ctypes.c_int()
        self._call("cuDeviceGetAttribute", ctypes.byref(value), attribute, handle)
        return value.value

    def device(self, ordinal: int) -> Device:
        handle = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(handle), ordinal)
        name = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", name, 256, handle)
        total = ctypes.c_size_t()
        self._call("cuDeviceTotalMem_v2", ctypes.byref(total), handle)
        return Device(
            ordinal=ordinal,
            name=name.value.decode(errors="replace"),
            total_bytes=total.value,
            multiprocessors=self._attribute(handle, _ATTR_MULTIPROCESSOR_COUNT),
            compute_capability=(
                self._attribute(handle, _ATTR_CC_MAJOR),
                self._attribute(handle, _ATTR_CC_MINOR),
            ),
            clock_khz=self._attribute(handle, _ATTR_CLOCK_RATE_KHZ),
        )

    @contextmanager
    def context(self, ordinal: int) -> Iterator[Context]:
        """The device's primary context, current on this thread while the block runs."""
        handle = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(handle), ordinal)
        ctx = ctypes.c_void_p()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), handle)
        try:
            self._call("cuCtxSetCurrent", ctx)
            yield Context(self)
        finally:
            self._lib.cuCtxSetCurrent(None)
            self._lib.cuDevicePrimaryCtxRelease_v2(handle)


class Context:
    """What runs inside a current context: modules, kernels, memory, events."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._call = driver._call

    def memory_info(self) -> tuple[int, int]:
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self._call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    # -- code -------------------------------------------------------------------------------

    def load_ptx(self, ptx: str) -> ctypes.c_void_p:
        """Compile PTX with the driver's JIT; its log is in the error if it refuses."""
        module = ctypes.c_void_p()
        log = ctypes.create_string_buffer(8192)
        options = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(8192))
        try:
            self._call(
                "cuModuleLoadDataEx",
                ctypes.byref(module),
                ctypes.c_char_p(ptx.encode() + b"\0"),
                2,
                options,
                values,
            )
        except CudaError as exc:
            detail = log.value.decode(errors="replace").strip()
            raise CudaError(f"cuModuleLoadDataEx ({detail})", exc.code, str(exc)) from exc
        return module

    def function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        function = ctypes.c_void_p()
        self._call("cuModuleGetFunction", ctypes.byref(function), module, name.encode())
        return function

    def unload(self, module: ctypes.c_void_p) -> None:
        self._call("cuModuleUnload", module)

    def launch(
        self, function: ctypes.c_void_p, grid: int, block: int, args: list[ctypes._SimpleCData]
    ) -> None:
        pointers = (ctypes.c_void_p * len(args))(
            *[ctypes.cast(ctypes.byref(arg), ctypes.c_void_p) for arg in args]
        )
        self._call("cuLaunchKernel", function, grid, 1, 1, block, 1, 1, 0, None, pointers, None)

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize")

    # -- memory -----------------------------------------------------------------------------

    def alloc(self, size: int) -> int:
        pointer = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(size))
        return pointer.value

    def free(self, pointer: int) -> None:
        self._call("cuMemFree_v2", ctypes.c_uint64(pointer))

    def memset32(self, pointer: int, value: int, count: int) -> None:
        self._call(
            "cuMemsetD32_v2", ctypes.c_uint64(pointer), ctypes.c_uint(value), ctypes.c_size_t(count)
        )

    def copy_to_host(self, pointer: int, size: int) -> bytes:
        buffer = ctypes.create_string_buffer(size)
        self._call("cuMemcpyDtoH_v2", buffer, ctypes.c_uint64(pointer), ctypes.c_size_t(size))
        return buffer.raw

    def copy_device(self, dst: int, src: int, size: int) -> None:
        self._call(
            "cuMemcpyDtoD_v2", ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(size)
        )

    # -- time -------------------------------------------------------------------------------

    @contextmanager
    def timed(self) -> Iterator[list[float]]:
        """Milliseconds of GPU time between entering and leaving, by the driver's events."""
        start, stop = ctypes.c_void_p(), ctypes.c_void_p()
        self._call("cuEventCreate", ctypes.byref(start), 0)
        self._call("cuEventCreate", ctypes.byref(stop), 0)
        elapsed: list[float] = []
        try:
            self._call("cuEventRecord", start, None)
            yield elapsed
            self._call("cuEventRecord", stop, None)
            self._call("cuEventSynchronize", stop)
            ms = ctypes.c_float()
            self._call("cuEventElapsedTime", ctypes.byref(ms), start, stop)
            elapsed.append(ms.value)
        finally:
            self._driver._lib.cuEventDestroy_v2(start)
            self._driver._lib.cuEventDestroy_v2(stop)
