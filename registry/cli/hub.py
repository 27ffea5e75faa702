"""Hub commands: publish, pull, verify-remote, history, diff, rollback.

The token is never an option: huggingface_hub reads HF_TOKEN or the ``hf auth login`` token
itself, so it cannot end up in shell history, CI logs or ``--json`` output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.errors import RegistryError
from .app import DIR_ARG, REGISTRY_OPT, main, registry_dir, registry_option, usage_error
from .output import Line, Text, check_text, json_option, output
from .sign import PUBLIC_KEY_OPT, REQUIRE_SIGNATURE_OPT

if TYPE_CHECKING:
    from ..hub.content import ContentCheck
    from ..hub.plan import Plan
    from ..index.releases import ReleaseDiff
    from ..ops.publish import Outcome


def revision_option(help_text: str) -> Callable[[Any], Any]:
    return click.option("--revision", default="main", show_default=True, help=help_text)


REVISION_OPT = revision_option("Branch to publish to.")
REPO_TYPE_OPT = click.option(
    "--repo-type",
    type=click.Choice(["model", "dataset"]),
    default="model",
    show_default=True,
    help="A model repo, or a dataset repo (a dataset registry: `registry dataset`).",
)


def _plan_text(plan: Plan) -> Text:
    from rich.filesize import decimal

    where = f"head {plan.head[:12]}" if plan.head else "new repo"
    yield f"plan for {plan.repo_id}@{plan.revision} ({where}):"
    for f in plan.files:
        if f.status == "unchanged":
            continue
        note = (
            decimal(f.local.size)
            if f.local
            else ("delete" if plan.delete_extra else "kept; --delete-remote-extra deletes it")
        )
        yield f"  {f.status:<12} {f.path}  ({note})"
    yield f"  {len(plan.with_status('unchanged'))} file(s) unchanged"
    yield f"upload {len(plan.uploads)} file(s), {decimal(plan.upload_bytes)}; delete {len(plan.deletions)}"


def _outcome_text(outcome: Outcome, dry_run: bool) -> Text:
    from ..ops.publish import describe_access

    yield from _plan_text(outcome.plan)
    yield f"the repo {'will be' if dry_run else 'is'} {describe_access(outcome.access)}"
    yield from (Line(f"error: {blocker.one_line()}", err=True) for blocker in outcome.blockers)
    if outcome.commit:
        yield f"published commit {outcome.commit.oid} ({outcome.commit.pr_url or outcome.commit.url})"
    elif not dry_run:
        yield "nothing to publish"
    if outcome.tagged:
        yield f"tagged {outcome.tagged}"


def _repo_id(repo_id: str | None, registry: Path) -> str:
    """--repo-id, else registry.repo_id from index.json."""
    if repo_id:
        return repo_id
    from ..core.repo import Repo, is_dataset
    from ..dataset import store

    repo = Repo.open(registry)
    configured = store.load(repo).dataset.repo_id if is_dataset(repo.root) else repo.load_index().registry.repo_id
    if not configured:
        raise RegistryError(
            "args.missing",
            "--repo-id",
            "no repo id given and index.json has no registry.repo_id",
            "pass --repo-id NAMESPACE/NAME",
        )
    return configured


def _content_text(checks: Iterable[ContentCheck]) -> Text:
    """How each LFS file was compared: by the Hub's Xet hash, or (said so) by sha256 only."""
    checks = list(checks)
    yield from (f"note: {check.path}: {check.note}" for check in checks if check.xet in ("lfs-only", "not-compared"))
    yield f"{sum(c.xet == 'match' for c in checks)} file(s) verified by the Hub's Xet hash against the local bytes"


