"""ultralytics never reaches the network: import, inspect weights, run an inference job (and a
tracked video job).

Each check runs in a fresh Python process whose network is blocked before ultralytics is imported
(this test process may already have imported it). The child blocks the socket functions Python
code uses, and records through an audit hook every socket operation and every process it starts,
which also catches calls made from C and a `pip install` in a child process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from yolo_orch.runners.yolo_env import configure_ultralytics
from yolo_orch.testing.yolo import ensure_ultralytics

ROOT = Path(__file__).resolve().parents[2]

LOCAL_TOOLS = {"/sbin/ldconfig", "fc-list"}
"""Processes seen on a clean run, both local: torch's CUDA library finder runs `ldconfig -p` and
matplotlib builds its font cache with `fc-list`. Anything else (pip, git, curl) fails the test."""

BLOCK_NETWORK = """
import json, socket, sys

events = []

def audit(event, args):
    if event.startswith("socket.") or event in {
        "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork"
    }:
        events.append([event, repr(args)[:200]])

sys.addaudithook(audit)

def refuse(*args, **kwargs):
    events.append(["refused", repr(args)[:200]])
    raise OSError("network blocked by test_offline")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
socket.gethostbyname = refuse
"""

FULL_RUN = """
from pathlib import Path
base = Path(sys.argv[1])
sys.path.insert(0, sys.argv[2])

from yolo_orch.testing.yolo import (
    RecordingContext, build_checkpoint, ensure_ultralytics, fixed_resolver, make_images,
    write_corrupt,
)
ensure_ultralytics(base)

from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.registry.weights import ResolvedWeights, inspect_checkpoint, sha256_file

# A non-ASCII class name makes ultralytics draw labels with PIL and look for its Arial font.
path = build_checkpoint(base / "tiny.pt", class_names=("rød", "grün"))
info = inspect_checkpoint(path)
runner = YoloInferenceRunner(
    fixed_resolver({"tiny": ResolvedWeights(path, sha256_file(path))}), data_roots=[base]
)
inputs = [*make_images(base / "images", 2), write_corrupt(base / "images" / "broken.jpg")]
ctx = RecordingContext().context(base / "job", inputs, imgsz=128, save_annotated=True)
result = runner.run(ctx)

# Tracking imports lap, which ultralytics would pip-install if it were missing.
from yolo_orch.testing.video import make_video
make_video(base / "clip.mp4", frames=8)
video_ctx = RecordingContext().context(
    base / "video-job", [base / "clip.mp4"], imgsz=64, track="botsort", save_annotated=True
)
video = runner.run(video_ctx)
print(json.dumps({
    "events": events,
    "task": info.task,
    "summary": result.summary,
    "video_summary": video.summary,
    "artifacts": sorted(p.name for p in (base / "job" / "artifacts").iterdir()),
}))
"""

EXPORT_AND_LOAD = """
from datetime import UTC, datetime
from pathlib import Path
base = Path(sys.argv[1])
sys.path.insert(0, sys.argv[2])

from yolo_orch.testing.yolo import (
    RecordingContext, build_checkpoint, ensure_ultralytics, fixed_resolver, make_images,
)
ensure_ultralytics(base)

from dataclasses import replace
from yolo_orch.domain import JobKind
from yolo_orch.registry.manifests import copy_tree_hashing
from yolo_orch.runners.export import YoloExportRunner
from yolo_orch.runners.formats import load_variant
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.domain.variants import ENTRY_NAMES, Variant
from yolo_orch.registry.weights import ResolvedWeights, sha256_file

path = build_checkpoint(base / "tiny.pt")
[image] = make_images(base / "images", 1)
kept = {}

def register(files):
    folder = base / "variants" / str(files.format)
    manifest = copy_tree_hashing(files.output, folder, ENTRY_NAMES[files.format])
    kept[files.format] = Variant(
        id=str(files.format), model_id="m", format=files.format, sha256=manifest.digest,
        size_bytes=manifest.size_bytes, files=manifest.files, lineage=files.lineage,
        source=files.source, job_id=files.job_id, created_at=datetime.now(UTC),
    )
    return {"id": str(files.format), "format": str(files.format)}

