"""The validation latch: named verdicts on the device, one poll, first-failure steps, windows."""

from __future__ import annotations

import contextlib

import pytest
import torch

from gym_graphreset.core.polling import CrossRankError, DeferredValidationError, FailedCheck
from gym_graphreset.core.validation import ValidationLatch, finite_rows


@pytest.fixture
def latch() -> ValidationLatch:
    return ValidationLatch("cpu", capacity=4)


def test_passing_checks_poll_quietly(latch: ValidationLatch) -> None:
    for _ in range(3):
        latch.require(torch.tensor([True, True]), "a", "msg a")
        latch.advance()
    latch.poll(3)


def test_failure_names_check_message_step_and_window(latch: ValidationLatch) -> None:
    latch.require(torch.tensor(True), "fine", "never fails")
    latch.advance()
    latch.require(torch.tensor([True, False]), "bad", "something broke")
    latch.advance()
    latch.require(torch.tensor(False), "bad", "something broke")  # later failures keep the first step
    latch.require(torch.tensor(False), "worse", "also broke")
    with pytest.raises(DeferredValidationError) as err:
        latch.poll(7)
    names = [f.name for f in err.value.failures]
    assert names == ["bad", "worse"]
    assert err.value.failures[0].first_failed_step == 1 and err.value.failures[1].first_failed_step == 2
    assert err.value.window == (0, 6)
    assert "something broke" in str(err.value) and "between steps 0 and 6" in str(err.value)
    latch.poll(9)  # the failure was cleared with its report


def test_latch_buffers_never_move(latch: ValidationLatch) -> None:
    ptr = latch.first_failed.data_ptr()
    for i in range(4):
        latch.require(torch.tensor(i % 2 == 0), f"c{i}", "m")
    assert latch.first_failed.data_ptr() == ptr and latch.names == ["c0", "c1", "c2", "c3"]


def test_capacity_and_type_errors(latch: ValidationLatch) -> None:
    for i in range(4):
        latch.require(torch.tensor(True), f"c{i}", "m")
    with pytest.raises(ValueError, match="latch is full"):
        latch.require(torch.tensor(True), "c4", "m")
    with pytest.raises(TypeError, match="dtype torch.bool"):
        latch.require(torch.tensor(1.0), "c0", "m")
    with pytest.raises(TypeError, match="bool torch.Tensor"):
        latch.require(True, "c0", "m")  # type: ignore[arg-type]


def test_require_many_latches_each_name(latch: ValidationLatch) -> None:
    names, messages = ("x[A]", "x[B]", "x[C]"), ("a broke", "b broke", "c broke")
    latch.require_many(torch.tensor([True, False, True]), names, messages)
    latch.advance()
    latch.require_many(torch.tensor([True, False, False]), names, messages)
    with pytest.raises(DeferredValidationError) as err:
        latch.poll(2)
    assert {f.name: f.first_failed_step for f in err.value.failures} == {"x[B]": 0, "x[C]": 1}
    with pytest.raises(ValueError, match="shape"):
        latch.require_many(torch.tensor([True]), names, messages)


@pytest.mark.parametrize("batched", [False, True], ids=["immediate", "batched"])
def test_batched_requires_latch_like_immediate_ones(batched: bool) -> None:
    """A batch latches at its end what the same requires latch one by one; repeated names are AND-ed."""
    latch = ValidationLatch("cpu", capacity=8)
    script = [
        [("a", True), ("b", True)],
        [("a", True), ("b", False), ("b", True)],  # b fails once within the step: AND, not last-wins
        [("c", False), ("a", False)],
    ]
    for checks in script:
        with latch.batch() if batched else contextlib.nullcontext():
            for name, ok in checks:
                latch.require(torch.tensor(ok), name, f"{name} broke")
            latch.require_many(torch.tensor([True, ok]), ("m[0]", "m[1]"), ("m0", "m1"))
        latch.advance()
    with pytest.raises(DeferredValidationError) as err:
        latch.poll(3)
    first = {f.name: f.first_failed_step for f in err.value.failures}
    assert first == {"b": 1, "m[1]": 2, "c": 2, "a": 2}  # m[1] takes each step's last ok


def _per_row_script(latch: ValidationLatch, step: int) -> None:
    """Per-row checks of two lengths, a 0-dim one, a name repeated per row and mixed, rows from require_many."""
    gen = torch.Generator().manual_seed(step)
    rows8 = torch.rand(8, generator=gen) > 0.3
    latch.require(rows8, "rows8", "m")
    latch.require(torch.rand(8, 3, generator=gen) > 0.1, "elements", "m")  # read per row
    latch.require(torch.rand(5, generator=gen) > 0.4, "rows5", "m")
    latch.require(torch.tensor(step != 2), "scalar", "m")
    latch.require(torch.rand(8, generator=gen) > 0.3, "repeated", "m")
    latch.require(torch.rand(8, generator=gen) > 0.3, "repeated", "m")
    latch.require(torch.rand(8, generator=gen) > 0.2, "mixed", "m")
    latch.require(torch.tensor(step != 3), "mixed", "m")
    bad = torch.rand(8, 2, generator=gen) > 0.8
    latch.require_many(~bad, ("many[0]", "many[1]"), ("m", "m"))  # per row


