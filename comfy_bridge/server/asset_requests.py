"""What the local assets API accepts (pydantic models for its queries and bodies, so a bad field gets a
400 naming it) and how it answers: the asset object and the error envelope of ComfyUI's asset routes."""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from aiohttp import web
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .asset_index import tags_of
from .common import dumps_json

HASH_RE = re.compile(r"^blake3:[0-9a-f]{64}$")
UUID_RE = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
MAX_TAG_FILTER = 100
MAX_TAGS, MAX_TAG_LEN = 64, 256  # what one request may set (ComfyUI sets no bound; a body could hold millions)
SYSTEM_TAGS = frozenset({"missing"})
CURSOR_SORTS = ("created_at", "updated_at", "name", "size")
# A client can show these from the bytes themselves; a model file gets no preview_url.
PREVIEWABLE = ("image/", "video/", "audio/", "text/")


def error(status: int, code: str, message: str, details: dict | None = None) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message, "details": details or {}}}, status=status, dumps=dumps_json
    )


def invalid(code: str, exc: ValidationError) -> web.Response:
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    return error(400, code, "Validation failed.", {"errors": errors})


def _csv(value: Any) -> list[str]:
    """Tags from `a,b` or repeated parameters; de-duplicated, order kept."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    out = [t.strip() for item in items if isinstance(item, str) for t in item.split(",")]
    return list(dict.fromkeys(t for t in out if t))


class TagFilter(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_tags: list[str] = []  # older spellings of tags_all and tags_none
    exclude_tags: list[str] = []
    tags_all: list[str] = []
    tags_any: list[str] = []
    tags_none: list[str] = []
    name_contains: str | None = None

    @field_validator("include_tags", "exclude_tags", "tags_all", "tags_any", "tags_none", mode="before")
    @classmethod
    def split_tags(cls, v: Any) -> list[str]:
        return _csv(v)

    def resolved(self) -> tuple[list[str], list[str], list[str]]:
        """(all, any, none), or ValueError naming the parameters that cannot be combined."""
        for name in ("include_tags", "exclude_tags", "tags_all", "tags_any", "tags_none"):
            if len(getattr(self, name)) > MAX_TAG_FILTER:
                raise ValueError(f"'{name}' lists more than {MAX_TAG_FILTER} tags.")
        if self.include_tags and self.tags_all:
            raise ValueError("Cannot combine 'include_tags' with 'tags_all'; use 'tags_all'.")
        if self.exclude_tags and self.tags_none:
            raise ValueError("Cannot combine 'exclude_tags' with 'tags_none'; use 'tags_none'.")
        all_, none = self.tags_all or self.include_tags, self.tags_none or self.exclude_tags
        if (self.tags_all or self.tags_any or self.tags_none) and set(all_) & set(none):
            clash = ", ".join(repr(t) for t in sorted(set(all_) & set(none)))
            raise ValueError(f"Query can never match: {clash} is both required and excluded.")
        return all_, self.tags_any, none

    def matches(self, record: dict, all_: list[str], any_: list[str], none: list[str]) -> bool:
        tags = set(tags_of(record))
        if not set(all_) <= tags or (any_ and not tags & set(any_)) or tags & set(none):
            return False
        return not self.name_contains or self.name_contains.lower() in record["name"].lower()


class ListQuery(TagFilter):
    hash: str | None = None
    include_public: bool = True  # accepted as ComfyUI accepts it: a local server has no public pool
    limit: int = Field(20, ge=1, le=500)
    offset: int = Field(0, ge=0)
    after: str | None = None
    sort: Literal["name", "created_at", "updated_at", "size", "last_access_time"] = "created_at"
    order: Literal["asc", "desc"] = "desc"

    @field_validator("hash", mode="before")
    @classmethod
    def lower_hash(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class RefineQuery(TagFilter):
    limit: int = Field(100, ge=1, le=1000)


class TagsQuery(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    prefix: str | None = Field(None, max_length=256)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=10_000_000)
    order: Literal["count_desc", "name_asc"] = "count_desc"
    include_zero: bool = True


def _bounded(tags: list[str]) -> list[str]:
    if len(tags) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags per request")
    long = next((t for t in tags if len(t) > MAX_TAG_LEN), None)
    if long is not None:
        raise ValueError(f"a tag is at most {MAX_TAG_LEN} characters ({long[:40]!r}... is {len(long)})")
    return tags


def _tag_list(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(t, str) for t in v):
        raise ValueError("tags must be a list of strings")
    return _bounded(list(dict.fromkeys(t.strip() for t in v if t.strip())))


class TagsBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    tags: list[str] = Field(..., min_length=1)

    @field_validator("tags", mode="before")
    @classmethod
    def check_tags(cls, v: Any) -> list[str]:
        return _tag_list(v)


def _blake3(v: Any) -> Any:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    s = str(v).strip().lower()
    if not HASH_RE.match(s):
        raise ValueError("hash must be 'blake3:' followed by 64 lowercase hex digits")
    return s


class FromHashBody(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    hash: str
    name: str | None = Field(None, min_length=1, max_length=512)
    tags: list[str] = []
    user_metadata: dict[str, Any] = {}
    mime_type: str | None = None
    preview_id: str | None = None

    @field_validator("hash", mode="before")
    @classmethod
    def check_hash(cls, v: Any) -> str:
        if _blake3(v) is None:
            raise ValueError("hash is required")
        return _blake3(v)

    @field_validator("tags", mode="before")
    @classmethod
    def check_tags(cls, v: Any) -> list[str]:
        return [] if v is None else _tag_list(v)


class UploadSpec(BaseModel):
    """The text fields of a multipart upload (tags may be repeated, comma-separated or a JSON array)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    tags: list[str] = []
    name: str | None = Field(None, max_length=512)
    user_metadata: dict[str, Any] = {}
    hash: str | None = None
    mime_type: str | None = None
    preview_id: str | None = None

    @field_validator("hash", mode="before")
    @classmethod
    def check_hash(cls, v: Any) -> str | None:
        return _blake3(v)

    @field_validator("tags", mode="before")
    @classmethod
    def split_tags(cls, v: Any) -> list[str]:
        out: list[str] = []
        for item in v if isinstance(v, list) else [v]:
            s = str(item).strip() if item is not None else ""
            if s.startswith("["):
                try:
                    parsed = json.loads(s)
                except ValueError:
                    parsed = None
                if isinstance(parsed, list):
                    out += [str(x).strip() for x in parsed]
                    continue
            out += [t.strip() for t in s.split(",")]
        return _bounded(list(dict.fromkeys(t for t in out if t)))

    @field_validator("user_metadata", mode="before")
    @classmethod
    def parse_metadata(cls, v: Any) -> Any:
        if isinstance(v, str):
            if not v.strip():
                return {}
            try:
                v = json.loads(v)
            except ValueError as exc:
                raise ValueError(f"user_metadata must be JSON: {exc}") from None
            if not isinstance(v, dict):
                raise ValueError("user_metadata must be a JSON object")  # noqa: TRY004 - pydantic reports ValueErrors only
        return v or {}


class UpdateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str | None = Field(None, min_length=1, max_length=512)
    user_metadata: dict[str, Any] | None = None
    preview_id: str | None = None

    @model_validator(mode="after")
    def one_field(self) -> UpdateBody:
        if self.name is None and self.user_metadata is None and self.preview_id is None:
            raise ValueError("Provide at least one of: name, user_metadata, preview_id.")
        return self


def query_dict(request: web.Request) -> dict[str, Any]:
    """The query string as a dict, a repeated parameter as a list."""
    return {
        k: (request.query.getall(k) if len(request.query.getall(k)) > 1 else request.query[k]) for k in request.query
    }


# -- cursors: opaque to clients; a keyset (the last item's sort value and id) so that items arriving at
# the head of the list (new outputs) do not shift the pages that follow
class InvalidCursor(ValueError):
    """A cursor this server did not issue, or issued for another sort."""


def encode_cursor(sort: str, order: str, value: Any, asset_id: str) -> str:
    raw = json.dumps({"s": sort, "o": order, "v": value, "i": asset_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str, order: str) -> tuple[Any, str]:
    """(sort value, id) of the item a page resumes after; InvalidCursor when the cursor is not one of ours or
    was made for another sort."""
    if sort not in CURSOR_SORTS:
        raise InvalidCursor(f"cursor pagination is not supported for sort={sort!r}")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCursor("the cursor is not one this server issued") from None
    if not (
        isinstance(data, dict)
        and isinstance(data.get("i"), str)
        and isinstance(data.get("v"), (str, int, float))
        and not isinstance(data.get("v"), bool)
    ):
        raise InvalidCursor("the cursor is not one this server issued")
    if data.get("s") != sort or data.get("o") != order:
        raise InvalidCursor(
            f"the cursor was issued for sort={data.get('s')!r} order={data.get('o')!r}, "
            f"not sort={sort!r} order={order!r}"
        )
    if isinstance(data["v"], str) != (sort == "name"):
        raise InvalidCursor("the cursor is not one this server issued")
    return data["v"], data["i"]


# -- answers ---------------------------------------------------------------------------------------
def iso(ts: float) -> str:
    """UTC without an offset, as ComfyUI's records serialise their times."""
    return datetime.fromtimestamp(ts, UTC).replace(tzinfo=None).isoformat()


def view_url(record: dict) -> str | None:
    """/api/view's address for an input, output or temp file (models have none)."""
    if record["root"] not in ("input", "output", "temp") or not record["loader_path"]:
        return None
    subfolder, _, filename = record["loader_path"].rpartition("/")
    url = f"/api/view?type={record['root']}&filename={quote(filename, safe='')}"
    return url + f"&subfolder={quote(subfolder, safe='')}" if subfolder else url


def asset_json(record: dict, preview: dict | None = None) -> dict:
    """The asset as the frontend's schema reads it; absent values are left out, as ComfyUI leaves them."""
    if record["preview_id"]:
        preview_url = view_url(preview) if preview is not None else None
    elif record["missing"]:
        preview_url = None
    else:
        mime = (record["mime_type"] or "").split(";", 1)[0].strip().lower()
        preview_url = view_url(record) if mime.startswith(PREVIEWABLE) else None
    out = {
        "id": record["id"],
        "name": record["name"],
        "hash": record["hash"],
        "loader_path": record["loader_path"],
        "display_name": record["display_name"],
        "size": record["size"],
        "mime_type": record["mime_type"],
        "tags": tags_of(record),
        "preview_url": preview_url,
        "preview_id": record["preview_id"],
        "user_metadata": record["user_metadata"],
        "job_id": record["job_id"],
        "prompt_id": record["job_id"],
        "created_at": iso(record["created"]),
        "updated_at": iso(record["updated"]),
        "last_access_time": iso(record["accessed"]),
    }
    return {k: v for k, v in out.items() if v is not None}