runner = YoloExportRunner(
    fixed_resolver({"m": ResolvedWeights(path, sha256_file(path))}), register, data_roots=[]
)
detections = {}
for export_format in ("onnx", "openvino"):
    ctx = RecordingContext().context(base / "job", [], format=export_format, imgsz=64)
    ctx = replace(ctx, job=replace(ctx.job, kind=JobKind.EXPORT, model_id="m"))
    runner.run(ctx)
    variant = kept[export_format]
    model = load_variant(ResolvedVariant(variant, base / "variants" / export_format), "detect")
    [result] = model.predict(str(image), imgsz=64, device="cpu", verbose=False)
    detections[export_format] = len(result.boxes)
print(json.dumps({"events": events, "detections": detections}))
"""

PLAIN_IMPORT = """
import ultralytics.utils
print(json.dumps({"events": events, "online": ultralytics.utils.ONLINE}))
"""


def _run_child(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    code = textwrap.dedent(BLOCK_NETWORK) + textwrap.dedent(script)
    completed = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=args[0] if args else None,
        env=env,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    output: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return output


def test_import_inspect_and_inference_make_no_network_attempt(tmp_path: Path) -> None:
    output = _run_child(FULL_RUN, str(tmp_path), str(ROOT))

    network = [event for event in output["events"] if not event[0].startswith("subprocess.")]
    processes = [event for event in output["events"] if event[0].startswith("subprocess.")]
    assert network == []
    assert [args for _, args in processes if args.split("'")[1] not in LOCAL_TOOLS] == []
    assert output["task"] == "detect"
    assert output["summary"]["images"] == 3
    assert output["summary"]["failed_images"] == 1
    assert output["artifacts"] == ["00000_img0.jpg", "00001_img1.jpg"]
    assert output["video_summary"]["frames"] == 8


def test_export_and_loading_the_exported_models_make_no_network_attempt(
    tmp_path: Path,
) -> None:
    output = _run_child(EXPORT_AND_LOAD, str(tmp_path), str(ROOT))

    network = [event for event in output["events"] if not event[0].startswith("subprocess.")]
    processes = [event for event in output["events"] if event[0].startswith("subprocess.")]
    assert network == []
    assert [args for _, args in processes if args.split("'")[1] not in LOCAL_TOOLS] == []
    assert output["detections"]["onnx"] > 0
    assert output["detections"]["openvino"] > 0


def test_the_blocker_sees_what_an_unconfigured_import_tries(tmp_path: Path) -> None:
    """The control: without `configure_ultralytics`, importing ultralytics probes DNS."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("YOLO_", "ULTRALYTICS_"))}
    env["YOLO_CONFIG_DIR"] = str(tmp_path)  # keep its settings file out of the home folder

    output = _run_child(PLAIN_IMPORT, str(tmp_path), env=env)

    assert output["online"] is False
    assert any(event == "refused" for event, _ in output["events"])


def test_configure_is_idempotent_and_points_ultralytics_at_its_folder(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    config = ensure_ultralytics(tmp_path_factory.getbasetemp())

    assert configure_ultralytics(config) == config  # the same folder again: nothing to do
    assert configure_ultralytics(tmp_path / "elsewhere") == config  # the first one stays

    from ultralytics.utils import SETTINGS

    for font in ("Arial.ttf", "Arial.Unicode.ttf"):
        assert (config / "Ultralytics" / font).stat().st_size > 0
    assert SETTINGS["sync"] is False
    assert not any(SETTINGS[name] for name in ("clearml", "comet", "dvc", "mlflow", "raytune"))
    for key in ("weights_dir", "runs_dir", "datasets_dir"):
        assert Path(SETTINGS[key]).is_relative_to(config)
