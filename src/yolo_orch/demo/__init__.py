"""`yolo-orch demo` (`make demo`): a detector trained, validated, exported and run through the
server's own HTTP API on a generated dataset, offline, on any machine.

- `dataset`: the generated shapes dataset (YOLO layout, seeded).
- `server`: the demo's own `yolo-orch serve` subprocess.
- `api`: the calls the demo makes to a server.
- `run`: the steps, their summary, and the command's entry point.
"""