@main.command("publish")
@click.option("--repo-id", metavar="NS/NAME", help="Target repo on the Hub (default: registry.repo_id in index.json).")
@REGISTRY_OPT
@REVISION_OPT
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan and what blocks it; upload nothing (exit 1 when publish would refuse).",
)
@click.option(
    "--assume-empty-remote",
    is_flag=True,
    help="With --dry-run: plan as if the repo did not exist yet, without contacting the Hub.",
)
@click.option(
    "--create-pr", is_flag=True, help="Open a pull request with the commit instead of committing to the branch."
)
@click.option("--tag", metavar="NAME", help="Tag the published commit (or the unchanged head) with NAME.")
@click.option("--allow-cpu-gate", is_flag=True, help="Accept gate receipts from CPU-only runs.")
@click.option(
    "--trust-gate-key",
    "trust_gate_keys",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="KEY.pub",
    help="Count receipts signed by this EC public key (the gate machine's `smoke --sign-key`); repeatable. docs/ci.md.",
)
@click.option("--delete-remote-extra", is_flag=True, help="Delete files on the Hub that the registry does not have.")
@click.option(
    "--restore",
    is_flag=True,
    help="Where the Hub holds other bytes than the registry published (changed on the Hub), put the registry's bytes back in the same verified commit.",
)
@click.option(
    "--private",
    is_flag=True,
    help="The repo's first publish: make it private (only its owners see it) before anything is committed; the card says so.",
)
@click.option(
    "--gated",
    type=click.Choice(["auto", "manual"]),
    help="The repo's first publish: make it gated (access requests approved automatically, or by its owners) before anything is committed; the card says so.",
)
@REQUIRE_SIGNATURE_OPT
@PUBLIC_KEY_OPT
@json_option
def publish_cmd(
    repo_id: str | None,
    registry: Path,
    revision: str,
    dry_run: bool,
    assume_empty_remote: bool,
    create_pr: bool,
    tag: str | None,
    allow_cpu_gate: bool,
    trust_gate_keys: tuple[Path, ...],
    delete_remote_extra: bool,
    restore: bool,
    private: bool,
    gated: str | None,
    require_signature: bool,
    public_key: Path | None,
) -> None:
    """Publish the registry to the Hub in one verified commit, after validate and the gate receipts.

    In order: validate; gate receipts this installation's gate wrote (or signed by a --trust-gate-key); a plan
    against the remote; the upload (the uploader hashes what it sends; a file changed since the plan is refused);
    one commit; a verification after, also when nothing was sent (the Hub's Xet hashes against the local bytes;
    files no Xet hash covers are downloaded and their sha256 compared), recording nothing while anything differs.
    Exactly the files SHA256SUMS lists, SHA256SUMS and model.sig are sent; a present model.sig must sign exactly
    them and goes in the same commit.

    --repo-id defaults to registry.repo_id and is recorded there (with the card): staged before the upload, written
    locally only once the Hub holds the commit. --restore puts the registry's own bytes back where the Hub was
    changed behind it (docs/reliability.md). --private / --gated are refused once the repo holds a published
    registry; they are recorded as registry.access, and the plan and the card say who may see the repo.
    """
    from ..artifacts.signature import SignaturePolicy, TrustedKey
    from ..ops.publish import PublishOptions, publish

    if private and gated:
        raise usage_error(
            "--gated",
            "a private repo is seen by its owners only, so a gate on it asks no one",
            "pass --private or --gated, not both",
        )
    access = "private" if private else f"gated-{gated}" if gated else None
    options = PublishOptions(
        repo_id=_repo_id(repo_id, registry), revision=revision, dry_run=dry_run, create_pr=create_pr, tag=tag,
        allow_cpu_gate=allow_cpu_gate, trusted_gate_keys=tuple(TrustedKey.read(k, "--trust-gate-key") for k in trust_gate_keys), delete_remote_extra=delete_remote_extra, assume_empty_remote=assume_empty_remote, restore=restore,
        signature=SignaturePolicy(public_key, require_signature), access=access,  # type: ignore[arg-type]  # one of core.models.Access
    )  # fmt: skip
    out = output()
    outcome = publish(registry, options, say=out.say, hub_progress=out.progress)
    out.result(outcome.as_dict(), _outcome_text(outcome, dry_run), found_problems=bool(outcome.blockers))


@main.command("pull")
@click.option("--repo-id", required=True, metavar="NS/NAME", help="Repo on the Hub to download.")
@DIR_ARG
@REGISTRY_OPT
@revision_option("Branch, tag or commit to download.")
@click.option(
    "--base-file",
    "base_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="For a repo that is not a registry yet (adopted on the way): a base its weights are checked against, as `registry adopt --base-file`.",
)
@click.option(
    "--trust-files",
    is_flag=True,
    help="For a repo that is not a registry yet: the files win over its hand-written index.json, as `registry adopt --trust-files`.",
)
@REQUIRE_SIGNATURE_OPT
@PUBLIC_KEY_OPT
@REPO_TYPE_OPT
@json_option
def pull_cmd(
    repo_id: str,
    directory: Path | None,
    registry: Path,
    revision: str,
    base_files: tuple[Path, ...],
    trust_files: bool,
    require_signature: bool,
    public_key: Path | None,
    repo_type: str,
) -> None:
    """Download a registry into DIR (or -C; new or empty), verify every file, then move it into place.
    A hand-made repo that is not a registry yet is adopted on the way (`registry adopt`).

    model.sig is verified when present. A repo adopted on the way takes `registry adopt`'s options and records the
    repo id it came from.
    """
    from ..artifacts.signature import SignaturePolicy
    from ..ops.adopt import AdoptOptions
    from ..ops.pull import pull

    signature = SignaturePolicy(public_key, require_signature)
    options = AdoptOptions(base_files=base_files, trust_files=trust_files)
    out = output()
    pulled = pull(
        repo_id,
        registry_dir(directory, registry),
        revision,
        say=out.say,
        signature=signature,
        adopt_options=options,
        repo_type=repo_type,
        hub_progress=out.progress,
    )
    adopted = pulled.adopted
    document = {
        "ok": True,
        "directory": str(pulled.root),
        "files": pulled.files,
        "remote": pulled.remote.model_dump(),
        "adopted": adopted.as_dict() if adopted else None,
    }
    text = [
        f"pulled {pulled.files} file(s) of {repo_id}@{pulled.remote.commit[:12]} into {pulled.root} ({'adopted: it was not a registry yet' if adopted else 'verified'})",
        *(f"  still to do: {step}" for step in (adopted.next_steps if adopted else ())),
    ]
    out.result(document, text)


