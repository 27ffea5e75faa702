"""``registry publish``: gated, planned, one atomic commit, verified before it is recorded.

1. validate must be clean (checksums, layout, card freshness, local immutability);
2. plan against the remote head (:mod:`registry.hub.plan`): only new and changed files are sent;
   a change to a file already on the Hub is refused unless index.json records the rewrite;
3. every entry whose bytes are not on the Hub yet needs a passing gate receipt;
4. the LFS files are uploaded, hashed by the uploader from the bytes it sends, and checked against
   the plan (:mod:`registry.hub.upload`); then one ``create_commit`` holding every operation with
   ``parent_commit`` = the planned head, so a push by someone else in between makes the Hub refuse
   it (412) instead of mixing trees;
5. the new commit's tree is listed and compared with the plan, Xet hashes against the local bytes
   (:mod:`registry.hub.content`); only then is the published state recorded locally.  A repo id
   publish records (``registry.repo_id``) is staged before the upload (the published index.json
   and card name the repo) and committed locally only after that.  ``--private`` / ``--gated``
   make a repo's first publish private or gated before anything is committed to it (recorded as
   ``registry.access``, which the card and the plan state).

A failure before step 4 leaves the Hub without a commit (uploaded LFS objects stay invisible until a
commit names them, and a re-run reuses them).  Whatever fails, the local record is only written
once the Hub was seen holding the planned bytes, so a re-run plans against what is really there.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from rich.filesize import decimal

from ..artifacts.signature import SignaturePolicy, TrustedKey
from ..core.atomic import Transaction, locked_transaction, registry_lock
from ..core.errors import Problem, RegistryError
from ..core.files import dry_run
from ..core.hashing.engine import hash_file
from ..core.models import Access, Index
from ..core.names import INDEX_NAME, SIGNATURE_NAME, SUMS_NAME
from ..core.progress import Say, silent
from ..core.published import RemoteRecord, published_sums, record_remote, recorded_rewrite
from ..core.repo import Repo, is_dataset, render_index
from ..core.sums import parse_sums
from ..dataset import store
from ..hub.content import check_local_bytes, content_problems
from ..hub.gates import GateTrust, entries_touching, gate_findings
from ..hub.local import local_files, local_sums, with_git_sha1
from ..hub.plan import (
    LocalFile,
    Plan,
    RemoteFile,
    RemoteState,
    make_plan,
    plain_paths,
    rewrites_needed,
    verify_tree,
)
from ..hub.remote import CommitResult, Hub
from ..hub.upload import check_uploaded, operations
from ..index.derived import stage_derived
from .validate import validate


@dataclass(frozen=True)
class PublishOptions:
    repo_id: str
    revision: str = "main"
    dry_run: bool = False
    create_pr: bool = False
    tag: str | None = None
    allow_cpu_gate: bool = False
    trusted_gate_keys: tuple[
        TrustedKey, ...
    ] = ()  # receipts signed by these keys count (the gate ran on another machine)
    delete_remote_extra: bool = False
    assume_empty_remote: bool = (
        False  # plan as if the repo did not exist yet, without contacting the Hub (dry run only)
    )
    restore: bool = False  # put the registry's own bytes back where the Hub changed behind it
    signature: SignaturePolicy = SignaturePolicy()  # model.sig, sent in the same commit, must sign exactly these bytes
    access: Access | None = (
        None  # who may see the repo (--private, --gated): set on its first publish, recorded in index.json
    )


@dataclass(frozen=True)
class Outcome:
    """The plan, what blocks it, and (after a real publish) the commit made, if any."""

    plan: Plan
    blockers: tuple[Problem, ...] = ()
    commit: CommitResult | None = None
    tagged: str | None = None
    access: str = "public"  # who may see the repo once published (core.models.Access)

    def summary(self) -> str:
        """One line: what the plan sends, to a repo that will be ``access``, and what blocks it."""
        plan = self.plan
        line = f"{len(plan.uploads)} file(s), {decimal(plan.upload_bytes)}, to {plan.repo_id}@{plan.revision} ({describe_access(self.access)}) in one commit"
        if not self.blockers:
            return f"{line}; ready"
        codes = sorted({b.code for b in self.blockers})
        return f"{line}; blocked by {len(self.blockers)} problem(s) ({', '.join(codes)}): {', '.join(b.file for b in self.blockers if b.file)}"

    def as_dict(self) -> dict:
        commit = self.commit
        return {
            "ok": not self.blockers,
            "plan": self.plan.as_dict(),
            "access": self.access,
            "blockers": [b.as_dict() for b in self.blockers],
            "commit": None
            if commit is None
            else {"oid": commit.oid, "url": commit.url, "pr_revision": commit.pr_revision, "pr_url": commit.pr_url},
            "tag": self.tagged,
        }


@dataclass(frozen=True)
class _Draft:
    """A plan with everything needed to carry it out."""

    index: Index
    sums: dict[str, str]
    local: dict[str, LocalFile]
    plan: Plan
    blockers: tuple[Problem, ...]
    staged: Mapping[str, Path] = field(default_factory=dict)  # files sent from a local transaction not committed yet
    access: str = "public"  # who may see the repo once published


def describe_access(access: str) -> str:
    """Who may see a repo of ``access`` (core.models.Access), in a few words."""
    return {
        "public": "public", "private": "private: its owners only",
        "gated-auto": "gated: access requests approved automatically", "gated-manual": "gated: access requests approved by its owners",
    }[access]  # fmt: skip


def _access(options: PublishOptions, remote: RemoteState) -> str:
    """Who may see the repo once published: what --private/--gated ask, else what it is now."""
    return options.access or remote.access or "public"


def _access_findings(options: PublishOptions, remote: RemoteState, repo_type: str) -> list[Problem]:
    """--private/--gated change who may see a repo only before it holds a published registry."""
    if options.access is None or not remote.exists or SUMS_NAME not in remote.files or remote.access == options.access:
        return []
    settings = f"https://huggingface.co/{'datasets/' if repo_type == 'dataset' else ''}{options.repo_id}/settings"
    return [Problem(
        "publish.access-set", options.repo_id,
        f"is {describe_access(remote.access or 'public')} and holds a published registry: --private and --gated set who may see a repo on its first publish",
        f"drop --private/--gated, or change it in the repo's settings on the Hub ({settings}) and record it with `registry {'dataset ' if repo_type == 'dataset' else ''}set access {options.access}`",
    )]  # fmt: skip


def _check_options(options: PublishOptions) -> None:
    if options.assume_empty_remote and not options.dry_run:
        raise RegistryError(
            "args.conflict",
            options.repo_id,
            "--assume-empty-remote only makes sense with --dry-run",
            "add --dry-run, or drop --assume-empty-remote",
        )
    if options.restore and options.assume_empty_remote:
        raise RegistryError(
            "args.conflict",
            options.repo_id,
            "--restore compares with the Hub, which --assume-empty-remote never contacts",
            "drop one of them",
        )
    if options.tag and options.create_pr:
        raise RegistryError(
            "args.conflict",
            options.repo_id,
            "a release tag must point at a commit on the branch, not at a pull request",
            "drop --tag or --create-pr",
        )


def _draft(
    repo: Repo,
    index: Index,
    sums: dict[str, str],
    remote: RemoteState,
    options: PublishOptions,
    hub: Hub,
    staged: Mapping[str, Path] | None = None,
) -> _Draft:
    staged = dict(staged or {})
    local = local_files(repo, sums, staged)
    local = with_git_sha1(repo.root, local, plain_paths(local, remote.files), staged)
    plan = make_plan(local, remote, index.rewrites, options.delete_remote_extra)
    if plan.problems:  # the Hub holds other bytes somewhere: are ours the registry's own?
        plan = make_plan(
            local,
            remote,
            index.rewrites,
            options.delete_remote_extra,
            _restorable(repo, hub, remote, plan),
            options.restore,
        )
    blockers = [
        *plan.problems,
        *gate_findings(
            repo,
            index,
            sums,
            [f.path for f in plan.uploads],
            GateTrust(options.allow_cpu_gate, options.trusted_gate_keys),
        ),
        *_signature_findings(repo, index, sums, options),
    ]
    if options.tag and remote.exists and options.tag in hub.tags():
        blockers.append(
            Problem("hub.tag-exists", options.repo_id, f"tag {options.tag!r} already exists", "choose another --tag")
        )
    blockers += _access_findings(options, remote, hub.repo_type)
    return _Draft(index, sums, local, plan, tuple(blockers), staged, _access(options, remote))


def _restorable(repo: Repo, hub: Hub, remote: RemoteState, plan: Plan) -> frozenset[str]:
    """Changed files whose local bytes are the registry's own: the bytes it published there (its
    record), or those the Hub's own SHA256SUMS lists.  The Hub holding others means it was changed
    behind the registry, and ``--restore`` may put them back; anything else needs a recorded rewrite."""
    own = published_sums(repo)
    if remote.head is not None and SUMS_NAME in remote.files:
        with tempfile.TemporaryDirectory(prefix="registry-publish-") as tmp:
            listed = parse_sums(
                hub.download(SUMS_NAME, remote.head, Path(tmp)).read_bytes(), f"{remote.repo_id}/{SUMS_NAME}"
            )
        own = {**listed, **own}
    return frozenset(f.path for f in rewrites_needed(plan.files) if own.get(f.path) == f.local_file.sha256)


def _remote(options: PublishOptions, hub: Hub) -> RemoteState:
    return RemoteState(options.repo_id, options.revision, None) if options.assume_empty_remote else hub.state()


def _signature_findings(repo: Repo, index: Index, sums: dict[str, str], options: PublishOptions) -> list[Problem]:
    problems = options.signature.folder_problems(repo, sums)
    if (repo.root / SIGNATURE_NAME).is_file() and index.registry.repo_id != options.repo_id:
        fix = f"run `registry set repo-id {options.repo_id}` and `registry sign` again, then publish"
        problems.append(
            Problem(
                "sign.repo-id-unrecorded",
                INDEX_NAME,
                f"index.json does not name {options.repo_id}; recording it now would leave model.sig stale",
                fix,
            )
        )
    if (
        (repo.root / SIGNATURE_NAME).is_file()
        and options.access is not None
        and index.registry.access != options.access
    ):
        fix = f"run `registry set access {options.access}` and `registry sign` again, then publish"
        problems.append(
            Problem(
                "sign.access-unrecorded",
                INDEX_NAME,
                f"index.json does not record access {options.access}; recording it now would leave model.sig stale",
                fix,
            )
        )
    return problems


def commit_message(index: Index, plan: Plan) -> tuple[str, str]:
    """(summary, description): the entries added, the rewrites and deletions, the files sent."""
    added = entries_touching(index, [f.path for f in plan.with_status("new")])
    summary = f"Publish {len(added)} entr{'y' if len(added) == 1 else 'ies'}" if added else "Update registry files"
    lines = [f"add {e.path} ({e.method}, data {e.data.version}, sha256 {e.sha256})" for e in added]
    # a plan is committed only when every rewrite it needs is recorded (else it has problems)
    lines += [
        f"rewrite {f.path}: {r.reason}"
        for f in rewrites_needed(plan.files)
        if (r := recorded_rewrite(index.rewrites, f.path, f.local_file.sha256))
    ]
    lines += [
        f"restore {f.path} (sha256 {f.local_file.sha256}): the Hub held other bytes"
        for f in rewrites_needed(plan.files)
        if f.path in plan.restored
    ]
    lines += [f"delete {f.path}" for f in plan.deletions]
    lines.append(f"{len(plan.uploads)} file(s), {plan.upload_bytes} bytes uploaded by rwkv-registry")
    return summary, "\n".join(lines)


def _verify(repo: Repo, draft: _Draft, hub: Hub, commit: str) -> None:
    after = hub.tree(commit)
    local = with_git_sha1(repo.root, draft.local, plain_paths(draft.local, after), draft.staged)
    problems = verify_tree(draft.plan, local, after)
    on_disk = [
        p for p in draft.local if p not in draft.staged
    ]  # staged files are small: the sha256 of their bytes was compared above
    checks = check_local_bytes(
        repo.root, repo.xet_cache_path, after, {p: f.sha256 for p, f in draft.local.items()}, on_disk
    )
    problems += content_problems(checks, "verify", "run `registry publish` again")
    problems += _reread(draft, hub, commit, after, {c.path for c in checks if c.xet in ("match", "mismatch")})
    if problems:
        raise RegistryError.of(problems)


def _reread(draft: _Draft, hub: Hub, commit: str, after: Mapping[str, RemoteFile], by_xet: set[str]) -> list[Problem]:
    """Download every file of the commit whose Xet hash did not vouch for its bytes (plain git files,
    LFS-only ones) and compare its sha256 with the local one: the listing's ids are the Hub's word."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="registry-reread-") as tmp:
        for path in sorted(p for p in draft.local if p in after and p not in by_xet):
            got, want = hash_file(hub.download(path, commit, Path(tmp))), draft.local[path].sha256
            if got != want:
                what = f"the Hub serves other bytes after the commit (sha256 {got[:12]}…, the registry's {want[:12]}…)"
                problems.append(
                    Problem(
                        "verify.served-mismatch",
                        path,
                        what,
                        "run `registry verify-remote` and ask the Hub's support; nothing was recorded as published",
                    )
                )
    return problems


