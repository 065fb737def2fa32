"""Measures a task module's model on this machine and writes a model profile file in kfsim's
schema (scenarios/README.md "Profile files", sim/scenario/profile_file.cc):

    python3 -m kungfu.torch.profile examples/fashion_cnn.py --device cpu --batch 32 \\
        --repeat 20 --out fashion_cnn.cpu.yaml

then, in a scenario: `workload: {profile: fashion_cnn.cpu.yaml, device: cpu}` (or return the
path from the task module's profile()).

What it writes: `name` (the module's stem) and one layer per module that owns trainable
parameters, in forward order (the order of the modules' first calls), each with `parameters`
(the module's own trainable elements: they sum to the model's), `times: {DEVICE: {forward,
backward}}` per sample, and `forward_gflops` per sample when every such module is a Conv or a
Linear layer (2 x multiply-adds, bias included; the schema wants FLOPs on every layer or none).

How it times: a forward hook on every parameter-owning module stamps the clock when the module
returns, and a hook on its output's gradient stamps the clock when the backward pass reaches it.
A layer's forward time is from the previous layer's stamp (the start of the pass for the first
layer) to its own: the parameter-free modules and functional code between two layers (ReLU,
pooling, flatten) are folded into the layer after them, since the schema requires at least one
parameter per layer; what follows the last layer (the loss included) is folded into the last
layer. The backward pass is folded the same way (a layer's backward time runs from its output's
gradient to the previous layer's output's gradient, so it includes the backward of the
parameter-free modules before it; the loss's backward goes to the last layer). So the layers'
times add up to the measured pass. --warmup passes are run first, then --repeat passes, each on
--batch samples from the training set; each layer's time is the median over the passes, divided
by the batch. The model runs in training mode on torch's CPU kernels with --threads threads.

When the forward order differs from the model's named_parameters order (the order a gradient
vector is laid out in) the profile keeps the forward order and a warning says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch

__all__ = ["LayerTimes", "measure", "to_yaml", "main"]


class LayerTimes:
    """One layer of the profile: its name, parameters, per-sample times (seconds) and FLOPs."""

    def __init__(self, name: str, module: torch.nn.Module, parameters: int) -> None:
        self.name, self.module, self.parameters = name, module, parameters
        self.forward: List[float] = []
        self.backward: List[float] = []
        self.gflops: Optional[float] = None

    @property
    def forward_s(self) -> float:
        return statistics.median(self.forward)

    @property
    def backward_s(self) -> float:
        return statistics.median(self.backward)


def _gflops(module: torch.nn.Module, output: torch.Tensor) -> Optional[float]:
    """Forward GFLOPs per sample of a Conv or Linear layer (2 per multiply-add), else None."""
    if isinstance(module, torch.nn.Linear):
        per_out = module.in_features * 2 + (1 if module.bias is not None else 0)
        outputs = output[0].numel() if output.dim() > 1 else output.numel()
        return per_out * outputs / 1e9
    if isinstance(module, torch.nn.modules.conv._ConvNd):
        kernel = 1
        for k in module.kernel_size:
            kernel *= k
        per_out = 2 * (module.in_channels // module.groups) * kernel + (
            1 if module.bias is not None else 0)
        return per_out * output[0].numel() / 1e9
    return None


def _first_tensor(value: Any) -> Optional[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for v in value:
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def measure(model: torch.nn.Module, loss_fn: Any, x: torch.Tensor, y: torch.Tensor,
            repeat: int = 10, warmup: int = 3) -> List[LayerTimes]:
    """Each parameter-owning module's per-sample forward and backward times (see the module's
    docstring), in forward order."""
    owners = []
    for name, module in model.named_modules():
        own = sum(p.numel() for p in module.parameters(recurse=False) if p.requires_grad)
        if own:
            owners.append((name or type(module).__name__, module, own))
    layers = {id(m): LayerTimes(n, m, own) for n, m, own in owners}
    calls: List[tuple] = []  # (layer, forward stamp, output tensor) in call order
    grads: Dict[int, float] = {}  # call index -> when its output's gradient was ready

    def forward_hook(module: torch.nn.Module, _inputs: Any, output: Any) -> None:
        now = time.perf_counter()
        layer = layers[id(module)]
        out = _first_tensor(output)
        index = len(calls)
        calls.append((layer, now, out))
        if layer.gflops is None and out is not None:
            layer.gflops = _gflops(module, out)
        if out is not None and out.requires_grad:
            def stamp(_grad: torch.Tensor, i: int = index) -> None:
                grads.setdefault(i, time.perf_counter())
            out.register_hook(stamp)

    handles = [m.register_forward_hook(forward_hook) for _, m, _ in owners]
    order: List[LayerTimes] = []
    try:
        model.train()
        for run in range(warmup + repeat):
            calls.clear()
            grads.clear()
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            loss = loss_fn(model(x), y)
            t_forward = time.perf_counter()
            loss.backward()
            t_end = time.perf_counter()
            if not calls:
                raise RuntimeError("the model called none of its parameter-owning modules")
            if run == 0:
                seen = set()
                for layer, _, _ in calls:
                    if id(layer) not in seen:
                        seen.add(id(layer))
                        order.append(layer)
            if run < warmup:
                continue
            forward = {id(l): 0.0 for l in order}
            backward = {id(l): 0.0 for l in order}
            previous = t0
            last = len(calls) - 1
            for i, (layer, stamp, _) in enumerate(calls):
                end = t_forward if i == last else stamp
                forward[id(layer)] += max(0.0, end - previous)
                previous = end
                # Backward: from this call's output gradient to the previous call's (or the end).
                begin = t_forward if i == last else grads.get(i, t_forward)
                until = grads.get(i - 1, t_end) if i > 0 else t_end
                backward[id(layer)] += max(0.0, until - begin)
            for layer in order:
                layer.forward.append(forward[id(layer)] / len(x))
                layer.backward.append(backward[id(layer)] / len(x))
    finally:
        for h in handles:
            h.remove()
    return order


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3f}us"


def to_yaml(name: str, device: str, layers: Sequence[LayerTimes]) -> str:
    """The profile file's text."""
    flops = all(l.gflops is not None for l in layers)
    lines = [f"# Measured by python3 -m kungfu.torch.profile: per-sample times on {device}.",
             f"name: {name}", "layers:"]
    for l in layers:
        fields = [f"name: {json.dumps(l.name)}", f"parameters: {l.parameters}"]
        if flops:
            fields.append(f"forward_gflops: {l.gflops:.9g}")
        fields.append(f"times: {{{device}: {{forward: {_us(l.forward_s)}, "
                      f"backward: {_us(l.backward_s)}}}}}")
        lines.append("  - {" + ", ".join(fields) + "}")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command; exit code 2 for an unusable task module."""
    ap = argparse.ArgumentParser(prog="python3 -m kungfu.torch.profile",
                                 description="Profiles a task module's model for kfsim.")
    ap.add_argument("module", help="the task module: a .py file or an importable module name")
    ap.add_argument("--device", default="cpu", help="the device's name in the profile")
    ap.add_argument("--batch", type=int, default=32, help="samples per pass")
    ap.add_argument("--repeat", type=int, default=10, help="timed passes (the median is kept)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed passes first")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--name", help="the profile's name (default: the module's stem)")
    ap.add_argument("--out", type=Path, help="the profile file (default: stdout)")
    a = ap.parse_args(argv)
    if a.batch < 1 or a.repeat < 1 or a.warmup < 0:
        ap.error("--batch and --repeat must be at least 1, --warmup at least 0")
    if not a.device.replace("_", "").replace("-", "").isalnum():
        ap.error(f"--device {a.device!r}: letters, digits, - and _ only")
    from kungfu.torch.task import TaskError, load
    torch.set_num_threads(a.threads)
    try:
        task = load(a.module)
        model = task.model(a.seed)
        x, y = task.data(True)
    except TaskError as e:
        print(f"kungfu.torch.profile: {e}", file=sys.stderr)
        return 2
    x, y = x[:a.batch], y[:a.batch]
    layers = measure(model, task.loss, x, y, repeat=a.repeat, warmup=a.warmup)
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    counted = sum(l.parameters for l in layers)
    if counted != total:
        print(f"kungfu.torch.profile: the forward pass used modules with {counted} of the model's "
              f"{total} trainable parameters", file=sys.stderr)
        return 1
    by_params = []
    for name, _ in model.named_parameters():
        owner = name.rsplit(".", 1)[0] if "." in name else type(model).__name__
        if owner not in by_params:
            by_params.append(owner)
    if [l.name for l in layers] != by_params:
        print("kungfu.torch.profile: warning: the forward order of the layers differs from "
              "named_parameters' order", file=sys.stderr)
    name = a.name or Path(a.module).stem
    text = to_yaml(name, a.device, layers)
    if a.out is None:
        sys.stdout.write(text)
    else:
        a.out.write_text(text)
        forward = sum(l.forward_s for l in layers)
        backward = sum(l.backward_s for l in layers)
        print(f"kungfu.torch.profile: {a.out}: {len(layers)} layers, {total} parameters, "
              f"{_us(forward)} forward + {_us(backward)} backward per sample on {a.device}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
