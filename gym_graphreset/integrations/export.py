"""A trained policy as one module from raw observations to its deterministic action; ONNX and TorchScript export.

:func:`load_policy` reads a checkpoint of either trainer the library ships with:

- the PPO example's (``examples/ppo_continuous.py``, ``format`` = :data:`PPO_CHECKPOINT_FORMAT`), a dict with
  ``agent`` (the agent's ``state_dict``: ``norm.mean``/``norm.var``/``norm.count``, ``actor.<i>.*``,
  ``critic.<i>.*``, ``log_std``), ``optimizer``, ``iteration``, ``global_step``, ``args``, ``env_id``,
  ``env_kwargs`` and ``policy`` (what rebuilding the actor needs: ``obs_dim``, ``act_dim``, ``actor_dim``,
  ``activation``, ``norm_eps``, ``norm_clip``, ``action_low``, ``action_high``);
- rsl_rl's (``OnPolicyRunner.save``: ``actor_state_dict``, ``critic_state_dict``, ``optimizer_state_dict``,
  ``iter``, ``infos``). rsl_rl does not store the network's activation or observation groups; they are read
  from ``infos["rl_cfg"]`` when the trainer put its config there (``benchmarks/gpu/rsl_rl_go1.py`` does), else
  rsl_rl's defaults are assumed (``elu``, the ``policy`` group).

The result, a :class:`DeterministicPolicy`, has the observation normaliser folded in: it takes the raw policy
observation (the ``policy`` group of a dict observation) and returns the mean action, clamped to the action
bounds the trainer clamped to. :func:`export_torchscript` and :func:`export_onnx` write it out;
:func:`check_export` runs a written file against it. Only ``torch`` is needed, plus ``onnx`` (and
``onnxruntime`` for :func:`check_export`) for ONNX: the optional extra ``export``.
"""

from __future__ import annotations

import copy
import math
import pickle
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

__all__ = [
    "PPO_CHECKPOINT_FORMAT",
    "DeterministicPolicy",
    "ExportCheck",
    "PolicySource",
    "check_export",
    "export_onnx",
    "onnx_metadata",
    "export_torchscript",
    "load_policy",
]

PPO_CHECKPOINT_FORMAT = "gym_graphreset.ppo_continuous/1"
"""The ``format`` entry of the PPO example's checkpoints (bumped when their layout changes)."""

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "elu": nn.ELU,
    "selu": nn.SELU,
    "relu": nn.ReLU,
    "crelu": nn.CELU,
    "lrelu": nn.LeakyReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "softplus": nn.Softplus,
    "gelu": nn.GELU,
    "swish": nn.SiLU,
    "mish": nn.Mish,
    "identity": nn.Identity,
}
"""Activation names, as rsl_rl spells them (``resolve_nn_activation``)."""


@dataclass(frozen=True)
class PolicySource:
    """Where a :class:`DeterministicPolicy` came from: what ``play`` needs to rebuild its env."""

    kind: Literal["ppo_continuous", "rsl_rl"]
    """Which trainer's checkpoint."""
    env_id: str | None = None
    """The task it was trained on, when the checkpoint records it."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """The env's constructor keywords it was trained with (e.g. ``model_xml``)."""
    iteration: int = 0
    """The training iteration the checkpoint was saved at."""
    obs_groups: tuple[str, ...] = ("policy",)
    """The observation groups concatenated into the policy's input, for a dict observation."""
    deployment: Mapping[str, Any] | None = None
    """What a robot deployment needs (:class:`~gym_graphreset.integrations.deployment.Deployment` as plain data),
    when the checkpoint records it (the ``train`` command's do, in ``infos["deployment"]``)."""


