"""Benchmarks (and the test suite) at two commits, side by side in one run.

Each commit is checked out in a worktree of its own and run with this checkout's virtual
environment, its `src` first on the path, so that the server processes a benchmark starts are
that commit's too. Rounds alternate the order of the commits, so that a machine that warms up or
slows down during the run weighs on both alike. Every run's whole output is kept in the log
folder; the table shows the lines each benchmark ends with, the figures' rows, per commit.

    python tools/side_by_side.py BEFORE [--after REV] [--rounds 2] [--suite] \
        [--bench "bench.submit --queue-only" "bench.admission --zero 3000 --lanes 2"]

The machine's file system matters to the figures (BENCHMARKS.md): set TMPDIR to a folder on a
journaled ext4 mount, as for any benchmark here.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BENCHES = (
    "bench.submit --queue-only --duration 10",
    "bench.admission --zero 3000 --lanes 2",
    "bench.small_jobs --seconds 20",
)
SUITE = "pytest -q -m 'not gpu' -p no:cacheprovider"


def worktree(rev: str, root: Path) -> tuple[str, Path]:
    """A detached worktree of `rev` under `root` (reused when it is already there)."""
    sha = git("rev-parse", "--short", rev)
    path = root / sha
    if not path.exists():
        git("worktree", "add", "--detach", str(path), sha)
    return sha, path


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()


def run(command: str, tree: Path, log: Path) -> tuple[float, int, list[str]]:
    """`command` (a benchmark module with its options, or the suite) in `tree`: its seconds,
    exit status and last lines."""
    venv = Path(sys.executable).parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree)]),
        "PATH": os.pathsep.join([str(venv), os.environ.get("PATH", "")]),
    }
    argv = ["-m", *shlex.split(command)]
    started = time.monotonic()
    with log.open("w") as out:
        status = subprocess.run(
            [sys.executable, *argv], cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    return time.monotonic() - started, status, lines[-4:]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="the commit to compare against (e.g. main~5)")
    parser.add_argument("--after", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bench", nargs="*", default=list(DEFAULT_BENCHES))
    parser.add_argument("--suite", action="store_true", help="also run the test suite")
    parser.add_argument("--trees", type=Path, default=Path("/tmp/side-by-side"))
    args = parser.parse_args(argv)
    args.trees.mkdir(parents=True, exist_ok=True)
    sides = [worktree(args.before, args.trees), worktree(args.after, args.trees)]
    logs = args.trees / time.strftime("logs-%Y%m%d-%H%M%S")
    logs.mkdir()
    commands = [*args.bench, *([SUITE] if args.suite else [])]
    print(f"before {sides[0][0]}, after {sides[1][0]}; logs in {logs}", flush=True)
    for round_no in range(1, args.rounds + 1):
        order = sides if round_no % 2 else sides[::-1]
        for command in commands:
            print(f"\n## round {round_no}: {command}", flush=True)
            for sha, tree in order:
                name = f"{round_no}-{command.split()[0]}-{sha}.log"
                seconds, status, tail = run(command, tree, logs / name)
                side = "before" if sha == sides[0][0] else "after"
                print(f"  {side} {sha}: exit {status}, {seconds:.0f} s", flush=True)
                for line in tail:
                    print(f"    {line}", flush=True)


if __name__ == "__main__":
    main()
