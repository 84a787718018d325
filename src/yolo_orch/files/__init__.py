"""The files jobs read and write: paths under the data roots, uploads and inputs, images,
videos, datasets, job folders and result files."""
