"""Arrays and tensors as the runtime sees them: an address, an element count and a dtype.

numpy arrays and torch CPU tensors are taken as they are when they are contiguous; others are
copied into a contiguous buffer first (and an in-place result is copied back). The runtime's
dtypes are u8..u64, i8..i64, f16, bf16, f32, f64; anything else is a TypeError naming the call.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

_NUMPY_DTYPES = {
    np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
}


def _torch_dtypes() -> dict:
    torch = sys.modules["torch"]
    names = {"uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
             "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
             "uint16": "u16", "uint32": "u32", "uint64": "u64"}
    return {getattr(torch, n): d for n, d in names.items() if hasattr(torch, n)}


def is_tensor(x: Any) -> bool:
    """Is `x` a torch tensor (without importing torch when it is not loaded)?"""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


@dataclass
class Buffer:
    """The memory of one array or tensor, contiguous, with what the runtime needs to know."""

    array: Any        # what the runtime reads or writes: `original` or a contiguous copy of it
    original: Any     # what the caller passed
    address: int
    count: int
    dtype: str        # the runtime's name: "f32", ...

    @property
    def copied(self) -> bool:
        return self.array is not self.original

    def empty_like(self) -> "Buffer":
        """A new contiguous buffer of the same shape and dtype."""
        if is_tensor(self.array):
            return wrap(sys.modules["torch"].empty_like(self.array), "")
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


def wrap(x: Any, call: str) -> Buffer:
    """`x` as a Buffer; `call` ("kungfu.allreduce") names the caller in errors."""
    if is_tensor(x):
        if x.device.type != "cpu":
            raise TypeError(f"{call}: a {x.device.type} tensor; kungfu's collectives take CPU "
                            "tensors here (GPU tensors go through the GPU paths, which need a "
                            "build with CUDA and a device)")
        dtype = _torch_dtypes().get(x.dtype)
        if dtype is None:
            raise TypeError(f"{call}: dtype {x.dtype} is not one the runtime has (uint8, int8, "
                            "int16, int32, int64, float16, bfloat16, float32, float64)")
        array = x if x.is_contiguous() else x.contiguous()
        return Buffer(array, x, array.data_ptr(), array.numel(), dtype)
    if isinstance(x, np.ndarray):
        dtype = _NUMPY_DTYPES.get(x.dtype)
        if dtype is None:
            raise TypeError(f"{call}: dtype {x.dtype} is not one the runtime has (uint8..uint64, "
                            "int8..int64, float16, float32, float64)")
        array = x if x.flags.c_contiguous else np.ascontiguousarray(x)
        return Buffer(array, x, array.__array_interface__["data"][0], array.size, dtype)
    raise TypeError(f"{call}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def writable(x: Any, call: str) -> None:
    """Raises ValueError when an in-place call gets read-only memory."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{call}: the array is read-only; pass inplace=False")
