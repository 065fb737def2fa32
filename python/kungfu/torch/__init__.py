"""kungfu.torch: KungFu's distributed training for PyTorch.

    import kungfu, kungfu.torch as kt
    kungfu.init()
    optimizer = kt.SynchronousSGDOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                           named_parameters=model.named_parameters())
    kt.broadcast_parameters(model.state_dict())

Optimizers wrap any torch.optim.Optimizer: SynchronousSGDOptimizer (also DistributedOptimizer,
Horovod's name) averages gradients with named allreduces started from gradient hooks, so
communication overlaps the backward pass; SynchronousAveragingOptimizer (SMA) averages models;
AdaptiveSGDOptimizer runs SMA, then S-SGD from a step on; PairAveragingOptimizer (AD-PSGD)
averages with one random peer's model through the peer-to-peer store. Monitors: GradientNoiseScale and
GradientVariance, on the runtime's estimators. Policies: PolicyRunner runs the C++ policies by name
(adaptive_batch_size, adaptive_strategy, elastic_provisioning, scheduled_resize) and BasePolicy
subclasses through the agreement round of kfsim and kftrain (kungfu.torch.policies). Importing it
registers the torch.distributed backend "kungfu" (kungfu.torch.distributed).

Task modules (kungfu.torch.task): a file with model() and data(train) (optionally loss() and
profile()), such as examples/fashion_cnn.py, runs in both worlds with the same math:

    kfrun -np 4 /usr/bin/python3 -m kungfu.torch.train examples/fashion_cnn.py --optimizer sma \
        --batch 32 --steps 200 --eval-every 50 --out runs/real      # real processes
    python3 -m kungfu.torch.profile examples/fashion_cnn.py --device cpu --out cnn.cpu.yaml
    kfsim scenario.yaml        # workload: {torch: {module: examples/fashion_cnn.py}}, or
                               # workload: {profile: cnn.cpu.yaml, device: cpu}

kungfu.torch.train uses kfsim's sampler (kungfu._core.ShardSampler) and local update rule
(kungfu.torch.local.LocalOptimizer, the C++ kf::LocalOptimizer), so a seeded S-SGD run takes
kfsim's steps; its docstring lists where the worlds cannot agree bit for bit.
"""

from kungfu.torch import distributed as _distributed
from kungfu.torch.monitors import GradientNoiseScale, GradientVariance
from kungfu.torch.ops import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from kungfu.torch.optimizers import (AdaptiveSGDOptimizer, DistributedOptimizer,
                                     PairAveragingOptimizer, SynchronousAveragingOptimizer,
                                     SynchronousSGDOptimizer)
from kungfu.torch.policies import (BasePolicy, PolicyRunner, Resize, SetBatchSize,
                                   SetLearningRate, StepMetrics, StopTraining, SwitchStrategy,
                                   TrainingState)

__all__ = [
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
    "SynchronousSGDOptimizer", "DistributedOptimizer", "SynchronousAveragingOptimizer",
    "AdaptiveSGDOptimizer", "PairAveragingOptimizer", "GradientNoiseScale", "GradientVariance",
    "PolicyRunner", "BasePolicy", "TrainingState", "StepMetrics", "SwitchStrategy", "Resize",
    "SetBatchSize", "SetLearningRate", "StopTraining",
]

_distributed.register()  # torch.distributed.init_process_group("kungfu")
