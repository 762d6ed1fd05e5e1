"""``FastPPO``: rsl_rl's PPO update with no host read per minibatch, captured as a CUDA graph on CUDA.

Same algorithm as rsl_rl's ``PPO`` (rsl-rl-lib 5.4/5.5) and the same hyperparameters: the clipped surrogate, the
(optionally clipped) value loss, the entropy bonus, the adaptive-KL learning rate, gradient clipping of the actor and
the critic, the optimiser, the observation normalisers, one ``randperm`` of the rollout shared by every epoch and the
actor's sample in each minibatch forward (the same random draws as stock). It keeps
:class:`~gym_graphreset.integrations.rsl_rl.FinalObsPPO`'s time-out bootstrap from the final observation.

What changes is where the numbers live. Stock reads the host three to six times per minibatch (three ``.item()``
of the losses, and with the adaptive schedule one to three comparisons of the KL with its targets); here:

- the learning rate is a 0-d float64 device tensor (``lr``), updated from the KL on the device with the same
  thresholds and the same float64 arithmetic as stock's Python floats, and handed to the optimiser as its tensor
  ``lr`` (Adam and AdamW; on CUDA with ``capturable=True``, so the step reads no host value);
- the losses are summed on the device in float64, in stock's order; the sums and the learning rate are read once
  per update (the logger needs them as floats);
- on CUDA (``cuda_graph=True``, the default) the whole minibatch step (gather, forward, KL and learning rate,
  losses, backward, gradient clipping, optimiser step, loss sums) is captured once as a CUDA graph after three
  eager warm-up steps and replayed for every minibatch. The graph reads a static copy of the rollout and a static
  index buffer (preallocated here beyond rsl_rl's ``RolloutStorage``, which is preallocated already and filled in
  place), and is captured again when the parameters or the optimiser state are replaced (``load``). Buffers that
  rsl_rl reassigns rather than writes in place (the normaliser's ``_std``) are copied back into the captured
  tensor before each update.

What it cannot run fast it runs as stock, and says so once (``warnings.warn``) and in :attr:`FastPPO.update_path`:
RND, symmetry, multi-GPU, mixed precision, a recurrent actor, an optimiser other than Adam/AdamW. An actor
whose head is not rsl_rl's Gaussian runs the device path eagerly (its sample cannot be captured), also with a
warning. A CUDA graph capture that fails raises, naming the error and ``cuda_graph=False`` (a failed capture
leaves CUDA's random generator unusable for the rest of the process).

On the CPU the update is the stock one operation for operation (same float operations in the same order): the
parameters, losses and learning rate after an update are bitwise stock's (tested).

Select it in the runner config: ``cfg["algorithm"]["class_name"] = "gym_graphreset.integrations.rsl_rl_fast:FastPPO"``
(``cfg["algorithm"]["cuda_graph"] = False`` keeps the device path eager), or ``gym-graphreset train --learner fast``.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Literal

import torch
from tensordict import TensorDict
from torch import nn

from gym_graphreset.integrations.rsl_rl import FinalObsPPO

__all__ = ["FastPPO", "UpdatePath"]

UpdatePath = Literal["graph", "eager", "stock"]
"""How :meth:`FastPPO.update` runs: a CUDA graph per minibatch step, eager on the device, or rsl_rl's own update."""

WARMUP_STEPS = 3
"""Eager minibatch steps (on a side stream) before the CUDA graph is captured, as PyTorch's capture recipe asks."""


@functools.cache
def normalizers_in_update() -> bool:
    """Whether rsl_rl updates the observation normalisers at the end of ``update`` (5.5; 5.4: ``process_env_step``)."""
    return tuple(int(p) for p in version("rsl-rl-lib").split(".")[:2]) >= (5, 5)


