"""Make ultralytics safe to run in this server: offline, quiet, and loading weights without code.

ultralytics reads its environment once, at import time (`YOLO_OFFLINE`, `YOLO_CONFIG_DIR`,
`YOLO_VERBOSE`, `ULTRALYTICS_SAFE_LOAD`, `YOLO_AUTOINSTALL`), so these must be in `os.environ`
before the first `import ultralytics` anywhere in the process. That is why this module is the
one place, besides config loading, that writes `os.environ`. Call `configure_ultralytics` once at
start-up (the app lifespan, a CLI command, a test fixture) before anything imports ultralytics.

What each setting stops is measured in `ULTRALYTICS.md`: the DNS probe at import, PyPI checks,
analytics, pip auto-install, integrations, the font download (not covered by `YOLO_OFFLINE`: a local
TTF is put where ultralytics looks for Arial), and pickled code in weights (safe load).

OpenVINO's model converter, which ultralytics' OpenVINO export calls, sends usage telemetry to
Google Analytics unless a consent file in the home folder says no, from a forked process per event
(33 forks in one export, measured): `openvino_telemetry` is made unimportable here, so the
converter uses its own no-op stub.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["configure_ultralytics"]

_FONT_NAMES = ("Arial.ttf", "Arial.Unicode.ttf")
_INTEGRATIONS = ("clearml", "comet", "dvc", "mlflow", "raytune", "tensorboard", "wandb")

_TELEMETRY_MODULES = ("openvino_telemetry", "openvino_telemetry.backend")

_lock = threading.Lock()
_configured_dir: Path | None = None


def configure_ultralytics(config_dir: Path) -> Path:
    """Point ultralytics at `config_dir`, switch off every network path, and import it.

    Returns the folder in effect: ultralytics cannot be reconfigured inside one process, so a
    later call keeps the first folder (a server process configures it once; tests that start
    several apps share one). Raises `RuntimeError` when ultralytics was imported before with an
    unsafe environment (safe load or offline mode not in force).
    """
    global _configured_dir
    config_dir = config_dir.expanduser().resolve()
    with _lock:
        if _configured_dir is None:
            config_dir.mkdir(parents=True, exist_ok=True)
            _set_environment(config_dir)
            _block_telemetry()
            _install_fonts(config_dir / "Ultralytics")
            _apply_settings(config_dir)
            _configured_dir = config_dir
        return _configured_dir


def _set_environment(config_dir: Path) -> None:
    if "ultralytics" in sys.modules:
        # Too late for the environment to matter; _apply_settings checks what is in force.
        return
    mpl_dir = config_dir / "matplotlib"
    mpl_dir.mkdir(exist_ok=True)
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_CONFIG_DIR"] = str(config_dir)
    os.environ["YOLO_AUTOINSTALL"] = "false"
    os.environ["YOLO_VERBOSE"] = "False"
    os.environ["ULTRALYTICS_SAFE_LOAD"] = "1"
    os.environ["MPLCONFIGDIR"] = str(mpl_dir)


def _block_telemetry() -> None:
    """Every importer of `openvino_telemetry` falls back to a stub when the import fails."""
    for name in _TELEMETRY_MODULES:
        sys.modules[name] = None  # type: ignore[assignment]


def _install_fonts(ultralytics_dir: Path) -> None:
    """Put matplotlib's DejaVuSans where ultralytics would otherwise download Arial from."""
    ultralytics_dir.mkdir(parents=True, exist_ok=True)
    spec = importlib.util.find_spec("matplotlib")  # locate, don't import: it reads MPLCONFIGDIR
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise RuntimeError("matplotlib is not installed; ultralytics needs it and its fonts")
    source = Path(next(iter(locations))) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
    if not source.is_file():
        raise RuntimeError(f"no TTF font at {source} to stand in for Arial")
    for name in _FONT_NAMES:
        target = ultralytics_dir / name
        if target.is_file() and target.stat().st_size > 0:
            continue
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=ultralytics_dir)
        os.close(fd)
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _apply_settings(config_dir: Path) -> None:
    import ultralytics.utils as ul_utils

    if not ul_utils.SAFE_LOAD or ul_utils.ONLINE:
        raise RuntimeError(
            "ultralytics was imported before configure_ultralytics(): safe load is "
            f"{'on' if ul_utils.SAFE_LOAD else 'off'} and offline mode is "
            f"{'off' if ul_utils.ONLINE else 'on'}; configure it before the first import"
        )
    if Path(ul_utils.USER_CONFIG_DIR).resolve() != config_dir / "Ultralytics":
        raise RuntimeError(
            f"ultralytics uses {ul_utils.USER_CONFIG_DIR} instead of {config_dir / 'Ultralytics'} "
            "(imported before configure_ultralytics(), or the folder is not writable)"
        )
    settings = ul_utils.SETTINGS
    updates: dict[str, object] = {
        "sync": False,
        "weights_dir": str(config_dir / "weights"),
        "runs_dir": str(config_dir / "runs"),
        "datasets_dir": str(config_dir / "datasets"),
        "vscode_msg": False,
        "openvino_msg": False,
    }
    updates.update({name: False for name in _INTEGRATIONS})
    known = {key: value for key, value in updates.items() if key in settings}
    if any(settings.get(key) != value for key, value in known.items()):
        settings.update(known)  # type: ignore[no-untyped-call]
