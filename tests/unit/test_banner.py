"""The start-up banner's URLs, and the too_many_gpus refusal's wording per executor."""

from __future__ import annotations

import pytest

from yolo_orch.api.banner import base_url
from yolo_orch.errors import too_many_gpus


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000"),
        ("0.0.0.0", "http://127.0.0.1:8000"),  # every address: loopback is one of them
        ("::", "http://[::1]:8000"),
        ("::1", "http://[::1]:8000"),
        ("gpu-box.example", "http://gpu-box.example:8000"),
    ],
)
def test_the_banner_gives_urls_the_server_answers_on(host: str, url: str) -> None:
    assert base_url(host, 8000) == url


def test_too_many_gpus_names_the_host_on_threads_and_the_node_on_a_cluster() -> None:
    assert too_many_gpus(2, 1, on_cluster=False).message == (
        "the job asks for 2 GPUs; this host has 1 lane(s)"
    )
    on_ray = too_many_gpus(3, 2, on_cluster=True).message
    assert on_ray == (
        "the job asks for 3 GPUs; a job's lanes are all on one node, and the cluster's largest "
        "node has 2 lane(s)"
    )
