"""What a start-up and the API import: the simulated runtime and the HTTP routes never load the
machine-learning stack (Optuna included: only a tune needs it), and a database already at the
schema's revision never loads alembic.

Each check runs in a fresh Python process: this test process may have imported them already.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from yolo_orch.store.migrate import SCHEMA_REVISION, current_revision, upgrade_to_head

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "ultralytics", "openvino", "onnxruntime", "cv2", "polars", "alembic", "optuna")

SERVE_AND_USE = """
import asyncio, json, sys
from pathlib import Path

sys.path.insert(0, sys.argv[2])
from tests.conftest import serve, sim_job, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings

async def main() -> None:
    settings = Settings(data_dir=Path(sys.argv[1]), runtime="simulated")
    async with serve(create_app(settings)) as client:
        job = (await client.post("/v1/jobs", json=sim_job())).raise_for_status().json()
        await wait_terminal(client, job["id"])
        for path in ("/v1/jobs", f"/v1/jobs/{job['id']}/result", "/v1/models", "/v1/devices",
                     "/readyz", "/metrics", "/openapi.json"):
            (await client.get(path)).raise_for_status()

asyncio.run(main())
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""


def _imported_by_a_server(data_dir: Path) -> set[str]:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SERVE_AND_USE), str(data_dir), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return set(json.loads(completed.stdout.splitlines()[-1]))


def test_a_server_at_the_schema_revision_imports_no_ml_stack_and_no_alembic(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "var"
    url = f"sqlite+aiosqlite:///{data_dir / 'yolo-orch.db'}"
    upgrade_to_head(url)

    imported = _imported_by_a_server(data_dir)

    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))
    assert current_revision(url) == SCHEMA_REVISION


def test_a_new_database_is_migrated_at_start_up(tmp_path: Path) -> None:
    data_dir = tmp_path / "var"

    imported = _imported_by_a_server(data_dir)

    assert "alembic" in imported
    assert imported.isdisjoint(set(HEAVY) - {"alembic"})
    assert current_revision(f"sqlite+aiosqlite:///{data_dir / 'yolo-orch.db'}") == SCHEMA_REVISION
