"""A data.yaml beyond the parser's or the class names' limits is a 422, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from yolo_orch.errors import InvalidJob
from yolo_orch.files.class_names import DEFAULT_CLASS_NAME_LIMITS, ClassNameLimits
from yolo_orch.files.datasets import check_dataset


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for split in ("train", "val"):
        (root / "ds" / "images" / split).mkdir(parents=True)
    return root


HEAD = "path: .\ntrain: images/train\nval: images/val\n"


def refusal(
    root: Path, text: str, limits: ClassNameLimits = DEFAULT_CLASS_NAME_LIMITS
) -> InvalidJob:
    (root / "ds" / "data.yaml").write_text(text)
    with pytest.raises(InvalidJob) as caught:
        check_dataset("ds/data.yaml", [root], limits)
    return caught.value


def test_a_yaml_nested_tens_of_thousands_deep_is_invalid(root: Path) -> None:
    error = refusal(root, HEAD + "names: " + "[" * 50_000 + "]" * 50_000 + "\n")

    assert error.code == "invalid_dataset"
    assert "nests deeper than" in error.message


def test_aliases_in_names_are_refused_before_they_expand(root: Path) -> None:
    # 30 names of 10 000 characters each, from one 10 000-character string
    text = HEAD + f"base: &n {'x' * 10_000}\nnames: [{', '.join(['*n'] * 30)}]\n"

    error = refusal(root, text)

    assert error.code == "invalid_dataset"
    assert "aliases are not accepted" in error.message


def test_more_class_names_than_allowed_are_refused(root: Path) -> None:
    names = [f"class{i}" for i in range(11)]
    text = HEAD + yaml.safe_dump({"names": names})

    error = refusal(root, text, ClassNameLimits(max_names=10))

    assert error.code == "class_names_too_large"
    assert "11 class names" in error.message
    assert "max_class_names" in error.message
    assert check_dataset("ds/data.yaml", [root], ClassNameLimits(max_names=11))


def test_class_names_too_long_together_are_refused(root: Path) -> None:
    text = HEAD + yaml.safe_dump({"names": ["é" * 50, "b" * 50]})  # 150 UTF-8 bytes

    error = refusal(root, text, ClassNameLimits(max_bytes=149))

    assert error.code == "class_names_too_large"
    assert "150 bytes" in error.message
    assert check_dataset("ds/data.yaml", [root], ClassNameLimits(max_bytes=150))


def test_the_value_cap_follows_the_class_name_limit(root: Path) -> None:
    names = {i: f"c{i}" for i in range(600)}  # 1200 values in `names`
    text = HEAD + yaml.safe_dump({"names": names})

    error = refusal(root, text, ClassNameLimits(max_names=10))

    assert error.code == "invalid_dataset"
    assert "more than 1020 values" in error.message
    assert check_dataset("ds/data.yaml", [root], ClassNameLimits(max_names=600))
