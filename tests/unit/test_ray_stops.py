"""`ray_cluster.stops.Stops`, the one timer that starts the stops asked of runs on a cluster: each
asked stop starts once, a run that ends cancels its stop under way, and the timer ends with the
last run it watches (plain asyncio: no Ray started)."""

from __future__ import annotations

import asyncio
import threading

from yolo_orch.ray_cluster.stops import Stop, Stops

LOOK_S = 0.001


async def test_a_stop_starts_once_its_flag_is_up_and_only_for_that_run() -> None:
    stops = Stops(LOOK_S)
    flags = {"a": threading.Event(), "b": threading.Event()}
    stopped: list[str] = []

    def stop_of(name: str) -> Stop:
        async def stop() -> None:
            stopped.append(name)

        return stop

    with (
        stops.watching(flags["a"].is_set, stop_of("a")),
        stops.watching(flags["b"].is_set, stop_of("b")),
    ):
        await asyncio.sleep(20 * LOOK_S)
        assert stopped == []
        flags["b"].set()  # as a cancel sets it, from another thread
        async with asyncio.timeout(5):
            while not stopped:
                await asyncio.sleep(LOOK_S)
        await asyncio.sleep(20 * LOOK_S)
        assert stopped == ["b"]  # once, however long its flag stays up


async def test_a_run_that_ends_cancels_its_stop_under_way_and_the_timer_ends_with_it() -> None:
    stops = Stops(LOOK_S)
    flag = threading.Event()
    began = asyncio.Event()
    cancelled = asyncio.Event()

    async def stop() -> None:  # the grace period before its actor is killed
        began.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with stops.watching(flag.is_set, stop):
        flag.set()
        async with asyncio.timeout(5):
            await began.wait()
    async with asyncio.timeout(5):
        await cancelled.wait()  # the run ended within its grace: nothing is killed
    async with asyncio.timeout(5):  # nothing left to watch: no timer left either
        while any(task.get_name() == "ray run stops" for task in asyncio.all_tasks()):
            await asyncio.sleep(LOOK_S)
