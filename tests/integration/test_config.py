"""Settings precedence: defaults < TOML file < environment < explicit overrides."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from yolo_orch.config import Settings, load_settings
from yolo_orch.setting_hints import describe_invalid

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("YOLO_ORCH_"):
            monkeypatch.delenv(name)


def test_defaults_serve_on_a_fresh_machine() -> None:
    settings = load_settings()
    assert settings.data_dir == Path.cwd() / "var"
    assert settings.store_url == f"sqlite+aiosqlite:///{Path.cwd() / 'var' / 'yolo-orch.db'}"
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
        if isinstance(expected, SecretStr):  # a secret's default is shown as its plain value
            expected = expected.get_secret_value()
        assert (Path(value).absolute() if isinstance(expected, Path) else value) == expected, key


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


@pytest.mark.parametrize(
    ("values", "fix"),
    [
        ({"lanes": ["gpu0"]}, "set lanes in the config file or YOLO_ORCH_LANES="),
        ({"lanes": ["cpu", "cpu"]}, "set lanes in the config file or YOLO_ORCH_LANES="),
        ({"database_url": "postgresql://db/jobs"}, "or YOLO_ORCH_DATABASE_URL="),
        ({"timeout_s": {"inference": -1}}, "or YOLO_ORCH_TIMEOUT_S="),
        ({"ray_node_cache_dir": "cache"}, "or YOLO_ORCH_RAY_NODE_CACHE_DIR="),
        ({"head_url": "not a url"}, "or YOLO_ORCH_HEAD_URL="),
        ({"head_url": "head-1:8000"}, "or YOLO_ORCH_HEAD_URL="),
        (
            {"host": "0.0.0.0"},
            "set allow_unauthenticated in the config file or YOLO_ORCH_ALLOW_UNAUTHENTICATED=true",
        ),
    ],
)
def test_a_refused_setting_names_its_environment_variable(
    values: dict[str, object], fix: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(**values)  # type: ignore[arg-type]

    assert fix in describe_invalid(refused.value)


def test_pydantic_refusals_name_the_setting_and_its_variable(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("slots_per_lane = 0\nunknown_key = 1\n")

    with pytest.raises(ValidationError) as refused:
        load_settings(config)

    described = describe_invalid(refused.value).splitlines()
    assert described[0].startswith("slots_per_lane: Input should be greater than or equal to 1")
    assert described[0].endswith(
        "set slots_per_lane in the config file or YOLO_ORCH_SLOTS_PER_LANE"
    )
    assert "unknown_key is not a setting" in described[1]


def test_a_head_url_with_a_scheme_and_a_host_is_taken() -> None:
    assert Settings(head_url="https://head-1.example:8443/orch").head_url == (
        "https://head-1.example:8443/orch"
    )


PATH_SETTINGS = ("data_dir", "data_roots", "model_roots", "shared_data_roots")


def test_relative_folders_from_the_environment_are_taken_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("YOLO_ORCH_DATA_DIR", "state")
    monkeypatch.setenv("YOLO_ORCH_DATA_ROOTS", '["images", "/srv/absolute"]')
    monkeypatch.setenv("YOLO_ORCH_MODEL_ROOTS", '["./weights/../weights"]')
    monkeypatch.setenv("YOLO_ORCH_SHARED_DATA_ROOTS", '["images"]')
    settings = load_settings()
    monkeypatch.chdir("/")  # resolved once, at load: a later working directory changes nothing

    assert settings.data_dir == tmp_path / "state"
    assert settings.data_roots == [tmp_path / "images", Path("/srv/absolute")]
    assert settings.model_roots == [tmp_path / "weights" / ".." / "weights"]  # no link resolved
    assert settings.shared_data_roots == [tmp_path / "images"]
    assert settings.store_url == f"sqlite+aiosqlite:///{tmp_path / 'state' / 'yolo-orch.db'}"
    assert settings.lock_files == [tmp_path / "state" / "yolo-orch.lock"]


def test_relative_folders_in_a_file_are_taken_against_the_working_directory_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "etc" / "yolo.toml"
    config.parent.mkdir()
    config.write_text(
        'data_dir = "var"\ndata_roots = ["data"]\nmodel_roots = ["weights"]\n'
        'shared_data_roots = ["shared"]\ndatabase_url = "sqlite+aiosqlite:///db/jobs.db"\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    settings = load_settings(config)

    assert settings.data_dir == work / "var"
    assert (settings.data_roots, settings.model_roots) == ([work / "data"], [work / "weights"])
    assert settings.shared_data_roots == [work / "shared"]
    assert settings.database_url == f"sqlite+aiosqlite:///{work / 'db' / 'jobs.db'}"
    assert settings.lock_files == [work / "var" / "yolo-orch.lock", work / "db" / "jobs.db.lock"]


def test_overrides_are_resolved_too_and_every_path_setting_ends_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = load_settings(
        data_dir=Path("./var"),
        data_roots=["~/pictures"],
        model_roots=[Path("m")],
        shared_data_roots=["s"],
    )
    assert settings.data_dir == tmp_path / "var"
    assert settings.data_roots == [tmp_path / "home" / "pictures"]
    assert (settings.model_roots, settings.shared_data_roots) == (
        [tmp_path / "m"],
        [tmp_path / "s"],
    )
    for key in (*PATH_SETTINGS, "ray_node_cache_dir"):
        value = getattr(settings, key)
        assert all(path.is_absolute() for path in (value if isinstance(value, list) else [value]))


@pytest.mark.parametrize(
    ("url", "resolved"),
    [
        ("sqlite+aiosqlite:///jobs.db", "sqlite+aiosqlite:///{cwd}/jobs.db"),
        (
            "sqlite+aiosqlite:///db/jobs.db?timeout=5",
            "sqlite+aiosqlite:///{cwd}/db/jobs.db?timeout=5",
        ),
        ("sqlite+aiosqlite:////srv/jobs.db", "sqlite+aiosqlite:////srv/jobs.db"),
        ("sqlite+aiosqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
        ("memory://", "memory://"),
        ("", ""),
    ],
)
def test_a_relative_sqlite_path_is_taken_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, resolved: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_settings(database_url=url).database_url == resolved.format(cwd=tmp_path)


def test_the_ray_node_cache_must_be_absolute_as_it_is_a_folder_on_other_machines() -> None:
    assert load_settings(ray_node_cache_dir="/var/cache/yolo").ray_node_cache_dir == Path(
        "/var/cache/yolo"
    )
    for relative in ("cache", "~/cache"):
        with pytest.raises(ValidationError, match="ray_node_cache_dir"):
            load_settings(ray_node_cache_dir=relative)
