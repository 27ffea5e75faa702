"""A fake Hugging Face Hub that the real, unmodified ``huggingface_hub`` client can talk to.

Why: the registry's release code drives ``HfApi`` / ``hf_hub_download`` / ``snapshot_download``; mocking those
calls would test our assumptions about the client instead of the client. This module serves the slice of the Hub
HTTP API those calls use (written against huggingface_hub 2.4.0) from an in-memory, git-like store on 127.0.0.1,
so the real client runs end to end, including its LFS upload and cache logic.

What is modelled:
  * repos (model/dataset/space) with a real git object model: blob, tree and commit ids are computed exactly as
    git computes them, so ``RepoFile.blob_id`` can be checked against ``sha1(b"blob <len>\\0" + content)``;
  * branches, tags and pull-request refs (``refs/pr/N``); every new repo gets the Hub's "initial commit" holding
    the default ``.gitattributes``;
  * Git LFS: the preupload endpoint decides ``lfs`` vs ``regular`` like the Hub does (``.gitattributes`` patterns of
    the target revision, a size threshold, or binary content), the batch endpoint answers with basic-transfer upload
    URLs that carry their own credential (like pre-signed S3 URLs: the client sends no auth header there and
    retries the same URL), and uploads are checked against their sha256 and size;
  * downloads via ``/resolve`` (200 with the bytes, never a CDN redirect), with ``Range`` support;
  * who may see a repo: ``create_repo(private=…)`` and the settings endpoint (``update_repo_settings(private=…,
    gated="auto"|"manual"|False)``), reported back by ``repo_info`` (a private repo is hidden from other tokens).

  * Xet, with ``HubServer(xet=True)`` (the ``hub_server`` fixture): the ``xet-write-token`` endpoint hands the
    real hf_xet a ``local://`` CAS folder (:mod:`tests.xetstore`), so the client's real Xet upload path runs; a
    committed ``lfsFile`` is resolved through the uploaded shard's records, and its bytes stored, *without*
    checking the sha256 the client asserted (the real Hub does not either).  Tree listings carry ``xetHash`` for
    files stored through Xet; files uploaded through the LFS basic transfer stay LFS-only (no ``xetHash``).
    Downloads of Xet-stored files go through Xet too (``xet-read-token``, the same CAS folder).
  * server-side copies (``CommitOperationCopy``): the client reads the source with ``paths-info`` at the source
    revision and commits an ``lfsFile`` naming the oid the repo holds (no preupload, no upload); a plain file's bytes
    come down through ``resolve`` and go back inline.  Every way content goes up is counted (``uploaded_objects``,
    ``requests["xet_write_token"]``, :attr:`HubServer.xet_uploads`), so a test can assert that none happened.

What is deliberately missing: multipart LFS, discussions, access requests to a gated repo (the owner's token sees
it), and anything not on the upload/download/listing path.

Fixtures: ``hub_server`` is what real users get, Xet on (uploads and downloads of LFS files go through hf_xet);
``lfs_hub_server`` is a client without Xet, as with ``HF_HUB_DISABLE_XET=1`` or no hf_xet installed (the basic LFS
transfer), for the tests that drive the LFS endpoints themselves.  Fault injection and counters live on
:class:`HubServer`; the fixtures wire the client to it.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import re
import secrets
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit

import huggingface_hub.hf_api
import pytest
import yaml
from huggingface_hub import constants, file_download
from huggingface_hub.utils import _cache_assets, _cache_manager, _http, close_session

from .xetstore import XetStore

# The default .gitattributes the Hub puts in every new repo's initial commit: it is what makes *.pth and
# *.safetensors files LFS files regardless of their size.
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (
        "*.7z *.arrow *.bin *.bz2 *.ckpt *.ftz *.gz *.h5 *.joblib *.lfs.* *.mlmodel *.model *.msgpack *.npy *.npz "
        "*.onnx *.ot *.parquet *.pb *.pickle *.pkl *.pt *.pth *.rar *.safetensors saved_model/**/* *.tar.* *.tar "
        "*.tflite *.tgz *.wasm *.xz *.zip *.zst *tfevents*"
    ).split()
)

# Page sizes of the real Hub for tree / commit listings (``expand=True`` makes tree pages smaller).
HUB_PAGE_SIZE = 1000
HUB_EXPANDED_PAGE_SIZE = 50
HUB_COMMITS_PAGE_SIZE = 50

_REPO_TYPE_BY_PLURAL = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX_BY_REPO_TYPE = {"model": "", "dataset": "datasets/", "space": "spaces/"}
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_PR_REF_RE = re.compile(r"refs/pr/(\d+)")

# --------------------------------------------------------------------------------------------------------------
# Git objects
# --------------------------------------------------------------------------------------------------------------


def _git_object_id(kind: bytes, body: bytes) -> str:
    return hashlib.sha1(kind + b" %d\0" % len(body) + body).hexdigest()


def git_blob_id(content: bytes) -> str:
    """The id git gives a file's bytes: ``sha1(b"blob <len>\\0" + content)``."""
    return _git_object_id(b"blob", content)


def git_tree_id(blob_ids: Mapping[str, str]) -> str:
    """The id of the git tree holding ``{relative path: blob id}`` (sub-folders become nested trees)."""
    files: dict[str, str] = {}
    folders: dict[str, dict[str, str]] = {}
    for path, blob_id in blob_ids.items():
        head, slash, rest = path.partition("/")
        if slash:
            folders.setdefault(head, {})[rest] = blob_id
        else:
            files[head] = blob_id
    entries = [(name, b"100644", oid) for name, oid in files.items()]
    entries += [(name, b"40000", git_tree_id(sub)) for name, sub in folders.items()]
    entries.sort(key=lambda e: e[0] + ("/" if e[1] == b"40000" else ""))  # git's ordering rule for folders
    return _git_object_id(b"tree", b"".join(m + b" " + n.encode() + b"\0" + bytes.fromhex(o) for n, m, o in entries))


