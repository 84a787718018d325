"""Exported variants on a Ray node, as plain Python (no Ray started): which variant the server
sends for a lane, and the node's cache keeping a variant's folder, verified file by file, as one
entry of its bound."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from tests.support.variants import variant
from yolo_orch.domain.variants import ExportFormat, Variant
from yolo_orch.errors import VariantTampered
from yolo_orch.params.inference import InferenceParams
from yolo_orch.ray_cluster.node_cache import NodeModelCache, VariantOffer, WeightsOffer
from yolo_orch.ray_cluster.parcels import pick_variant
from yolo_orch.registry.manifests import manifest_digest
from yolo_orch.registry.resolutions import ResolvedVariant

FILES = {
    "model_openvino_model/model.xml": b"<net/>",
    "model_openvino_model/model.bin": b"\x00weights\x01",
    "model_openvino_model/metadata.yaml": b"task: detect\n",
}


def with_files(base: Variant, files: dict[str, bytes]) -> Variant:
    manifest = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    return replace(base, files=manifest, sha256=manifest_digest(manifest))


OPENVINO = with_files(variant(ExportFormat.OPENVINO, "ov-1"), FILES)
ONNX = with_files(variant(ExportFormat.ONNX, "onnx-1"), {"model.onnx": b"onnx graph"})


class Parcels:
    """Stands in for Ray's object store: a ref is the value itself; counts what is fetched."""

    def __init__(self) -> None:
        self.fetched = 0

    def get(self, ref: Any) -> Any:
        self.fetched += 1
        return ref


def offer(the_variant: Variant, files: dict[str, bytes]) -> VariantOffer:
    return VariantOffer(the_variant, [dict(files)])


@pytest.fixture
def parcels() -> Parcels:
    return Parcels()


def cache(tmp_path: Path, parcels: Parcels, capacity: int = 4) -> NodeModelCache:
    return NodeModelCache(tmp_path / "node", capacity, parcels.get)


def test_a_variant_the_node_lacks_is_fetched_verified_and_kept_as_its_folder(
    tmp_path: Path, parcels: Parcels
) -> None:
    node = cache(tmp_path, parcels)
    assert node.held() == []
    with node.using_variant(offer(OPENVINO, FILES)) as resolved:
        assert [r.variant.id for r in node.variants_of("m")] == ["ov-1"]
        assert node.variants_of("other model") == []
        for name, data in FILES.items():
            assert (resolved.folder / name).read_bytes() == data
        assert resolved.entry == resolved.folder / "model_openvino_model"
    assert node.held() == [OPENVINO.sha256]
    assert node.variants_of("m") == []  # listed only while a job uses it

    with node.using_variant(offer(OPENVINO, FILES)):  # kept: not fetched again
        pass
    assert parcels.fetched == 1


@pytest.mark.parametrize(
    "sent",
    [
        {**FILES, "model_openvino_model/model.bin": b"tampered"},
        {name: data for name, data in FILES.items() if not name.endswith(".bin")},
        {**FILES, "model_openvino_model/extra.py": b"print()"},
    ],
    ids=["changed", "missing", "added"],
)
def test_files_that_do_not_match_the_manifest_fail_model_tampered_and_are_not_kept(
    tmp_path: Path, parcels: Parcels, sent: dict[str, bytes]
) -> None:
    node = cache(tmp_path, parcels)
    with pytest.raises(VariantTampered) as failure, node.using_variant(offer(OPENVINO, sent)):
        pass
    assert failure.value.code == "model_tampered"
    assert failure.value.variant_id == "ov-1"
    assert node.held() == []
    assert node.variants_of("m") == []


def test_a_kept_copy_that_changed_is_fetched_again(tmp_path: Path, parcels: Parcels) -> None:
    node = cache(tmp_path, parcels)
    with node.using_variant(offer(OPENVINO, FILES)) as resolved:
        kept = resolved.folder / "model_openvino_model" / "model.bin"
    kept.write_bytes(b"corrupted on the node")

    with node.using_variant(offer(OPENVINO, FILES)):
        assert kept.read_bytes() == FILES["model_openvino_model/model.bin"]
    assert parcels.fetched == 2


def test_a_variant_is_one_entry_of_the_bound_and_one_in_use_is_never_dropped(
    tmp_path: Path, parcels: Parcels
) -> None:
    node = cache(tmp_path, parcels, capacity=1)
    weights = b"pt weights"
    sha256 = hashlib.sha256(weights).hexdigest()
    with node.using_variant(offer(OPENVINO, FILES)):
        node.ensure(WeightsOffer("m", sha256, "tiny.pt", "detect", [weights]))
        assert set(node.held()) == {OPENVINO.sha256, sha256}  # in use: kept beyond the bound
    with node.using_variant(offer(ONNX, {"model.onnx": b"onnx graph"})):
        assert node.held() == [ONNX.sha256]


def resolved(*variants: Variant) -> list[ResolvedVariant]:
    return [ResolvedVariant(v, Path("/registry") / v.id) for v in variants]


def test_the_server_picks_by_the_lanes_rule_for_the_device_on_its_node() -> None:
    both = resolved(ONNX, OPENVINO)
    every = frozenset(ExportFormat)
    auto = InferenceParams.from_job({"imgsz": 320})
    named = InferenceParams.from_job({"imgsz": 320, "format": "onnx"})

    assert pick_variant(auto, "node1/cpu", both, every) == both[1]  # OpenVINO before ONNX
    assert pick_variant(auto, "node1/cpu", both, frozenset({ExportFormat.ONNX})) == both[0]
    assert pick_variant(auto, "node1/cuda:1", both, every) is None  # auto on CUDA: engines
    assert pick_variant(named, "node1/cuda:1", both, every) == both[0]
    assert (
        pick_variant(InferenceParams.from_job({"imgsz": 320, "format": "pt"}), "n/cpu", both, every)
        is None
    )