@main.command("verify-remote")
@click.option("--repo-id", required=True, metavar="NS/NAME", help="Repo on the Hub to check.")
@registry_option(
    "The registry directory (env RWKV_REGISTRY); when it holds a registry, its SHA256SUMS is compared too."
)
@revision_option("Branch, tag or commit to check.")
@REQUIRE_SIGNATURE_OPT
@PUBLIC_KEY_OPT
@REPO_TYPE_OPT
@json_option
def verify_remote_cmd(
    repo_id: str, registry: Path, revision: str, require_signature: bool, public_key: Path | None, repo_type: str
) -> None:
    """Check the Hub's files against its SHA256SUMS, index.json and model.sig without downloading the weights.

    The Hub's LFS oids are compared with SHA256SUMS; when -C holds the registry, also its Xet hashes with the local
    bytes (an LFS-only file: sha256 only, said so; a redacted hash: unverifiable). A file SHA256SUMS does not list
    (someone else's, which publish keeps) is a note, not a failure.
    """
    from ..artifacts.signature import SignaturePolicy
    from ..core.repo import find_root
    from ..ops.verify_remote import verify_remote

    out = output()
    signature = SignaturePolicy(public_key, require_signature)
    report = verify_remote(
        repo_id, revision, find_root(registry), signature=signature, repo_type=repo_type, hub_progress=out.progress
    )
    summary = f"{repo_id}@{report.commit[:12]}: {report.files} file(s) agree with its SHA256SUMS and index.json"
    kept = (
        f"note: {path}: on the Hub but not in its SHA256SUMS: no part of the registry (publish keeps it; --delete-remote-extra deletes it)"
        for path in report.kept
    )
    out.result(
        report.as_dict(),
        check_text(report.problems, summary, [*_content_text(report.content), *kept]),
        found_problems=bool(report.problems),
    )


def _diff_lines(diff: ReleaseDiff) -> Text:
    what = diff.what
    verbs = {"added": "added", "removed": "removed", "changed": "replaced"}
    for change in diff.artifacts:
        a = change.artifact
        facts = ", ".join(
            f for f in (a.method, a.base and f"base {a.base}", a.data_version and f"data {a.data_version}") if f
        )
        shas = (
            f"{change.old.sha256[:12]}… -> {change.new.sha256[:12]}…"
            if change.old and change.new
            else f"sha256 {a.sha256[:12]}…"
        )
        yield f"  {what} {verbs[change.status]:<8} {a.path}  ({facts}{'; ' if facts else ''}{shas})"
    for score in diff.scores:
        setup = f" [{score.setup}]" if score.setup else ""
        yield f"  score {score.status:<8} {score.owner}: {score.benchmark}{setup} {score.backend} {score.date}: {score.old or '-'} -> {score.new or '-'}"
    if diff.recommended:
        before, after = diff.recommended
        yield f"  recommended moved: {', '.join(before) or 'none'} -> {', '.join(after) or 'none'}"
    yield from (f"  file {f.status:<8} {f.path}" for f in diff.files)
    if diff.card:
        yield f"  card {diff.card.line()}"
    yield from (Line(f"note: {note}", err=True) for note in diff.notes)