class DeterministicPolicy(nn.Module):
    """Raw observation -> deterministic action: ``clamp(mlp(clamp((obs - shift) / scale, ±clip)), low, high)``.

    Args:
        mlp: The actor's network (its mean action head).
        shift: ``(obs_dim,)`` subtracted from the observation (the normaliser's mean; zeros for none).
        scale: ``(obs_dim,)`` the divisor after it (the normaliser's std with its epsilon; ones for none).
        clip: The normalised observation is clipped to ``[-clip, clip]`` (``inf``: no clip).
        low: ``(act_dim,)`` lower action bound (``-inf``: none).
        high: ``(act_dim,)`` upper action bound (``inf``: none).
        source: What the checkpoint recorded about its run.
    """

    def __init__(
        self,
        mlp: nn.Sequential,
        shift: torch.Tensor,
        scale: torch.Tensor,
        clip: float,
        low: torch.Tensor,
        high: torch.Tensor,
        source: PolicySource,
    ) -> None:
        super().__init__()
        if shift.shape != scale.shape or shift.ndim != 1:
            raise ValueError(
                f"`shift` and `scale` must be 1-D of one shape, got {tuple(shift.shape)} and {tuple(scale.shape)}"
            )
        if low.shape != high.shape or low.ndim != 1:
            raise ValueError(
                f"`low` and `high` must be 1-D of one shape, got {tuple(low.shape)} and {tuple(high.shape)}"
            )
        self.net = _PolicyNet(mlp, shift, scale, clip, low, high)
        self.source = source
        self.obs_dim = int(shift.shape[0])
        self.act_dim = int(low.shape[0])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(batch, obs_dim)`` raw observations -> ``(batch, act_dim)`` actions."""
        return self.net(obs)

    def observation(self, obs: Any) -> torch.Tensor:
        """The policy's input from an env observation: a tensor as it is, a dict's groups side by side."""
        if isinstance(obs, torch.Tensor):
            return obs
        if isinstance(obs, Mapping) and all(g in obs for g in self.source.obs_groups):
            return torch.cat([obs[g] for g in self.source.obs_groups], dim=-1)
        keys = sorted(obs) if isinstance(obs, Mapping) else type(obs).__name__
        raise ValueError(f"the policy reads the observation groups {list(self.source.obs_groups)}, got {keys}")


class _PolicyNet(nn.Module):
    """The computation of a :class:`DeterministicPolicy`, without its metadata: what the exporters trace."""

    if TYPE_CHECKING:  # the buffers' types, for type checkers only (TorchScript cannot read string annotations)
        shift: torch.Tensor
        scale: torch.Tensor
        low: torch.Tensor
        high: torch.Tensor

    def __init__(
        self,
        mlp: nn.Sequential,
        shift: torch.Tensor,
        scale: torch.Tensor,
        clip: float,
        low: torch.Tensor,
        high: torch.Tensor,
    ) -> None:
        super().__init__()
        self.mlp = mlp
        self.register_buffer("shift", shift.detach().float().clone())
        self.register_buffer("scale", scale.detach().float().clone())
        self.register_buffer("low", low.detach().float().clone())
        self.register_buffer("high", high.detach().float().clone())
        self.clip = float(clip)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = ((obs - self.shift) / self.scale).clamp(-self.clip, self.clip)
        return torch.minimum(torch.maximum(self.mlp(x), self.low), self.high)


def _mlp(weights: Mapping[str, torch.Tensor], prefix: str, activation: str, where: str) -> nn.Sequential:
    """``<prefix><i>.weight``/``.bias`` Linear layers, with ``activation`` between them, as an ``nn.Sequential``."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"`activation` must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    indices = sorted(
        int(k[len(prefix) :].split(".")[0])
        for k in weights
        if k.startswith(prefix) and k.endswith(".weight") and k[len(prefix) :].split(".")[0].isdigit()
    )
    if not indices:
        raise ValueError(f"{where} has no `{prefix}<i>.weight` entries (keys: {sorted(weights)[:8]}...)")
    layers: list[nn.Module] = []
    for n, i in enumerate(indices):
        w, b = weights[f"{prefix}{i}.weight"], weights[f"{prefix}{i}.bias"]
        linear = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            linear.weight.copy_(w)
            linear.bias.copy_(b)
        layers.append(linear)
        if n < len(indices) - 1:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def _from_ppo(ckpt: Mapping[str, Any], where: str) -> DeterministicPolicy:
    meta, agent = ckpt["policy"], ckpt["agent"]
    actor_dim = meta["actor_dim"] or meta["obs_dim"]
    mlp = _mlp(agent, "actor.", meta["activation"], where)
    shift = agent["norm.mean"][:actor_dim]
    scale = torch.sqrt(agent["norm.var"][:actor_dim] + meta["norm_eps"])
    source = PolicySource(
        kind="ppo_continuous",
        env_id=ckpt.get("env_id"),
        env_kwargs=dict(ckpt.get("env_kwargs") or {}),
        iteration=int(ckpt.get("iteration", 0)),
        obs_groups=("policy",),
        deployment=ckpt.get("deployment"),
    )
    low = torch.as_tensor(meta["action_low"], dtype=torch.float32)
    high = torch.as_tensor(meta["action_high"], dtype=torch.float32)
    return DeterministicPolicy(mlp, shift, scale, meta["norm_clip"], low, high, source)


