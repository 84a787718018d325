"""What one hand-off of a call to a worker thread and back costs the event loop's thread (its CPU
time, which the loop cannot spend on requests), under uvloop as the server runs: anyio's
`to_thread.run_sync` with a limiter (as the thread executor used), against the loop's
`run_in_executor` on a one-thread `ThreadPoolExecutor` (as it uses now). Alternating rounds.

    python -m bench.hand_off [--calls 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import anyio
import anyio.to_thread
import uvloop


def _nothing() -> None:
    pass


async def _loop_cpu_us(hand_off: Callable[[], Awaitable[None]], calls: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        await hand_off()
    return (time.thread_time() - started) / calls * 1e6


async def _measure(calls: int, rounds: int) -> list[tuple[float, float]]:
    loop = asyncio.get_running_loop()
    limiter = anyio.CapacityLimiter(1)
    with ThreadPoolExecutor(1) as threads:

        async def through_anyio() -> None:
            await anyio.to_thread.run_sync(_nothing, limiter=limiter)

        async def through_executor() -> None:
            await loop.run_in_executor(threads, _nothing)

        return [
            (
                await _loop_cpu_us(through_anyio, calls),
                await _loop_cpu_us(through_executor, calls),
            )
            for _ in range(rounds)
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("event loop CPU per hand-off, microseconds")
    print(f"{'round':>5} {'anyio':>8} {'executor':>9} {'ratio':>6}")
    for index, (anyio_us, executor_us) in enumerate(uvloop.run(_measure(args.calls, args.rounds))):
        print(f"{index + 1:>5} {anyio_us:>8.1f} {executor_us:>9.1f} {executor_us / anyio_us:>6.2f}")


if __name__ == "__main__":
    main()
