"""The isolation case of every route of the hosted face, keyed by (method, path template) as the app's
router names them (a HEAD is its GET, an /api mirror is the route it mirrors and runs with prefix /api).

A case is either a tenant-data case, which tries the route as the attacker against the victim's prompt
ids, files, user data, settings, users and sockets and checks (a) no byte of the victim's data in any
answer, (b) the status that a denial should have, and (c) where the route returns data, a positive
control: the owner asking the same thing does get it, so a check that could not fail is caught; or an
explicit classification with its reason: `public` (serves no tenant data: the web UI's files, node
definitions, the operator's model folders; still requested and checked for the victim's bytes), `auth`
(login and logout), `operator` (process-wide views and controls: refused to a non-admin tenant).

Adding a route to the app without adding it here fails test_every_route_has_an_isolation_case."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp.test_utils import TestClient
from app_routes import route_key

from nodes import progress


@dataclass
class Tenant:
    name: str
    headers: dict
    done: str = ""  # a finished prompt (LoadImage of its upload, TSave, SaveImage)
    running: str = ""  # a slow prompt running while the routes are tried (victim only)
    pending: str = ""  # queued behind it (victim only)
    user_id: str = ""  # created with POST /users (multi-user mode)
    image: str = ""  # the output file of `done`
    v2_job: str = ""  # a finished Comfy API v2 job, its output's asset id and blake3 hash
    v2_output: str = ""
    v2_hash: str = ""
    v2_asset: str = ""  # an asset uploaded through /api/v2/assets

    @property
    def upper(self) -> str:
        return self.name.upper()

    @property
    def cid(self) -> str:
        return f"{self.name}-socket"

    def secrets(self) -> list[str]:
        n, u = self.name, self.upper
        return [
            s
            for s in (
                self.done,
                self.running,
                self.pending,
                self.user_id,
                self.v2_job,
                self.v2_output,
                self.v2_asset,
                self.v2_hash,
                f"{n}img",
                f"{n}loaded",
                f"{n}input",
                f"{u}-PNGTEXT",
                f"{n}model",
                f"{u}-META",
                f"{n}flow",
                f"{u}-USERDATA",
                f"{u}-SETTING",
                f"{n}user",
                f"tenants/{n}",
            )
            if s
        ]


@dataclass
class Ctx:
    client: TestClient
    victim: Tenant
    attacker: Tenant
    prefix: str  # "" or "/api"
    server: Any
    workspace: Any
    sockets: list = field(default_factory=list)  # the attacker's sockets, read once the victim's prompts end
    tried: list = field(default_factory=list)  # (method, url) of every request the cases sent

    def url(self, path: str) -> str:
        return self.prefix + path


def clean(body: bytes, victim: Tenant, sent: str, where: Any) -> None:
    """No secret of the victim in `body`, except what the attacker itself sent (an echoed name)."""
    for secret in victim.secrets():
        if secret not in sent:
            assert secret.encode() not in body, (where, secret, body[:400])


async def call(
    ctx: Ctx,
    who: Tenant,
    method: str,
    url: str,
    *,
    json_body: Any = None,
    data: Any = None,
    headers: dict | None = None,
    head: bool = True,
) -> tuple[int, bytes]:
    """Send one request as `who`; a GET is sent as HEAD too, which must answer the same status."""
    hdrs = {**who.headers, **(headers or {})}
    resp = await ctx.client.request(method, url, json=json_body, data=data, headers=hdrs)
    body = await resp.read()
    ctx.tried.append((method, url, who.name))
    assert resp.status < 500, (method, url, resp.status, body[:300])
    if method == "GET" and head:
        head_resp = await ctx.client.head(url, headers=hdrs)
        assert head_resp.status == resp.status, (url, "HEAD", head_resp.status, resp.status)
        ctx.tried.append(("HEAD", url, who.name))
    return resp.status, body


async def attack(
    ctx: Ctx,
    method: str,
    path: str,
    *,
    expect: tuple[int, ...] | None = None,
    json_body: Any = None,
    data: Any = None,
    headers: dict | None = None,
    sent: str = "",
    head: bool = True,
) -> tuple[int, bytes]:
    url = ctx.url(path)
    status, body = await call(
        ctx, ctx.attacker, method, url, json_body=json_body, data=data, headers=headers, head=head
    )
    clean(body, ctx.victim, url + sent + json.dumps(json_body) + json.dumps(headers), (method, url))
    if expect is not None:
        assert status in expect, (method, url, status, body[:300])
    return status, body


async def own(
    ctx: Ctx,
    method: str,
    path: str,
    must_contain: list[str],
    status: int = 200,
    json_body: Any = None,
    headers: dict | None = None,
) -> bytes:
    """Positive control: the victim asking for its own data gets it."""
    got, body = await call(ctx, ctx.victim, method, ctx.url(path), json_body=json_body, headers=headers, head=False)
    assert got == status, (path, got, body[:300])
    for item in must_contain:
        assert item.encode() in body, (path, item, body[:400])
    return body


def assert_not_interrupted(ctx: Ctx) -> None:
    """The victim's running prompt got no interrupt: its flag is bound and not raised (deterministic:
    the route raised any flag before it answered, and the slow node clears it only by stopping)."""
    rid = ctx.victim.running
    assert rid in progress._prompt_flags, "the victim's running prompt stopped"
    assert not progress._prompt_flags[rid].is_set(), "the attacker's request interrupted the victim's prompt"
    assert rid not in progress._early


def enc(path: str) -> str:
    return quote(path, safe="")


# -- classifications -------------------------------------------------------------------------------
Case = Callable[[Ctx], Awaitable[None]]


def public(reason: str, *paths: str, positive: tuple[str, str] | None = None) -> Case:
    """A route that serves no tenant data (`reason`); the attacker still asks for it, paths naming the
    victim's things included, and no byte of the victim's data may come back."""

    async def case(ctx: Ctx) -> None:
        v = ctx.victim.name
        for path in paths:
            await attack(ctx, "GET", path.format(v=v, ev=enc(f"../../input/tenants/{v}/{v}input.png")))
        if positive:
            path, marker = positive
            await own(ctx, "GET", path, [marker])

    case.kind, case.reason = "public", reason
    return case


def operator(method: str, path: str, body: Any = None) -> Case:
    """Process-wide: refused to a non-admin tenant."""

    async def case(ctx: Ctx) -> None:
        await attack(ctx, method, path, json_body=body, expect=(403,))

    case.kind, case.reason = "operator", "process-wide view or control: admin tenants only"
    return case


def tenant(fn: Case) -> Case:
    fn.kind, fn.reason = "tenant", fn.__doc__ or ""
    return fn


# -- tenant data: prompts, queue, history, jobs ---------------------------------------------------
@tenant
async def ws_case(ctx: Ctx) -> None:
    """The attacker takes the victim's client id; no message of the victim's prompts may reach it
    (read after the victim's prompts end, behind the attacker's own prompt: one publish loop)."""
    cid = ctx.victim.cid + ("-api" if ctx.prefix else "")
    await attack(ctx, "HEAD", f"/ws?clientId={cid}")  # not an upgrade: refused, never a socket
    sock = await ctx.client.ws_connect(ctx.url(f"/ws?clientId={cid}"), headers=ctx.attacker.headers)
    ctx.sockets.append((cid, sock))


@tenant
async def get_prompt(ctx: Ctx) -> None:
    """Queue counts are per tenant."""
    _, body = await attack(ctx, "GET", "/prompt", expect=(200,))
    assert json.loads(body)["exec_info"]["queue_remaining"] == 0
    assert json.loads(await own(ctx, "GET", "/prompt", []))["exec_info"]["queue_remaining"] == 2


@tenant
async def post_prompt(ctx: Ctx) -> None:
    """Neither the victim's prompt id nor its uploads can be used."""
    import tenant_nodes as tn

    v = ctx.victim
    await attack(ctx, "POST", "/prompt", json_body={"prompt": tn.prompt(3), "prompt_id": v.done}, expect=(409,))
    load = {
        "1": {"class_type": "LoadImage", "inputs": {"image": f"{v.name}input.png"}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}},
    }
    await attack(ctx, "POST", "/prompt", json_body={"prompt": load}, expect=(400,))


