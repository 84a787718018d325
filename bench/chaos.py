"""Crash harness: cycles of submitting jobs while the server is killed with SIGKILL at a random
moment and restarted; at the end, the whole queue is checked like Jepsen's total-queue checker
(every acknowledged job present and terminal, none that no client submitted, none that ran to
success twice in one attempt): `yolo_orch.testing.chaos`, whose run this is.

    python -m bench.chaos [--cycles 50] [--jobs 200] [--clients 4] [--seed 1]

Simulated runtime, SQLite (synchronous=FULL), 2 lanes, max_attempts 3. Jobs are the crash
test's mix (inference; training on 1 or 2 lanes; three priorities; 0.05 s each), so the backlog
carries over from one cycle to the next and kills land while jobs run, while clients submit, or
both. A job killed mid-run max_attempts times ends `failed`/`interrupted`, which the checker
allows. The short CI version is tests/proof/test_chaos.py.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from yolo_orch.testing.chaos import ChaosReport, run_chaos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=200, help="submissions per cycle")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yolo-orch-chaos-") as tmp:
        report, _ = run_chaos(
            Path(tmp) / "var",
            Path(tmp) / "logs",
            cycles=args.cycles,
            jobs=args.jobs,
            clients=args.clients,
            seed=args.seed,
        )
    print_report(report)


def print_report(report: ChaosReport) -> None:
    acked = report.acked_at_kill
    print(f"cycles {report.cycles}, SIGKILLs {report.kills}, submissions {report.submissions}")
    print(f"kills with a job running: {report.running_at_kill}/{report.kills}")
    print(
        f"acked at the kill (this cycle's): min {min(acked)}, median "
        f"{sorted(acked)[len(acked) // 2]}, max {max(acked)}"
    )
    print(f"submission outcomes: {dict(report.outcomes)}")
    print(f"final job states: {dict(report.states)}; failures by code: {dict(report.errors)}")
    print(f"total {report.seconds:.0f} s (drain after the last cycle {report.drain_seconds:.0f} s)")
    print("checker: every acknowledged job present and terminal, none unexpected, none twice: OK")


if __name__ == "__main__":
    main()
