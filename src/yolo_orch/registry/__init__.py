"""Models and their variants: imports that fingerprint weights, manifests, resolutions
of a job's model to a file, and the downloads that serve them."""
