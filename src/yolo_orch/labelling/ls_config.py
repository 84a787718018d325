"""A Label Studio project's labelling config (its `<View>` XML), read for what an ML backend
needs: the image it labels and the control tags that label it (rectangles, rotated rectangles,
polygons, brushes, keypoints, choices), with their `from_name`/`to_name` and label values.

The XML comes from another server: it is bounded in size and in elements, and read by expat with
every document type declaration refused, so no entity (internal, external, or nested as in the
"billion laughs") is ever declared, let alone expanded. Label Studio's own configs never have one.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.parsers import expat

from yolo_orch.errors import LabelConfigInvalid

MAX_CONFIG_BYTES = 256 * 1024
"""Far above any real config (a few hundred labels); far below what would hurt to parse."""
MAX_ELEMENTS = 20_000


class ControlKind(enum.StrEnum):
    """A control tag, named as its results' `type` (`rectanglelabels`, ...)."""

    RECTANGLES = "rectanglelabels"
    POLYGONS = "polygonlabels"
    BRUSH = "brushlabels"
    KEYPOINTS = "keypointlabels"
    CHOICES = "choices"


_CONTROL_TAGS = {
    "RectangleLabels": ControlKind.RECTANGLES,
    "PolygonLabels": ControlKind.POLYGONS,
    "BrushLabels": ControlKind.BRUSH,
    "KeyPointLabels": ControlKind.KEYPOINTS,
    "Choices": ControlKind.CHOICES,
}
_LABEL_TAGS = frozenset({"Label", "Choice"})


@dataclass(frozen=True)
class LabelValue:
    """One `<Label>` or `<Choice>`: its `value` (what results carry), the model class names it
    stands for (`predicted_values`, comma-separated, as Label Studio's YOLO example writes
    them), and for a keypoint its index in the model's keypoints (`model_index`)."""

    value: str
    predicted: tuple[str, ...] = ()
    index: int | None = None

    def names(self) -> tuple[str, ...]:
        """The class names it matches: `predicted_values`, else its own value."""
        return self.predicted or (self.value,)


@dataclass(frozen=True)
class Control:
    kind: ControlKind
    name: str
    """`from_name` of its results."""
    to_name: str
    labels: tuple[LabelValue, ...]

    def label_for(self, class_name: str) -> str | None:
        """The label value a model's class is given: the label naming it (its value or
        `predicted_values`), exactly, else ignoring case; None when no label does."""
        for fold in (False, True):
            for label in self.labels:
                names = label.names()
                if fold:
                    if class_name.casefold() in (name.casefold() for name in names):
                        return label.value
                elif class_name in names:
                    return label.value
        return None

    def class_of(self, value: str, names: Sequence[str]) -> int | None:
        """The index in the dataset's `names` of the class a label value stands for."""
        label = next((label for label in self.labels if label.value == value), None)
        candidates = (value,) if label is None else (value, *label.names())
        for fold in (False, True):
            for candidate in candidates:
                for index, name in enumerate(names):
                    same = name.casefold() == candidate.casefold() if fold else name == candidate
                    if same:
                        return index
        return None

    def keypoint_index(self, value: str) -> int | None:
        """The keypoint a label value marks: its `model_index`, else its place among the
        control's labels."""
        for place, label in enumerate(self.labels):
            if label.value == value:
                return label.index if label.index is not None else place
        return None

    def keypoint_label(self, index: int) -> str | None:
        for place, label in enumerate(self.labels):
            if (label.index if label.index is not None else place) == index:
                return label.value
        return None


@dataclass(frozen=True)
class LabelConfig:
    image: str
    """The `<Image>` tag's name: the `to_name` of the controls that label it."""
    image_key: str
    """The task data key holding the image's URL (its `value`, `$image`, without the `$`)."""
    controls: tuple[Control, ...]

    def control(self, kind: ControlKind) -> Control | None:
        """The first control of that kind labelling the image."""
        return next((each for each in self.controls if each.kind is kind), None)

    def by_name(self, name: str) -> Control | None:
        return next((each for each in self.controls if each.name == name), None)


@dataclass
class _Reader:
    images: list[tuple[str, str]] = field(default_factory=list)
    controls: list[tuple[ControlKind, str, str, list[LabelValue]]] = field(default_factory=list)
    open_control: list[LabelValue] | None = None
    depth_of_control: int = 0
    depth: int = 0
    elements: int = 0

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        self.elements += 1
        if self.elements > MAX_ELEMENTS:
            raise LabelConfigInvalid(f"the config has more than {MAX_ELEMENTS} elements")
        if tag == "Image" and attrs.get("name") and attrs.get("value", "").startswith("$"):
            self.images.append((attrs["name"], attrs["value"][1:]))
        elif tag in _CONTROL_TAGS and attrs.get("name") and attrs.get("toName"):
            labels: list[LabelValue] = []
            self.controls.append((_CONTROL_TAGS[tag], attrs["name"], attrs["toName"], labels))
            self.open_control, self.depth_of_control = labels, self.depth
        elif tag in _LABEL_TAGS and self.open_control is not None and "value" in attrs:
            self.open_control.append(_label(attrs))

    def end(self, tag: str) -> None:
        if self.open_control is not None and self.depth == self.depth_of_control:
            self.open_control = None
        self.depth -= 1


def _label(attrs: dict[str, str]) -> LabelValue:
    predicted = tuple(
        name.strip() for name in attrs.get("predicted_values", "").split(",") if name.strip()
    )
    index = attrs.get("model_index", "").strip()
    if index and not index.isdigit():
        raise LabelConfigInvalid(f"model_index {index!r} of label {attrs['value']!r} is no index")
    return LabelValue(attrs["value"], predicted, int(index) if index else None)


def parse_label_config(xml: str) -> LabelConfig:
    """The image and its controls; `LabelConfigInvalid` for anything else: too large, not
    well-formed, any document type declaration, no `<Image value="$...">`, or no control tag
    of those above labelling it."""
    data = xml.encode()
    if len(data) > MAX_CONFIG_BYTES:
        raise LabelConfigInvalid(f"the config is larger than {MAX_CONFIG_BYTES} bytes")
    reader = _Reader()
    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise LabelConfigInvalid(f"the config is not well-formed XML: {exc}") from None
    if not reader.images:
        raise LabelConfigInvalid('the config has no <Image name=".." value="$.."> tag')
    image, key = reader.images[0]
    controls = tuple(
        Control(kind, name, to_name, tuple(labels))
        for kind, name, to_name, labels in reader.controls
        if to_name == image
    )
    if not controls:
        kinds = ", ".join(_CONTROL_TAGS)
        raise LabelConfigInvalid(f"no control tag ({kinds}) labels the image {image!r}")
    return LabelConfig(image, key, controls)


def _refuse_doctype(*_: object) -> None:
    raise LabelConfigInvalid("the config declares a document type (entities are refused)")


def _refuse_entity(*_: object) -> None:
    raise LabelConfigInvalid("the config declares an entity (refused)")
