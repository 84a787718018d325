"""A real Label Studio (1.23) on a free loopback port, for tests and benchmarks.

Label Studio pins its own Django stack, so it lives in a virtual environment of its own (about
1 GB), built once per machine under the user's cache folder and reused: the build goes to a
temporary sibling folder, gets a marker file last, and is renamed into place, so a build that dies
half-way is never mistaken for a finished one (a lock file keeps two test processes from building
at once). A venv is not relocatable by its scripts' shebangs, so the harness runs only its
`bin/python`, which is.

Each start gets a fresh data folder, one known user with a known API token, and runs in a process
group of its own that is ended on the way out. Settings that only a loopback test wants: the
token is a legacy one (`--enable-legacy-api-token`; this release refuses legacy tokens otherwise),
and SSRF protection and `ML_BLOCK_LOCAL_IP` are off (they refuse webhooks and ML backends on
127.0.0.1, where yolo-orch listens).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from yolo_orch.demo.server import free_port

__all__ = [
    "LABEL_STUDIO_REQUIREMENT",
    "LabelStudio",
    "LabelStudioExited",
    "ensure_label_studio",
    "label_studio_venv_dir",
    "running_label_studio",
]

LABEL_STUDIO_REQUIREMENT = "label-studio==1.23.*"
VENV_NAME = "label-studio-1.23"
MARKER = ".yolo-orch-built"
BUILD_TIMEOUT_S = 1800.0
STARTUP_TIMEOUT_S = 180.0
"""It answers /health about 40 s after a start on a quiet machine; its first start also runs
every migration into the new data folder."""
LOG_TAIL_CHARS = 6000
# The one user of a throwaway loopback server; its token has the 40 characters of Django's.
USERNAME = "yolo-orch-test@example.com"
PASSWORD = "yolo-orch-test-password"
TOKEN = "yolo0orch0test0token0000000000000000000"


class LabelStudioExited(RuntimeError):
    """Label Studio ended while its caller waited for it to answer."""


def label_studio_venv_dir() -> Path:
    """The cached venv: `$XDG_CACHE_HOME` (else ~/.cache)/yolo-orch/label-studio-1.23."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "yolo-orch" / VENV_NAME


def ensure_label_studio(venv: Path | None = None) -> Path:
    """The venv with Label Studio installed, built first if no finished build is there (a minute
    or so with a warm pip cache). Returns the venv's folder."""
    venv = venv if venv is not None else label_studio_venv_dir()
    if (venv / MARKER).exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait for it
        if (venv / MARKER).exists():
            return venv
        build = Path(tempfile.mkdtemp(prefix=f"{venv.name}.build-", dir=venv.parent))
        try:
            _build_venv(build)
            shutil.rmtree(venv, ignore_errors=True)  # a build that died without its marker
            build.rename(venv)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    return venv


def _build_venv(target: Path) -> None:
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(target)], check=True, timeout=BUILD_TIMEOUT_S)
    pip = [str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "install", LABEL_STUDIO_REQUIREMENT],
        check=True,
        timeout=BUILD_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    version = subprocess.run(
        [
            str(target / "bin" / "python"),
            "-c",
            "import label_studio; print(label_studio.__version__)",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip()
    (target / MARKER).write_text(f"label-studio {version}\n")


@dataclass(frozen=True)
class LabelStudio:
    """A running Label Studio: its URL, a user's API token, and its venv's Python (which has
    `label-studio-sdk`, the release Label Studio itself uses)."""

    url: str
    token: str
    username: str
    python: Path
    log_path: Path

    @property
    def headers(self) -> dict[str, str]:
        """What its REST API wants from a legacy token."""
        return {"Authorization": f"Token {self.token}"}

    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout)

    def run_sdk(self, script: str, args: Mapping[str, object] | None = None) -> object:
        """Run `script` with `label-studio-sdk` in Label Studio's own venv (the SDK's pins clash
        with the project's). The script finds `ls` (a connected `LabelStudio` client) and `args`
        (the JSON of `args`) ready, and sets `result` to what this returns (through JSON)."""
        program = (
            "import json, sys\n"
            "from label_studio_sdk import LabelStudio\n"
            "request = json.load(sys.stdin)\n"
            "ls = LabelStudio(base_url=request['url'], api_key=request['token'])\n"
            "args = request['args']\n"
            "result = None\n"
            f"{script}\n"
            "sys.stdout.write('\\n' + json.dumps(result, default=str))\n"
        )
        request = {"url": self.url, "token": self.token, "args": dict(args or {})}
        done = subprocess.run(
            [str(self.python), "-c", program],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        if done.returncode != 0:
            raise RuntimeError(f"SDK script failed ({done.returncode}):\n{done.stderr[-4000:]}")
        return json.loads(done.stdout.rsplit("\n", 1)[-1])

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]


@contextlib.contextmanager
def running_label_studio(
    *,
    venv: Path | None = None,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> Iterator[LabelStudio]:
    """A started Label Studio with a fresh data folder (the venv built first if need be); its
    process group is ended (SIGTERM, then SIGKILL) on the way out. `env` adds variables."""
    python = ensure_label_studio(venv) / "bin" / "python"
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="yolo-orch-label-studio-") as tmp:
        data_dir = Path(tmp) / "data"
        log_path = Path(tmp) / "label-studio.log"
        child_env = _label_studio_env(data_dir, port)
        child_env.update(env or {})
        command = [
            str(python), "-m", "label_studio.server", "start", "--no-browser",
            "--data-dir", str(data_dir), "--internal-host", "127.0.0.1", "--port", str(port),
            "--username", USERNAME, "--password", PASSWORD, "--user-token", TOKEN,
            "--enable-legacy-api-token",
        ]  # fmt: skip
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env,
                cwd=tmp,
                start_new_session=True,  # its own process group: it may start children
            )
        studio = LabelStudio(f"http://127.0.0.1:{port}", TOKEN, USERNAME, python, log_path)
        try:
            _wait_healthy(process, studio, startup_timeout_s)
            yield studio
        finally:
            _stop_group(process)


def _label_studio_env(data_dir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "DJANGO_"))}
    env.update(
        {
            "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
            "LABEL_STUDIO_HOST": f"http://127.0.0.1:{port}",
            "SSRF_PROTECTION_ENABLED": "false",
            "ML_BLOCK_LOCAL_IP": "false",
            "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
            "COLLECT_ANALYTICS": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("VIRTUAL_ENV", None)
    return env


def _wait_healthy(process: subprocess.Popen[bytes], studio: LabelStudio, timeout: float) -> None:
    """Until `/health` answers 200 and the token is accepted; fails at once if it exits."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=studio.url, headers=studio.headers, timeout=5.0) as client:
        while True:
            if process.poll() is not None:
                raise LabelStudioExited(
                    f"Label Studio exited with {process.returncode}:\n{studio.log_tail()}"
                )
            with contextlib.suppress(httpx.TransportError):
                if (
                    client.get("/health").status_code == 200
                    and client.get("/api/current-user/whoami").status_code == 200
                ):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Label Studio did not answer /health within {timeout}s:\n{studio.log_tail()}"
                )
            time.sleep(0.5)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # children it left behind in its group