def _require_clear(draft: _Draft) -> None:
    if draft.blockers:
        raise RegistryError.of(draft.blockers, {"plan": draft.plan.as_dict()})


def publish(
    root: Path | str,
    options: PublishOptions,
    hub: Hub | None = None,
    say: Say | None = None,
    hub_progress: bool = True,
) -> Outcome:
    """Plan (``dry_run``) or publish the registry at ``root``; see the module docstring for the steps
    (``hub_progress``: the Hub client's bars)."""
    say = say or silent
    _check_options(options)
    with dry_run(options.dry_run):  # a dry run writes nothing, caches included
        return _publish(root, options, hub, say, hub_progress)


def _publish(root: Path | str, options: PublishOptions, hub: Hub | None, say: Say, hub_progress: bool) -> Outcome:
    repo = Repo.open(root)
    dataset = is_dataset(repo.root)  # a dataset repo on the Hub: no weights, so nothing to gate
    hub = hub or Hub(
        options.repo_id, options.revision, repo_type="dataset" if dataset else "model", progress=hub_progress
    )
    # A real publish holds the lock throughout, so no registry command changes a file mid-upload.
    with nullcontext() if options.dry_run else registry_lock(repo.root):
        say("validating the registry")
        findings = validate(repo.root)
        if findings:
            raise RegistryError.of(findings)  # SHA256SUMS is the plan's input: it must be true first
        index, sums = Index() if dataset else repo.load_index(), local_sums(repo)
        say(f"planning against {options.repo_id}@{options.revision}")
        remote = _remote(options, hub)
        draft = _draft(repo, index, sums, remote, options, hub)
        if options.dry_run:
            return Outcome(draft.plan, draft.blockers, access=draft.access)
        _require_clear(draft)
        state = _prepare_repo(hub, remote, options, say)
        if state is not remote:
            draft = _draft(repo, index, sums, state, options, hub)  # re-plan on the Hub's initial commit
            _require_clear(draft)
        info = store.load(repo).dataset if dataset else index.registry
        if info.repo_id == options.repo_id and options.access in (None, info.access):
            return _record(repo, draft, options, _carry_out(repo, draft, options, hub, say))
        say(f"recording {options.repo_id} as the repo id" + (f" and access {options.access}" if options.access else ""))
        # Staged, sent from staging, and committed locally only once the Hub holds the commit:
        # whatever fails before, the registry stays byte-identical.
        with locked_transaction(repo.root) as txn:
            draft = _with_repo_facts(repo, txn, state, options, hub, dataset)
            outcome = _carry_out(repo, draft, options, hub, say)
        return _record(repo, draft, options, outcome)


