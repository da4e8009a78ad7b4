"""Safe joining of client-supplied names onto workspace folders.

Every route that touches files (/view, /upload/*, /userdata, /view_metadata, /internal/files) and
every node that opens an input, output or temp file by name (LoadImage and kin, folder_paths'
annotated paths) goes through `safe_join`, so the traversal rules live in one place: no absolute
paths, no `..` segments, no backslashes, no NUL, no percent-encoded separators or dots that a later
decode could turn into traversal, and the resolved path (symlinks followed) must stay inside the
base folder. A route and a node therefore never disagree on which files a prompt may reach.
"""

from __future__ import annotations

import re
from pathlib import Path

# Percent-encoded '.', '/', '\\' and NUL: already decoded once by the HTTP layer, a second decode
# anywhere downstream would turn them into traversal, so a name still carrying them is refused.
_ENCODED = re.compile(r"%(2e|2f|5c|00)", re.IGNORECASE)
NAME_MAX = 255  # bytes in one path component on common filesystems


class UnsafePath(ValueError):
    """A client-supplied name that would leave its base folder."""


def check_relative(name: str) -> None:
    """Refuse a relative name that is absolute, climbs, or hides separators."""
    if "\x00" in name or "\\" in name or _ENCODED.search(name):
        raise UnsafePath(name)
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise UnsafePath(name)
    if any(part == ".." or len(part.encode("utf-8", "surrogatepass")) > NAME_MAX for part in name.split("/")):
        raise UnsafePath(name)  # too long a name cannot exist: refused before the filesystem errors


def is_inside(path: Path, base: Path) -> bool:
    return path.resolve() == base.resolve() or path.resolve().is_relative_to(base.resolve())


def safe_join(base: Path, *parts: str) -> Path:
    """`base/parts...` resolved (symlinks followed); UnsafePath if it would leave `base`."""
    for part in parts:
        check_relative(part)
    target = base.resolve().joinpath(*[p for p in parts if p]).resolve()
    if not is_inside(target, base):
        raise UnsafePath("/".join(parts))
    return target