def lfs_pointer(oid: str, size: int) -> bytes:
    """The pointer file git stores in place of an LFS file's content."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n".encode()


@dataclass(frozen=True)
class Blob:
    """A file in a tree. ``data`` is what git stores: the content, or the LFS pointer for LFS files."""

    data: bytes
    lfs_oid: str | None = None
    lfs_size: int = 0
    xet_hash: str | None = None  # the Xet file hash of the stored bytes, for files stored through Xet

    @classmethod
    def lfs(cls, oid: str, size: int, xet_hash: str | None = None) -> Blob:
        return cls(lfs_pointer(oid, size), oid, size, xet_hash)

    @cached_property
    def oid(self) -> str:
        return git_blob_id(self.data)

    @property
    def size(self) -> int:
        return self.lfs_size if self.lfs_oid else len(self.data)

    @property
    def content_id(self) -> str:
        """What the client compares against to skip unchanged files: sha256 for LFS files, git sha1 otherwise."""
        return self.lfs_oid or self.oid


@dataclass(frozen=True)
class Commit:
    oid: str
    parent: str | None
    tree: Mapping[str, Blob]
    title: str
    message: str
    author: str
    date: datetime

    @property
    def iso_date(self) -> str:
        return self.date.strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    gated: str | bool = False  # "auto" or "manual": access requests approved automatically or by the owners
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    pulls: dict[int, str] = field(default_factory=dict)  # PR number -> head commit of refs/pr/N
    lfs_objects: dict[str, bytes] = field(default_factory=dict)  # sha256 -> content (LFS is scoped per repo)

    def add_commit(
        self, parent: str | None, tree: Mapping[str, Blob], title: str, description: str, author: str
    ) -> Commit:
        """Store a commit (refs are left alone); its id is the real git commit id."""
        date = datetime.now(UTC)
        message = f"{title}\n\n{description}" if description else title
        signature = f"{author} <{author}@users.noreply.huggingface.co> {int(date.timestamp())} +0000"
        body = f"tree {git_tree_id({p: b.oid for p, b in tree.items()})}\n"
        body += f"parent {parent}\n" if parent else ""
        body += f"author {signature}\ncommitter {signature}\n\n{message}\n"
        commit = Commit(_git_object_id(b"commit", body.encode()), parent, dict(tree), title, message, author, date)
        self.commits[commit.oid] = commit
        return commit

    def resolve(self, rev: str) -> Commit:
        """Branch, tag, ``refs/pr/N``, or a full or abbreviated commit id."""
        oid = self.branches.get(rev) or self.tags.get(rev)
        if oid is None and (pr := _PR_REF_RE.fullmatch(rev)):
            oid = self.pulls.get(int(pr[1]))
        if oid is None and re.fullmatch(r"[0-9a-fA-F]{5,40}", rev):
            matches = [c for c in self.commits if c.startswith(rev.lower())]
            oid = matches[0] if len(matches) == 1 else None
        if oid is None:
            raise _revision_not_found(rev)
        return self.commits[oid]

    def is_branch(self, rev: str) -> bool:
        pr = _PR_REF_RE.fullmatch(rev)
        return rev in self.branches or (pr is not None and int(pr[1]) in self.pulls)

    def move_ref(self, rev: str, oid: str) -> None:
        if pr := _PR_REF_RE.fullmatch(rev):
            self.pulls[int(pr[1])] = oid
        else:
            self.branches[rev] = oid

    def history(self, commit: Commit) -> Iterator[Commit]:
        while True:
            yield commit
            if commit.parent is None:
                return
            commit = self.commits[commit.parent]

    def last_change(self, commit: Commit, path: str, is_dir: bool) -> Commit:
        """The most recent commit (first-parent history) that changed ``path``: what ``expand=True`` reports."""

        def state(c: Commit) -> Any:
            if not is_dir:
                return c.tree.get(path)
            return sorted((p, b.oid) for p, b in c.tree.items() if p.startswith(path + "/"))

        current = state(commit)
        while commit.parent is not None and state(self.commits[commit.parent]) == current:
            commit = self.commits[commit.parent]
        return commit


# --------------------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None, *, content_type: str | None = None
) -> Response:
    return Response(
        status, json.dumps(data).encode(), {"Content-Type": content_type or "application/json", **(headers or {})}
    )


class HubError(Exception):
    """An error answer, shaped like the Hub's: the client maps ``X-Error-Code`` to its exception classes."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
        self.headers, self.extra = dict(headers or {}), dict(extra or {})

    def response(self) -> Response:
        headers = {"X-Error-Message": self.message, **({"X-Error-Code": self.code} if self.code else {})}
        return json_response({"error": self.message, **self.extra}, self.status, {**headers, **self.headers})


def _repo_not_found() -> HubError:
    return HubError(404, "Repository not found", code="RepoNotFound")


def _revision_not_found(rev: str) -> HubError:
    return HubError(404, f"Invalid rev id: {rev}", code="RevisionNotFound")


def _entry_not_found(message: str, commit: Commit | None = None) -> HubError:
    headers = {"X-Repo-Commit": commit.oid} if commit else {}
    return HubError(404, message, code="EntryNotFound", headers=headers)


def _ref(name: str, ref: str, oid: str) -> dict[str, str]:
    return {"name": name, "ref": ref, "targetCommit": oid}


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in {"1", "true", "yes"}


class Request:
    """One HTTP request. The body is read lazily so that a fault can stop reading it half-way."""

    def __init__(self, handler: BaseHTTPRequestHandler):
        target = urlsplit(handler.path)
        self.method = handler.command
        self.path = target.path
        self.query = dict(parse_qsl(target.query, keep_blank_values=True))
        self.headers = handler.headers
        self._rfile = handler.rfile
        self._chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        self._length = int(self.headers.get("Content-Length") or 0)
        self._body: bytes | None = None

    @property
    def body(self) -> bytes:
        """The whole body; reading it is also how the connection is drained before answering."""
        if self._body is None:
            self._body = self._read_chunks() if self._chunked else self._rfile.read(self._length)
        return self._body

    def drain(self) -> None:
        self.body  # noqa: B018 - reading it is the point

    def read_part(self) -> None:
        """Consume roughly half of the body (one chunk if chunked): the start of an interrupted transfer."""
        if self._chunked:
            self._read_chunks(max_chunks=1)
        else:
            self._rfile.read(self._length // 2)

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def _read_chunks(self, max_chunks: int | None = None) -> bytes:
        parts: list[bytes] = []
        while max_chunks is None or len(parts) < max_chunks:
            size = int(self._rfile.readline().split(b";")[0], 16)
            if size == 0:
                while self._rfile.readline() not in (b"\r\n", b"\n", b""):  # optional trailers
                    pass
                break
            parts.append(self._rfile.read(size))
            self._rfile.readline()
        return b"".join(parts)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the Hub; every answer carries a Content-Length
    timeout = 30  # idle keep-alive connections give their thread back eventually
    server: _HTTPServer

    def do_GET(self) -> None:
        request = Request(self)
        response = self.server.hub.dispatch(request)
        if response is None:  # injected network failure: vanish without answering
            self.close_connection = True
            return
        request.drain()  # whatever was not read would be parsed as the next request on this connection
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_HEAD = do_POST = do_PUT = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hub: HubServer):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hub = hub


