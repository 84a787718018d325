"""Tuning: the same search through a `tune` job, its trials on lanes side by side, and through
ultralytics' own `model.tune`, which runs its trials one after another; in one run.

    python -m bench.tune [--sim-trials 16] [--sim-epochs 8] [--sim-epoch-s 0.2]
                         [--trials 6] [--epochs 2] [--weights PT]
                         [--skip-sim] [--skip-real]

Part 1, simulated runtime (2 lanes, model `sim`; its score peaks at lr0 0.02, epoch by epoch):
one search (`--sim-trials` trials, seed 0, lr0 in [0.0005, 0.2] on a log scale, `--sim-epochs`
epochs of `--sim-epoch-s` each) as a tune with `parallel` 1 (one trial at a time, as
ultralytics runs them: the baseline) and `parallel` 2, pruner none; and with `parallel` 2 and
the median pruner. The lanes' scheduling alone: a simulated epoch costs no CPU.

Part 2, real runtime on the CPU (`--skip-real` leaves it out): a yolo11n trained on the demo's
shapes (`small_shapes.train_shape_detector`, 300 images, 6 epochs: about a minute on a quiet
2-core host; `--weights` reuses one) is fine-tuned by each trial on 48 + 16 other such images at
imgsz 128, batch 16, SGD, `--epochs` epochs, `--trials` trials, lr0 in [0.0005, 0.05] (linear on
both sides: ultralytics' space has no log scale), training seed 0:
- ultralytics: `YOLO(weights).tune(...)` in this process (its `Tuner`, which in 8.4 trains each
  trial in a `yolo train` subprocess of its own: the import and set-up are paid per trial);
- server, 1 lane: a tune job on the `cpu` lane, one trial at a time;
- server, 2 lanes: the same with two trials at once on the `cpu` lane (`slots_per_lane` 2,
  `parallel` 2).
Every trial trains with ultralytics' own CPU thread count (`NUM_THREADS`: all cores but one, 1
here), as its tuner's trials do. Both searches start from the training defaults (lr0 0.01);
then ultralytics mutates the best trials so far (a genetic search, its mutations drawn from an
unseeded generator: its later trials differ from run to run), the server samples with Optuna's
TPE, seeded. "best": the highest mAP50-95 of a trial (ultralytics' fitness is mAP50-95). A few
epochs of a few batches stay inside ultralytics' warmup (at least 100 iterations, where the
learning rate ramps up from 0), so lr0 moves the scores little: the sides' best differ by noise.

Wall time: the tune job's `created_at` to `finished_at` (submission to the end), and the
`tune()` call. Trials/hour: trials over wall time (pruned trials count). Time to best: from the
tune's submission to the end of the trial its result names best; with the pruner, also to the
end of the first trial as good as the unpruned search's best. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench._server import running_server
from yolo_orch.testing import require, wait_terminal

TUNE_TIMEOUT_S = 3600.0
SIM_SPACE = {"lr0": {"low": 0.0005, "high": 0.2, "log": True}}
TARGET_RATIO, TARGET_PER_LANE, TARGET_TO_BEST = 1.8, 0.9, 0.6
MODEL = "shapes"
REAL_LR0 = (0.0005, 0.05)
REAL_BASE = {"imgsz": 128, "batch": 16, "workers": 0, "seed": 0, "optimizer": "SGD"}


@dataclass(frozen=True)
class Outcome:
    """One search, on whichever side ran it."""

    side: str
    trials: int
    wall_s: float
    best: float | None
    best_number: int | None
    to_best_s: float | None = None
    pruned: int = 0
    ends: tuple[tuple[float, float], ...] = ()
    """Each complete trial's end (seconds after the submission) and score."""

    def reached(self, value: float) -> float | None:
        """When a trial first scored `value` or more."""
        return min((end for end, score in self.ends if score >= value), default=None)

    @property
    def per_hour(self) -> float:
        return self.trials / self.wall_s * 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sim-trials", type=int, default=16)
    parser.add_argument("--sim-epochs", type=int, default=8)
    parser.add_argument("--sim-epoch-s", type=float, default=0.2, help="seconds a sim epoch takes")
    parser.add_argument("--sim-warmup", type=int, default=3, help="the tune's warmup_trials")
    parser.add_argument("--trials", type=int, default=6, help="real trials")
    parser.add_argument("--epochs", type=int, default=2, help="each real trial's epochs")
    parser.add_argument(
        "--weights", type=Path, help="a shapes detector to fine-tune (default: train one)"
    )
    parser.add_argument("--skip-sim", action="store_true")
    parser.add_argument("--skip-real", action="store_true")
    args = parser.parse_args()
    if not args.skip_sim:
        simulated(args)
    if not args.skip_real:
        report_real(*real(args.trials, args.epochs, args.weights), args)


