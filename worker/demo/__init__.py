"""The demos behind `make demo`, `make demo-cdc` and `make demo-file`: a live shop to copy, the
pipelines' configs, a live view of the copy catching up, and the row-by-row verdict.

Kept apart from the worker's own modules: nothing the worker, CLI or REST server runs imports them.
"""