def _prepare_repo(hub: Hub, remote: RemoteState, options: PublishOptions, say: Say) -> RemoteState:
    """The repo, created if missing, made as visible as --private/--gated ask before anything is
    committed to it (a gated repo is created private and opened once its gate is set, so a failure
    in between leaves it private); the state to plan against."""
    wanted = options.access
    if remote.exists and (wanted is None or remote.access == wanted):
        return remote
    if not remote.exists:
        say(f"creating {options.repo_id}" + (f" ({describe_access(wanted)})" if wanted else ""))
        hub.create_repo(private=wanted not in (None, "public"))
    if wanted is not None and (remote.exists or wanted.startswith("gated-")):
        say(f"making {options.repo_id} {describe_access(wanted)}")
        hub.set_access(wanted)
    return hub.existing_state()


def _with_repo_facts(
    repo: Repo, txn: Transaction, state: RemoteState, options: PublishOptions, hub: Hub, dataset: bool
) -> _Draft:
    """The plan with the repo publish sends to (and who may see it, when --private/--gated say)
    recorded in index.json (staged in ``txn``), so the published index.json and card name them and
    the next publish needs no --repo-id."""
    if dataset:
        dataset_index = store.load(repo)
        dataset_index.dataset.repo_id = options.repo_id
        dataset_index.dataset.access = options.access or dataset_index.dataset.access
        txn.write(INDEX_NAME, render_index(dataset_index))
        index, sums = Index(), store.stage_derived(repo, txn, dataset_index)  # nothing to gate
    else:
        index = repo.load_index()
        index.registry.repo_id = options.repo_id
        index.registry.access = options.access or index.registry.access
        txn.write(INDEX_NAME, render_index(index))
        sums = stage_derived(repo, txn, index)
    staged = {
        rel: path for rel in txn.staged_files() if (path := txn.staged_source(rel)) is not None
    }  # SHA256SUMS included
    draft = _draft(repo, index, sums, state, options, hub, staged)
    _require_clear(draft)
    return draft


