"""The application layer over the store and the dispatcher: submission, cancel and the
notifications clients follow. Knows nothing of HTTP."""