def simulated(args: argparse.Namespace) -> None:
    def body(parallel: int, pruner: str) -> dict[str, Any]:
        return {
            "kind": "tune",
            "model": "sim",
            "params": {
                "space": SIM_SPACE,
                "trials": args.sim_trials,
                "epochs": args.sim_epochs,
                "parallel": parallel,
                "pruner": pruner,
                "seed": 0,
                "warmup_trials": args.sim_warmup,
                "base": {
                    "sim_seconds": args.sim_epochs * args.sim_epoch_s,
                    "sim_steps": args.sim_epochs,
                },
            },
        }

    with (
        running_server(sim_lanes=2) as server,
        httpx.Client(base_url=server.url, timeout=120) as client,
    ):
        one = server_tune(client, "parallel 1, no pruner", body(1, "none"))
        two = server_tune(client, "parallel 2, no pruner", body(2, "none"))
        pruned = server_tune(client, "parallel 2, median pruner", body(2, "median"))
    print(
        f"Part 1, simulated runtime, 2 lanes: {args.sim_trials} trials of {args.sim_epochs} "
        f"epochs x {args.sim_epoch_s} s, lr0 in [{SIM_SPACE['lr0']['low']}, "
        f"{SIM_SPACE['lr0']['high']}] (log scale), TPE seed 0, warmup_trials {args.sim_warmup}"
    )
    table([one, two, pruned], baseline=one)
    ratio = two.per_hour / one.per_hour
    print(
        f"trials/hour, parallel 2 / parallel 1: {ratio:.2f} (target >= {TARGET_RATIO}), per "
        f"lane {ratio / 2:.2f} (target >= {TARGET_PER_LANE})"
    )
    if pruned.to_best_s is not None and two.to_best_s is not None and two.best is not None:
        print(
            f"time to the best trial, median pruner / none: {pruned.to_best_s / two.to_best_s:.2f}"
            f" (target <= {TARGET_TO_BEST})"
        )
        # With two trials at once, when a trial ends decides what TPE knows at the next ask:
        # the pruned search can go on past the same best to a slightly better trial.
        reached = pruned.reached(two.best)
        if reached is not None:
            print(
                f"time to a trial as good as the unpruned best ({two.best:.4f}), median pruner / "
                f"none: {reached / two.to_best_s:.2f}"
            )
    print()


def report_real(outcomes: list[Outcome], threads: int, args: argparse.Namespace) -> None:
    direct, one, two = outcomes
    print(
        f"Part 2, real runtime on the CPU: {args.trials} trials of {args.epochs} epochs, "
        f"fine-tuning the shapes detector at imgsz {REAL_BASE['imgsz']}, batch "
        f"{REAL_BASE['batch']}, {REAL_BASE['optimizer']}, lr0 in [{REAL_LR0[0]}, {REAL_LR0[1]}], "
        f"{threads} torch thread(s) a trial; ultralytics mutates (genetic, unseeded), the "
        "server samples with TPE (seed 0)"
    )
    table(outcomes, baseline=direct)
    ratio = two.per_hour / direct.per_hour
    print(
        f"trials/hour, server 2 lanes / ultralytics: {ratio:.2f} (target >= {TARGET_RATIO}), "
        f"per lane {ratio / 2:.2f} (target >= {TARGET_PER_LANE}); server 1 lane / "
        f"ultralytics: {one.per_hour / direct.per_hour:.2f}; server 2 lanes / 1 lane: "
        f"{two.per_hour / one.per_hour:.2f}"
    )


def table(outcomes: list[Outcome], baseline: Outcome) -> None:
    print(
        f"{'':<30} {'trials':>6} {'pruned':>6} {'wall s':>8} {'trials/h':>9} {'ratio':>6} "
        f"{'best':>7} {'#':>3} {'to best s':>9}"
    )
    for o in outcomes:
        best = "-" if o.best is None else f"{o.best:.4f}"
        number = "-" if o.best_number is None else str(o.best_number)
        to_best = "-" if o.to_best_s is None else f"{o.to_best_s:.2f}"
        print(
            f"{o.side:<30} {o.trials:>6} {o.pruned:>6} {o.wall_s:>8.2f} {o.per_hour:>9.0f} "
            f"{o.per_hour / baseline.per_hour:>6.2f} {best:>7} {number:>3} {to_best:>9}"
        )


