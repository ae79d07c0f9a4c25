"""The device queue: one evaluation per device at a time, a lost device's candidate evaluated once more elsewhere."""

from __future__ import annotations

import threading

import pytest

from kernelkiln.errors import UserError
from kernelkiln.evaluation.scheduler import Device, DeviceLost, DeviceQueue, DevicesGone, choose_kind


def _devices(n: int) -> list[Device]:
    return [Device(name=f"d{i}", kind="cpu: test", handle=i) for i in range(n)]


def test_a_candidate_whose_device_dies_is_evaluated_on_another_and_counted_once():
    queue = DeviceQueue(_devices(2))
    seen = []

    def work(device: Device) -> str:
        seen.append(device.name)
        if device.name == "d0":
            raise DeviceLost("node died")
        return "verdict"

    assert queue.run(work) == "verdict"
    assert seen == ["d0", "d1"]
    stats = queue.stats()
    assert (stats.evaluations, stats.retried, stats.alive, stats.lost) == (1, 1, 1, ["d0"])
    assert queue.run(lambda d: d.name) == "d1"  # the dead device is never handed out again


def test_a_candidate_that_loses_its_device_twice_stops_the_run_with_a_resumable_error():
    queue = DeviceQueue(_devices(3))

    def work(device: Device) -> None:
        raise DeviceLost(f"{device.name} gone")

    with pytest.raises(DevicesGone, match=r"lost its device on each of 2 tries.*--resume"):
        queue.run(work)
    assert [d.name for d in queue.alive()] == ["d2"]


def test_waiting_candidates_fail_with_one_line_when_the_last_device_dies():
    queue = DeviceQueue(_devices(1))
    started, release = threading.Event(), threading.Event()

    def dies(device: Device) -> None:
        started.set()
        release.wait(5)
        raise DeviceLost("node died")

    first = queue.submit(dies)
    started.wait(5)
    second = queue.submit(lambda d: None)  # waits for the one device
    release.set()
    assert isinstance(first.exception(5), DevicesGone)
    assert isinstance(second.exception(5), DevicesGone)
    assert "every evaluation device of the cluster died" in str(second.exception())


def test_no_device_ever_runs_two_evaluations_at_once():
    queue = DeviceQueue(_devices(2))
    busy: dict[str, int] = {"d0": 0, "d1": 0}
    worst = {"d0": 0, "d1": 0}
    lock = threading.Lock()

    def work(device: Device) -> None:
        with lock:
            busy[device.name] += 1
            worst[device.name] = max(worst[device.name], busy[device.name])
        threading.Event().wait(0.005)
        with lock:
            busy[device.name] -= 1

    threads = [threading.Thread(target=lambda: [queue.run(work) for _ in range(5)]) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert worst == {"d0": 1, "d1": 1}
    assert queue.stats().evaluations == 30


def test_a_pool_without_devices_is_refused():
    with pytest.raises(DevicesGone, match="no evaluation device"):
        DeviceQueue([])


def test_a_run_is_judged_on_one_kind_of_device_the_most_numerous_unless_named():
    devices = [
        Device("a", "cuda: NVIDIA H200", 0),
        Device("b", "cuda: NVIDIA A100", 1),
        Device("c", "cuda: NVIDIA H200", 2),
    ]
    assert choose_kind(devices, None) == "cuda: NVIDIA H200"
    assert choose_kind(devices, "cuda: NVIDIA A100") == "cuda: NVIDIA A100"
    with pytest.raises(UserError, match="judged on 'cuda: NVIDIA L4', and the cluster has none of it"):
        choose_kind(devices, "cuda: NVIDIA L4")  # a resumed run never moves to another kind


def test_tasks_run_at_once_until_their_agents_cover_every_device():
    assert [DeviceQueue(_devices(n)).tasks_at_once(8) for n in (1, 8, 9, 64)] == [1, 1, 2, 8]