@tenant
async def get_queue(ctx: Ctx) -> None:
    """The queue lists only the caller's prompts."""
    _, body = await attack(ctx, "GET", "/queue", expect=(200,))
    assert json.loads(body) == {"queue_running": [], "queue_pending": []}
    await own(ctx, "GET", "/queue", [ctx.victim.running, ctx.victim.pending])


@tenant
async def post_queue(ctx: Ctx) -> None:
    """Deleting the victim's pending prompt or clearing the queue touches only the caller's queue."""
    v = ctx.victim
    await attack(ctx, "POST", "/queue", json_body={"delete": [v.pending, v.running]}, expect=(200,))
    await attack(ctx, "POST", "/queue", json_body={"clear": True}, expect=(200,))
    await own(ctx, "GET", "/queue", [v.running, v.pending])
    assert_not_interrupted(ctx)


@tenant
async def get_history(ctx: Ctx) -> None:
    """History lists only the caller's prompts."""
    _, body = await attack(ctx, "GET", "/history", expect=(200,))
    assert ctx.attacker.done in json.loads(body)  # the caller's own history is there, the victim's is not
    await own(ctx, "GET", "/history", [ctx.victim.done, ctx.victim.image])


@tenant
async def get_history_prompt(ctx: Ctx) -> None:
    """The victim's prompt ids read as unknown."""
    v = ctx.victim
    for pid in (v.done, v.running, v.pending):
        _, body = await attack(ctx, "GET", f"/history/{pid}", expect=(200,))
        assert json.loads(body) == {}
    await own(ctx, "GET", f"/history/{v.done}", [v.done, v.image])


