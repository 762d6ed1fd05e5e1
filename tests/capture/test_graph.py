"""AutoresetGraph: refusal off CUDA; on CUDA capture == eager, registered generators, host-transition
replay order, stale-pointer guards, and zero host syncs per step (the sleep canary)."""

from __future__ import annotations

import re

import pytest
import torch

from gym_graphreset import AutoresetGraph, EpisodeStatistics, FixedShapeAutoresetVectorEnv, StaleGraphError
from gym_graphreset.capture.host_transitions import host_transition
from gym_graphreset.envs import CartPoleVectorEnv
from gym_graphreset.testing import assert_capture_matches_eager, assert_sync_free, count_host_syncs
from tests.conftest import GRAPH_MODES, MODES, needs_cuda


def test_refused_off_cuda() -> None:
    with pytest.raises(ValueError, match=re.escape("CUDA graph capture needs a CUDA device, got device cpu")):
        AutoresetGraph(lambda: None, device="cpu")


@pytest.mark.parametrize(
    ("kw", "message"),
    [({"warmup": -1}, "`graph_warmup` must be an int >= 0"), ({"capture_mode": "x"}, "must be one of")],
)
@needs_cuda
@pytest.mark.cuda
def test_bad_arguments(kw, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        AutoresetGraph(lambda: None, device="cuda", **kw)


@pytest.mark.cuda
@needs_cuda
def test_warmup_then_capture_then_replay() -> None:
    x = torch.zeros(4, device="cuda")
    g = AutoresetGraph(lambda: x.add_(1), device="cuda", warmup=2)
    for _ in range(5):
        g()
    torch.cuda.synchronize()
    assert x.tolist() == [5.0] * 4  # 2 eager calls, then the capture call replays once, then 2 replays
    assert (g.eager_calls, g.captures, g.replays) == (2, 1, 3)


@pytest.mark.cuda
@needs_cuda
def test_stale_pointer_recapture_or_raise() -> None:
    holder = {"x": torch.zeros(2, device="cuda")}

    def body() -> None:
        holder["x"].add_(1)

    g = AutoresetGraph(body, device="cuda", warmup=0, fingerprint=lambda: holder["x"].data_ptr())
    g()
    old = holder["x"]
    holder["x"] = torch.zeros(2, device="cuda")  # the captured buffer is replaced
    g()
    torch.cuda.synchronize()
    assert g.captures == 2 and holder["x"].tolist() == [1.0, 1.0] and old.tolist() == [1.0, 1.0]
    strict = AutoresetGraph(body, device="cuda", warmup=0, fingerprint=lambda: holder["x"].data_ptr(), on_stale="raise")
    strict()
    holder["x"] = torch.zeros(2, device="cuda")
    with pytest.raises(StaleGraphError, match="refusing to replay stale pointers"):
        strict()


class _RandomTerm:
    """Draws from its own CUDA generator inside the reset body; logs host transitions."""

    supports_reset_selection = True

    def __init__(self, log: list[str]) -> None:
        self.gen = torch.Generator(device="cuda").manual_seed(5)
        self.log = log
        self.resets = 0

    def bind(self, env) -> None:
        self.noise = torch.zeros(env.num_envs, device="cuda")

    def torch_generators(self) -> list[torch.Generator]:
        return [self.gen]

    def reset(self, env_ids) -> None:
        draw = torch.rand(self.noise.shape, device="cuda", generator=self.gen)
        self.noise.copy_(torch.where(env_ids.mask, draw, self.noise))

        def count() -> None:
            self.resets += 1

        host_transition(lambda: self.log.append("a"), name="a")
        host_transition(count, name="count")
        host_transition(lambda: self.log.append("b"), name="b")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("scope", ["reset", "step"])
def test_generator_and_host_transitions(scope: str) -> None:
    """A registered generator gives fresh draws each replay; transitions replay in order, once per step."""
    log: list[str] = []
    term = _RandomTerm(log)
    flags = {**GRAPH_MODES["reset_graph" if scope == "reset" else "step_graph"], "validation_poll_interval": 1000}
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(64, device="cuda"), reset_terms={"rand": term}, **flags)
    env.reset(seed=0)
    noises = []
    for _ in range(8):
        env.step(torch.ones(64, dtype=torch.long, device="cuda"))
        noises.append(term.noise.clone())
    assert env.graph is not None and env.graph.captured and env.graph.transitions.names == ["a", "count", "b"]
    assert term.resets == 9 and log == ["a", "b"] * 9  # env.reset() once, then once per step
    torch.cuda.synchronize()
    assert not torch.equal(noises[-1], noises[-2])  # the generator advanced across replays


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("scope", ["reset", "step"])
def test_capture_matches_eager(scope: str) -> None:
    """Captured CartPole returns what the same configuration returns eagerly, bit for bit."""
    gen = torch.Generator().manual_seed(0)
    actions = [torch.randint(0, 2, (256,), generator=gen).cuda() for _ in range(120)]

    def factory(flags):
        return FixedShapeAutoresetVectorEnv(
            CartPoleVectorEnv(256, device="cuda"), reset_terms={"ep": EpisodeStatistics()}, **flags
        )

    assert_capture_matches_eager(factory, actions, graph=scope)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("mode", ["masked", "masked_persistent", "reset_graph", "step_graph"])
