"""A Label Studio labelling config read for its image and controls; hostile XML refused."""

from __future__ import annotations

import pytest

from yolo_orch.errors import LabelConfigInvalid
from yolo_orch.labelling.ls_config import MAX_CONFIG_BYTES, ControlKind, parse_label_config

POSE = """
<View>
  <Image name="img" value="$picture" zoom="true"/>
  <Header value="Label the people"/>
  <RectangleLabels name="box" toName="img">
    <Label value="Person" predicted_values="person,human" background="red"/>
  </RectangleLabels>
  <KeyPointLabels name="kp" toName="img">
    <Label value="nose"/>
    <Label value="left_eye" model_index="2"/>
  </KeyPointLabels>
  <Choices name="other" toName="elsewhere"><Choice value="x"/></Choices>
</View>
"""


def test_the_image_and_the_controls_that_label_it() -> None:
    config = parse_label_config(POSE)

    assert (config.image, config.image_key) == ("img", "picture")
    assert [control.kind for control in config.controls] == [
        ControlKind.RECTANGLES,
        ControlKind.KEYPOINTS,
    ]  # the Choices label another object: left out
    boxes = config.control(ControlKind.RECTANGLES)
    assert boxes is not None
    assert (boxes.name, boxes.to_name) == ("box", "img")
    assert config.by_name("kp") is config.control(ControlKind.KEYPOINTS)


def test_labels_map_model_classes_and_keypoint_indexes() -> None:
    config = parse_label_config(POSE)
    boxes, points = config.controls

    assert boxes.label_for("human") == "Person"  # predicted_values
    assert boxes.label_for("PERSON") == "Person"  # case folded when nothing matches exactly
    assert boxes.label_for("car") is None
    assert boxes.class_of("Person", ["car", "person"]) == 1
    assert boxes.class_of("Dog", ["car", "person"]) is None
    assert points.keypoint_index("nose") == 0  # its place
    assert points.keypoint_index("left_eye") == 2  # its model_index
    assert points.keypoint_label(2) == "left_eye"
    assert points.keypoint_label(1) is None


@pytest.mark.parametrize(
    ("xml", "why"),
    [
        ("<View><Image name='i' value='$i'/>", "not well-formed"),
        ("<View><Text name='t' value='$t'/></View>", "no <Image"),
        ("<View><Image name='i' value='$i'/><TextArea name='a' toName='i'/></View>", "no control"),
        (
            "<View><Image name='i' value='$i'/>"
            "<Choices name='c' toName='i'><Choice value='a' model_index='x'/></Choices></View>",
            "is no index",
        ),
    ],
)
def test_configs_it_cannot_use_are_refused(xml: str, why: str) -> None:
    with pytest.raises(LabelConfigInvalid, match=why):
        parse_label_config(xml)


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(2, 10)).replace(
        "&lol1;", "&lol;"
    )
    + "]><View><Image name='i' value='$i'/><Choices name='c' toName='i'>"
    "<Choice value='&lol9;'/></Choices></View>"
)
EXTERNAL = (
    '<?xml version="1.0"?><!DOCTYPE v [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    "<View><Image name='i' value='$i'/><Choices name='c' toName='i'>"
    "<Choice value='&xxe;'/></Choices></View>"
)


@pytest.mark.parametrize("xml", [BILLION_LAUGHS, EXTERNAL])
def test_entities_are_never_expanded(xml: str) -> None:
    with pytest.raises(LabelConfigInvalid, match="document type"):
        parse_label_config(xml)


def test_an_undeclared_entity_is_not_well_formed() -> None:
    with pytest.raises(LabelConfigInvalid, match="not well-formed"):
        parse_label_config("<View><Image name='i' value='$i'/>&lol;</View>")


def test_size_and_elements_are_bounded() -> None:
    big = "<View><Image name='i' value='$i'/>" + " " * MAX_CONFIG_BYTES + "</View>"
    with pytest.raises(LabelConfigInvalid, match="larger than"):
        parse_label_config(big)
    many = "<View><Image name='i' value='$i'/>" + "<View/>" * 20_001 + "</View>"
    with pytest.raises(LabelConfigInvalid, match="elements"):
        parse_label_config(many)