def test_batched_row_summaries_match_immediate_ones() -> None:
    """Per-row columns summarised together at a region's end give each check's own first row and count."""
    latches = {"immediate": ValidationLatch("cpu", capacity=16), "batched": ValidationLatch("cpu", capacity=16)}
    for step in range(5):
        for kind, latch in latches.items():
            with latch.batch() if kind == "batched" else contextlib.nullcontext():
                _per_row_script(latch, step)
            latch.advance()
    immediate, batched = latches.values()
    assert immediate.names == batched.names
    assert torch.equal(immediate.first_failed, batched.first_failed)
    assert torch.equal(immediate.rows, batched.rows)
    assert (immediate.first_failed[: len(immediate.names)] >= 0).all()  # every check failed at some step


def test_regions_over_scattered_slots_latch_like_runs() -> None:
    """A region whose slots are not one run (updated through an index) latches what a run (views) does."""
    scattered, run = ValidationLatch("cpu", capacity=8), ValidationLatch("cpu", capacity=8)
    for name in ("a", "gap", "b", "c"):
        scattered.slot(name, "m")  # "gap" splits the region's slots: a=0, b=2, c=3
    for step in range(4):
        gen = torch.Generator().manual_seed(step)
        checks = {
            "c": torch.rand(6, generator=gen) > 0.3,
            "a": torch.tensor(step != 1),
            "b": torch.rand(6, generator=gen) > 0.2,
        }
        for latch in (scattered, run):
            with latch.batch():
                for name, ok in checks.items():
                    latch.require(ok, name, "m")
            latch.advance()
    for name in ("a", "b", "c"):
        i, j = scattered.names.index(name), run.names.index(name)
        assert scattered.first_failed[i] == run.first_failed[j] and torch.equal(scattered.rows[i], run.rows[j])
    assert (run.first_failed[:3] >= 0).all()  # each failed at some step


def test_nested_batches_latch_at_their_own_end() -> None:
    """An inner batch (a separately captured reset body) latches when it closes, not with the outer one."""
    latch = ValidationLatch("cpu", capacity=4)
    with latch.batch():
        with latch.batch():
            latch.require(torch.tensor(False), "inner", "m")
        assert latch.first_failed[0].item() == 0  # already latched
        latch.require(torch.tensor(False), "outer", "m")
        assert latch.first_failed[1].item() == -1  # pending until the outer batch closes
    assert latch.first_failed[:2].tolist() == [0, 0]


@pytest.mark.parametrize("value", [0.0, -0.0, 1e38, -3.4e38, float("nan"), float("inf"), -float("inf")])
def test_finite_helpers_match_isfinite(value: float) -> None:
    x = torch.zeros(3, 4)
    x[1, 2] = value
    assert torch.equal(finite_rows(x), torch.isfinite(x).all(dim=1))
    assert torch.equal(finite_rows(x[1]), torch.isfinite(x[1]))


def test_poll_before_any_step_says_so() -> None:
    latch = ValidationLatch("cpu")
    latch.require(torch.tensor([True, False]), "x", "bad")
    with pytest.raises(
        DeferredValidationError, match=r"failed before the first step:\n  - x: bad \(first failed at step 0, row 1\)"
    ):
        latch.poll(0)


def test_failure_names_first_row_and_count_one_read() -> None:
    latch = ValidationLatch("cpu")
    with latch.batch():
        latch.require(torch.tensor([[True, True], [True, False], [False, True]]), "x", "bad")
        latch.require(torch.tensor(False), "scalar", "no rows")
        latch.require_many(torch.tensor([[1, 1], [1, 0], [1, 0]]).bool(), ("a", "b"), ("m", "m"))  # per row
    with pytest.raises(DeferredValidationError) as err:
        latch.poll(1)
    rows = {f.name: (f.first_row, f.failing_rows) for f in err.value.failures}
    assert rows == {"x": (1, 2), "scalar": (None, None), "b": (1, 2)}
    assert "row 1 and 1 more" in str(err.value)


