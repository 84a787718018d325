"""yolo-orch: a job server for YOLO inference and training on the GPUs of one host."""

__version__ = "0.1.0"