def test_zero_host_syncs_between_polls(mode: str) -> None:
    """The sleep canary: the fast paths never wait for the GPU between polls."""
    flags = {**(MODES | GRAPH_MODES)[mode], "validation_poll_interval": 10_000}
    env = FixedShapeAutoresetVectorEnv(
        CartPoleVectorEnv(1024, device="cuda"), reset_terms={"ep": EpisodeStatistics()}, **flags
    )
    env.reset(seed=0)
    a = torch.ones(1024, dtype=torch.long, device="cuda")
    for _ in range(6):  # warm-up and capture
        env.step(a)
    # An eager masked step launches a few hundred kernels: more than two queued behind the sleep fill CUDA's
    # launch queue (~1,000-1,500 entries) and block - back-pressure, not a sync (a sync blocks the first).
    result = assert_sync_free(lambda: env.step(a), steps=4 if mode in GRAPH_MODES else 2)
    print(f"{mode}: {result}")
    syncs, messages = count_host_syncs(lambda: env.step(a))
    assert syncs == 0, messages


@pytest.mark.cuda
@needs_cuda
def test_canary_catches_the_selected_path() -> None:
    """The canary can fail: the selected-row path reads the host every step."""
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(1024, device="cuda"))
    env.reset(seed=0)
    a = torch.ones(1024, dtype=torch.long, device="cuda")
    env.step(a)
    with pytest.raises(AssertionError, match="a step waited for the GPU"):
        assert_sync_free(lambda: env.step(a), steps=2)
    syncs, _ = count_host_syncs(lambda: env.step(a))
    assert syncs >= 1


def test_capture_report_names_every_reason_on_the_cpu() -> None:
    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from tests.core.test_autoreset_env import _PlainTerm

    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4), reset_terms={"plain": _PlainTerm()})
    report = env.capture_report("step")
    assert not report.eligible
    assert set(report.reasons) == {"device", "flags", "reset_selection_blockers"}
    assert "plain" in report.reasons["reset_selection_blockers"] and "persistent_buffers" in report.reasons["flags"]
    assert "not possible" in str(report) and report.state["captures"] == 0


@pytest.mark.cuda
@needs_cuda
def test_capture_report_after_capture() -> None:
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(64, device="cuda"), **GRAPH_MODES["step_graph"])
    before = env.capture_report()
    assert not before.reasons and before.host_reads is None and not before.eligible  # host reads not yet checked
    env.reset(seed=0)
    for _ in range(5):
        env.step(torch.ones(64, dtype=torch.long, device="cuda"))
    report = env.capture_report()
    assert report.eligible and report.host_reads == []  # the capture ran the body: it is the check
    state = report.state
    assert state["captured"] and state["captures"] == 1 and state["replays"] == 3