@tenant
async def post_history(ctx: Ctx) -> None:
    """Deleting the victim's entries or clearing touches only the caller's history."""
    v = ctx.victim
    await attack(ctx, "POST", "/history", json_body={"delete": [v.done]}, expect=(200,))
    await attack(ctx, "POST", "/history", json_body={"clear": True}, expect=(200,))
    await own(ctx, "GET", f"/history/{v.done}", [v.done])


@tenant
async def get_jobs(ctx: Ctx) -> None:
    """Jobs lists only the caller's prompts."""
    for query in ("", "?status=in_progress,pending", "?status=completed"):
        await attack(ctx, "GET", "/jobs" + query, expect=(200,))
    await own(ctx, "GET", "/jobs", [ctx.victim.done, ctx.victim.running, ctx.victim.pending])


@tenant
async def get_job(ctx: Ctx) -> None:
    """The victim's job ids read as not found."""
    v = ctx.victim
    for pid in (v.done, v.running, v.pending):
        await attack(ctx, "GET", f"/jobs/{pid}", expect=(404,))
    await own(ctx, "GET", f"/jobs/{v.done}", [v.done])


@tenant
async def cancel_job(ctx: Ctx) -> None:
    """Cancelling the victim's jobs cancels nothing."""
    for pid in (ctx.victim.pending, ctx.victim.running):
        _, body = await attack(ctx, "POST", f"/jobs/{pid}/cancel", expect=(200,))
        assert json.loads(body)["cancelled"] is False
    assert_not_interrupted(ctx)


@tenant
async def cancel_jobs(ctx: Ctx) -> None:
    """Cancelling the victim's jobs in bulk cancels nothing."""
    _, body = await attack(
        ctx, "POST", "/jobs/cancel", json_body={"job_ids": [ctx.victim.pending, ctx.victim.running]}, expect=(200,)
    )
    assert json.loads(body)["cancelled"] is False
    assert_not_interrupted(ctx)


@tenant
async def post_interrupt(ctx: Ctx) -> None:
    """An interrupt, naming the victim's running prompt or none, never reaches the victim's prompt."""
    await attack(ctx, "POST", "/interrupt", json_body={"prompt_id": ctx.victim.running}, expect=(200,))
    await attack(ctx, "POST", "/interrupt", json_body={}, expect=(200,))
    assert_not_interrupted(ctx)


