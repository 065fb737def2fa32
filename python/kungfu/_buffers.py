"""Arrays and tensors as the runtime sees them: an address, an element count and a dtype.

numpy arrays and torch CPU tensors are taken as they are when they are contiguous; others are
copied into a contiguous buffer first (and an in-place result is copied back). The runtime's
dtypes are u8..u64, i8..i64, f16, bf16, f32, f64; anything else is a TypeError naming the call.

CUDA memory (torch CUDA tensors, and any array with __cuda_array_interface__: CuPy, Numba) is
taken by allreduce only, through the GPU paths; its Buffer carries the device and the producer's
stream, which the runtime waits for before it reads.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

_NUMPY_DTYPES = {
    np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
}


_TORCH_DTYPES: Optional[dict] = None


def _torch_dtypes() -> dict:
    """torch's dtypes the runtime has, by the runtime's names (made once torch is loaded)."""
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        torch = sys.modules["torch"]
        names = {"uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                 "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
                 "uint16": "u16", "uint32": "u32", "uint64": "u64"}
        _TORCH_DTYPES = {getattr(torch, n): d for n, d in names.items() if hasattr(torch, n)}
    return _TORCH_DTYPES


def is_tensor(x: Any) -> bool:
    """Is `x` a torch tensor (without importing torch when it is not loaded)?"""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def cpu_tensor(x: Any) -> Optional[tuple[int, int, str]]:
    """(address, element count, dtype) of `x` as it is, when it is a contiguous CPU torch tensor
    of a dtype the runtime has; None for anything else (wrap() then copies it or raises)."""
    if not is_tensor(x) or x.device.type != "cpu" or not x.is_contiguous():
        return None
    dtype = _torch_dtypes().get(x.dtype)
    return None if dtype is None else (x.data_ptr(), x.numel(), dtype)


@dataclass
class Buffer:
    """The memory of one array or tensor, contiguous, with what the runtime needs to know."""

    array: Any        # what the runtime reads or writes: `original` or a contiguous copy of it
    original: Any     # what the caller passed
    address: int
    count: int
    dtype: str        # the runtime's name: "f32", ...
    device: Optional[int] = None  # CUDA memory: the device ordinal (-1: the worker's default)
    stream: int = 0               # CUDA memory: the producer's stream (0: the legacy default)

    @property
    def copied(self) -> bool:
        return self.array is not self.original

    def empty_like(self) -> "Buffer":
        """A new contiguous buffer of the same shape and dtype."""
        if is_tensor(self.array):
            return wrap(sys.modules["torch"].empty_like(self.array), "", device_ok=True)
        return wrap(np.empty_like(self.array), "")

    def stacked(self, n: int) -> "Buffer":
        """A new contiguous buffer of shape (n, *shape)."""
        shape = (n, *tuple(self.array.shape))
        if is_tensor(self.array):
            torch = sys.modules["torch"]
            return wrap(torch.empty(shape, dtype=self.array.dtype), "")
        return wrap(np.empty(shape, dtype=self.array.dtype), "")

    def write_back(self) -> None:
        """After an in-place operation on a copy: the result into the caller's array."""
        if not self.copied:
            return
        if is_tensor(self.original):
            self.original.copy_(self.array)
        else:
            self.original[...] = self.array


_CUDA_TYPESTRS = {"|u1": "u8", "<u2": "u16", "<u4": "u32", "<u8": "u64", "|i1": "i8",
                  "<i2": "i16", "<i4": "i32", "<i8": "i64", "<f2": "f16", "<f4": "f32",
                  "<f8": "f64"}


def _no_device(call: str) -> TypeError:
    return TypeError(f"{call}: CUDA memory: only kungfu.allreduce takes it (through the GPU "
                     "paths); copy it to the CPU for this collective")


def wrap(x: Any, call: str, device_ok: bool = False) -> Buffer:
    """`x` as a Buffer; `call` ("kungfu.allreduce") names the caller in errors. CUDA memory only
    where `device_ok`."""
    if is_tensor(x):
        dtype = _torch_dtypes().get(x.dtype)
        if dtype is None:
            raise TypeError(f"{call}: dtype {x.dtype} is not one the runtime has (uint8, int8, "
                            "int16, int32, int64, float16, bfloat16, float32, float64)")
        if x.device.type == "cuda":
            if not device_ok:
                raise _no_device(call)
            torch = sys.modules["torch"]
            array = x if x.is_contiguous() else x.contiguous()
            stream = torch.cuda.current_stream(x.device).cuda_stream
            return Buffer(array, x, array.data_ptr(), array.numel(), dtype,
                          device=x.device.index, stream=stream)
        if x.device.type != "cpu":
            raise TypeError(f"{call}: a {x.device.type} tensor; kungfu takes CPU and CUDA "
                            "tensors")
        array = x if x.is_contiguous() else x.contiguous()
        return Buffer(array, x, array.data_ptr(), array.numel(), dtype)
    interface = getattr(x, "__cuda_array_interface__", None)
    if interface is not None:
        if not device_ok:
            raise _no_device(call)
        dtype = _CUDA_TYPESTRS.get(interface.get("typestr"))
        if dtype is None:
            raise TypeError(f"{call}: CUDA array of typestr {interface.get('typestr')!r} is not "
                            "a dtype the runtime has")
        shape = tuple(interface.get("shape", ()))
        count = int(np.prod(shape)) if shape else 1
        strides = interface.get("strides")
        itemsize = int(interface["typestr"][2:])
        if strides is not None and tuple(strides) != _c_strides(shape, itemsize):
            raise TypeError(f"{call}: a non-contiguous CUDA array; pass a contiguous one")
        stream = interface.get("stream") or 0
        return Buffer(x, x, int(interface["data"][0]), count, dtype, device=-1,
                      stream=int(stream))
    if isinstance(x, np.ndarray):
        dtype = _NUMPY_DTYPES.get(x.dtype)
        if dtype is None:
            raise TypeError(f"{call}: dtype {x.dtype} is not one the runtime has (uint8..uint64, "
                            "int8..int64, float16, float32, float64)")
        array = x if x.flags.c_contiguous else np.ascontiguousarray(x)
        return Buffer(array, x, array.__array_interface__["data"][0], array.size, dtype)
    raise TypeError(f"{call}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def writable(x: Any, call: str) -> None:
    """Raises ValueError when an in-place call gets read-only memory."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{call}: the array is read-only; pass inplace=False")
