"""The labelling loop's plain parts: which of a job's images are captured into a managed dataset
(`capture_rule`) and the YOLO label lines a result entry comes to (`yolo_labels`). No I/O here:
the runners and the services around Label Studio use them."""