# -- tenant data: files --------------------------------------------------------------------------
@tenant
async def get_view(ctx: Ctx) -> None:
    """The victim's outputs and uploads, by name, annotation, subfolder or traversal, are not served."""
    v = ctx.victim.name
    image = ctx.victim.image
    for query in (
        f"filename={image}",
        f"filename={image}&subfolder=..%2F{v}",
        f"filename={image}&subfolder=../{v}",
        f"filename={image}&subfolder=tenants%2F{v}",
        f"filename={v}input.png&type=input",
        f"filename={v}input.png%20%5Binput%5D",
        f"filename=..%2F{v}%2F{v}input.png&type=input",
        f"filename={v}input.png&type=input&subfolder=..%2F{v}",
        f"filename={v}input.png&type=input&preview=webp",
        f"filename={v}model.safetensors&type=input",
        f"filename={v}input.png&type=temp",
    ):
        await attack(ctx, "GET", "/view?" + query, expect=(400, 403, 404))
    await own(ctx, "GET", f"/view?filename={v}input.png&type=input", [f"{ctx.victim.upper}-PNGTEXT"])
    await own(ctx, "GET", f"/view?filename={image}", [])


@tenant
async def get_internal_files(ctx: Ctx) -> None:
    """The input/output/temp listings are the caller's own."""
    for kind in ("input", "output", "temp"):
        await attack(ctx, "GET", f"/internal/files/{kind}", expect=(200,))
    await own(ctx, "GET", "/internal/files/input", [f"{ctx.victim.name}input.png", f"{ctx.victim.name}model"])
    await own(ctx, "GET", "/internal/files/output", [ctx.victim.image])


@tenant
async def get_object_info(ctx: Ctx) -> None:
    """Node definitions list the caller's own input files (LoadImage's choices), never the victim's."""
    await attack(ctx, "GET", "/object_info", expect=(200,))
    await own(ctx, "GET", "/object_info", [f"{ctx.victim.name}input.png"])


@tenant
async def get_object_info_node(ctx: Ctx) -> None:
    """As /object_info, for one class."""
    for node in ("LoadImage", "SaveImage", "TNumber"):
        await attack(ctx, "GET", f"/object_info/{node}", expect=(200,))
    await own(ctx, "GET", "/object_info/LoadImage", [f"{ctx.victim.name}input.png"])


def _png(text: str) -> bytes:
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("secret", text)
    buf = io.BytesIO()
    Image.new("RGBA", (4, 4), (1, 2, 3, 255)).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def _form(name: str, data: bytes, **fields: str) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("image", data, filename=name, content_type="image/png")
    for key, value in fields.items():
        form.add_field(key, value)
    return form


@tenant
async def upload_image(ctx: Ctx) -> None:
    """Uploading under the victim's file name neither collides with nor replaces the victim's file,
    and no subfolder reaches the victim's folder."""
    v = ctx.victim.name
    name = f"{v}input.png"
    original = (ctx.workspace.input_dir / "tenants" / v / name).read_bytes()
    _, body = await attack(ctx, "POST", "/upload/image", data=_form(name, _png("ATTACKER")), expect=(200,), sent=name)
    assert json.loads(body)["name"] == name  # no "(1)": the victim's file is not in the caller's folder
    await attack(
        ctx, "POST", "/upload/image", data=_form(name, _png("ATTACKER"), overwrite="true"), expect=(200,), sent=name
    )
    for sub in (f"../{v}", f"../../input/tenants/{v}", "..", f"tenants/{v}"):
        status, _ = await attack(
            ctx, "POST", "/upload/image", data=_form(name, b"X", subfolder=sub, overwrite="true"), sent=name + sub
        )
        assert status == 400 or sub == f"tenants/{v}", sub  # tenants/<v> under the caller's own folder is the caller's
    assert (ctx.workspace.input_dir / "tenants" / v / name).read_bytes() == original


