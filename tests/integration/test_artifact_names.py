"""Artifact names fit in a file name (255 bytes) whatever the input's name: a long stem is cut
(at a character boundary, to a fixed number of bytes), a short one kept as it always was; jobs
on inputs with the longest names a file system allows succeed, and their results and artifact
listings name the files that are there."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.files.jobfiles import FRAMES_SUFFIX
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.artifact_names import (
    NAME_MAX,
    STEM_MAX_BYTES,
    artifact_name,
    artifact_stem,
    input_stem,
)
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.testing.video import make_video
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_checkpoint,
    build_task_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)

IMGSZ = 64

LONG_IMAGE_STEM = "M" * 251  # with ".jpg", a 255-byte name
LONG_VIDEO_STEM = "V" * 240
EURO_STEM = "\u20ac" * 83  # 3 bytes each: 249 bytes, a 253-byte name with ".jpg"
EMOJI_STEM = "a" + "\U0001f600" * 62  # 4 bytes each: 249 bytes
RAW_STEM = os.fsdecode(b"\xff" * 250)  # not UTF-8: one byte each on disk

IMAGE_SUFFIXES = (".jpg", "_classes.png", "_depth.png", "_depth.npy")
"""What `ImageOutput.write` puts after an image's stem (annotated image, class and depth maps)."""


def _bytes(name: str) -> int:
    return len(os.fsencode(name))


def _written_names(index: int, stem: str, frame: int) -> list[str]:
    """Every name the runners write for an input, temporary ones included."""
    names: list[str] = []
    for suffix in IMAGE_SUFFIXES:
        for tail in ("", f"_f{frame:06d}"):  # an image's maps, and a video frame's
            name = artifact_name(index, stem, tail + suffix)
            names += [name, f".{name}.tmp"]
    frames = artifact_name(index, stem, FRAMES_SUFFIX)
    annotated = artifact_name(index, stem, ".annotated.mp4")
    return [*names, frames, f".{frames}.index", annotated, f".{annotated}"]


