"""The annotated videos converted for browsers (api/job_videos.py): WebM (VP8) with every frame,
converted once and kept hidden beside the artifact, nothing left behind for a file that is no
video."""

from __future__ import annotations

from pathlib import Path

from yolo_orch.api.job_videos import webm_of
from yolo_orch.testing.video import frame_count, make_video


def test_an_mp4v_video_becomes_webm_once(tmp_path: Path) -> None:
    source = tmp_path / "00000_clip.annotated.mp4"
    make_video(source, frames=12)
    converted = webm_of(source)
    assert converted == tmp_path / ".00000_clip.annotated.mp4.webm"
    assert converted.read_bytes()[:4] == b"\x1a\x45\xdf\xa3"  # EBML: WebM
    assert frame_count(converted) == 12
    made = converted.stat().st_mtime_ns
    assert webm_of(source) == converted
    assert converted.stat().st_mtime_ns == made  # kept, not converted again
    assert sorted(p.name for p in tmp_path.iterdir()) == [converted.name, source.name]


def test_a_file_that_is_no_video_is_none_and_leaves_nothing(tmp_path: Path) -> None:
    source = tmp_path / "broken.mp4"
    source.write_bytes(b"no video in here" * 64)
    assert webm_of(source) is None
    assert [p.name for p in tmp_path.iterdir()] == [source.name]