@tenant
async def upload_mask(ctx: Ctx) -> None:
    """A mask whose original_ref names the victim's image is never merged with it (the merged file keeps
    the original's PNG text, which would carry the victim's secret)."""
    v = ctx.victim.name
    me = ctx.attacker.name
    for i, ref in enumerate(
        (
            {"filename": f"{v}input.png", "type": "input"},
            {"filename": f"{v}input.png", "type": "input", "subfolder": f"../{v}"},
            {"filename": f"../{v}/{v}input.png", "type": "input"},
            {"filename": ctx.victim.image, "type": "output"},
            {"filename": ctx.victim.image, "type": "output", "subfolder": f"../{v}"},
        )
    ):
        name = f"{me}mask{i}.png"
        await attack(
            ctx,
            "POST",
            "/upload/mask",
            data=_form(name, _png("MASK"), original_ref=json.dumps(ref)),
            expect=(200,),
            sent=json.dumps(ref),
        )
        # Saved only when the reference names a file of the caller's own (an upload under the victim's
        # name): then it is merged with that, and the victim's PNG text is not in it.
        await attack(ctx, "GET", f"/view?filename={name}&type=input", expect=(200, 404))
    # Positive control: the owner's own mask is merged with its original and keeps its text.
    form = _form(f"{v}mask.png", _png("MASK"), original_ref=json.dumps({"filename": f"{v}input.png", "type": "input"}))
    got, _ = await call(ctx, ctx.victim, "POST", ctx.url("/upload/mask"), data=form, head=False)
    assert got == 200
    await own(ctx, "GET", f"/view?filename={v}mask.png&type=input", [f"{ctx.victim.upper}-PNGTEXT"])


# -- tenant data: users, user data, settings ------------------------------------------------------
@tenant
async def get_users(ctx: Ctx) -> None:
    """Users (multi-user mode) are per tenant."""
    await attack(ctx, "GET", "/users", expect=(200,))
    await own(ctx, "GET", "/users", [f"{ctx.victim.name}user", ctx.victim.user_id])


@tenant
async def post_users(ctx: Ctx) -> None:
    """The victim's user name is free in the caller's tenant (no 'Duplicate username' telling it exists)."""
    name = f"{ctx.victim.name}user"
    _, mine = await call(ctx, ctx.attacker, "GET", "/users", head=False)
    taken = name in json.loads(mine)["users"].values()  # by the caller itself, in the other prefix's run
    _, body = await attack(ctx, "POST", "/users", json_body={"username": name}, expect=(400,) if taken else (200,))
    assert ctx.victim.user_id not in body.decode()


@tenant
async def get_userdata(ctx: Ctx) -> None:
    """File lists are the caller's; the victim's multi-user id is unknown to the caller."""
    v = ctx.victim
    for query in (
        "dir=workflows",
        "dir=workflows&recurse=true&full_info=true",
        f"dir=..%2F..%2F{v.name}",
        f"dir=..%2F{v.name}%2Fdefault%2Fworkflows",
    ):
        await attack(ctx, "GET", "/userdata?" + query, expect=(200, 400, 403, 404))
    await attack(ctx, "GET", "/userdata?dir=workflows", headers={"comfy-user": v.user_id}, expect=(401, 403))
    await own(ctx, "GET", "/userdata?dir=workflows", [f"{v.name}flow.json"])


@tenant
async def get_userdata_v2(ctx: Ctx) -> None:
    """As /userdata."""
    v = ctx.victim
    for query in ("", "?path=workflows", f"?path=..%2F..%2F{v.name}"):
        await attack(ctx, "GET", "/v2/userdata" + query, expect=(200, 400, 403, 404))
    await attack(ctx, "GET", "/v2/userdata", headers={"comfy-user": v.user_id}, expect=(401, 403))
    await own(ctx, "GET", "/v2/userdata", [f"{v.name}flow.json"])


@tenant
async def get_userdata_file(ctx: Ctx) -> None:
    """The victim's file, by name or traversal, is not served."""
    v = ctx.victim.name
    for name in (
        f"workflows%2F{v}flow.json",
        f"..%2F..%2F{v}%2Fdefault%2Fworkflows%2F{v}flow.json",
        f"..%2F{v}%2Fworkflows%2F{v}flow.json",
    ):
        await attack(ctx, "GET", f"/userdata/{name}", expect=(403, 404))
    await own(ctx, "GET", f"/userdata/workflows%2F{v}flow.json", [f"{ctx.victim.upper}-USERDATA"])


def _victim_flow(ctx: Ctx) -> Path:
    return (
        ctx.workspace.user_dir / "tenants" / ctx.victim.name / "default" / "workflows" / f"{ctx.victim.name}flow.json"
    )


