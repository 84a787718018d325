"""Settings precedence: defaults < TOML file < environment < explicit overrides."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from yolo_orch.config import Settings, load_settings

EXAMPLE = Path(__file__).parent.parent / "config.example.toml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("YOLO_ORCH_"):
            monkeypatch.delenv(name)


def test_defaults_serve_on_a_fresh_machine() -> None:
    settings = load_settings()
    assert settings.data_dir == Path("./var")
    assert settings.sqlite_url == f"sqlite+aiosqlite:///{Path('var').resolve() / 'yolo-orch.db'}"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.runtime == "auto"
    assert settings.lanes == []
    assert (settings.slots_per_lane, settings.sim_lanes, settings.max_attempts) == (1, 2, 3)


def test_example_file_documents_every_key_with_its_default() -> None:
    text = EXAMPLE.read_text()
    example = tomllib.loads(text)
    defaults = Settings()
    unset = {key for key in Settings.model_fields if getattr(defaults, key) is None}
    assert set(example) == set(Settings.model_fields) - unset
    for key in unset:  # TOML has no null: these are shown commented out
        assert f"# {key} = " in text, key
    for key, value in example.items():
        expected = getattr(defaults, key)
        assert (Path(value) if isinstance(expected, Path) else value) == expected, key


def test_file_then_environment_then_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "yolo.toml"
    config.write_text('port = 9000\nhost = "127.0.0.2"\nsim_lanes = 4\nmax_queued = 7\n')
    from_file = load_settings(config)
    assert (from_file.port, from_file.host, from_file.sim_lanes) == (9000, "127.0.0.2", 4)

    monkeypatch.setenv("YOLO_ORCH_PORT", "9100")
    monkeypatch.setenv("YOLO_ORCH_LANES", '["cuda:0", "cuda:1"]')
    from_env = load_settings(config)
    assert from_env.port == 9100
    assert from_env.lanes == ["cuda:0", "cuda:1"]
    assert from_env.max_queued == 7

    overridden = load_settings(config, port=9200)
    assert overridden.port == 9200
    assert overridden.sim_lanes == 4


def test_config_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "yolo.toml"
    config.write_text("sim_lanes = 3\n")
    monkeypatch.setenv("YOLO_ORCH_CONFIG", str(config))
    assert load_settings().sim_lanes == 3
    monkeypatch.setenv("YOLO_ORCH_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(FileNotFoundError):
        load_settings()


def test_a_partial_table_keeps_the_other_kinds_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "yolo.toml"
    config.write_text("timeout_s = { inference = 60 }\n")
    monkeypatch.setenv("YOLO_ORCH_BATCH_MAX_IMAGES__CUDA", "16")
    settings = load_settings(config)
    defaults = Settings()
    assert settings.timeout_s == {**defaults.timeout_s, "inference": 60}
    assert settings.timeout_s["validation"] == 3600
    assert settings.batch_max_images == {**defaults.batch_max_images, "cuda": 16}
    assert settings.batch_max_images["cpu"] == 8


@pytest.mark.parametrize(
    "content",
    ["slots_per_lane = 0\n", 'runtime = "quantum"\n', "unknown_key = 1\n", 'lanes = ["a", "a"]\n'],
)
def test_invalid_values_are_refused(tmp_path: Path, content: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(content)
    with pytest.raises(ValidationError):
        load_settings(config)


@pytest.mark.parametrize(
    "values",
    [
        {"database_url": "sqlite:///var/jobs.db"},
        {"database_url": "postgresql://db/jobs"},
        {"lanes": ["gpu0"]},
        {"lanes": ["cuda:x"]},
    ],
)
def test_unusable_database_urls_and_lanes_are_refused_at_load(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings(**values)  # type: ignore[arg-type]
