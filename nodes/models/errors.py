"""The one error type model loading raises, so a node can show the user which file is wrong and why."""

from __future__ import annotations

import os


class ModelLoadError(Exception):
    """A model file could not be loaded: names the file and says what is wrong with it."""

    def __init__(self, path: str | os.PathLike | None, problem: str) -> None:
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        where = f"{self.path}: " if self.path else ""
        super().__init__(f"cannot load model {where}{problem}")