def _carry_out(repo: Repo, draft: _Draft, options: PublishOptions, hub: Hub, say: Say) -> Outcome:
    """The commit on the Hub, verified, and the tag; nothing local is written here."""
    plan, result = draft.plan, None
    assert plan.head is not None, "publish plans against an existing repo"
    if not plan.empty:
        say(
            f"one commit: {len(plan.uploads)} upload(s), {decimal(plan.upload_bytes)}; {len(plan.deletions)} deletion(s)"
        )
        ops = operations(repo.root, plan, draft.staged)
        hub.upload(ops, options.create_pr)
        check_uploaded(plan, ops)
        result = hub.commit(ops, *commit_message(draft.index, plan), parent=plan.head, create_pr=options.create_pr)
    say(f"verifying commit {(result.oid if result else plan.head)[:12]}")
    _verify(repo, draft, hub, result.oid if result else plan.head)  # an empty plan too: the labels may lie
    if options.tag:
        hub.create_tag(options.tag, result.oid if result else plan.head)
    return Outcome(plan, (), result, options.tag, draft.access)


def _record(repo: Repo, draft: _Draft, options: PublishOptions, outcome: Outcome) -> Outcome:
    """Remember what the Hub now holds (after the local files were committed)."""
    result, head = outcome.commit, draft.plan.head
    assert head is not None, "publish plans against an existing repo"
    revision = result.pr_revision if result and result.pr_revision else options.revision
    record_remote(
        repo,
        draft.sums,
        RemoteRecord(repo_id=options.repo_id, revision=revision, commit=result.oid if result else head),
    )
    return outcome
