"""Making every worker's model and optimizer the same: broadcasts of parameters, optimizer state
and any picklable object from one root."""

from __future__ import annotations

import io
import pickle
from typing import Any, Iterable, Mapping, Optional, Tuple, Union

import numpy as np
import torch

import kungfu

Named = Union[Mapping[str, torch.Tensor], Iterable[Tuple[str, torch.Tensor]]]


def broadcast_parameters(params: Named, root: int = 0) -> None:
    """Overwrites every worker's tensors with root's, in place: a model's state_dict() or
    named_parameters(). Tensors are matched by name, so the order does not matter."""
    items = params.items() if isinstance(params, Mapping) else params
    handles = []
    for name, tensor in items:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"kungfu.torch.broadcast_parameters: {name} is a "
                            f"{type(tensor).__name__}, not a tensor")
        target = tensor.data if tensor.requires_grad else tensor
        handles.append(kungfu.broadcast_async(target, root, inplace=True,
                                              name=f"kungfu.params/{name}"))
    for h in handles:
        h.wait()


def broadcast_object(obj: Any, root: int = 0, name: Optional[str] = None) -> Any:
    """Root's `obj` on every worker (pickled; tensors inside are saved with torch.save)."""
    base = name or "kungfu.object"
    data = np.zeros(0, dtype=np.uint8)
    if kungfu.rank() == root:
        buffer = io.BytesIO()
        torch.save(obj, buffer, pickle_protocol=pickle.HIGHEST_PROTOCOL)
        data = np.frombuffer(buffer.getvalue(), dtype=np.uint8).copy()
    size = kungfu.broadcast(np.array([data.size], dtype=np.int64), root, name=f"{base}/size")
    if kungfu.rank() != root:
        data = np.zeros(int(size[0]), dtype=np.uint8)
    data = kungfu.broadcast(data, root, name=f"{base}/bytes")
    return torch.load(io.BytesIO(data.tobytes()))


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root: int = 0) -> None:
    """Every worker's optimizer takes root's state and hyperparameters (momentum buffers, Adam's
    moments, learning rates), including a worker that has not stepped yet."""
    state = broadcast_object(optimizer.state_dict(), root, name="kungfu.optimizer_state")
    if kungfu.rank() != root:
        optimizer.load_state_dict(state)