SUPPORTED_RSL_RL_DISTRIBUTIONS = ("GaussianDistribution",)
"""rsl_rl action heads :func:`load_policy` rebuilds exactly: one mean per action (a state-independent std)."""


def _check_rsl_rl_actor(actor: Mapping[str, Any], cfg: Mapping[str, Any], where: str) -> None:
    """Refuse, by name, an rsl_rl actor that an MLP with an action-mean output cannot represent exactly.

    rsl_rl 5's ``RNNModel`` (LSTM/GRU: ``rnn.*`` weights) and ``CNNModel`` (``cnn.*``) have layers the rebuilt
    MLP would drop; ``HeteroscedasticGaussianDistribution`` and ``BetaDistribution`` heads output two values
    per action (mean and std, or alpha and beta), which the rebuilt MLP would take as twice the actions.
    """
    actor_cfg = cfg.get("actor") or {}
    model = actor_cfg.get("class_name")
    recurrent = sorted({k.split(".")[0] for k in actor if k.split(".")[0] in ("rnn", "cnn")})
    if recurrent or (model is not None and model != "MLPModel"):
        kind = model or {"rnn": "RNNModel", "cnn": "CNNModel"}[recurrent[0]]
        detail = f" ({actor_cfg['rnn_type'].upper()})" if kind == "RNNModel" and "rnn_type" in actor_cfg else ""
        raise ValueError(
            f"{where}: the actor is an rsl_rl {kind}{detail} (`{recurrent[0] if recurrent else kind}` layers); "
            "load_policy and export rebuild only an MLPModel actor and would drop them: not supported"
        )
    dist_cfg = actor_cfg.get("distribution_cfg", "unrecorded")
    dist = dist_cfg.get("class_name") if isinstance(dist_cfg, Mapping) else None
    if dist is not None and dist not in SUPPORTED_RSL_RL_DISTRIBUTIONS:
        raise ValueError(
            f"{where}: the actor's action head is an rsl_rl {dist}, which outputs two values per action: not "
            f"supported (load_policy and export support {list(SUPPORTED_RSL_RL_DISTRIBUTIONS)}, an action mean)"
        )
    has_std = any(k.startswith("distribution.") and "std" in k for k in actor)
    if not has_std and dist_cfg is not None:  # a recorded distribution_cfg of None: a deterministic actor
        raise ValueError(
            f"{where}: the actor has no state-independent std (`distribution.std_param` / `log_std_param`): its "
            "head is not an rsl_rl GaussianDistribution (a HeteroscedasticGaussianDistribution or BetaDistribution "
            "outputs two values per action), which load_policy and export cannot represent: not supported"
        )