# --------------------------------------------------------------------------------------------------------------
# The Hub
# --------------------------------------------------------------------------------------------------------------

_API = r"/api/(?P<kind>models|datasets|spaces)/(?P<ns>[^/]+)/(?P<name>[^/]+)"
_GIT = r"/(?:(?P<kind>datasets|spaces)/)?(?P<ns>[^/]+)/(?P<name>[^/]+)"

# (methods, path regex, endpoint name). The name keys `requests`, the fault hooks and the `_on_<name>` handler.
_ROUTES = [
    ("POST", r"/api/repos/create", "create_repo"),
    ("DELETE", r"/api/repos/delete", "delete_repo"),
    ("GET", r"/api/whoami-v2", "whoami"),
    ("POST", r"/api/validate-yaml", "validate_yaml"),
    ("GET", _API + r"(?:/revision/(?P<rev>[^/]+))?", "repo_info"),
    ("PUT", _API + r"/settings", "repo_settings"),
    ("GET", _API + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?", "tree"),
    ("POST", _API + r"/paths-info/(?P<rev>[^/]+)", "paths_info"),
    ("POST", _API + r"/preupload/(?P<rev>[^/]+)", "preupload"),
    ("POST", _API + r"/commit/(?P<rev>[^/]+)", "commit"),
    ("GET", _API + r"/commits/(?P<rev>[^/]+)", "commits"),
    ("GET", _API + r"/refs", "refs"),
    ("POST", _API + r"/branch/(?P<branch>[^/]+)", "create_branch"),
    ("DELETE", _API + r"/branch/(?P<branch>[^/]+)", "delete_branch"),
    ("POST", _API + r"/tag/(?P<rev>[^/]+)", "create_tag"),
    ("DELETE", _API + r"/tag/(?P<tag>[^/]+)", "delete_tag"),
    ("POST", _GIT + r"\.git/info/lfs/objects/batch", "lfs_batch"),
    ("POST", _GIT + r"\.git/info/lfs/objects/verify", "lfs_verify"),
    ("PUT", r"/lfs-upload/(?P<ticket>[0-9a-f]+)", "lfs_upload"),
    ("GET", _API + r"/xet-write-token/(?P<rev>[^/]+)", "xet_write_token"),
    ("GET", _API + r"/xet-read-token/(?P<rev>[^/]+)", "xet_read_token"),
    ("GET HEAD", _GIT + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "resolve"),
]
ENDPOINTS = frozenset(name for _, _, name in _ROUTES)


class HubServer:
    """In-memory Hub on 127.0.0.1. Start with :meth:`start` (or ``with``); point the client at :attr:`url`.

    Knobs (plain attributes, change them at any time):
      * ``token`` / ``require_token``: when required, every request but the LFS upload PUT (authorised by its
        URL, like a pre-signed S3 URL) must carry ``Authorization: Bearer <token>``, else 401;
      * ``lfs_threshold``: files at least this big are LFS files (the real Hub uses 10 MB);
      * ``page_size``: overrides the Hub's page sizes for tree/commit listings, to exercise ``Link`` paging;
      * ``redact_xet_hashes``: list every ``xetHash`` as 64 ``*`` (what a gated repo shows without access).

    Counters: ``requests`` (Counter per endpoint name, see ``ENDPOINTS``), ``commits_made`` (commits created through
    the commit endpoint), ``uploaded_objects`` / ``uploaded_bytes`` (LFS PUTs that were accepted), and
    ``internal_errors`` (tracebacks of bugs in this fake, answered as 500); :attr:`xet_uploaded_files` counts what the
    client uploaded through Xet, :attr:`xet_uploads` every Xet upload (a file sent again included).
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        require_token: bool | None = None,
        lfs_threshold: int = 1 << 20,
        page_size: int | None = None,
        username: str = "test-user",
        xet: bool = False,
    ):
        self.token = token
        self.require_token = token is not None if require_token is None else require_token
        self.lfs_threshold = lfs_threshold
        self.page_size = page_size
        self.username = username
        self.url = ""
        self.requests: Counter[str] = Counter()
        self.commits_made = 0
        self.uploaded_objects = 0
        self.uploaded_bytes = 0
        self.internal_errors: list[str] = []
        self._repos: dict[tuple[str, str], Repo] = {}
        self._upload_tickets: dict[str, tuple[tuple[str, str], str, int]] = {}
        self._failures: dict[str, list[int]] = {}
        self._drops: Counter[str] = Counter()
        self._pushes_before_commit: list[tuple[tuple[str, str], str]] = []
        self._lock = threading.RLock()
        self._routes = [(methods.split(), re.compile(pattern + r"/?"), name) for methods, pattern, name in _ROUTES]
        self._http: _HTTPServer | None = None
        self._xet_dir = tempfile.TemporaryDirectory(prefix="hub-xet-") if xet else None
        self.xet = XetStore(Path(self._xet_dir.name)) if self._xet_dir else None
        self.redact_xet_hashes = False
        self._substitute: set[tuple[tuple[str, str], str]] = set()
        self._lies: set[tuple[tuple[str, str], str]] = set()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> HubServer:
        self._http = _HTTPServer(self)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._xet_dir is not None:
            self._xet_dir.cleanup()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- fault injection ---------------------------------------------------------------------------------------

    def fail_next(self, endpoint: str, times: int = 1, status: int = 500) -> None:
        """Answer the next ``times`` calls of ``endpoint`` with ``status`` and change nothing.

        Mind that the client retries 5xx with exponential sleeps on most endpoints except ``commit``
        (see the ``instant_retries`` fixture).
        """
        with self._lock:
            self._failures.setdefault(self._endpoint(endpoint), []).extend([status] * times)

    def clear_failures(self) -> None:
        """Forget the failures :meth:`fail_next` queued that have not been answered yet."""
        with self._lock:
            self._failures.clear()

    def drop_next(self, endpoint: str, times: int = 1) -> None:
        """On the next ``times`` calls of ``endpoint``, read part of the body then close the socket unanswered.

        ``drop_next("lfs_upload")`` cuts an LFS upload mid-transfer. The client retries network errors 5 times,
        so it takes ``times=6`` for one upload to fail for good.
        """
        with self._lock:
            self._drops[self._endpoint(endpoint)] += times

    def store_other_bytes(self, repo_id: str, path: str, *, repo_type: str = "model") -> None:
        """When ``path`` is next committed as an LFS file, store its bytes with the last one flipped, under the
        sha256 the client asserted: the listing's ``lfs.oid`` then vouches for bytes the Hub does not hold, and
        only its ``xetHash`` (of the stored bytes) tells."""
        with self._lock:
            self._substitute.add(((repo_type, repo_id), path))

    def serve_other_bytes(self, repo_id: str, path: str, *, repo_type: str = "model") -> None:
        """From now on, at every commit, serve ``path`` with its last byte flipped while the listing keeps its
        git blob id and ``lfs.oid``: the Hub keeps lying however often the file is committed again.  Only the
        ``xetHash`` (of the bytes served) and the bytes themselves tell."""
        with self._lock:
            self._lies.add(((repo_type, repo_id), path))

    def _served(self, repo: Repo, path: str, content: bytes) -> bytes:
        return (
            content[:-1] + bytes([content[-1] ^ 1])
            if content and ((repo.repo_type, repo.repo_id), path) in self._lies
            else content
        )

    def push_before_next_commit(self, repo_id: str, *, branch: str = "main", repo_type: str = "model") -> None:
        """Simulate someone else pushing to ``branch`` right before the next commit request is processed."""
        with self._lock:
            self._pushes_before_commit.append(((repo_type, repo_id), branch))

    # -- inspection --------------------------------------------------------------------------------------------

    def head(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> str:
        """The commit id ``revision`` points to."""
        with self._lock:
            return self._repos[(repo_type, repo_id)].resolve(revision).oid

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> dict[str, bytes]:
        """Every file at ``revision`` with its real content (LFS objects resolved)."""
        with self._lock:
            repo = self._repos[(repo_type, repo_id)]
            tree = repo.resolve(revision).tree
            return {p: repo.lfs_objects[b.lfs_oid] if b.lfs_oid else b.data for p, b in sorted(tree.items())}

    @property
    def xet_uploads(self) -> int:
        """How many shards clients have written through Xet: one per upload that sent anything, even bytes the
        CAS holds already (a re-upload of a known file still writes its shard), so it counts what
        :attr:`xet_uploaded_files` (distinct sha256s) cannot."""
        with self._lock:
            return self.xet.shard_count() if self.xet is not None else 0

    @property
    def xet_uploaded_files(self) -> int:
        """How many distinct files (by the sha256 the client asserted) the client has uploaded through Xet, committed
        or not: the Xet counterpart of ``uploaded_objects``."""
        with self._lock:
            return len(self.xet.uploaded()) if self.xet is not None else 0

    # -- dispatch ----------------------------------------------------------------------------------------------

    def dispatch(self, request: Request) -> Response | None:
        """Route one request; ``None`` means "drop the connection without answering"."""
        name, params = self._route(request)
        with self._lock:
            self.requests[name] += 1
            drop = self._drops[name] > 0
            if drop:
                self._drops[name] -= 1
        if drop:
            request.read_part()
            return None
        request.drain()  # outside the lock: it may be a large upload
        with self._lock:
            try:
                if name != "lfs_upload":
                    self._check_token(request)
                if failures := self._failures.get(name):
                    raise HubError(failures.pop(0), f"Injected failure of {name}")
                return getattr(self, f"_on_{name}")(request, params)
            except HubError as error:
                return error.response()
            except json.JSONDecodeError as error:
                return HubError(400, f"Malformed JSON body: {error}").response()
            except Exception as error:  # a bug in this fake: answer like a crashed Hub, keep the trace
                self.internal_errors.append(traceback.format_exc())
                return HubError(500, f"{type(error).__name__}: {error}").response()

    def _route(self, request: Request) -> tuple[str, dict[str, str]]:
        for methods, pattern, name in self._routes:
            if request.method in methods and (match := pattern.fullmatch(request.path)):
                return name, {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
        return "unknown", {}

    def _endpoint(self, name: str) -> str:
        if name not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {name!r}; expected one of {sorted(ENDPOINTS)}")
        return name

    def _authorized(self, request: Request) -> bool:
        return self.token is not None and request.headers.get("Authorization") == f"Bearer {self.token}"

    def _check_token(self, request: Request) -> None:
        if self.require_token and not self._authorized(request):
            # This exact message keeps the client from reporting the 401 as RepositoryNotFoundError.
            raise HubError(401, "Invalid credentials in Authorization header")

    def _repo(self, request: Request, params: Mapping[str, str]) -> Repo:
        repo_type = _REPO_TYPE_BY_PLURAL.get(params.get("kind") or "models", "model")
        repo = self._repos.get((repo_type, f"{params['ns']}/{params['name']}"))
        if repo is None or (repo.private and not self._authorized(request)):
            raise _repo_not_found()
        return repo

    def _repo_url(self, repo: Repo) -> str:
        return f"{self.url}/{_URL_PREFIX_BY_REPO_TYPE[repo.repo_type]}{repo.repo_id}"

    def _on_unknown(self, request: Request, params: Mapping[str, str]) -> Response:
        raise HubError(404, f"Not found: {request.method} {request.path}")

    # -- repos -------------------------------------------------------------------------------------------------

    def _on_create_repo(self, request: Request, params: Mapping[str, str]) -> Response:
        payload = request.json()
        repo_type = payload.get("type") or "model"
        repo_id = f"{payload.get('organization') or self.username}/{payload['name']}"
        private = bool(payload.get("private")) or payload.get("visibility") == "private"
        if (repo_type, repo_id) in self._repos:
            url = self._repo_url(self._repos[(repo_type, repo_id)])
            raise HubError(409, f"You already created this {repo_type} repo", extra={"url": url})
        repo = Repo(repo_type, repo_id, private)
        gitattributes = {".gitattributes": Blob(DEFAULT_GITATTRIBUTES.encode())}
        repo.branches["main"] = repo.add_commit(None, gitattributes, "initial commit", "", self.username).oid
        self._repos[(repo_type, repo_id)] = repo
        return json_response({"url": self._repo_url(repo), "name": repo_id})

    def _on_repo_settings(self, request: Request, params: Mapping[str, str]) -> Response:
        """Who may see the repo: ``visibility`` ("public" or "private"; older clients send ``private``, a
        bool) and ``gated`` ("auto", "manual" or false), as the Hub takes them."""
        repo = self._repo(request, params)
        payload = request.json()
        if "gated" in payload and payload["gated"] not in ("auto", "manual", False):
            raise HubError(400, f"gated must be 'auto', 'manual' or false, not {payload['gated']!r}")
        if "visibility" in payload and payload["visibility"] not in ("public", "private"):
            raise HubError(400, f"visibility must be 'public' or 'private', not {payload['visibility']!r}")
        if "private" in payload and not isinstance(payload["private"], bool):
            raise HubError(400, "private must be a boolean")
        repo.gated = payload.get("gated", repo.gated)
        repo.private = (
            payload["visibility"] == "private" if "visibility" in payload else payload.get("private", repo.private)
        )
        return json_response({})

    def _on_delete_repo(self, request: Request, params: Mapping[str, str]) -> Response:
        payload = request.json()
        key = (payload.get("type") or "model", f"{payload.get('organization') or self.username}/{payload['name']}")
        if self._repos.pop(key, None) is None:
            raise _repo_not_found()
        return json_response({})

    def _on_whoami(self, request: Request, params: Mapping[str, str]) -> Response:
        token_info = {"displayName": "hubserver", "role": "write"}
        return json_response(
            {
                "type": "user",
                "name": self.username,
                "fullname": self.username,
                "orgs": [],
                "auth": {"type": "access_token", "accessToken": token_info},
            }
        )

    def _on_validate_yaml(self, request: Request, params: Mapping[str, str]) -> Response:
        """Reject a README whose front matter is not a YAML mapping, as the Hub does before any upload."""
        front_matter = re.match(r"---[ \t]*\n(.*?)\n---[ \t]*(?:\n|$)", request.json().get("content", ""), re.S)
        try:
            metadata = yaml.safe_load(front_matter[1]) if front_matter else None
            if metadata is not None and not isinstance(metadata, dict):
                raise yaml.YAMLError("metadata must be a mapping")
        except yaml.YAMLError as error:
            return json_response({"errors": [{"message": str(error)}], "warnings": []}, 400)
        return json_response({"errors": [], "warnings": []})

    def _on_repo_info(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        commit = repo.resolve(params.get("rev", "main"))
        with_blobs = _truthy(request.query.get("blobs"))
        return json_response(
            {
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": commit.oid,
                "private": repo.private,
                "gated": repo.gated,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "createdAt": repo.created_at.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "lastModified": commit.iso_date,
                "siblings": [self._sibling(path, blob, with_blobs) for path, blob in sorted(commit.tree.items())],
            }
        )

    @staticmethod
    def _sibling(path: str, blob: Blob, with_blobs: bool) -> dict[str, Any]:
        if not with_blobs:
            return {"rfilename": path}
        lfs = {"sha256": blob.lfs_oid, "size": blob.size, "pointerSize": len(blob.data)} if blob.lfs_oid else None
        return {"rfilename": path, "size": blob.size, "blobId": blob.oid, **({"lfs": lfs} if lfs else {})}

    # -- listings ----------------------------------------------------------------------------------------------

    def _on_tree(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        commit = repo.resolve(params["rev"])
        base = params.get("path", "").strip("/")
        entries = _tree_paths(commit.tree, base, recursive=_truthy(request.query.get("recursive")))
        if base and not entries:
            raise _entry_not_found(f"Folder {base} does not exist", commit)
        expand = _truthy(request.query.get("expand"))
        items = [self._tree_entry(repo, commit, path, is_dir, expand) for path, is_dir in entries]
        return self._paged(request, items, HUB_EXPANDED_PAGE_SIZE if expand else HUB_PAGE_SIZE)

    def _on_paths_info(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        commit = repo.resolve(params["rev"])
        form = parse_qs(request.body.decode())
        expand = _truthy(form.get("expand", [""])[-1])
        items = []
        for path in dict.fromkeys(p.strip("/") for p in form.get("paths", [])):
            is_dir = path not in commit.tree and any(p.startswith(path + "/") for p in commit.tree)
            if path in commit.tree or is_dir:
                items.append(self._tree_entry(repo, commit, path, is_dir, expand))
        return json_response(items)

    def _tree_entry(self, repo: Repo, commit: Commit, path: str, is_dir: bool, expand: bool) -> dict[str, Any]:
        if is_dir:
            prefix = path + "/"
            tree_id = git_tree_id({p[len(prefix) :]: b.oid for p, b in commit.tree.items() if p.startswith(prefix)})
            entry: dict[str, Any] = {"type": "directory", "oid": tree_id, "size": 0, "path": path}
        else:
            blob = commit.tree[path]
            entry = {"type": "file", "oid": blob.oid, "size": blob.size, "path": path}
            if blob.lfs_oid:
                entry["lfs"] = {"oid": blob.lfs_oid, "size": blob.size, "pointerSize": len(blob.data)}
            xet_hash = blob.xet_hash
            if xet_hash and self.xet is not None and ((repo.repo_type, repo.repo_id), path) in self._lies:
                xet_hash = self.xet.write(self._served(repo, path, repo.lfs_objects[blob.lfs_oid])).xet_hash
            if xet_hash:
                entry["xetHash"] = "*" * 64 if self.redact_xet_hashes else xet_hash
        if expand:
            last = repo.last_change(commit, path, is_dir)
            entry["lastCommit"] = {"id": last.oid, "title": last.title, "date": last.iso_date}
            if not is_dir:
                entry["securityFileStatus"] = {
                    "status": "safe",
                    "avScan": {"virusFound": False, "virusNames": None},
                    "pickleImportScan": None,
                }
        return entry

    def _on_commits(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        items = [
            {"id": c.oid, "title": c.title, "message": c.message, "date": c.iso_date, "authors": [{"user": c.author}]}
            for c in repo.history(repo.resolve(params["rev"]))
        ]
        return self._paged(request, items, HUB_COMMITS_PAGE_SIZE)

    def _paged(self, request: Request, items: list[Any], hub_page_size: int) -> Response:
        """One page of ``items``; the next one is announced in a ``Link: <...>; rel="next"`` header."""
        size = self.page_size or hub_page_size
        start = int(request.query.get("cursor", 0))
        headers = {}
        if start + size < len(items):
            next_query = urlencode({**request.query, "cursor": start + size})
            headers["Link"] = f'<{self.url}{request.path}?{next_query}>; rel="next"'
        return json_response(items[start : start + size], headers=headers)

    # -- refs --------------------------------------------------------------------------------------------------

    def _on_refs(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        data: dict[str, list[dict[str, str]]] = {
            "branches": [_ref(name, f"refs/heads/{name}", oid) for name, oid in repo.branches.items()],
            "tags": [_ref(name, f"refs/tags/{name}", oid) for name, oid in repo.tags.items()],
            "converts": [],
        }
        if _truthy(request.query.get("include_prs")):
            data["pullRequests"] = [_ref(f"refs/pr/{n}", f"refs/pr/{n}", oid) for n, oid in repo.pulls.items()]
        return json_response(data)

    def _on_create_branch(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        branch = params["branch"]
        if branch in repo.branches:
            raise HubError(409, f"Reference refs/heads/{branch} already exists")
        repo.branches[branch] = repo.resolve((request.json() or {}).get("startingPoint") or "main").oid
        return json_response({})

    def _on_delete_branch(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        branch = params["branch"]
        if branch == "main":
            raise HubError(403, "Cannot delete the default branch")
        if repo.branches.pop(branch, None) is None:
            raise _revision_not_found(branch)
        return json_response({})

    def _on_create_tag(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        tag = request.json()["tag"]
        if tag in repo.tags:
            raise HubError(409, f"Tag {tag} already exists")
        repo.tags[tag] = repo.resolve(params["rev"]).oid
        return json_response({})

    def _on_delete_tag(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        if repo.tags.pop(params["tag"], None) is None:
            raise _revision_not_found(params["tag"])
        return json_response({})

    # -- uploads -----------------------------------------------------------------------------------------------

    def _on_preupload(self, request: Request, params: Mapping[str, str]) -> Response:
        """Tell the client which files go through LFS, and the current id of files it may not need to send."""
        repo = self._repo(request, params)
        commit = repo.resolve(params["rev"])
        lfs_patterns = _lfs_patterns(commit.tree.get(".gitattributes"))
        answers = []
        for file in request.json()["files"]:
            path, existing = file["path"], commit.tree.get(file["path"])
            sample = base64.b64decode(file.get("sample", ""))
            is_lfs = file["size"] >= self.lfs_threshold or b"\0" in sample or _matches_any(path, lfs_patterns)
            answer = {"path": path, "uploadMode": "lfs" if is_lfs else "regular", "shouldIgnore": False}
            answers.append({**answer, "oid": existing.content_id} if existing else answer)
        return json_response({"files": answers, "commitOid": commit.oid})

    def _on_lfs_batch(self, request: Request, params: Mapping[str, str]) -> Response:
        """Git LFS batch API, basic transfer: an upload (and verify) action for each object not stored yet."""
        repo = self._repo(request, params)
        payload = request.json()
        if payload.get("operation") != "upload":
            raise HubError(400, "Only the 'upload' operation is supported")
        objects = [self._batch_answer(repo, obj.get("oid"), obj.get("size")) for obj in payload.get("objects", [])]
        return json_response(
            {"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
            content_type="application/vnd.git-lfs+json",
        )

    def _batch_answer(self, repo: Repo, oid: Any, size: Any) -> dict[str, Any]:
        if not (isinstance(oid, str) and _SHA256_RE.fullmatch(oid) and isinstance(size, int) and size >= 0):
            return {
                "oid": str(oid),
                "size": size if isinstance(size, int) else 0,
                "error": {"code": 422, "message": "Invalid oid or size"},
            }
        answer: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
        if oid in repo.lfs_objects:
            return answer  # no actions: the client skips the upload
        ticket = secrets.token_hex(16)
        self._upload_tickets[ticket] = ((repo.repo_type, repo.repo_id), oid, size)
        verify_url = f"{self._repo_url(repo)}.git/info/lfs/objects/verify"
        answer["actions"] = {
            "upload": {"href": f"{self.url}/lfs-upload/{ticket}", "expires_in": 3600},
            "verify": {"href": verify_url, "header": {}},
        }
        return answer

    def _on_lfs_upload(self, request: Request, params: Mapping[str, str]) -> Response:
        """The upload URL from the batch answer. The ticket in the URL is the credential, so it stays valid for
        the client's retries of the same URL."""
        ticket = self._upload_tickets.get(params["ticket"])
        if ticket is None:
            raise HubError(403, "Unknown upload URL")
        repo_key, oid, size = ticket
        data = request.body
        if len(data) != size or hashlib.sha256(data).hexdigest() != oid:
            raise HubError(400, f"Uploaded content does not match oid {oid} and size {size}")
        if repo_key not in self._repos:
            raise _repo_not_found()
        self._repos[repo_key].lfs_objects[oid] = data
        self.uploaded_objects += 1
        self.uploaded_bytes += len(data)
        return Response(200)

    def _on_lfs_verify(self, request: Request, params: Mapping[str, str]) -> Response:
        repo = self._repo(request, params)
        payload = request.json()
        data = repo.lfs_objects.get(payload.get("oid"))
        if data is None or len(data) != payload.get("size"):
            raise HubError(404, f"LFS object {payload.get('oid')} not found")
        return json_response({"success": True})

    # -- commits -----------------------------------------------------------------------------------------------

    def _on_commit(self, request: Request, params: Mapping[str, str]) -> Response:
        """The ndjson commit endpoint: validate everything first, so that a rejected commit changes nothing."""
        self._apply_pending_pushes()
        repo = self._repo(request, params)
        lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The first line of a commit must be its header")
        header, operations = lines[0]["value"], lines[1:]
        target = params["rev"]
        head = repo.resolve(target)
        if not repo.is_branch(target):
            raise HubError(400, f"Cannot commit to {target}: not a branch")
        parent = (header.get("parentCommit") or "").lower()
        create_pr = _truthy(request.query.get("create_pr"))
        if create_pr:
            base = repo.resolve(parent) if parent else head
        elif parent and not head.oid.startswith(parent):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        else:
            base = head
        tree = self._apply_operations(repo, base, operations)
        commit = repo.add_commit(base.oid, tree, header["summary"], header.get("description", ""), self.username)
        pr_url = None
        if create_pr:
            number = max(repo.pulls, default=0) + 1
            repo.pulls[number] = commit.oid
            pr_url = f"{self._repo_url(repo)}/discussions/{number}"
        else:
            repo.move_ref(target, commit.oid)
        self.commits_made += 1
        return json_response(
            {
                "success": True,
                "commitOid": commit.oid,
                "pullRequestUrl": pr_url,
                "commitUrl": f"{self._repo_url(repo)}/commit/{commit.oid}",
            }
        )

    def _apply_operations(self, repo: Repo, base: Commit, operations: list[dict[str, Any]]) -> dict[str, Blob]:
        tree = dict(base.tree)
        for operation in operations:
            key, value = operation["key"], operation["value"]
            path = value["path"].strip("/")
            if key == "file":
                content = value["content"]
                tree[path] = Blob(base64.b64decode(content) if value.get("encoding") == "base64" else content.encode())
            elif key == "lfsFile":
                tree[path] = self._committed_lfs_blob(repo, path, value)
            elif key == "deletedFile":
                if tree.pop(path, None) is None:
                    raise _entry_not_found(f"A file with this name doesn't exist: {path}", base)
            elif key == "deletedFolder":
                doomed = [p for p in tree if p.startswith(path + "/")]
                if not doomed:
                    raise _entry_not_found(f"A folder with this name doesn't exist: {path}", base)
                for p in doomed:
                    del tree[p]
            else:
                raise HubError(400, f"Unknown commit operation {key!r}")
        return tree

    def _committed_lfs_blob(self, repo: Repo, path: str, value: Mapping[str, Any]) -> Blob:
        oid = value["oid"]
        data = repo.lfs_objects.get(oid)
        xet_file = self.xet.find(oid) if self.xet is not None else None
        if xet_file is not None:
            data = repo.lfs_objects[oid] = self.xet.read(xet_file)  # the asserted sha256 is not checked
        if data is None:
            raise HubError(400, f"LFS object {oid} for {path} has not been uploaded")
        if value.get("size", len(data)) != len(data):
            raise HubError(400, f"LFS object {oid} for {path} has size {len(data)}, not {value['size']}")
        xet_hash = xet_file.xet_hash if xet_file else None
        if (key := ((repo.repo_type, repo.repo_id), path)) in self._substitute:
            self._substitute.discard(key)
            data = repo.lfs_objects[oid] = data[:-1] + bytes([data[-1] ^ 1])
            xet_hash = self.xet.write(data).xet_hash if self.xet is not None and xet_hash else None
        return Blob.lfs(oid, len(data), xet_hash)

    def _on_xet_read_token(self, request: Request, params: Mapping[str, str]) -> Response:
        return self._on_xet_write_token(request, params)

    def _on_xet_write_token(self, request: Request, params: Mapping[str, str]) -> Response:
        """Where hf_xet uploads and downloads: a ``local://`` CAS folder (the JSON body hf_xet reads, and the
        headers huggingface_hub reads)."""
        self._repo(request, params)
        if self.xet is None:
            raise HubError(404, "Xet storage is not enabled on this Hub")
        expiry = int(time.time()) + 3600
        headers = {"X-Xet-Cas-Url": self.xet.url, "X-Xet-Access-Token": "local", "X-Xet-Token-Expiration": str(expiry)}
        return json_response({"accessToken": "local", "exp": expiry, "casUrl": self.xet.url}, headers=headers)

    def _apply_pending_pushes(self) -> None:
        while self._pushes_before_commit:
            repo_key, branch = self._pushes_before_commit.pop(0)
            repo = self._repos[repo_key]
            head = repo.resolve(branch)
            marker = f"concurrent-push-{len(repo.commits)}.txt"
            tree = {**head.tree, marker: Blob(b"pushed by someone else\n")}
            repo.move_ref(branch, repo.add_commit(head.oid, tree, f"Add {marker}", "", "someone-else").oid)

    # -- downloads ---------------------------------------------------------------------------------------------

    def _on_resolve(self, request: Request, params: Mapping[str, str]) -> Response:
        """File content plus the headers ``get_hf_file_metadata`` reads (commit, etag, LFS etag and size)."""
        repo = self._repo(request, params)
        commit = repo.resolve(params["rev"])
        blob = commit.tree.get(params["path"])
        if blob is None:
            raise _entry_not_found(f"Entry not found: {params['path']}", commit)
        headers = {
            "X-Repo-Commit": commit.oid,
            "ETag": f'"{blob.oid}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if blob.lfs_oid:
            headers.update({"X-Linked-Etag": f'"{blob.lfs_oid}"', "X-Linked-Size": str(blob.size)})
        content = self._served(repo, params["path"], repo.lfs_objects[blob.lfs_oid] if blob.lfs_oid else blob.data)
        return _ranged(request.headers.get("Range"), content, headers)


def _ranged(range_header: str | None, content: bytes, headers: dict[str, str]) -> Response:
    """200 with everything, or 206 for a single ``bytes=`` range (all the client ever asks, to resume)."""
    match = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", range_header or "")
    if match is None or match.groups() == ("", ""):
        return Response(200, content, headers)
    size = len(content)
    first, last = match.groups()
    start = int(first) if first else max(size - int(last), 0)
    end = min(int(last), size - 1) if first and last else size - 1
    if start >= size or start > end:
        return Response(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
    return Response(206, content[start : end + 1], {**headers, "Content-Range": f"bytes {start}-{end}/{size}"})


def _tree_paths(tree: Mapping[str, Blob], base: str, *, recursive: bool) -> list[tuple[str, bool]]:
    """``(path, is_dir)`` for the entries under ``base``: direct children, or everything if ``recursive``."""
    prefix = f"{base}/" if base else ""
    entries: set[tuple[str, bool]] = set()
    for path in tree:
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix) :].split("/")
        folders = [prefix + "/".join(parts[:depth]) for depth in range(1, len(parts))]
        if recursive:
            entries.update((folder, True) for folder in folders)
            entries.add((path, False))
        else:
            entries.add((folders[0], True) if folders else (path, False))
    return sorted(entries)


def _lfs_patterns(gitattributes: Blob | None) -> list[str]:
    if gitattributes is None:
        return []
    lines = (line.split() for line in gitattributes.data.decode(errors="replace").splitlines())
    return [words[0] for words in lines if len(words) > 1 and "filter=lfs" in words[1:]]


def _matches_any(path: str, patterns: list[str]) -> bool:
    """gitattributes matching, simplified: patterns with a slash match the whole path, others the file name."""
    name = path.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(path, p.lstrip("/").replace("**/", "*")) if "/" in p else fnmatch.fnmatchcase(name, p)
        for p in patterns
    )