def _library_exceptions() -> list[type[BaseException]]:
    """Every exception (and warning) class defined in the library's modules."""
    import importlib
    import pkgutil

    import gym_graphreset

    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(gym_graphreset.__path__, "gym_graphreset."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__.startswith("gym_graphreset"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def _sample(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` with every attribute its constructor takes filled in."""
    if issubclass(cls, DeferredValidationError):
        return cls([FailedCheck("finite_obs", "NaN", 3, 1, 2, 5)], (0, 9))
    if "__init__" in vars(cls) and cls is not DeferredValidationError:
        pytest.fail(f"{cls.__qualname__} has its own __init__: add a sample here so its pickling is tested")
    return cls("a message naming what failed")


@pytest.mark.parametrize("cls", _library_exceptions(), ids=lambda c: c.__qualname__)
def test_every_library_exception_round_trips_pickle(cls: type[BaseException]) -> None:
    """A failure in a worker process reaches the parent as itself (not as BrokenProcessPool)."""
    import pickle

    err = _sample(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err) and back.args == err.args
    assert vars(back) == vars(err)


def test_a_polled_failure_round_trips_pickle(latch: ValidationLatch) -> None:
    """The error a real poll raises keeps its failures (rows included) and window through pickle."""
    import pickle

    latch.require(torch.tensor([True, False, False]), "finite_obs", "NaN obs")
    latch.advance()
    with pytest.raises(DeferredValidationError) as caught:
        latch.poll(1)
    back = pickle.loads(pickle.dumps(caught.value))
    assert back.failures == caught.value.failures and back.window == caught.value.window
    assert back.failures[0].first_row == 1 and back.failures[0].failing_rows == 2
    assert str(back) == str(caught.value)


@pytest.fixture
def process_group(tmp_path):
    """A one-rank gloo group in this process (the collective path of a poll, without torchrun)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield True
    finally:
        dist.destroy_process_group()


def test_failures_polled_across_ranks_keep_their_rows(process_group) -> None:
    """Through the collective a failure still names its rank, first failing row and count."""
    latch = ValidationLatch("cpu", capacity=4)
    latch.require(torch.tensor([True, True, True]), "quiet", "never fails")
    latch.advance()
    latch.require(torch.tensor([True, False, True, False, False]), "finite_obs", "NaN obs")
    with pytest.raises(DeferredValidationError) as caught:
        latch.poll(2, process_group)
    (failure,) = caught.value.failures
    assert (failure.name, failure.rank, failure.first_failed_step) == ("finite_obs", 0, 1)
    assert (failure.first_row, failure.failing_rows) == (1, 3)
    assert "on rank 0: NaN obs (first failed at step 1, row 1 and 2 more)" in str(caught.value)


def test_wrapper_with_a_process_group_reports_rows(process_group) -> None:
    """The wrapper's poll over a process group names the rows, as without one."""
    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from gym_graphreset.envs import CartPoleVectorEnv

    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4), "masked", process_group=process_group)
    env.reset(seed=0)
    env.step(torch.tensor([0, 7, 1, 7]))  # out of the Discrete(2) space in rows 1 and 3
    with pytest.raises(DeferredValidationError, match=r"valid_actions on rank 0: .*row 1 and 1 more\)"):
        env.poll_finite_validation()


def test_a_one_rank_group_recovers_from_an_interrupted_step_by_reset(process_group) -> None:
    """Alone in its group, an env whose step raised announces nothing to stop: reset() recovers, close() is quiet."""
    from gym_graphreset import FixedShapeAutoresetVectorEnv
    from gym_graphreset.envs import CartPoleVectorEnv

    env = FixedShapeAutoresetVectorEnv(CartPoleVectorEnv(4), "masked", process_group=process_group)
    env.reset(seed=0)
    inner_step = env.env.step

    def broken_step(actions: torch.Tensor) -> None:
        raise RuntimeError("physics broke")

    env.env.step = broken_step
    with pytest.raises(RuntimeError, match="physics broke"):
        env.step(torch.zeros(4, dtype=torch.long))
    env.env.step = inner_step
    env.reset(seed=0)  # its poll carries the failure; with no other rank, nothing must stop
    env.step(torch.zeros(4, dtype=torch.long))
    env.poll_finite_validation()
    env.close()


def test_a_closing_rank_leaves_quietly_and_polls_no_more(process_group) -> None:
    """A rank's failure announced in close() raises nothing there; after it the latch makes no collective."""
    latch = ValidationLatch("cpu", capacity=4)
    latch.poll(0, process_group, settings={"validation_poll_interval": 4})
    latch.poll(4, process_group, settings={"validation_poll_interval": 4}, failure="step() 5 raised X", closing=True)
    latch.poll(4, process_group, closing=True)  # detached: quiet, no collective
    with pytest.raises(CrossRankError, match=r"rank_failed on rank 0: step\(\) 5 raised X \(announced in close\(\)"):
        latch.poll(8, process_group)


@pytest.mark.parametrize("batched", [False, True])
def test_per_step_messages_keep_one_slot_and_report_the_latest(batched: bool) -> None:
    """A message that changes every step neither grows the latch's caches nor is reported stale."""
    latch = ValidationLatch("cpu", capacity=4)
    for t in range(200):
        with latch.batch() if batched else contextlib.nullcontext():
            latch.require(torch.tensor([True, t < 150]), "reward", f"reward out of range at step {t}")
            latch.require(torch.tensor(True), "obs", "obs out of range")
        latch.advance()
    assert latch.names == ["reward", "obs"] and len(latch._index_cache) <= 2  # by names, not by messages
    with pytest.raises(DeferredValidationError) as err:
        latch.poll(200)
    (failure,) = err.value.failures
    assert failure.first_failed_step == 150 and failure.first_row == 1
    changed = "(its message changed 199 time(s) since the last poll; this is the latest)"
    assert failure.message == f"reward out of range at step 199 {changed}"
    latch.require(torch.tensor(False), "reward", "reward out of range at step 199")
    with pytest.raises(DeferredValidationError) as err:
        latch.poll(201)
    assert err.value.failures[0].message == "reward out of range at step 199"  # a new window: unchanged