@tenant
async def post_userdata_file(ctx: Ctx) -> None:
    """Writing under the victim's file name writes the caller's own file (no 409 telling it exists)."""
    before = _victim_flow(ctx).read_bytes()
    mine = ctx.workspace.user_dir / "tenants" / ctx.attacker.name / "default" / "workflows" / _victim_flow(ctx).name
    await attack(
        ctx,
        "POST",
        f"/userdata/workflows%2F{ctx.victim.name}flow.json?overwrite=false",
        data=b"{}",
        expect=(409,) if mine.exists() else (200,),
    )  # 409 only for the caller's own file (the /api run)
    await attack(ctx, "POST", f"/userdata/..%2F..%2F{ctx.victim.name}%2Fdefault%2Fx.json", data=b"{}", expect=(403,))
    assert _victim_flow(ctx).read_bytes() == before


@tenant
async def delete_userdata_file(ctx: Ctx) -> None:
    """Deleting the victim's file deletes nothing of the victim's."""
    await attack(
        ctx,
        "DELETE",
        f"/userdata/..%2F..%2F{ctx.victim.name}%2Fdefault%2Fworkflows%2F{ctx.victim.name}flow.json",
        expect=(403, 404),
    )
    await attack(ctx, "DELETE", f"/userdata/workflows%2F{ctx.victim.name}flow.json", expect=(204, 404))
    assert _victim_flow(ctx).is_file()


@tenant
async def move_userdata_file(ctx: Ctx) -> None:
    """Moving the victim's file moves nothing of the victim's."""
    v = ctx.victim.name
    await attack(
        ctx, "POST", f"/userdata/..%2F..%2F{v}%2Fdefault%2Fworkflows%2F{v}flow.json/move/stolen.json", expect=(403, 404)
    )
    await attack(
        ctx, "POST", f"/userdata/workflows%2Fnothere.json/move/..%2F..%2F{v}%2Fdefault%2Fx.json", expect=(403, 404)
    )
    assert _victim_flow(ctx).is_file()


@tenant
async def get_settings(ctx: Ctx) -> None:
    """Settings are the caller's."""
    await attack(ctx, "GET", "/settings", expect=(200,))
    await attack(ctx, "GET", "/settings", headers={"comfy-user": ctx.victim.user_id}, expect=(401, 403))
    await own(ctx, "GET", "/settings", [f"{ctx.victim.upper}-SETTING"])


@tenant
async def get_setting(ctx: Ctx) -> None:
    """The victim's setting reads as unset."""
    _, body = await attack(ctx, "GET", f"/settings/{ctx.victim.name}.secret", expect=(200,))
    assert json.loads(body) is None
    await own(ctx, "GET", f"/settings/{ctx.victim.name}.secret", [f"{ctx.victim.upper}-SETTING"])


@tenant
async def post_settings(ctx: Ctx) -> None:
    """Setting the victim's key sets the caller's."""
    await attack(ctx, "POST", "/settings", json_body={f"{ctx.victim.name}.secret": "STOLEN"}, expect=(200,))
    await own(ctx, "GET", f"/settings/{ctx.victim.name}.secret", [f"{ctx.victim.upper}-SETTING"])


@tenant
async def post_setting(ctx: Ctx) -> None:
    """As POST /settings, one key."""
    await attack(ctx, "POST", f"/settings/{ctx.victim.name}.secret", json_body="STOLEN", expect=(200,))
    await own(ctx, "GET", f"/settings/{ctx.victim.name}.secret", [f"{ctx.victim.upper}-SETTING"])


# -- accounting ------------------------------------------------------------------------------------
@tenant
async def usage_list(ctx: Ctx) -> None:
    """A non-admin sees only its own row."""
    _, body = await attack(ctx, "GET", "/cluster/tenants", expect=(200,))
    assert [row["tenant"] for row in json.loads(body)["tenants"]] == [ctx.attacker.name]


@tenant
async def usage(ctx: Ctx) -> None:
    """Another tenant's usage is refused; one's own is served."""
    await attack(ctx, "GET", f"/cluster/tenants/{ctx.victim.name}/usage", expect=(403,))
    await own(ctx, "GET", f"/cluster/tenants/{ctx.victim.name}/usage", [f'"tenant": "{ctx.victim.name}"'])


# -- authentication --------------------------------------------------------------------------------
async def login_page(ctx: Ctx) -> None:
    await attack(ctx, "GET", f"/login?next=%2Fview%3Ffilename%3D{ctx.victim.name}img", expect=(200,))