# --------------------------------------------------------------------------------------------------------------
# Pointing the real client at the server
# --------------------------------------------------------------------------------------------------------------

# Environment variables that would otherwise override HF_HOME-derived paths, force offline mode or
# swap the token, in this process or in subprocesses (e.g. a CLI under test).
_CONFLICTING_ENV = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_ASSETS_CACHE",
    "HUGGINGFACE_ASSETS_CACHE",
    "HF_XET_CACHE",
    "HF_TOKEN_PATH",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_OIDC_RESOURCE",
    "HUGGINGFACE_CO_STAGING",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN",
)


def point_client_at(server: HubServer, hf_home: Path, monkeypatch: pytest.MonkeyPatch, *, xet: bool = False) -> None:
    """Make every huggingface_hub entry point use ``server`` and a private ``hf_home``.

    Environment variables alone are not enough: huggingface_hub reads them into ``huggingface_hub.constants``
    when it is first imported (which usually happened before any fixture ran), a few modules copied constants
    by value, and the module-level helpers (``huggingface_hub.create_repo`` ...) are bound to an ``HfApi``
    built at import time. So the env is set for subprocesses, and the already-imported state is patched.
    """

    hub_cache, assets_cache = str(hf_home / "hub"), str(hf_home / "assets")
    for name in _CONFLICTING_ENV:
        monkeypatch.delenv(name, raising=False)
    env = {
        "HF_ENDPOINT": server.url,
        "HF_HUB_DISABLE_XET": None if xet else "1",
        "HF_HOME": str(hf_home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_TOKEN": server.token,
    }
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)

    patched_constants = {
        "ENDPOINT": server.url,
        "HUGGINGFACE_CO_URL_TEMPLATE": server.url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_URL_HOSTS": constants.HF_URL_HOSTS | {"127.0.0.1"},
        "HF_HOME": str(hf_home),
        "HF_HUB_CACHE": hub_cache,
        "HUGGINGFACE_HUB_CACHE": hub_cache,
        "HF_ASSETS_CACHE": assets_cache,
        "HUGGINGFACE_ASSETS_CACHE": assets_cache,
        "HF_XET_CACHE": str(hf_home / "xet"),
        "HF_TOKEN_PATH": str(hf_home / "token"),
        "HF_STORED_TOKENS_PATH": str(hf_home / "stored_tokens"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_XET": not xet,  # with hf_xet installed, uploads go to Xet with no LFS fallback
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": False,
    }
    for name, value in patched_constants.items():
        monkeypatch.setattr(constants, name, value)
    monkeypatch.setattr(_cache_manager, "HF_HUB_CACHE", hub_cache)
    monkeypatch.setattr(_cache_assets, "HF_ASSETS_CACHE", assets_cache)
    monkeypatch.setattr(huggingface_hub.hf_api.api, "endpoint", server.url)


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xet: bool) -> Iterator[HubServer]:
    server = HubServer(token=f"hf_test_{secrets.token_hex(8)}", xet=xet).start()
    point_client_at(server, tmp_path / "hf_home", monkeypatch, xet=xet)
    try:
        yield server
    finally:
        close_session()  # drop pooled keep-alive connections to this server
        server.stop()


