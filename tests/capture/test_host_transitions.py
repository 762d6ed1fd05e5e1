"""Host transitions run inline when eager; recorded at capture, replayed in order."""

from __future__ import annotations

from gym_graphreset import HostTransitions, host_transition


def test_inline_without_a_recorder() -> None:
    log: list[int] = []
    host_transition(lambda: log.append(1))
    assert log == [1]


def test_inline_when_active_but_not_recording() -> None:
    log: list[int] = []
    ht = HostTransitions()
    with ht.active():
        host_transition(lambda: log.append(1))
    assert log == [1] and len(ht) == 0


def test_recorded_then_replayed_in_order() -> None:
    log: list[str] = []
    ht = HostTransitions()
    with ht.recording_scope():
        host_transition(lambda: log.append("a"), name="first")
        host_transition(lambda: log.append("b"), name="second")
        assert ht.recording
    assert log == [] and ht.names == ["first", "second"] and not ht.recording
    ht.replay()
    ht.replay()
    assert log == ["a", "b", "a", "b"]
    with ht.recording_scope():  # a recapture starts a fresh record
        host_transition(lambda: log.append("c"))
    assert len(ht) == 1
    host_transition(lambda: log.append("outside"))  # the scope was left
    assert log[-1] == "outside"