class _ItemEnv(CartPoleVectorEnv):
    """Reads a tensor on the host in its step (``.item()``): runs on the CPU with no notice."""

    def step(self, actions: torch.Tensor):
        out = super().step(actions)
        self.last_mean = out[1].mean().item()  # a host read: a sync on CUDA, a failed capture
        return out


class _ItemTerm:
    """A reset term whose masked reset reads the host (``bool()`` of a tensor)."""

    supports_reset_selection = True

    def reset(self, env_ids) -> None:
        if bool(env_ids.mask.any()):
            pass


def test_capture_report_does_not_claim_eligibility_it_did_not_check() -> None:
    """A step calling ``.item()`` used to be reported ``eligible_on_cuda``; host reads are now 'not checked'."""
    env = FixedShapeAutoresetVectorEnv(_ItemEnv(8), "masked_persistent")
    report = env.capture_report("step")
    assert set(report.reasons) == {"device"} and report.host_reads is None
    assert not report.eligible_on_cuda and not report.eligible
    assert "host reads: not checked (capture_report(..., check_host_reads=True)" in str(report)
    assert "would capture on a CUDA device" not in str(report)


def test_capture_report_checked_finds_item_in_the_step() -> None:
    env = FixedShapeAutoresetVectorEnv(_ItemEnv(8), "masked_persistent")
    env.reset(seed=0)
    report = env.capture_report("step", check_host_reads=True)
    assert not report.eligible_on_cuda and set(report.reasons) == {"device", "host_reads"}
    assert report.reasons["host_reads"].startswith("1 host read(s) in one step body")
    assert len(report.host_reads) == 1 and "test_graph.py" in report.host_reads[0]
    assert report.host_reads[0].endswith(".item")
    assert env.host_step == 1  # the check took one step
    assert "host_reads" not in env.capture_report("reset", check_host_reads=True).reasons  # not in the reset body


def test_capture_report_checked_clean_env_is_eligible_on_cuda() -> None:
    env = FixedShapeAutoresetVectorEnv(
        CartPoleVectorEnv(8), "masked_persistent", reset_terms={"ep": EpisodeStatistics()}
    )
    env.reset(seed=0)
    for scope in ("step", "reset"):
        report = env.capture_report(scope, check_host_reads=True, actions=torch.ones(8, dtype=torch.long))
        assert report.host_reads == [] and report.eligible_on_cuda and set(report.reasons) == {"device"}
    assert "would capture on a CUDA device" in str(report) and "not checked" not in str(report)
    assert env.host_step == 2


def test_capture_report_reset_scope_counts_the_reset_body() -> None:
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8), "masked_persistent", reset_terms={"t": _ItemTerm()})
    env.reset(seed=0)
    report = env.capture_report("reset", check_host_reads=True)
    assert "host_reads" in report.reasons and report.host_reads[0].endswith(".__bool__")
    selected = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8))  # its reset body runs in no runner of its own
    selected.reset(seed=0)
    report = selected.capture_report("reset", check_host_reads=True)
    assert report.host_reads is None
    assert "host reads: not checked (the step taken ran no separate reset body to count; capture needs" in str(
        report
    )  # not "pass check_host_reads=True", which was passed


def test_capture_report_check_refusals() -> None:
    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(8), "masked_persistent")
    with pytest.raises(
        RuntimeError, match=re.escape("capture_report(check_host_reads=True) takes a step: call reset()")
    ):
        env.capture_report("step", check_host_reads=True)
    with pytest.raises(ValueError, match=re.escape("`actions` are the step that check_host_reads=True takes")):
        env.capture_report("step", actions=torch.ones(8, dtype=torch.long))
    with pytest.raises(ValueError, match=re.escape("`scope` must be 'reset', 'step' or None, got 'all'")):
        env.capture_report("all")  # type: ignore[arg-type]
    env.reset(seed=0)
    with pytest.raises(ValueError, match=re.escape("actions must have shape (8,), got (4,)")):
        env.capture_report("step", check_host_reads=True, actions=torch.ones(4, dtype=torch.long))
    assert env.host_step == 0