@pytest.fixture
def hub_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """A fresh fake Hub with a required token, and the huggingface_hub client configured to use it with Xet on, as
    real users have it: LFS files go up and come down through hf_xet (``local://`` CAS), tree listings carry
    ``xetHash``."""
    yield from _serve(tmp_path, monkeypatch, xet=True)


@pytest.fixture
def lfs_hub_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """:func:`hub_server` for a client without Xet, as with ``HF_HUB_DISABLE_XET=1`` or no hf_xet: LFS files go
    through the basic LFS transfer (``lfs_batch``, ``lfs_upload``, ``lfs_verify``), which this fixture's tests drive
    and count (``uploaded_objects``); the Hub stores them LFS-only (no ``xetHash``)."""
    yield from _serve(tmp_path, monkeypatch, xet=False)


class _TimeWithoutSleep:
    """The ``time`` module, minus the sleeping."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(_seconds: float) -> None:
        pass


@pytest.fixture
def instant_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let huggingface_hub retry without waiting: ``http_backoff`` sleeps 1+2+4+8+8 s over its 5 retries and
    ``http_get`` 1 s per resumed download, which would dominate the runtime of fault-injection tests."""

    monkeypatch.setattr(_http, "time", _TimeWithoutSleep())
    monkeypatch.setattr(file_download, "time", _TimeWithoutSleep())
