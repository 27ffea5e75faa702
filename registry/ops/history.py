"""``registry history``: the releases of a registry, newest first, each with one line of what it
changed (:mod:`registry.index.releases`).

Where the Hub repo is known (``--repo-id``, index.json's repo id, or the last publish's record),
the releases are the commits of the branch: each one's SHA256SUMS, index.json and card are read
(never its weights) and compared with its parent's.  Offline (``--offline``, or no repo known), the
releases are those publish and pull kept here (``.registry/published/releases/``), newest first,
each against the one kept before it; a registry that published before they were kept has the last
publish's SHA256SUMS alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import RegistryError
from ..core.progress import Say, silent
from ..core.published import kept_releases, recorded_remote
from ..core.repo import Repo
from ..index.releases import HistoryItem, Release, compare, hub_release, read_kept, recorded_release, registry_hub

DEFAULT_LIMIT = 20
Listed = tuple[Release, str, str, tuple[str, ...]]  # a release, its date, title and tags


@dataclass(frozen=True)
class History:
    repo_id: str | None  # None: from the local record alone
    revision: str
    items: tuple[HistoryItem, ...]
    more: bool = False  # older commits were left out (--limit)

    def as_dict(self) -> dict:
        return {
            "ok": True,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "source": "hub" if self.repo_id else "local",
            "releases": [i.as_dict() for i in self.items],
            "more": self.more,
        }


def history(
    root: Path | str, repo_id: str | None = None, revision: str = "main", limit: int = DEFAULT_LIMIT, offline: bool = False, say: Say | None = None, hub_progress: bool = True,
) -> History:  # fmt: skip
    """The last ``limit`` commits of ``revision`` (the Hub), or the local record (``offline``, or no repo known)."""
    say = say or silent
    repo = Repo.open(root)
    record = recorded_remote(repo)
    hub = None if offline else registry_hub(repo, repo_id, revision, hub_progress)
    if hub is None:
        kept = kept_releases(repo)
        here = record.commit if record else None
        if kept:
            found: list[Listed] = [
                (read_kept(repo, r, folder), r.recorded, f"published or pulled: {r.repo_id}@{r.revision}", ())
                for r, folder in kept[: limit + 1]
            ]
            return History(None, revision, _items(found, limit, here), len(kept) > limit)
        if record is None:
            fix = "publish the registry first" if offline else "pass --repo-id NAMESPACE/NAME"
            raise RegistryError(
                "history.unknown",
                repo.rel(repo.published_dir),
                "no publish or pull is recorded here" + ("" if offline else ", and no repo id is known"),
                fix,
            )
        last: list[Listed] = [
            (
                recorded_release(repo, record.commit),
                "",
                f"the last publish or pull: {record.repo_id}@{record.revision}",
                (),
            )
        ]
        return History(None, record.revision, _items(last, limit, here))
    commits = hub.commits()
    shown = commits[: limit + 1]  # one more: the parent of the oldest shown
    tags: dict[str, list[str]] = {}
    for tag, target in sorted(hub.tag_targets().items()):
        tags.setdefault(target, []).append(tag)
    found = []  # one per commit shown
    for number, commit in enumerate(shown, 1):
        say(f"reading {commit.oid[:12]} ({number}/{len(shown)})")
        found.append((hub_release(hub, commit.oid), commit.date, commit.title, tuple(tags.get(commit.oid, ()))))
    here = record.commit if record and record.repo_id == hub.repo_id else None
    return History(hub.repo_id, revision, _items(found, limit, here), len(commits) > limit)


def _items(found: Sequence[Listed], limit: int, here: str | None) -> tuple[HistoryItem, ...]:
    """Each of the first ``limit`` releases (release, date, title, tags; newest first) against the
    next one, its parent."""
    items = []
    for position, (release, date, title, tags) in enumerate(found[:limit]):
        parent = found[position + 1][0] if position + 1 < len(found) else Release("nothing", {})
        diff = compare(parent, release) if release.is_registry else None
        items.append(HistoryItem(release.commit or release.label, date, title, diff, tags, release.commit == here))
    return tuple(items)
