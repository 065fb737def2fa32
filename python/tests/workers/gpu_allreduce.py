"""CUDA memory through kungfu.allreduce. Modes:
  no-device   where no CUDA device can be used: an allreduce of CUDA memory raises DeviceError
              with the reason; other collectives refuse CUDA memory with a TypeError
  device [S]  where one can: every worker allreduces device memory (cudaMalloc'ed through
              ctypes, exposed by __cuda_array_interface__, and torch CUDA tensors when this torch
              has CUDA) with sum / max / avg over device strategy S (default NCCL), checked
              against the serial result
  count       prints the number of CUDA devices this process sees (no launcher needed)
"""

import ctypes
import ctypes.util
import sys

import numpy as np

import kungfu


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"rank {kungfu.rank()}: FAILED {what}", file=sys.stderr, flush=True)
        sys.exit(1)


def cudart() -> ctypes.CDLL:
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12",
                 "/usr/local/cuda/lib64/libcudart.so", "/usr/local/cuda/lib/libcudart.so.13",
                 ctypes.util.find_library("cudart")):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("no libcudart")


class DeviceArray:
    """float32 device memory with __cuda_array_interface__ (what CuPy and Numba arrays expose)."""

    def __init__(self, lib: ctypes.CDLL, host: np.ndarray):
        self.lib, self.shape = lib, host.shape
        self.ptr = ctypes.c_void_p()
        check(lib.cudaMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(host.nbytes)) == 0,
              "cudaMalloc")
        check(lib.cudaMemcpy(self.ptr, host.ctypes.data_as(ctypes.c_void_p),
                             ctypes.c_size_t(host.nbytes), 1) == 0, "cudaMemcpy to device")

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": "<f4", "data": (self.ptr.value, False),
                "version": 3, "strides": None, "stream": 1}

    def host(self) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.float32)
        check(self.lib.cudaMemcpy(out.ctypes.data_as(ctypes.c_void_p), self.ptr,
                                  ctypes.c_size_t(out.nbytes), 2) == 0, "cudaMemcpy to host")
        return out


class FakeDeviceArray:
    """An object that claims CUDA memory (never touched: the device check comes first)."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x1000, False),
                                "version": 3, "strides": None, "stream": 1}


def no_device() -> None:
    kungfu.init()
    why = kungfu._core.gpu_unavailable()
    check(why is not None, "this mode needs a machine without a usable CUDA device")
    try:
        kungfu.allreduce(FakeDeviceArray(), inplace=True)
        check(False, "no error for CUDA memory without a device")
    except kungfu.DeviceError as e:
        check("allreduce" in str(e) and ("no CUDA device" in str(e) or
                                         "built without CUDA" in str(e)), f"message {e}")
    for call in (lambda: kungfu.broadcast(FakeDeviceArray(), inplace=True),
                 lambda: kungfu.allgather(FakeDeviceArray())):
        try:
            call()
            check(False, "a host collective took CUDA memory")
        except TypeError as e:
            check("only kungfu.allreduce" in str(e), f"message {e}")
    try:
        kungfu.allreduce(FakeDeviceArray())
        check(False, "out-of-place allreduce of a non-torch CUDA array")
    except TypeError as e:
        check("inplace=True" in str(e), f"message {e}")
    kungfu.barrier()
    print("ok", flush=True)


def device(strategy: str = "NCCL") -> None:
    kungfu.init(device_strategy=strategy)
    why = kungfu._core.gpu_unavailable()
    check(why is None, f"no device: {why}")
    lib = cudart()
    r, n = kungfu.rank(), kungfu.size()
    host = np.arange(1000, dtype=np.float32) * (r + 1)
    for op, want in (("sum", np.arange(1000, dtype=np.float32) * (n * (n + 1) / 2)),
                     ("max", np.arange(1000, dtype=np.float32) * n),
                     ("avg", np.arange(1000, dtype=np.float32) * ((n + 1) / 2))):
        d = DeviceArray(lib, host)
        kungfu.allreduce(d, op, inplace=True, name=f"gpu.{op}")
        check(np.allclose(d.host(), want), f"{op}: {d.host()[:4]} want {want[:4]}")
    try:
        import torch
        if torch.cuda.is_available():
            t = torch.full((333,), float(r + 1), device=f"cuda:{kungfu.local_rank() % torch.cuda.device_count()}")
            out = kungfu.allreduce(t, "sum", name="gpu.torch")
            check(out.is_cuda and torch.allclose(out.cpu(), torch.full((333,), n * (n + 1) / 2)),
                  f"torch CUDA allreduce: {out[:4]}")
            print("torch CUDA tensors: checked", flush=True)
    except ImportError:
        pass
    print("ok", flush=True)


def count() -> None:
    n = ctypes.c_int(0)
    print(n.value if cudart().cudaGetDeviceCount(ctypes.byref(n)) == 0 else 0, flush=True)


if __name__ == "__main__":
    {"no-device": no_device, "device": device, "count": count}[sys.argv[1]](*sys.argv[2:])
