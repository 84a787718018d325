"""What `serve` logs once it listens: one record naming what is in force and where to look."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.servers import ServerFactory

TOKEN_SHA256 = "0" * 64


@pytest.mark.acceptance
def test_the_banner_names_the_settings_in_force_and_the_urls(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    images = tmp_path / "images"
    images.mkdir()
    server = server_factory(data_roots=json.dumps([str(images)]))
    server.start()

    log = server.stderr()
    start = log.index(" INFO yolo_orch: yolo-orch ")
    banner = log[start:].split("\n\n")[0]
    url = server.url
    assert f"listening on {url}" in banner
    assert f"dashboard: {url}/ " in banner
    assert f"API page: {url}/docs " in banner
    assert f"metrics: {url}/metrics" in banner
    assert f"data_dir: {server.data_dir}" in banner
    database = server.settings.get("database_url") or f"{server.data_dir}/yolo-orch.db"
    assert f"database: {database}" in banner
    assert f"data_roots: {images}" in banner
    assert "model_roots: none (set model_roots or YOLO_ORCH_MODEL_ROOTS)" in banner
    assert "lanes: sim:0, sim:1 (1 slot(s) each), runtime simulated, executor threads" in banner
    assert "auth: off" in banner
    assert "connections: at most " in banner
    assert "(open files: limit " in banner
    assert log.count("open files: limit") == 1  # folded into the banner, not said twice
    assert log.count(" INFO yolo_orch: yolo-orch ") == 1


@pytest.mark.acceptance
def test_the_banner_is_one_json_line_in_json_logs(server_factory: ServerFactory) -> None:
    server = server_factory(
        log_format="json", tokens=json.dumps([{"sha256": TOKEN_SHA256, "scope": "admin"}])
    )
    server.start()

    records = [json.loads(line) for line in server.stderr().splitlines() if line.startswith("{")]
    banners = [record for record in records if record["msg"].startswith("yolo-orch ")]
    assert len(banners) == 1
    banner = banners[0]["msg"]
    assert banners[0]["level"] == "info"
    assert f"listening on {server.url}\n" in banner
    assert f"metrics: {server.url}/metrics (token needed)" in banner
    assert "auth: on (1 token(s))" in banner