@main.command("history")
@click.option(
    "--repo-id", metavar="NS/NAME", help="Repo on the Hub (default: registry.repo_id, else the last publish's record)."
)
@REGISTRY_OPT
@revision_option("Branch whose commits are listed.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="List at most this many commits, newest first.",
)
@click.option("--offline", is_flag=True, help="Read no Hub: the release the last publish or pull recorded here.")
@json_option
def history_cmd(repo_id: str | None, registry: Path, revision: str, limit: int, offline: bool) -> None:
    """The releases of the registry, newest first: commit, date and one line of what each changed
    (weights, scores, recommended); from the Hub's commits, else the local record.

    --offline reads only the local record (docs/releases.md).
    """
    from ..ops.history import history

    out = output()
    found = history(registry, repo_id, revision, limit, offline, say=out.say, hub_progress=out.progress)

    def text() -> Text:
        yield (
            f"releases of {found.repo_id}@{found.revision}, newest first:"
            if found.repo_id
            else "the last publish or pull recorded here:"
        )
        for item in found.items:
            marks = [*(f"tag {t}" for t in item.tags), *(["published here"] if item.published_here else [])]
            mark = f" [{', '.join(marks)}]" if marks else ""
            yield f"{item.commit[:12]}  {item.date[:19]}  {item.title}{mark}"
            yield f"    {item.diff.summary() if item.diff else 'not a release of this registry (no SHA256SUMS)'}"
        if found.more:
            yield f"(older commits left out: pass --limit {limit * 2})"

    out.result(found.as_dict(), text())


@main.command("diff")
@click.argument("old", default="published", required=False)
@click.argument("new", default="working", required=False)
@click.option(
    "--repo-id",
    metavar="NS/NAME",
    help="Repo on the Hub whose revisions are named (default: registry.repo_id, else the last publish's record).",
)
@REGISTRY_OPT
@click.option("--offline", is_flag=True, help="Read no Hub: `published` is the local record's SHA256SUMS alone.")
@json_option
def diff_cmd(old: str, new: str, repo_id: str | None, registry: Path, offline: bool) -> None:
    """What changed from OLD to NEW: weights added, removed or replaced (by sha256), scores,
    the recommended weights, other files and the card.  Each is `working` (the registry on disk),
    `published` (the last publish or pull) or a Hub revision (branch, tag, commit id); by default
    `published` against `working`.

    The releases a publish or pull kept in .registry/published/releases/ are read without the Hub.
    """
    from ..ops.diff import diff

    out = output()
    found = diff(registry, old, new, repo_id, offline, hub_progress=out.progress)
    text = [f"{found.old[:12]} -> {found.new[:12]}: {found.summary()}", *_diff_lines(found)]
    out.result({"ok": True, **found.as_dict()}, text)


@main.command("rollback")
@click.argument("rev")
@click.option(
    "--repo-id", metavar="NS/NAME", help="Repo on the Hub (default: registry.repo_id, else the last publish's record)."
)
@REGISTRY_OPT
@revision_option("Branch that is rolled back.")
@click.option("--dry-run", is_flag=True, help="Say what the commit would copy and delete; commit nothing.")
@click.option("--hub-only", is_flag=True, help="Leave the local registry as it is (the output says how to pull REV).")
@json_option
def rollback_cmd(rev: str, repo_id: str | None, registry: Path, revision: str, dry_run: bool, hub_only: bool) -> None:
    """Make the branch hold REV's files again in one verified commit, copied on the Hub (no weight is
    uploaded again); refused if the branch moved meanwhile.  The local registry follows when it held
    exactly the branch's release.

    It is verified as publish verifies (Xet hash and sha256); when the local registry does not follow, the output
    says how to pull REV.
    """
    from ..ops.rollback import rollback

    out = output()
    done = rollback(registry, rev, repo_id, revision, dry_run, not hub_only, say=out.say, hub_progress=out.progress)

    def text() -> Text:
        head = f"{done.repo_id}@{done.revision}: {done.head[:12]} -> {done.target[:12]} ({len(done.copied)} file(s) copied on the Hub, {len(done.deleted)} deleted)"
        yield head
        yield from (f"  copy   {p}" for p in done.copied)
        yield from (f"  delete {p}" for p in done.deleted)
        if done.commit:
            yield from (f"note: {c.path}: {c.note}" for c in done.content if c.xet == "lfs-only")
            yield f"{sum(c.xet == 'match' for c in done.content)} file(s) verified by the Hub's Xet hash (against the local bytes where the registry holds them, else REV's)"
            yield f"rolled back in commit {done.commit}"
            yield done.local_note
        elif not (done.copied or done.deleted):
            yield "nothing to roll back: the branch already holds REV's files"
        else:
            yield "dry run: nothing committed"

    out.result(done.as_dict(), text())