def server_tune(client: httpx.Client, side: str, body: dict[str, Any]) -> Outcome:
    """Submit the tune, wait for its end; its figures from the server's own timestamps."""
    response = client.post("/v1/jobs", json=body)
    require(response.status_code == 202, f"tune: {response.status_code} {response.text}")
    done = wait_terminal(client, response.json()["id"], TUNE_TIMEOUT_S)
    require(done["state"] == "succeeded", f"tune ended {done['state']}: {done['error']}")
    result = client.get(f"/v1/jobs/{done['id']}/result").json()
    best = result["best"]
    listed = client.get("/v1/jobs", params={"chain": done["id"], "kind": "training", "limit": 500})
    submitted = _at(done["created_at"])
    ended = {job["id"]: _at(job["finished_at"]) - submitted for job in listed.json()["jobs"]}
    return Outcome(
        side=side,
        trials=len(result["trials"]),
        wall_s=_at(done["finished_at"]) - submitted,
        best=best["value"],
        best_number=best["number"],
        to_best_s=ended[best["job_id"]],
        pruned=sum(trial["state"] == "pruned" for trial in result["trials"]),
        ends=tuple(
            (ended[trial["job_id"]], trial["value"])
            for trial in result["trials"]
            if trial["state"] == "complete"
        ),
    )


def real(trials: int, epochs: int, pretrained: Path | None) -> tuple[list[Outcome], int]:
    """Part 2: ultralytics' `tune`, then tune jobs on a server with 1 and 2 lanes; and the
    torch threads each trial had."""
    from yolo_orch.demo.dataset import DatasetSpec, make_dataset
    from yolo_orch.testing.small_shapes import OBJECT_FRACTION, train_shape_detector
    from yolo_orch.testing.yolo import ensure_ultralytics

    with tempfile.TemporaryDirectory(prefix="yolo-orch-bench-tune-") as tmp:
        root = Path(tmp)
        # Offline and quiet before anything imports ultralytics; its tuner's `yolo train`
        # subprocesses inherit the environment this sets.
        ensure_ultralytics(root)
        from ultralytics.utils import NUM_THREADS

        weights = root / "weights" / f"{MODEL}.pt"
        weights.parent.mkdir()
        if pretrained is None:
            started = time.perf_counter()
            pretrained = train_shape_detector(root / "pretrain", images=300, epochs=6)
            print(f"shapes detector trained in {time.perf_counter() - started:.0f} s")
        shutil.copy(pretrained, weights)
        spec = DatasetSpec(train=48, val=16, test=0, object_fraction=OBJECT_FRACTION, seed=7)
        data = make_dataset(root / "data" / "tune-set", spec)
        outcomes = [ultralytics_tune(weights, data, trials, epochs, root / "direct")]
        for lanes in (1, 2):
            with (
                running_server(
                    runtime="auto",
                    data_roots=[data.parent.parent],
                    model_roots=[weights.parent],
                    cpu_threads=NUM_THREADS,
                    slots_per_lane=lanes,
                ) as server,
                httpx.Client(base_url=server.url, timeout=120) as client,
            ):
                imported = client.post("/v1/models", json={"path": weights.name})
                require(imported.status_code in (200, 201), f"import: {imported.text}")
                body = {
                    "kind": "tune",
                    "model": MODEL,
                    "dataset": "tune-set/data.yaml",
                    "params": {
                        "space": {"lr0": {"low": REAL_LR0[0], "high": REAL_LR0[1]}},
                        "trials": trials,
                        "epochs": epochs,
                        "parallel": lanes,
                        "pruner": "none",
                        "seed": 0,
                        "base": REAL_BASE,
                    },
                }
                side = f"server, {lanes} lane{'s' if lanes > 1 else ''}"
                outcomes.append(server_tune(client, side, body))
        return outcomes, NUM_THREADS


def ultralytics_tune(weights: Path, data: Path, trials: int, epochs: int, project: Path) -> Outcome:
    """`model.tune` as its documentation shows it, with the server's training settings (the
    ones a trial job sets: no AMP, no compile, no plots); its best from its results file."""
    from ultralytics.models import YOLO

    started = time.perf_counter()
    YOLO(str(weights)).tune(
        data=str(data),
        epochs=epochs,
        iterations=trials,
        space={"lr0": REAL_LR0},
        device="cpu",
        project=str(project),
        name="tune",
        amp=False,
        compile=False,
        plots=False,
        val=True,
        deterministic=False,
        verbose=False,
        **REAL_BASE,
    )
    wall = time.perf_counter() - started
    lines = (project / "tune" / "tune_results.ndjson").read_text().splitlines()
    scores = [
        next(iter(record["datasets"].values())).get("metrics/mAP50-95(B)", 0.0)
        for record in map(json.loads, lines)
    ]
    best = max(range(len(scores)), key=scores.__getitem__)
    return Outcome("ultralytics model.tune", len(scores), wall, scores[best], best)


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


if __name__ == "__main__":
    main()