async def login(ctx: Ctx) -> None:
    """A login with the caller's key is a session of the caller, whatever it asks for."""
    key = ctx.attacker.headers["Authorization"][7:]
    status, body = await attack(ctx, "POST", "/login", json_body={"key": key, "tenant": ctx.victim.name}, expect=(200,))
    assert json.loads(body) == {"tenant": ctx.attacker.name}
    cookie = ctx.client.session.cookie_jar.filter_cookies(ctx.client.make_url("/"))["comfy_cluster_session"].value
    ctx.client.session.cookie_jar.clear()
    resp = await ctx.client.get("/cluster/tenants", cookies={"comfy_cluster_session": cookie})
    body = await resp.read()
    clean(body, ctx.victim, "", "usage by cookie")
    assert [row["tenant"] for row in json.loads(body)["tenants"]] == [ctx.attacker.name]
    await attack(ctx, "POST", "/login", json_body={"key": key[:-4] + "AAAA"}, expect=(401,))


async def logout(ctx: Ctx) -> None:
    await attack(ctx, "POST", "/logout", expect=(200,))
    await own(ctx, "GET", "/queue", [ctx.victim.running])  # the victim's key still works


for _fn in (login_page, login, logout):
    _fn.kind, _fn.reason = "auth", "login and logout: a session of the key's own tenant, no tenant data"

MODELS = "the operator's model folders: shared and read-only to tenants, never written by a route"
UI = "the web UI's and packs' static files and example workflows, the same for everyone"

