"""Every call to the Hub, through huggingface_hub's HfApi, and the errors users see from them.

The endpoint comes from ``HF_ENDPOINT`` and the token from ``HF_TOKEN`` or ``hf auth login``, both
read by the library itself: this module never handles the token except to scrub it from error
text, so none of the registry's messages or ``--json`` output can carry it.  Every library exception becomes
a one-line :class:`RegistryError` naming the repo and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2  # huggingface_hub's HTTP client: its transport errors are the network failures
from huggingface_hub import CommitOperation, CommitOperationAdd, HfApi, get_token
from huggingface_hub.errors import (
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import HFValidationError, disable_progress_bars, validate_repo_id

from .. import __version__
from ..core.errors import Exit, RegistryError
from .plan import ExistingState, RemoteFile, RemoteState

_TOKEN_SHAPED = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")  # user access tokens: hf_ + 34 letters and digits
AUTH_FIX = "set HF_TOKEN to a token with write access to the repo (or run `hf auth login`)"
RETRY_FIX = "run the command again (publish re-plans against what the Hub holds; uploaded files are not sent twice)"


def scrub(text: str) -> str:
    """``text`` without the token in use, nor anything shaped like a Hub token."""
    token = get_token()
    if token:
        text = text.replace(token, "***")
    return _TOKEN_SHAPED.sub("hf_***", text)


def _server_says(err: HfHubHTTPError) -> str:
    return scrub(err.server_message or str(err).splitlines()[0]).strip()


@contextmanager
def hub_errors(repo_id: str, revision: str) -> Iterator[None]:
    """Translate huggingface_hub's exceptions into one-line refusals (token scrubbed)."""
    try:
        yield
    except RevisionNotFoundError as exc:
        raise RegistryError(
            "hub.revision-missing",
            repo_id,
            f"revision {revision!r} does not exist",
            "create the branch on the Hub, or pass --revision main",
        ) from exc
    except RemoteEntryNotFoundError as err:
        raise RegistryError(
            "hub.file-missing",
            repo_id,
            f"a file is missing on the Hub ({_server_says(err)})",
            "publish the registry again, or check --revision",
        ) from err
    except RepositoryNotFoundError as exc:
        raise RegistryError(
            "hub.repo-missing",
            repo_id,
            "no such repo on the Hub (or the token cannot see it)",
            "check --repo-id and the token (`registry publish` creates a missing repo)",
        ) from exc
    except HfHubHTTPError as err:
        status = err.response.status_code
        if status in (401, 403):
            raise RegistryError("hub.auth", repo_id, f"the Hub refused the credentials ({status})", AUTH_FIX) from err
        if status == 412:
            raise RegistryError(
                "hub.moved",
                repo_id,
                f"{revision} moved since the plan was made (someone else pushed); nothing was committed",
                "run `registry publish` again to plan against the new head",
                Exit.RETRY,
            ) from err
        retryable = status == 429 or status >= 500
        raise RegistryError(
            "hub.http",
            repo_id,
            f"the Hub answered {status}: {_server_says(err)}",
            RETRY_FIX,
            Exit.RETRY if retryable else Exit.REFUSED,
        ) from err
    except (httpx2.HTTPError, ConnectionError) as err:  # ConnectionError: hf_xet's network and Hub errors (Xet on)
        raise RegistryError(
            "hub.network",
            repo_id,
            f"network error talking to the Hub ({type(err).__name__}: {scrub(str(err))})",
            RETRY_FIX,
            Exit.RETRY,
        ) from err


def _access(private: bool | None, gated: object) -> str:
    """The Hub's ``private`` and ``gated`` (False, "auto" or "manual") as one core.models.Access."""
    if private:
        return "private"
    return f"gated-{gated}" if gated in ("auto", "manual") else "public"


def check_repo_id(repo_id: str) -> str:
    """A Hub repo id of the form NAMESPACE/NAME, refused before any request is made."""
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise RegistryError("args.bad-repo-id", repo_id, str(err).rstrip("."), "pass --repo-id NAMESPACE/NAME") from err
    if repo_id.count("/") != 1:
        raise RegistryError(
            "args.bad-repo-id", repo_id, "not of the form NAMESPACE/NAME", "pass --repo-id NAMESPACE/NAME"
        )
    return repo_id


def _remote_file(item: RepoFile) -> RemoteFile:
    return RemoteFile(item.path, item.size, item.blob_id, item.lfs.sha256 if item.lfs else None, item.xet_hash)


@dataclass(frozen=True)
class CommitResult:
    oid: str
    url: str
    pr_revision: str | None
    pr_url: str | None


@dataclass(frozen=True)
class HubCommit:
    oid: str
    date: str
    title: str