def _from_rsl_rl(ckpt: Mapping[str, Any], activation: str | None, where: str) -> DeterministicPolicy:
    actor = ckpt["actor_state_dict"]
    infos = ckpt.get("infos") or {}
    cfg = infos.get("rl_cfg") or {}
    _check_rsl_rl_actor(actor, cfg, where)
    activation = activation or cfg.get("actor", {}).get("activation", "elu")
    groups = tuple(cfg.get("obs_groups", {}).get("actor", ("policy",)))
    mlp = _mlp(actor, "mlp.", activation, where)
    first, last = mlp[0], mlp[-1]
    assert isinstance(first, nn.Linear) and isinstance(last, nn.Linear)  # built so by _mlp
    obs_dim, act_dim = first.in_features, last.out_features
    std_entries = [k for k in actor if k.startswith("distribution.")]
    if any("std" in k for k in std_entries) and not any(actor[k].numel() == act_dim for k in std_entries):
        raise ValueError(f"{where}: the actor's output ({act_dim}) is not an action mean (state-dependent std?)")
    if "obs_normalizer._mean" in actor:
        shift = actor["obs_normalizer._mean"].reshape(-1)
        scale = actor["obs_normalizer._std"].reshape(-1) + 1e-2  # EmpiricalNormalization's eps (rsl_rl's default)
    else:
        shift, scale = torch.zeros(obs_dim), torch.ones(obs_dim)
    source = PolicySource(
        kind="rsl_rl",
        env_id=infos.get("env_id"),
        env_kwargs=dict(infos.get("env_kwargs") or {}),
        iteration=int(ckpt.get("iter", 0)),
        obs_groups=groups,
        deployment=infos.get("deployment"),
    )
    inf = torch.full((act_dim,), math.inf)
    return DeterministicPolicy(mlp, shift, scale, math.inf, -inf, inf, source)


def load_policy(
    path: str | Path, *, activation: str | None = None, map_location: str | torch.device = "cpu"
) -> DeterministicPolicy:
    """The deterministic policy of a checkpoint of the PPO example or of rsl_rl (see the module docstring).

    Args:
        path: The checkpoint file (``torch.save`` of a dict).
        activation: rsl_rl checkpoints only: the actor's activation when ``infos`` does not record it
            (default ``"elu"``, rsl_rl's).
        map_location: Where the checkpoint's tensors are loaded.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is neither format, or its actor is not an MLP with an action-mean output (an
            rsl_rl ``RNNModel`` or ``CNNModel``, a ``HeteroscedasticGaussianDistribution`` or
            ``BetaDistribution`` head: refused by name, before anything is written).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"`path` must be a checkpoint file, got {str(path)!r} (no such file)")
    where = f"checkpoint {str(path)!r}"
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=False)  # the args and infos are plain data
    except (pickle.UnpicklingError, EOFError, RuntimeError) as exc:
        raise ValueError(f"{where} is not a file torch.save wrote ({type(exc).__name__}: {exc})") from exc
    if isinstance(ckpt, Mapping) and ckpt.get("format") == PPO_CHECKPOINT_FORMAT:
        policy = _from_ppo(ckpt, where)
    elif isinstance(ckpt, Mapping) and "actor_state_dict" in ckpt:
        policy = _from_rsl_rl(ckpt, activation, where)
    else:
        keys = sorted(ckpt)[:8] if isinstance(ckpt, Mapping) else type(ckpt).__name__
        raise ValueError(
            f"{where} must be a PPO example checkpoint (format {PPO_CHECKPOINT_FORMAT!r}) or rsl_rl's "
            f"(`actor_state_dict`), got {keys}"
        )
    return policy.eval()


def export_torchscript(policy: DeterministicPolicy, path: str | Path) -> Path:
    """Write ``policy`` as a TorchScript module (``torch.jit.load`` it, or load it from C++ libtorch); its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*is deprecated", category=DeprecationWarning)
        scripted = torch.jit.script(copy.deepcopy(policy.net).cpu().eval())
    scripted.save(str(path))
    return path


