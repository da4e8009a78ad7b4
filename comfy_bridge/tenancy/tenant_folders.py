"""Per-tenant folders: input/, output/, temp/ and user/ each get a `tenants/<name>` subfolder that
is the whole folder for code acting for that tenant (routes, /view, the engine's Save and Load
nodes through folder_paths). Model folders are the operator's, shared and read-only to tenants; a
tenant's own models (uploaded through Comfy API v2) live in models/tenants/<name>/<folder>, which
only code acting for that tenant sees, after the shared folders."""

from __future__ import annotations

from pathlib import Path

from comfy_bridge.server.userdata import UserManager
from nodes.workspace import MODEL_FOLDERS, Workspace

from . import tenant_context as context

TENANTS_DIR = "tenants"
SCOPED_DIRS = ("input_dir", "output_dir", "temp_dir", "user_dir")
# Model folders a tenant may bring its own files into (weights: no configs, no diffusers folders).
TENANT_MODEL_FOLDERS = tuple(k for k in MODEL_FOLDERS if k not in ("configs", "diffusers", "custom_nodes"))


def tenant_dir(base: Path, tenant: str) -> Path:
    return base / TENANTS_DIR / tenant


def _scoped(attr: str) -> property:
    def get(self: TenantWorkspace) -> Path | None:
        base = self.__dict__.get("_" + attr)
        tenant = context.current()
        if tenant is None or base is None:
            return base
        path = tenant_dir(base, tenant)
        made = self.__dict__.setdefault("_made", set())
        if path not in made:
            path.mkdir(parents=True, exist_ok=True)
            made.add(path)
        return path

    def set_(self: TenantWorkspace, value: Path | None) -> None:
        self.__dict__["_" + attr] = value

    return property(get, set_)


class TenantWorkspace(Workspace):
    """A Workspace whose input/output/temp/user folders follow the current tenant."""

    input_dir = _scoped("input_dir")
    output_dir = _scoped("output_dir")
    temp_dir = _scoped("temp_dir")
    user_dir = _scoped("user_dir")

    @classmethod
    def wrap(cls, ws: Workspace) -> TenantWorkspace:
        with context.scoped(None):
            return cls(
                ws.root,
                output_dir=ws.output_dir,
                input_dir=ws.input_dir,
                temp_dir=ws.temp_dir,
                user_dir=ws.user_dir,
                folder_names_and_paths=ws.folder_names_and_paths,
            )

    def tenant_models_dir(self, tenant: str, folder: str | None = None) -> Path:
        """The tenant's own models (all of them, or one model folder's)."""
        base = tenant_dir(self.models_dir, tenant)
        return base / self.folder_key(folder) if folder is not None else base

    def folder_paths(self, name: str) -> list[Path]:
        paths = super().folder_paths(name)
        tenant, key = context.current(), self.folder_key(name)
        if tenant is not None and key in TENANT_MODEL_FOLDERS:
            paths.append(self.tenant_models_dir(tenant, key))
        return paths

    def tenant_folders(self, tenant: str) -> list[Path]:
        """The tenant's own folders (for storage accounting)."""
        return [tenant_dir(self.__dict__["_" + attr], tenant) for attr in SCOPED_DIRS] + [
            self.tenant_models_dir(tenant)
        ]


class TenantUserManager(UserManager):
    """ComfyUI's user manager rooted in the current tenant's user folder."""

    def __init__(self, workspace: TenantWorkspace, multi_user: bool):
        self._workspace = workspace
        super().__init__(workspace.user_dir, multi_user)

    @property
    def user_dir(self) -> Path:
        return Path(self._workspace.user_dir)

    @user_dir.setter
    def user_dir(self, value: Path) -> None:
        """The folder follows the workspace; UserManager's own assignment is ignored."""


def storage_bytes(folders: list[Path]) -> int:
    total = 0
    for folder in folders:
        if folder.is_dir():
            total += sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return total