class Hub:
    """One repo at one revision on the Hub."""

    def __init__(
        self,
        repo_id: str,
        revision: str = "main",
        api: HfApi | None = None,
        repo_type: str = "model",
        progress: bool = True,
    ) -> None:
        self.repo_id = check_repo_id(repo_id)
        self.revision = revision
        self.repo_type = repo_type  # "dataset" for a dataset registry (registry/dataset/)
        self.api = api or HfApi(library_name="rwkv-registry", library_version=__version__)
        if not progress:  # the CLI's rule for bars: only on a terminal, never under --json
            disable_progress_bars()

    def _errors(self) -> AbstractContextManager[None]:
        return hub_errors(self.repo_id, self.revision)

    def existing_state(self) -> ExistingState:
        """The head of the revision and every file in its tree; refuses a missing repo.

        The tree is listed at the head's commit id, not the branch name, so it is exactly the tree
        a commit with ``parent_commit=head`` will be based on.
        """
        with self._errors():
            info = self.api.repo_info(self.repo_id, revision=self.revision, repo_type=self.repo_type)
        if info.sha is None:  # the Hub always sends it; huggingface_hub types it optional
            raise RegistryError(
                "hub.no-head",
                self.repo_id,
                f"the endpoint did not name the commit at {self.revision!r}",
                "check HF_ENDPOINT: it must be a Hugging Face Hub",
            )
        return ExistingState(
            self.repo_id, self.revision, info.sha, self.tree(info.sha), _access(info.private, info.gated)
        )

    def state(self) -> RemoteState:
        """:meth:`existing_state`, or an empty state when the repo does not exist (publish creates it)."""
        try:
            return self.existing_state()
        except RegistryError as err:
            if err.code != "hub.repo-missing":
                raise
            return RemoteState(self.repo_id, self.revision, None)

    def resolve(self, revision: str) -> str:
        """The commit id a branch, tag or (abbreviated) commit id names."""
        try:
            with hub_errors(self.repo_id, revision):
                sha = self.api.repo_info(self.repo_id, revision=revision, repo_type=self.repo_type).sha
        except RegistryError as err:
            if err.problems[0].code != "hub.revision-missing":
                raise
            raise RegistryError(
                "hub.revision-missing",
                self.repo_id,
                f"no branch, tag or commit {revision!r}",
                "name one of `registry history`'s commits, a tag or a branch",
            ) from err
        if sha is None:
            raise RegistryError(
                "hub.no-head",
                self.repo_id,
                f"the endpoint did not name the commit at {revision!r}",
                "check HF_ENDPOINT: it must be a Hugging Face Hub",
            )
        return sha

    def commits(self) -> list[HubCommit]:
        """The revision's first-parent history, newest first."""
        with self._errors():
            listed = self.api.list_repo_commits(self.repo_id, revision=self.revision, repo_type=self.repo_type)
        return [HubCommit(c.commit_id, c.created_at.isoformat(), c.title) for c in listed]

    def tree(self, commit: str) -> dict[str, RemoteFile]:
        with self._errors():
            items = self.api.list_repo_tree(self.repo_id, recursive=True, revision=commit, repo_type=self.repo_type)
            return {item.path: _remote_file(item) for item in items if isinstance(item, RepoFile)}

    def tags(self) -> set[str]:
        return set(self.tag_targets())

    def tag_targets(self) -> dict[str, str]:
        """Every tag and the commit it points to."""
        with self._errors():
            return {
                tag.name: tag.target_commit
                for tag in self.api.list_repo_refs(self.repo_id, repo_type=self.repo_type).tags
            }

    def create_repo(self, private: bool = False) -> None:
        with self._errors():
            self.api.create_repo(self.repo_id, exist_ok=True, repo_type=self.repo_type, private=private)

    def set_access(self, access: str) -> None:
        """Make the repo ``access`` (core.models.Access) through its settings: private or public,
        gated with automatic or manual approval, or not gated."""
        gated = access.removeprefix("gated-") if access.startswith("gated-") else False
        with self._errors():
            self.api.update_repo_settings(
                self.repo_id,
                private=access == "private",
                gated=gated,  # type: ignore[arg-type]
                repo_type=self.repo_type,
            )

    @contextmanager
    def _upload_errors(self) -> Iterator[None]:
        with self._errors():
            try:
                yield
            except HfHubHTTPError:
                raise  # an answer from the Hub: hub_errors says what it means
            except RuntimeError as err:  # raised by the upload step once the client's retries are spent
                cause = f" ({type(err.__cause__).__name__})" if err.__cause__ else ""
                raise RegistryError(
                    "hub.upload-failed",
                    self.repo_id,
                    f"{scrub(str(err))}{cause}; nothing was committed",
                    RETRY_FIX,
                    Exit.RETRY,
                ) from err
            except ValueError as err:  # e.g. README.md front matter rejected before any upload
                raise RegistryError(
                    "hub.rejected",
                    self.repo_id,
                    scrub(str(err)),
                    "fix the file named above and run `registry publish` again",
                ) from err

    def upload(self, operations: Sequence[CommitOperation], create_pr: bool) -> None:
        """Send the content of the LFS files (through Xet, or LFS) without committing; :meth:`commit`
        then sends none of it again.  hf_xet fills in the sha256 it computed from the bytes it sent."""
        additions = [op for op in operations if isinstance(op, CommitOperationAdd)]
        with self._upload_errors():
            self.api.preupload_lfs_files(
                self.repo_id, additions, revision=self.revision, create_pr=create_pr, repo_type=self.repo_type
            )

    def commit(
        self, operations: Sequence[CommitOperation], message: str, description: str, parent: str, create_pr: bool
    ) -> CommitResult:
        """One commit with every operation, refused by the Hub if ``revision`` moved past ``parent``."""
        with self._upload_errors():
            info = self.api.create_commit(
                self.repo_id,
                list(operations),
                commit_message=message,
                commit_description=description,
                revision=self.revision,
                parent_commit=parent,
                create_pr=create_pr,
                repo_type=self.repo_type,
            )
        return CommitResult(info.oid, info.commit_url, info.pr_revision, info.pr_url)

    def create_tag(self, tag: str, commit: str) -> None:
        with self._errors():
            self.api.create_tag(self.repo_id, tag=tag, revision=commit, repo_type=self.repo_type)

    def download(self, filename: str, commit: str, local_dir: Path) -> Path:
        with self._errors():
            return Path(
                self.api.hf_hub_download(
                    self.repo_id, filename, revision=commit, local_dir=local_dir, repo_type=self.repo_type
                )
            )

    def snapshot(self, commit: str, local_dir: Path) -> None:
        with self._errors():
            self.api.snapshot_download(self.repo_id, revision=commit, local_dir=local_dir, repo_type=self.repo_type)
