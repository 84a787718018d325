"""`safe_yaml.load_file`: client YAML parsed within limits of size, depth, values and aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from yolo_orch.files.safe_yaml import MAX_DEPTH, YamlRefused, load_file


def load(tmp_path: Path, text: str, max_bytes: int = 1 << 20, max_nodes: int = 1000) -> object:
    path = tmp_path / "data.yaml"
    path.write_text(text, encoding="utf-8")
    return load_file(path, max_bytes=max_bytes, max_nodes=max_nodes)


def test_an_ordinary_document_loads_as_safe_load_would(tmp_path: Path) -> None:
    text = "path: .\ntrain: [a, b]\nnames: {0: cat, 1: dog}\nnc: 2\nseen: 2024-05-01\n"

    data = load(tmp_path, text)

    assert isinstance(data, dict)
    assert data["names"] == {0: "cat", 1: "dog"}
    assert data["train"] == ["a", "b"]
    assert str(data["seen"]) == "2024-05-01"


def test_aliases_are_refused(tmp_path: Path) -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"

    with pytest.raises(YamlRefused, match=r"aliases are not accepted \(\*a, line 2\)"):
        load(tmp_path, laughs)


def test_an_anchor_without_an_alias_is_harmless(tmp_path: Path) -> None:
    assert load(tmp_path, "a: &a 1\n") == {"a": 1}


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 50_000])
def test_deep_nesting_is_refused_without_recursing(tmp_path: Path, levels: int) -> None:
    with pytest.raises(YamlRefused, match=f"nests deeper than {MAX_DEPTH} levels"):
        load(tmp_path, "[" * levels + "]" * levels)


def test_nesting_up_to_the_limit_loads(tmp_path: Path) -> None:
    data = load(tmp_path, "[" * MAX_DEPTH + "]" * MAX_DEPTH)

    for _ in range(MAX_DEPTH - 1):
        assert isinstance(data, list)
        assert len(data) == 1
        data = data[0]
    assert data == []


def test_more_values_than_allowed_are_refused(tmp_path: Path) -> None:
    items = ", ".join("a" for _ in range(100))

    assert load(tmp_path, f"[{items}]", max_nodes=101) == ["a"] * 100
    with pytest.raises(YamlRefused, match="more than 100 values"):
        load(tmp_path, f"[{items}]", max_nodes=100)


def test_a_file_over_the_size_limit_is_not_parsed(tmp_path: Path) -> None:
    with pytest.raises(YamlRefused, match="larger than 64 bytes"):
        load(tmp_path, "a: " + "b" * 62, max_bytes=64)
    assert load(tmp_path, "a: " + "b" * 61, max_bytes=64) == {"a": "b" * 61}


@pytest.mark.parametrize(
    "value",
    [
        "1" + ":0" * 100_000,  # YAML 1.1 base 60: quadratic to convert
        "9" * 5000,  # past Python's 4300-digit limit on int()
    ],
)
def test_long_integers_are_refused_before_conversion(tmp_path: Path, value: str) -> None:
    with pytest.raises(YamlRefused, match="integer longer than"):
        load(tmp_path, f"x: {value}\n")


def test_a_value_that_cannot_be_built_is_refused(tmp_path: Path) -> None:
    with pytest.raises(YamlRefused, match=r"month must be in 1\.\.12"):
        load(tmp_path, "when: 2001-13-45\n")


def test_python_tags_stay_refused(tmp_path: Path) -> None:
    import yaml

    with pytest.raises(yaml.YAMLError, match="could not determine a constructor"):
        load(tmp_path, "x: !!python/object/apply:os.system [ls]\n")
