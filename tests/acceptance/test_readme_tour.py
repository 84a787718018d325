"""README.md's tour, run as written against a real `yolo-orch serve` on the demo's data.

The demo runs first on a tiny budget (1 epoch on 24 images; imgsz 128 as the full demo, so that
its ONNX variant fits the tour's `imgsz=128`), which leaves the layout the tour names under
./demo: the dataset, the server's database with the demo's jobs, and the model
`shapes-<date>-<time>`. Then the README's `<!-- tour-serve -->` command serves that data again,
and every command of its `<!-- tour -->` block runs in `bash` (`.venv/bin` first on PATH, the
server's URL in YOLO_ORCH_URL and in place of localhost:8000, curl failing on an HTTP error),
each of which must exit 0 and print what its comment promises."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from yolo_orch.cli import main
from yolo_orch.testing import free_port

pytestmark = pytest.mark.acceptance

README = Path(__file__).resolve().parents[2] / "README.md"
DEMO = ["--epochs", "1", "--imgsz", "128", "--train-images", "24"]
MARK = "@@tour@@"
# What each tour command must print, by a pattern its code (comment left out) matches; every
# pattern must match some command, and every command must print something.
EXPECTED = [
    (r"/readyz$", r'"status":"ready"'),
    (r"^yolo-orch models list$", r"shapes-\d{8}-\d{6} +[0-9a-f-]{36} +detect +3 "),
    (r"^MODEL=", r"^MODEL=shapes-\d{8}-\d{6}$"),
    (r"^yolo-orch variants list", r"onnx 128 "),
    (r"^yolo-orch list$", r"(?s)(?=.*training +succeeded)(?=.*export +succeeded)"),
    (r"^yolo-orch submit --model .*--wait$", r"succeeded"),
    (r"^JOB=", r"^JOB=[0-9a-f-]{36}$"),
    (r"Prefer: wait", r'"state":"succeeded"'),
    (r"/result\"$", r'"images":\[\s*\{"source":"test_0000\.png"'),
    (r"^yolo-orch validate .*--wait$", r"mAP50 \d\.\d{3}"),
    (r"/metrics", r'yolo_orch_jobs\{kind="inference",state="succeeded"\} [1-9]'),
]


def tour_block(marker: str) -> list[str]:
    """The commands of the ```sh block after `<!-- marker -->`: one per line, continuations
    joined, blank lines and whole-line comments left out."""
    text = README.read_text()
    match = re.search(rf"<!-- {re.escape(marker)} -->\s*```sh\n(.*?)```", text, re.DOTALL)
    assert match, f"README.md has no ```sh block after <!-- {marker} -->"
    joined = match.group(1).replace("\\\n", " ")
    return [
        line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def _code(command: str) -> str:
    """A tour command without its trailing comment."""
    return re.sub(r"\s+#.*$", "", command).strip()


def _script(commands: list[str], url: str) -> str:
    """The tour as one bash script that marks where each command's output starts and stops at
    the first that fails (an assignment fails too when it leaves its variable empty)."""
    lines = ["set -o pipefail"]
    for index, command in enumerate(commands):
        command = command.replace("localhost:8000", url.removeprefix("http://"))
        command = re.sub(r"\bcurl -s\b", "curl -s --fail-with-body", command)
        lines += [f"echo '{MARK} {index}'", command, "rc=$?"]
        assigned = re.match(r"^([A-Z_]+)=", command)
        if assigned:  # it prints nothing itself: show what it assigned
            name = assigned.group(1)
            lines.append(f'echo "{name}=${name}"; if [ -z "${name}" ]; then rc=91; fi')
        lines += [f"echo '{MARK} rc' $rc", "if [ $rc -ne 0 ]; then exit $rc; fi"]
    return "\n".join(lines) + "\n"


def _env(port: int, bin_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("YOLO_ORCH_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["YOLO_ORCH_URL"] = f"http://127.0.0.1:{port}"
    return env


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the tour's server exited:\n{log.read_text()[-4000:]}"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the tour's server did not answer:\n{log.read_text()[-4000:]}")


def test_the_readme_tour_runs_against_a_real_server_on_the_demos_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve = tour_block("tour-serve")
    tour = tour_block("tour")
    if shutil.which("curl") is None or shutil.which("bash") is None:
        pytest.skip("the README's tour needs bash and curl")
    assert len(serve) == 1, serve
    assert serve[0].endswith("yolo-orch serve"), serve
    assert 8 <= len(tour) <= 14, f"the tour has {len(tour)} commands"

    assert main(["demo", "--dir", str(tmp_path / "demo"), *DEMO]) == 0
    capsys.readouterr()

    # The README's commands run from the repository root, where `.venv/bin` is.
    bin_dir = Path(sys.executable).parent
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "bin").symlink_to(bin_dir, target_is_directory=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = _env(port, bin_dir)
    log = tmp_path / "tour-server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            ["bash", "-c", serve[0]],
            cwd=tmp_path,
            env=env | {"YOLO_ORCH_PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        _wait_ready(url, server, log)
        done = subprocess.run(
            ["bash", "-c", _script(tour, url)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

    report = (
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}\nserver log:\n{log.read_text()[-3000:]}"
    )
    outputs = re.split(rf"^{MARK} \d+\n", done.stdout, flags=re.MULTILINE)[1:]
    assert done.returncode == 0, f"a tour command failed (exit {done.returncode}):\n{report}"
    assert len(outputs) == len(tour), report
    for command, output in zip(tour, outputs, strict=True):
        printed, _, rc = output.rpartition(f"{MARK} rc ")
        assert rc.strip() == "0", f"{command!r} exited {rc.strip()}:\n{report}"
        assert printed.strip(), f"{command!r} printed nothing:\n{report}"
        code = _code(command)
        for key, pattern in EXPECTED:
            if re.search(key, code):
                assert re.search(pattern, printed, re.MULTILINE), (
                    f"{command!r} did not print {pattern!r}:\n{printed}\n{report}"
                )
    for key, _ in EXPECTED:
        assert any(re.search(key, _code(command)) for command in tour), f"no tour command {key!r}"
