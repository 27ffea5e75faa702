"""``registry diff [OLD] [NEW]``: what changed between two releases of a registry
(:mod:`registry.index.releases`).

Each side is ``working`` (the registry on disk), ``published`` (the last publish or pull), or any
revision of the Hub repo (a branch, a tag, a commit id).  A commit this registry published or
pulled is read from what it kept of it (``.registry/published/releases/``), with no Hub; else from
the Hub, or, for the last one without a kept copy (``--offline``), from its SHA256SUMS alone.  By
default the last release against the working registry.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import RegistryError
from ..core.published import recorded_remote
from ..core.repo import Repo
from ..hub.remote import Hub
from ..index.releases import (
    Release,
    ReleaseDiff,
    compare,
    hub_release,
    kept_release,
    recorded_release,
    registry_hub,
    working_release,
)

WORKING = "working"
PUBLISHED = "published"


def _side(repo: Repo, spec: str, hub: Hub | None, offline: bool) -> Release:
    if spec == WORKING:
        return working_release(repo)
    record = recorded_remote(repo)
    if spec == PUBLISHED:
        if record is None:
            return recorded_release(repo, None)  # refuses: nothing recorded
        spec = record.commit
    kept = kept_release(repo, spec)
    if kept is not None:
        return kept
    if record is not None and spec == record.commit and (offline or hub is None):
        return recorded_release(repo, record.commit)
    if offline or hub is None:
        fix = "drop --offline" if offline else "pass --repo-id NAMESPACE/NAME (or publish the registry first)"
        raise RegistryError(
            "diff.no-hub",
            spec,
            f"{spec!r} is a Hub revision, and {'--offline reads no Hub' if offline else 'no repo id is known'}",
            fix,
        )
    return hub_release(hub, hub.resolve(spec))


def diff(
    root: Path | str,
    old: str = PUBLISHED,
    new: str = WORKING,
    repo_id: str | None = None,
    offline: bool = False,
    hub_progress: bool = True,
) -> ReleaseDiff:
    """``new`` compared with ``old``."""
    repo = Repo.open(root)
    hub = None if offline else registry_hub(repo, repo_id, progress=hub_progress)
    return compare(_side(repo, old, hub, offline), _side(repo, new, hub, offline))
