"""``registry history``: the releases of a registry, newest first, each with one line of what it
changed (:mod:`registry.index.releases`).

Where the Hub repo is known (``--repo-id``, index.json's repo id, or the last publish's record),
the releases are the commits of the branch: each one's SHA256SUMS, index.json and card are read
(never its weights) and compared with its parent's.  Offline (``--offline``, or no repo known), the
local record of the last publish or pull is the only release known, compared with nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import RegistryError
from ..core.progress import Echo, silent
from ..core.published import recorded_remote
from ..core.repo import Repo
from ..index.releases import HistoryItem, Release, compare, hub_release, recorded_release, registry_hub

DEFAULT_LIMIT = 20


@dataclass(frozen=True)
class History:
    repo_id: str | None  # None: from the local record alone
    revision: str
    items: tuple[HistoryItem, ...]
    more: bool = False  # older commits were left out (--limit)

    def as_dict(self) -> dict:
        return {"ok": True, "repo_id": self.repo_id, "revision": self.revision, "source": "hub" if self.repo_id else "local", "releases": [i.as_dict() for i in self.items], "more": self.more}


def history(
    root: Path | str, repo_id: str | None = None, revision: str = "main", limit: int = DEFAULT_LIMIT, offline: bool = False, say: Echo | None = None, hub_progress: bool = True,
) -> History:  # fmt: skip
    """The last ``limit`` commits of ``revision`` (the Hub), or the local record (``offline``, or no repo known)."""
    say = say or silent
    repo = Repo.open(root)
    record = recorded_remote(repo)
    hub = None if offline else registry_hub(repo, repo_id, revision, hub_progress)
    if hub is None:
        if record is None:
            fix = "publish the registry first" if offline else "pass --repo-id NAMESPACE/NAME"
            raise RegistryError("history.unknown", repo.rel(repo.published_dir), "no publish or pull is recorded here" + ("" if offline else ", and no repo id is known"), fix)
        item = HistoryItem(record.commit, "", f"recorded by the last publish or pull of {record.repo_id}@{record.revision}", compare(Release("nothing", {}), recorded_release(repo, record.commit)), (), True)
        return History(None, record.revision, (item,))
    commits = hub.commits()
    shown = commits[: limit + 1]  # one more: the parent of the oldest shown
    tags: dict[str, list[str]] = {}
    for tag, target in sorted(hub.tag_targets().items()):
        tags.setdefault(target, []).append(tag)
    releases: dict[str, Release] = {}
    for number, commit in enumerate(shown, 1):
        say(f"reading {commit.oid[:12]} ({number}/{len(shown)})")
        releases[commit.oid] = hub_release(hub, commit.oid)
    here = record.commit if record and record.repo_id == hub.repo_id else None
    items = []
    for position, commit in enumerate(shown[:limit]):
        release = releases[commit.oid]
        parent = releases[shown[position + 1].oid] if position + 1 < len(shown) else Release("nothing", {})
        diff = compare(parent, release) if release.is_registry else None
        items.append(HistoryItem(commit.oid, commit.date, commit.title, diff, tuple(tags.get(commit.oid, ())), commit.oid == here))
    return History(hub.repo_id, revision, tuple(items), len(commits) > limit)