CASES: dict[tuple[str, str], Case] = {
    ("GET", "/ws"): ws_case,
    ("GET", "/prompt"): get_prompt,
    ("POST", "/prompt"): post_prompt,
    ("GET", "/queue"): get_queue,
    ("POST", "/queue"): post_queue,
    ("GET", "/history"): get_history,
    ("GET", "/history/{prompt_id}"): get_history_prompt,
    ("POST", "/history"): post_history,
    ("GET", "/jobs"): get_jobs,
    ("GET", "/jobs/{job_id}"): get_job,
    ("POST", "/jobs/{job_id}/cancel"): cancel_job,
    ("POST", "/jobs/cancel"): cancel_jobs,
    ("POST", "/interrupt"): post_interrupt,
    ("GET", "/view"): get_view,
    ("GET", "/internal/files/{directory_type}"): get_internal_files,
    ("GET", "/object_info"): get_object_info,
    ("GET", "/object_info/{node_class}"): get_object_info_node,
    ("POST", "/upload/image"): upload_image,
    ("POST", "/upload/mask"): upload_mask,
    ("GET", "/users"): get_users,
    ("POST", "/users"): post_users,
    ("GET", "/userdata"): get_userdata,
    ("GET", "/v2/userdata"): get_userdata_v2,
    ("GET", "/userdata/{file}"): get_userdata_file,
    ("POST", "/userdata/{file}"): post_userdata_file,
    ("DELETE", "/userdata/{file}"): delete_userdata_file,
    ("POST", "/userdata/{file}/move/{dest}"): move_userdata_file,
    ("GET", "/settings"): get_settings,
    ("GET", "/settings/{id}"): get_setting,
    ("POST", "/settings"): post_settings,
    ("POST", "/settings/{id}"): post_setting,
    ("GET", "/cluster/tenants"): usage_list,
    ("GET", "/cluster/tenants/{name}/usage"): usage,
    ("GET", "/login"): login_page,
    ("POST", "/login"): login,
    ("POST", "/logout"): logout,
    ("POST", "/free"): operator("POST", "/free", {"free_memory": True, "unload_models": True}),
    ("GET", "/cluster/stats"): operator("GET", "/cluster/stats"),
    ("GET", "/metrics"): operator("GET", "/metrics"),
    ("GET", "/internal/logs"): operator("GET", "/internal/logs"),
    ("GET", "/internal/logs/raw"): operator("GET", "/internal/logs/raw"),
    ("PATCH", "/internal/logs/subscribe"): operator(
        "PATCH", "/internal/logs/subscribe", {"clientId": "x", "enabled": True}
    ),
    ("GET", "/view_metadata/{folder_name}"): public(
        MODELS,
        "/view_metadata/checkpoints?filename={v}model.safetensors",
        "/view_metadata/checkpoints?filename={v}model2.safetensors",
        "/view_metadata/checkpoints?filename=..%2F..%2Finput%2Ftenants%2F{v}%2F{v}model.safetensors",
        "/view_metadata/input?filename={v}model.safetensors",
        "/view_metadata/loras?filename=shared.safetensors",
        positive=("/view_metadata/checkpoints?filename=shared.safetensors", "OPERATOR-META"),
    ),
    ("GET", "/embeddings"): public(MODELS, "/embeddings"),
    ("GET", "/models"): public(MODELS, "/models"),
    ("GET", "/models/{folder}"): public(
        MODELS,
        "/models/checkpoints",
        "/models/input",
        "/models/..%2Finput",
        positive=("/models/checkpoints", "shared.safetensors"),
    ),
    ("GET", "/experiment/models"): public(MODELS, "/experiment/models"),
    ("GET", "/experiment/models/{folder}"): public(
        MODELS,
        "/experiment/models/checkpoints",
        "/experiment/models/input",
        positive=("/experiment/models/checkpoints", "shared.safetensors"),
    ),
    ("GET", "/experiment/models/preview/{folder}/{path_index}/{filename}"): public(
        MODELS,
        "/experiment/models/preview/checkpoints/0/shared.safetensors",
        "/experiment/models/preview/checkpoints/0/{ev}",
        "/experiment/models/preview/checkpoints/0/../../input/x.png",
    ),
    ("GET", "/internal/folder_paths"): public(MODELS, "/internal/folder_paths"),
    ("GET", "/system_stats"): public("the server's version, devices and memory", "/system_stats"),
    ("GET", "/features"): public("the server's feature flags", "/features"),
    ("GET", "/"): public(UI, "/", positive=("/", "<html>ui</html>")),
    ("GET", "/{filename}"): public(UI, "/index.html", "/{ev}", "/..%2Fws%2Finput%2Ftenants%2F{v}%2F{v}input.png"),
    ("GET", "/extensions"): public(UI, "/extensions"),
    ("GET", "/extensions/{name}/{path}"): public(
        UI, "/extensions/core/x.js", "/extensions/core/{ev}", "/extensions/..%2F..%2Fws/input"
    ),
    ("GET", "/i18n"): public(UI, "/i18n"),
    ("GET", "/workflow_templates"): public(UI, "/workflow_templates"),
    ("GET", "/api/workflow_templates/{name}/{path}"): public(
        UI, "/api/workflow_templates/x/{ev}", "/api/workflow_templates/x/a.json"
    ),
    ("GET", "/templates/{name}"): public(
        "the installed workflow-template packages' files",
        "/templates/index.json",
        "/templates/{ev}",
        "/templates/..%2F{v}",
    ),
    ("GET", "/user.css"): public(UI, "/user.css"),
    ("GET", "/global_subgraphs"): public("subgraph blueprints of the installed node packs", "/global_subgraphs"),
    ("GET", "/global_subgraphs/{id}"): public(
        "subgraph blueprints of the installed node packs", "/global_subgraphs/x", "/global_subgraphs/{ev}"
    ),
    ("GET", "/node_replacements"): public(
        "node replacements of ComfyUI and the installed node packs", "/node_replacements"
    ),
}

# Writes run after every read, so the caller's own writes under the victim's names (which the
# caller may then list as its own) come after the reads that look for the victim's names.
WRITES = ("POST", "DELETE", "PATCH", "PUT")


def uncovered(routes: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Routes of the app with no case in CASES."""
    present = set(routes)
    return sorted({(m, p) for m, p in routes if route_key(m, p, present)[:2] not in CASES})


def stale(routes: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Cases for routes the app does not have (a renamed route must move its case)."""
    present = set(routes)
    keys = {route_key(m, p, present)[:2] for m, p in routes}
    return sorted(set(CASES) - keys)


def _with_v2() -> None:
    from isolation_cases_assets import ASSET_CASES
    from isolation_cases_v2 import V2_CASES

    CASES.update(V2_CASES)
    CASES.update(ASSET_CASES)


_with_v2()