def export_onnx(policy: DeterministicPolicy, path: str | Path, *, opset: int = 18) -> Path:
    """Write ``policy`` as one ONNX file (input ``obs`` ``(batch, obs_dim)``, output ``actions``); its path.

    Uses torch's ``torch.export``-based exporter (needs ``onnx`` and ``onnxscript``). The batch size is dynamic.
    The file's ``metadata_props`` say what the policy is (:func:`onnx_metadata`): its task, iteration,
    observation groups and sizes, and, when the checkpoint recorded them, the deployment data (joint names,
    gains, default pose, action scale, observation terms; mjlab's keys and format).
    """
    metadata = onnx_metadata(policy)  # refused before anything is written
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = copy.deepcopy(policy.net).cpu().eval()
    batch = torch.export.Dim("batch", min=1)
    torch.onnx.export(
        module,
        (torch.zeros(2, policy.obs_dim),),
        str(path),
        input_names=["obs"],
        output_names=["actions"],
        dynamic_shapes={"obs": {0: batch}},
        opset_version=opset,
        dynamo=True,
        external_data=False,
        verbose=False,
    )
    import onnx

    model = onnx.load(str(path))
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))
    return path


def onnx_metadata(policy: DeterministicPolicy) -> dict[str, str]:
    """The ``metadata_props`` :func:`export_onnx` writes: the policy's source and its deployment data, as text.

    Raises:
        ValueError: the recorded deployment data lacks a key or has one it does not know (named).
    """
    from gym_graphreset.integrations.deployment import Deployment

    source = policy.source
    meta = {
        "exporter": "gym_graphreset",
        "trainer": source.kind,
        "env_id": source.env_id or "",
        "iteration": str(source.iteration),
        "observation_groups": ",".join(source.obs_groups),
        "obs_dim": str(policy.obs_dim),
        "act_dim": str(policy.act_dim),
    }
    if source.deployment is not None:
        meta.update(Deployment.from_dict(source.deployment).metadata())
    return meta


@dataclass(frozen=True)
class ExportCheck:
    """The outcome of :func:`check_export`."""

    path: Path
    """The file checked."""
    runtime: str
    """What ran it: ``"torch.jit"``, ``"onnxruntime"``, or ``"onnx.checker"`` (validated, not run)."""
    max_abs_diff: float | None
    """The largest difference from the torch policy's actions (``None`` when the file was not run)."""


def check_export(
    policy: DeterministicPolicy,
    path: str | Path,
    *,
    samples: int = 256,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    seed: int = 0,
) -> ExportCheck:
    """Run an exported file on random observations and compare it with ``policy`` (``torch.allclose``).

    The observations are ``policy``'s normaliser mean plus 3 x its scale times a standard normal draw (so
    the observation clip is exercised too). A ``.onnx`` file runs in ``onnxruntime`` when it is installed;
    without it the file is only validated by ``onnx.checker`` (a notice says so); anything else is loaded
    with ``torch.jit.load``.

    Raises:
        ImportError: an ONNX file and no ``onnx`` package.
        AssertionError: the exported model's actions differ from ``policy``'s beyond ``atol``/``rtol``.
    """
    path = Path(path)
    gen = torch.Generator().manual_seed(seed)
    shift, scale = policy.net.shift.cpu(), policy.net.scale.cpu()
    obs = shift + 3.0 * scale * torch.randn(samples, policy.obs_dim, generator=gen)
    with torch.no_grad():
        expected = copy.deepcopy(policy.net).cpu().eval()(obs)
    if path.suffix == ".onnx":
        import onnx

        onnx.checker.check_model(onnx.load(str(path)))
        try:
            import onnxruntime
        except ImportError:
            warnings.warn(f"onnxruntime is not installed (the `export` extra): {path} validated, not run", stacklevel=2)
            return ExportCheck(path, "onnx.checker", None)
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = torch.from_numpy(session.run(None, {"obs": obs.numpy()})[0])
        runtime = "onnxruntime"
    else:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.filterwarnings("ignore", message=".*torch.jit.load.*is deprecated", category=DeprecationWarning)
            got = torch.jit.load(str(path), map_location="cpu")(obs)
        runtime = "torch.jit"
    diff = float((got - expected).abs().max())
    if not torch.allclose(got, expected, atol=atol, rtol=rtol):
        raise AssertionError(f"{path} ({runtime}) differs from the torch policy: max |diff| {diff:.3g} > atol {atol}")
    return ExportCheck(path, runtime, diff)
