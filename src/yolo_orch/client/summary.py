"""What a finished job comes to, in a few lines (`submit --wait`, `wait`), and a training job's
epoch, loss and scores while it runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from yolo_orch.client import render
from yolo_orch.client.errors import ApiError
from yolo_orch.client.shapes import ExportResultDetail, Job
from yolo_orch.client.sync import Client

_MAIN_SCORES = (
    ("mAP50", "mAP50-95"),
    ("mask_mAP50", "mask_mAP50-95"),
    ("pose_mAP50", "pose_mAP50-95"),
    ("top1", "top5"),
    ("mIoU", "pixel_acc"),
    ("delta1", "abs_rel"),
)
_SHOWN_CLASSES = 8
PER_CLASS_MAX_IMAGES = 5000
"""Up to this many images, a summary counts detections per class from the result's pages."""
_COUNTED = {"detections": "detection", "classified": "classified", "maps": "map"}
"""What an inference result counts, and each one's name for a count of one."""


def main_scores(metrics: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The task's headline scores: mAP50 and mAP50-95 for boxes, top1/top5, mIoU, ..."""
    for names in _MAIN_SCORES:
        found = [(name, metrics[name]) for name in names if isinstance(metrics.get(name), float)]
        if found:
            return found
    return [(k, v) for k, v in metrics.items() if isinstance(v, float)][:3]


def scores_text(metrics: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {value:.3f}" for name, value in main_scores(metrics))


def training_status(job: Job, history: list[dict[str, Any]]) -> str:
    """`epoch 3/50, loss 1.234, mAP50 0.612, mAP50-95 0.401` from the job's progress and its
    metrics so far (`GET /v1/jobs/{id}/metrics`)."""
    progress = job.progress
    detail = (progress.detail if progress else None) or {}
    parts = []
    if "epoch" in detail and "epochs" in detail:
        parts.append(f"epoch {detail['epoch']}/{detail['epochs']}")
    elif progress is not None and progress.unit == "steps":  # the simulated runtime's epochs
        parts.append(f"epoch {progress.done}/{progress.total}")
    losses = detail.get("loss") or (history[-1].get("train_loss") if history else None)
    if isinstance(losses, dict) and losses:
        parts.append(f"loss {sum(float(v) for v in losses.values()):.3f}")
    if history and (scores := scores_text(history[-1])):
        parts.append(scores)
    return ", ".join(parts)


def completed_epochs(job: Job) -> int:
    """Epochs whose metrics the server has, as far as the progress tells."""
    progress = job.progress
    if progress is None:
        return 0
    detail = progress.detail or {}
    if "epoch" in detail:
        return int(detail["epoch"]) - 1
    return progress.done if progress.unit == "steps" else 0


def job_summary(job: Job, client: Client) -> list[str]:
    """A succeeded job's result, a line or a few (the client fetches what its summary lacks:
    the classes found, the model's name, the variant's size); nothing for other states."""
    result = job.result
    if job.state != "succeeded" or not result:
        return []
    if job.kind == "inference":
        return _inference(result, lambda: _per_class(client, job))
    if job.kind == "training":
        return _training(result, client)
    if job.kind == "tune":
        return _tune(result, client)
    if job.kind == "validation":
        images = result.get("images")
        split = result.get("split", "val")
        line = f"{split} split, {images} images" if images is not None else f"{split} split"
        return [f"{line}: {_all_scores(result.get('metrics') or {})}"]
    return _export(result, client, job.id)


def _per_class(client: Client, job: Job) -> Counter[str]:
    counts: Counter[str] = Counter()
    for entry in client.result(job.id, page_size=1000):
        counts.update(d.class_name for d in getattr(entry, "detections", None) or ())
    return counts


def _inference(result: Mapping[str, Any], per_class: Callable[[], Counter[str]]) -> list[str]:
    images = int(result.get("images", 0))
    line = f"{images} image{'s' * (images != 1)}"
    if result.get("failed_images"):
        line += f" ({result['failed_images']} unreadable)"
    for counted, one in _COUNTED.items():
        if counted in result:
            line += f", {result[counted]} {one if result[counted] == 1 else counted}"
    ran = result.get("format")
    if ran:
        line += f"; ran {ran}" + (
            f" variant {result['variant_id']}" if result.get("variant_id") else ""
        )
    lines = [line]
    if not result.get("detections"):
        return lines
    if images > PER_CLASS_MAX_IMAGES:
        return [*lines, "per class: see `yolo-orch result` (too many images to count here)"]
    counts = per_class()
    if counts:
        shown = ", ".join(f"{name} {n}" for name, n in counts.most_common(_SHOWN_CLASSES))
        more = len(counts) - _SHOWN_CLASSES
        lines.append(f"per class: {shown}" + (f", {more} more" if more > 0 else ""))
    return lines


def _training(result: Mapping[str, Any], client: Client) -> list[str]:
    epochs = result.get("epochs")
    model_id = result.get("model_id")
    line = f"{epochs} epochs" if epochs is not None else "trained"
    if model_id:
        line += f"; registered model {_model_name(client, str(model_id))} ({model_id})"
    else:
        line += "; no model registered (the simulated runtime)"
    lines = [line]
    if scores := scores_text(result.get("metrics") or {}):
        lines.append(f"best: {scores}")
    return lines


def _tune(result: Mapping[str, Any], client: Client) -> list[str]:
    ended = ", ".join(
        f"{result[state]} {state}"
        for state in ("complete", "pruned", "failed", "cancelled")
        if result.get(state)
    )
    lines = [f"{result.get('trials')} trials: {ended}"]
    best = result.get("best") or {}
    line = f"best: trial {best.get('number')}, {result.get('objective')} {best.get('value'):.3f}"
    line += f" with {', '.join(f'{k}={v}' for k, v in (best.get('params') or {}).items())}"
    if best.get("model_id"):
        line += f"; model {_model_name(client, str(best['model_id']))} ({best['model_id']})"
    return [*lines, line]


def _model_name(client: Client, model_id: str) -> str:
    try:
        return client.model(model_id).name
    except ApiError:  # deleted since: its id still says which it was
        return "(deleted)"


def _export(result: Mapping[str, Any], client: Client, job_id: str) -> list[str]:
    variant_id = result.get("variant_id")
    if not variant_id:
        return [f"format {result.get('format', '?')}; no variant stored (the simulated runtime)"]
    line = f"variant {variant_id}, format {result.get('format', '?')}"
    detail = client.result_detail(job_id).root
    if isinstance(detail, ExportResultDetail) and detail.variant:
        line += f", {render.size(int(detail.variant.get('size_bytes', 0)))}"
    return [line]


def _all_scores(metrics: Mapping[str, Any]) -> str:
    shown = [f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, float)]
    return ", ".join(shown) or "no scores"