@pytest.mark.parametrize(
    "stem",
    ["img0", "a b.c", "x" * STEM_MAX_BYTES, "\u00e9" * (STEM_MAX_BYTES // 2), "\u20ac" * 66],
)
def test_short_stems_are_kept_as_they_were(stem: str) -> None:
    assert artifact_stem(stem) == stem
    assert artifact_name(3, stem, ".jpg") == f"00003_{stem}.jpg"
    assert artifact_name(12, stem, FRAMES_SUFFIX) == f"00012_{stem}.frames.jsonl"


@pytest.mark.parametrize(
    ("stem", "expected"),
    [
        (LONG_IMAGE_STEM, "M" * STEM_MAX_BYTES),
        (LONG_VIDEO_STEM, "V" * STEM_MAX_BYTES),
        ("x" * (STEM_MAX_BYTES + 1), "x" * STEM_MAX_BYTES),
        (EURO_STEM, "\u20ac" * (STEM_MAX_BYTES // 3)),  # 198 bytes: a 67th would take 201
        (EMOJI_STEM, "a" + "\U0001f600" * 49),  # 197 bytes
        ("ab" + "\u00e9" * 100, "ab" + "\u00e9" * 99),  # 200 bytes
        (RAW_STEM, os.fsdecode(b"\xff" * STEM_MAX_BYTES)),
    ],
)
def test_long_stems_are_cut_at_a_character_boundary(stem: str, expected: str) -> None:
    cut = artifact_stem(stem)

    assert cut == expected
    assert stem.startswith(cut)
    assert _bytes(cut) <= STEM_MAX_BYTES < _bytes(stem[: len(cut) + 1])
    assert artifact_stem(stem) == cut  # deterministic
    assert artifact_stem(cut) == cut
    assert artifact_name(7, stem, ".jpg") == f"00007_{cut}.jpg"


@pytest.mark.parametrize(
    "stem", [LONG_IMAGE_STEM, LONG_VIDEO_STEM, EURO_STEM, EMOJI_STEM, RAW_STEM, "short"]
)
@pytest.mark.parametrize(("index", "frame"), [(0, 0), (99_999, 999_999), (9_999_999, 10**9)])
def test_every_name_written_fits_in_a_file_name(
    stem: str, index: int, frame: int, tmp_path: Path
) -> None:
    names = _written_names(index, stem, frame)

    assert max(_bytes(name) for name in names) <= NAME_MAX
    for name in names:  # and the file system agrees
        (tmp_path / name).touch()
    assert len(os.listdir(tmp_path)) == len(names)


def test_inputs_that_share_a_long_prefix_keep_distinct_names() -> None:
    first, second = "p" * 300 + "1", "p" * 300 + "2"

    assert artifact_stem(first) == artifact_stem(second)
    assert artifact_name(0, first, ".jpg") != artifact_name(1, second, ".jpg")
    frames = {artifact_name(0, first, f"_f{frame:06d}_classes.png") for frame in range(5)}
    assert len(frames) == 5


# End to end: the runner and the API, with the longest names a data root can hold.


def test_a_semantic_video_with_a_long_name_writes_every_frame_map(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A video's frame maps keep their frame number after a cut stem: one file per frame."""
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_task_checkpoint(tmp_path / "weights" / "semantic.pt", "semantic")
    runner = YoloInferenceRunner(
        fixed_resolver({"semantic": ResolvedWeights(path, sha256_file(path))}),
        data_roots=[tmp_path],
    )
    video = tmp_path / "hostile" / f"{LONG_VIDEO_STEM}.mp4"
    make_video(video, frames=3)
    workdir = tmp_path / "job"

    result = runner.run(
        RecordingContext().context(
            workdir, [video], model="semantic", imgsz=IMGSZ, save_annotated=True
        )
    )

    entry = result.detail["images"][0]
    stem = "V" * STEM_MAX_BYTES
    assert entry["frames"] == f"00000_{stem}.frames.jsonl"
    assert entry["annotated"] == f"00000_{stem}.annotated.mp4"
    artifacts = workdir / "artifacts"
    frames = [json.loads(line) for line in (artifacts / entry["frames"]).read_text().splitlines()]
    maps = [frame["map"] for frame in frames]
    assert maps == [f"00000_{stem}_f{i:06d}_classes.png" for i in range(3)]
    assert sorted(p.name for p in artifacts.iterdir() if not p.name.startswith(".")) == sorted(
        [entry["frames"], entry["annotated"], *maps]
    )
    assert all(_bytes(p.name) <= NAME_MAX for p in artifacts.iterdir())


@pytest.fixture
async def client(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, model_root = tmp_path / "data", tmp_path / "weights"
    hostile = data / "hostile"
    (short,) = make_images(hostile, 1)
    for stem in (LONG_IMAGE_STEM, EURO_STEM):
        assert _bytes(f"{stem}.jpg") <= NAME_MAX
        short.with_name(f"{stem}.jpg").write_bytes(short.read_bytes())
    make_video(hostile / f"{LONG_VIDEO_STEM}.mp4", frames=4)
    build_checkpoint(model_root / "tiny.pt")
    settings = settings_factory(
        runtime="auto", database_url="", data_roots=[data], model_roots=[model_root]
    )
    async with serve(create_app(settings)) as client:
        response = await client.post("/v1/models", json={"path": "tiny.pt"})
        assert response.status_code == 201, response.text
        yield client


async def _run_job(client: httpx.AsyncClient, inputs: list[str], **params: Any) -> dict[str, Any]:
    job = {"kind": "inference", "model": "tiny", "inputs": inputs}
    response = await client.post("/v1/jobs", json={**job, "params": {"imgsz": IMGSZ, **params}})
    assert response.status_code == 202, response.text
    done = await wait_terminal(client, response.json()["id"], deadline_s=60)
    assert done["state"] == "succeeded", done
    return done


async def _artifacts(client: httpx.AsyncClient, job_id: str) -> list[str]:
    listing = (await client.get(f"/v1/jobs/{job_id}/artifacts")).json()
    names = [artifact["name"] for artifact in listing["artifacts"]]
    for name in names:
        fetched = await client.get(f"/v1/jobs/{job_id}/artifacts/{quote(name)}")
        assert fetched.status_code == 200, (name, fetched.text)
        assert fetched.content
    return names


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("val0.jpg", "val0"),
        ("shots/2026/a.b.jpg", "a.b"),  # a path: its last part
        ("x\x00y.jpg", "x_y"),  # no file name holds a NUL
        ("\ud800q.jpg", "_q"),  # nor a lone surrogate that stands for no byte
        (RAW_STEM + ".jpg", RAW_STEM),  # one that does is the byte it stands for
    ],
)
def test_artifacts_are_named_after_the_clients_name_for_the_input(name: str, stem: str) -> None:
    assert input_stem(name) == stem


async def test_an_uploaded_images_artifacts_are_named_after_its_file_name(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    image = next((tmp_path / "data" / "hostile").glob("img0.jpg")).read_bytes()
    response = await client.post(
        "/v1/jobs/inference",
        data={"model": "tiny", "params": json.dumps({"imgsz": IMGSZ, "save_annotated": True})},
        files=[("images", ("val0.jpg", image)), ("images", ("my photo.JPG", image))],
    )
    assert response.status_code == 202, response.text
    done = await wait_terminal(client, response.json()["id"], deadline_s=60)

    entries = (await client.get(f"/v1/jobs/{done['id']}/result")).json()["images"]
    assert [(e["source"], e["annotated"]) for e in entries] == [
        ("val0.jpg", "00000_val0.jpg"),
        ("my photo.JPG", "00001_my photo.jpg"),
    ]
    assert await _artifacts(client, done["id"]) == ["00000_val0.jpg", "00001_my photo.jpg"]


async def test_long_named_images_are_annotated(client: httpx.AsyncClient) -> None:
    inputs = [f"hostile/{LONG_IMAGE_STEM}.jpg", f"hostile/{EURO_STEM}.jpg", "hostile/img0.jpg"]

    job = await _run_job(client, inputs, save_annotated=True)

    entries = (await client.get(f"/v1/jobs/{job['id']}/result")).json()["images"]
    assert [entry["source"] for entry in entries] == inputs
    annotated = [entry["annotated"] for entry in entries]
    assert annotated == [
        f"00000_{'M' * STEM_MAX_BYTES}.jpg",
        f"00001_{chr(0x20AC) * 66}.jpg",
        "00002_img0.jpg",  # as it always was
    ]
    assert await _artifacts(client, job["id"]) == sorted(annotated)
    image = await client.get(f"/v1/jobs/{job['id']}/artifacts/{quote(annotated[1])}")
    assert image.content.startswith(b"\xff\xd8")  # a JPEG


@pytest.mark.parametrize("save_annotated", [False, True])
async def test_a_long_named_video_runs_and_pages_its_frames(
    client: httpx.AsyncClient, save_annotated: bool
) -> None:
    job = await _run_job(client, [f"hostile/{LONG_VIDEO_STEM}.mp4"], save_annotated=save_annotated)

    url = f"/v1/jobs/{job['id']}/result"
    video = (await client.get(url)).json()["images"][0]
    stem = "V" * STEM_MAX_BYTES
    assert video["frames"] == f"00000_{stem}.frames.jsonl"
    page = (await client.get(url, params={"entry": 0, "offset": 1, "limit": 2})).json()
    assert [frame["frame"] for frame in page["frames"]] == [1, 2]
    expected = [video["frames"]]
    if save_annotated:
        assert video["annotated"] == f"00000_{stem}.annotated.mp4"
        expected.append(video["annotated"])
    assert await _artifacts(client, job["id"]) == sorted(expected)
