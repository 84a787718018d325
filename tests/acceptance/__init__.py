"""Acceptance tests: the real `yolo-orch serve` as a subprocess, driven over HTTP."""