@dataclass(frozen=True)
class _Rollout:
    """The rollout flattened to ``(steps * envs, ...)``: what a minibatch gathers from."""

    observations: dict[str, torch.Tensor]
    actions: torch.Tensor
    values: torch.Tensor
    returns: torch.Tensor
    advantages: torch.Tensor
    old_log_prob: torch.Tensor
    old_params: tuple[torch.Tensor, ...]

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor, in a fixed order."""
        fixed = [self.actions, self.values, self.returns, self.advantages, self.old_log_prob]
        return [*self.observations.values(), *fixed, *self.old_params]


class FastPPO(FinalObsPPO):
    """rsl_rl's PPO with :class:`FinalObsPPO`'s bootstrap and an update without host reads per minibatch.

    See the module docstring for what is identical to stock and what changes.

    Args:
        actor: rsl_rl's actor model.
        critic: rsl_rl's critic model (not recurrent: the final-observation bootstrap needs that).
        storage: rsl_rl's ``RolloutStorage``.
        cuda_graph: On CUDA, capture the minibatch step as a CUDA graph (else run it eagerly on the device).
        **kwargs: rsl_rl's ``PPO`` arguments (its hyperparameters, unchanged).

    Attributes:
        update_path: ``"graph"``, ``"eager"`` or ``"stock"`` (:data:`UpdatePath`).
        fallback_reason: Why the update runs stock, or eagerly after a failed capture (``None`` otherwise).
    """

    learning_rate: float
    """The learning rate (a float, as stock's): read from the device once per update, written to it at the next."""

    def __init__(self, actor: Any, critic: Any, storage: Any, *, cuda_graph: bool = True, **kwargs: Any) -> None:
        if not isinstance(cuda_graph, bool):
            raise ValueError(f"`cuda_graph` must be True or False, got {cuda_graph!r}")
        super().__init__(actor, critic, storage, **kwargs)
        on_cuda = torch.device(self.device).type == "cuda"
        self.fallback_reason: str | None = self._unsupported()
        self._gaussian_head = self._gaussian()  # the actor's head is fixed: asked once, not per minibatch
        self.update_path: UpdatePath = "graph" if on_cuda and cuda_graph else "eager"
        if self.fallback_reason:
            self.update_path = "stock"
            warnings.warn(f"FastPPO runs rsl_rl's stock update: {self.fallback_reason}", stacklevel=2)
        elif self.update_path == "graph" and not self._gaussian_head:
            self.update_path = "eager"
            self.fallback_reason = "the actor's distribution is not a Gaussian one: its sample cannot be captured"
            warnings.warn(f"FastPPO runs the update eagerly on the device: {self.fallback_reason}", stacklevel=2)
        self._lr = torch.tensor(float(self.learning_rate), dtype=torch.float64, device=self.device)
        self._loss_sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._graph_inputs: list[torch.Tensor] = []
        self._pinned: list[tuple[nn.Module, str, torch.Tensor]] = []
        self._static: _Rollout | None = None
        self._index: torch.Tensor | None = None
        self._warm = 0
        if self.update_path != "stock":
            self._use_device_lr()

    def _gaussian(self) -> bool:
        """Whether the actor's head is rsl_rl's Gaussian (or heteroscedastic Gaussian): its sample is capturable."""
        from rsl_rl.modules.distribution import GaussianDistribution

        return isinstance(getattr(self.actor, "distribution", None), GaussianDistribution)

    def _unsupported(self) -> str | None:
        """Why the fast update cannot run this configuration, or ``None``."""
        if self.rnd:
            return "RND (rnd_cfg) adds a second optimiser and loss"
        if self.symmetry:
            return "symmetry augmentation changes the minibatch size"
        if self.is_multi_gpu:
            return "multi-GPU training reduces the KL and gradients across processes"
        if getattr(self, "use_mixed_precision", False):  # rsl-rl-lib >= 5.5 only
            return "mixed precision (use_mixed_precision) is not supported"
        if self.actor.is_recurrent:
            return "a recurrent actor trains on padded trajectories"
        if not isinstance(self.optimizer, torch.optim.Adam | torch.optim.AdamW):
            return f"the optimiser {type(self.optimizer).__name__} takes no device learning rate (Adam and AdamW do)"
        return None

    def _use_device_lr(self) -> None:
        """Give the optimiser the device learning rate (capturable on CUDA: its step then reads no host value)."""
        capturable = torch.device(self.device).type == "cuda"
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr
            group["capturable"] = capturable
        if capturable:  # a loaded stock checkpoint keeps Adam's step counts on the CPU
            for state in self.optimizer.state.values():
                if "step" in state and state["step"].device.type != "cuda":
                    state["step"] = state["step"].to(device=self.device, dtype=torch.float32)

    def save(self) -> dict:
        """rsl_rl's checkpoint, written as stock writes it: stock ``PPO`` loads it as its own.

        The learning rate is a float, Adam's step counts are on the CPU and its groups are not capturable.
        """
        saved = super().save()
        if self.update_path != "stock":
            optimizer = saved["optimizer_state_dict"]
            groups = [{**g, "lr": self.learning_rate, "capturable": False} for g in optimizer["param_groups"]]
            states = {k: {**v, "step": v["step"].cpu()} if "step" in v else v for k, v in optimizer["state"].items()}
            saved["optimizer_state_dict"] = {**optimizer, "param_groups": groups, "state": states}
        return saved

    def load(self, loaded_dict: dict, load_cfg: dict | None, strict: bool) -> bool:
        """rsl_rl's load; the device learning rate is installed again and the graph captured anew."""
        loaded = super().load(loaded_dict, load_cfg, strict)
        if self.update_path != "stock":
            self.learning_rate = float(self.learning_rate)
            self._use_device_lr()
            self._drop_graph()
        return loaded

    def update(self) -> dict[str, float]:
        """One PPO update over the stored rollout: rsl_rl's, with one host read (the losses and learning rate)."""
        if self.update_path == "stock":
            return super().update()
        st = self.storage
        num_mini_batches = self.num_mini_batches
        mini_batch_size = st.num_envs * st.num_transitions_per_env // num_mini_batches
        # stock's draw (RolloutStorage.mini_batch_generator): one permutation, shared by every epoch
        indices = torch.randperm(num_mini_batches * mini_batch_size, requires_grad=False, device=self.device)
        self._lr.fill_(self.learning_rate)  # the host value is the truth between updates (load, a user's change)
        self._loss_sums.zero_()
        rollout = self._flat_rollout()
        if self.update_path == "graph":
            rollout = self._prepare_graph(rollout, mini_batch_size)
        for _ in range(self.num_learning_epochs):
            for i in range(num_mini_batches):
                batch_index = indices[i * mini_batch_size : (i + 1) * mini_batch_size]
                if self.update_path == "graph":
                    self._graph_step(rollout, batch_index)
                else:
                    self._step(rollout, batch_index)
        if normalizers_in_update():  # as stock 5.5, after the minibatches
            obs = st.observations.flatten(0, 1)
            self.actor.update_normalization(obs)
            self.critic.update_normalization(obs)
        value, surrogate, entropy, lr = torch.cat((self._loss_sums, self._lr.reshape(1))).tolist()  # the host read
        self.learning_rate = lr
        num_updates = self.num_learning_epochs * num_mini_batches
        st.clear()
        return {"value": value / num_updates, "surrogate": surrogate / num_updates, "entropy": entropy / num_updates}

    def _flat_rollout(self) -> _Rollout:
        """Views of the storage flattened over steps and envs (as stock's minibatch generator takes them)."""
        st = self.storage
        observations = st.observations.flatten(0, 1)
        return _Rollout(
            observations={str(k): v for k, v in observations.items()},
            actions=st.actions.flatten(0, 1),
            values=st.values.flatten(0, 1),
            returns=st.returns.flatten(0, 1),
            advantages=st.advantages.flatten(0, 1),
            old_log_prob=st.actions_log_prob.flatten(0, 1),
            old_params=tuple(p.flatten(0, 1) for p in st.distribution_params),
        )

    def _step(self, rollout: _Rollout, batch_index: torch.Tensor) -> None:
        """One minibatch step of stock PPO (non-recurrent, no RND, no symmetry), its numbers kept on the device."""
        size = batch_index.shape[0]
        observations = TensorDict(
            {k: v[batch_index] for k, v in rollout.observations.items()}, batch_size=[size], device=self.device
        )
        actions = rollout.actions[batch_index]
        old_values = rollout.values[batch_index]
        advantages = rollout.advantages[batch_index]
        returns = rollout.returns[batch_index]
        old_log_prob = rollout.old_log_prob[batch_index]
        old_params = tuple(p[batch_index] for p in rollout.old_params)
        if self.normalize_advantage_per_mini_batch:
            with torch.no_grad():
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        if self._gaussian_head:
            # stock's forward with its sample: torch.normal(loc, scale) is loc + scale * N(0, 1) drawn as
            # normal_(0, 1) of the sample's shape, after a host check that scale >= 0, which a CUDA graph cannot
            # hold; randn_like draws the same words (the generator advances alike) without it
            self.actor.distribution.update(self.actor.mlp(self.actor.get_latent(observations, None, None)))
            torch.randn_like(self.actor.distribution.mean)
        else:
            self.actor(observations, masks=None, hidden_state=None, stochastic_output=True)  # stock's sample
        log_prob = self.actor.get_output_log_prob(actions)
        values = self.critic(observations, masks=None, hidden_state=None)
        params = tuple(self.actor.output_distribution_params)
        entropy = self.actor.output_entropy

        if self.desired_kl is not None and self.schedule == "adaptive":
            with torch.inference_mode():
                kl_mean = torch.mean(self.actor.get_kl_divergence(old_params, params))
                self._lr.copy_(self._next_learning_rate(kl_mean))

        ratio = torch.exp(log_prob - torch.squeeze(old_log_prob))
        surrogate = -torch.squeeze(advantages) * ratio
        clipped_ratio = torch.clamp(ratio, 1.0 - self.clip_param, 1.0 + self.clip_param)
        surrogate_clipped = -torch.squeeze(advantages) * clipped_ratio
        surrogate_loss = torch.max(surrogate, surrogate_clipped).mean()
        if self.use_clipped_value_loss:
            value_clipped = old_values + (values - old_values).clamp(-self.clip_param, self.clip_param)
            value_losses = (values - returns).pow(2)
            value_losses_clipped = (value_clipped - returns).pow(2)
            value_loss = torch.max(value_losses, value_losses_clipped).mean()
        else:
            value_loss = (returns - values).pow(2).mean()
        loss = surrogate_loss + self.value_loss_coef * value_loss - self.entropy_coef * entropy.mean()

        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.actor.parameters(), self.max_grad_norm)
        nn.utils.clip_grad_norm_(self.critic.parameters(), self.max_grad_norm)
        self.optimizer.step()
        with torch.no_grad():  # stock adds each loss's float to a Python float: float64 sums in the same order
            self._loss_sums += torch.stack((value_loss, surrogate_loss, entropy.mean())).to(torch.float64)

    def _next_learning_rate(self, kl_mean: torch.Tensor) -> torch.Tensor:
        """Stock's adaptive schedule on the device: the same comparisons (float32 KL) and float64 arithmetic."""
        lr = self._lr
        lower = torch.clamp(lr / 1.5, min=1e-5)
        higher = torch.clamp(lr * 1.5, max=1e-2)
        raise_it = (kl_mean < self.desired_kl / 2.0) & (kl_mean > 0.0)
        return torch.where(kl_mean > self.desired_kl * 2.0, lower, torch.where(raise_it, higher, lr))

    # ---- the CUDA graph ------------------------------------------------------------------------------------------

    def _prepare_graph(self, rollout: _Rollout, mini_batch_size: int) -> _Rollout:
        """The static rollout copy the graph reads, filled; a captured graph dropped when its inputs were replaced."""
        if self._static is None or self._index is None or self._index.shape[0] != mini_batch_size:
            self._static = _Rollout(
                observations={k: torch.empty_like(v) for k, v in rollout.observations.items()},
                actions=torch.empty_like(rollout.actions),
                values=torch.empty_like(rollout.values),
                returns=torch.empty_like(rollout.returns),
                advantages=torch.empty_like(rollout.advantages),
                old_log_prob=torch.empty_like(rollout.old_log_prob),
                old_params=tuple(torch.empty_like(p) for p in rollout.old_params),
            )
            self._index = torch.zeros(mini_batch_size, dtype=torch.long, device=self.device)
            self._drop_graph()
        for static, source in zip(self._static.tensors(), rollout.tensors(), strict=True):
            static.copy_(source)
        for module, name, pinned in self._pinned:  # rsl_rl reassigns some buffers (the normaliser's _std)
            current = getattr(module, name)
            if current is not pinned:
                with torch.inference_mode(pinned.is_inference()):  # rsl_rl makes it under inference_mode
                    pinned.copy_(current)
                setattr(module, name, pinned)
        if self._graph is not None:
            inputs = self._inputs()
            replaced = len(inputs) != len(self._graph_inputs)  # a parameter group or a state entry added
            if replaced or any(a is not b for a, b in zip(inputs, self._graph_inputs, strict=True)):
                self._drop_graph()  # parameters or optimiser state replaced: warm up and capture again
        return self._static

    def _drop_graph(self) -> None:
        """Forget the captured graph: the next minibatch steps warm up eagerly again, then it is captured anew."""
        self._graph = None
        self._warm = 0

    def _inputs(self) -> list[torch.Tensor]:
        """The parameters and optimiser state the graph reads and writes."""
        params = [*self.actor.parameters(), *self.critic.parameters()]
        state = [t for s in self.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        return params + state

    def _graph_step(self, rollout: _Rollout, batch_index: torch.Tensor) -> None:
        """Run the minibatch step: eagerly while warming up, then as the captured graph."""
        index = self._index
        if index is None:  # _prepare_graph ran
            raise RuntimeError("FastPPO: the graph's index buffer is missing")
        index.copy_(batch_index)
        if self._graph is None and self._warm < WARMUP_STEPS:
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self._step(rollout, index)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._warm += 1
            return
        if self._graph is None:
            try:
                self._capture(rollout, index)
            except RuntimeError as exc:  # a failed capture leaves CUDA's generator in capture mode: not resumable
                raise RuntimeError(
                    f"FastPPO: the CUDA graph capture of the minibatch step failed ({exc}); run the update eagerly "
                    "on the device instead: cfg['algorithm']['cuda_graph'] = False"
                ) from exc
        if self._graph is not None:
            self._graph.replay()

    def _capture(self, rollout: _Rollout, index: torch.Tensor) -> None:
        """Capture one minibatch step (recorded, not run); pin the buffers rsl_rl may reassign."""
        graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)  # the captured backward then writes the gradients it allocates
        with torch.cuda.graph(graph):
            self._step(rollout, index)
        self._graph = graph
        self._graph_inputs = self._inputs()
        self._pinned = [
            (module, name, buffer)
            for model in (self.actor, self.critic)
            for module in model.modules()
            for name, buffer in module.named_buffers(recurse=False)
        ]
