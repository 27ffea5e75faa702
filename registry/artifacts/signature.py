"""Signed releases: ``model.sig``, an OpenSSF Model Signing bundle over every published file.

The format is model_signing 1.1's: a Sigstore bundle holding a DSSE envelope over an in-toto
statement whose predicate lists every file with its sha256 (serialization ``files``, hash type
``sha256``), which is exactly how stock ``model_signing verify`` re-hashes a folder.  So the
manifest is built from the hashes the registry already holds (SHA256SUMS, kept true by validate
and the stat cache) and no weight is read to sign.  The files covered are what publish uploads:
everything SHA256SUMS lists, plus SHA256SUMS itself; ``.gitattributes`` is one of the git files
model_signing ignores, and the manifest records the paths verification must ignore
(:data:`registry.core.names.UNSIGNED`).

The key hint in the bundle is the sha256 of the signer's PEM public key; index.json records it
(``registry.signer.fingerprint``) and the card shows it with the verify command.  Checking a
signature here (:func:`signature_problems`) never re-hashes files either: the signed manifest is
compared with sha256s that were checked against the bytes (validate, the Hub's tree).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core.errors import Problem, RegistryError
from ..core.hashing.digest import sha256, sha256_hex
from ..core.models import Signer, path_problem
from ..core.names import GIT_DIR, INDEX_NAME, SIGNATURE_NAME, SUMS_NAME, UNSIGNED
from ..core.repo import Repo, is_dataset
from ..core.schemas import parse_json
from ..core.staged_sums import STALE_SIGNATURE_FIX

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from model_signing.manifest import Manifest
INSTALL_FIX = "pip install 'rwkv-registry[sign]'"
RESIGN_FIX = "run `registry sign --key KEY.pem` on the registry that holds the right bytes, then publish"
STALE_FIX = STALE_SIGNATURE_FIX  # a local registry whose files changed after signing


def signed_files(sums: Mapping[str, str], sums_bytes: bytes) -> dict[str, str]:
    """Every file a signature covers, with its sha256: SHA256SUMS's list and SHA256SUMS itself,
    less git's files (``.gitattributes``), which stock verify skips by default: SHA256SUMS, which
    the signature covers, lists their sha256."""
    listed = {path: sha for path, sha in sums.items() if not path.split("/", 1)[0].startswith(GIT_DIR)}
    return {**listed, SUMS_NAME: sha256_hex(sums_bytes)}


def _model_signing() -> tuple[ModuleType, ModuleType, ModuleType, ModuleType, ModuleType]:
    try:
        from model_signing import manifest  # noqa: PLC0415 optional dependency: model_signing
        from model_signing._hashing import hashing  # noqa: PLC0415 optional dependency: model_signing
        from model_signing._signing import sign_ec_key, sign_sigstore_pb, signing  # noqa: PLC0415 optional dependency: model_signing
    except ImportError as err:
        raise RegistryError(
            "sign.unavailable", SIGNATURE_NAME, f"model_signing is not installed ({err.name})", INSTALL_FIX
        ) from err
    return manifest, hashing, sign_ec_key, sign_sigstore_pb, signing


def _manifest(files: Mapping[str, str], name: str) -> Manifest:
    manifest, hashing, *_ = _model_signing()
    serialization = manifest._FileSerialization(
        "sha256", allow_symlinks=False, ignore_paths=[Path(p) for p in UNSIGNED]
    )
    items = [
        manifest.FileManifestItem(path=PurePosixPath(path), digest=hashing.Digest("sha256", bytes.fromhex(sha)))
        for path, sha in sorted(files.items())
    ]
    return manifest.Manifest(name, items, serialization)


def _private_key(key: Path) -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 optional dependency: cryptography
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 optional dependency: cryptography

    try:
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as err:
        raise RegistryError(
            "sign.bad-key",
            key,
            f"not an unencrypted PEM private key ({err})",
            "pass an EC private key in PEM, e.g. from `openssl ecparam -name prime256v1 -genkey -noout -out key.pem`",
        ) from err
    if not isinstance(private, ec.EllipticCurvePrivateKey):
        raise RegistryError(
            "sign.bad-key", key, "not an elliptic-curve key", "pass an EC private key (P-256, P-384 or P-521)"
        )
    return private


def public_pem(key: Path) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 optional dependency: cryptography

    return (
        _private_key(key)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def fingerprint(public_key_pem: bytes) -> str:
    """What model_signing puts in the bundle as the key hint: sha256 of the PEM public key."""
    return sha256_hex(public_key_pem)


def sign_files(files: Mapping[str, str], key: Path, name: str) -> bytes:
    """The bytes of ``model.sig`` over ``files`` (path -> sha256), signed with the EC key at ``key``."""
    _private_key(key)  # a clear refusal for a key model_signing would choke on
    *_, sign_ec_key, _sigstore_pb, signing = _model_signing()
    signature = sign_ec_key.Signer(key).sign(signing.Payload(_manifest(files, name)))
    return signature.bundle.to_json().encode()


BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
MAX_SIGNATURE_BYTES = 64 << 20  # a manifest line is ~150 bytes: far more files than a registry holds
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SignedManifest:
    """What ``model.sig`` says, read without model_signing: path -> sha256 as signed, and the key hint."""

    files: dict[str, str]
    hint: str


def _field(obj: Any, key: str, kind: type, where: str) -> Any:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or (kind is str and not value):
        raise _unreadable(
            f"{where}{key} is missing or not a{'n object' if kind is dict else ' list' if kind is list else ' string'}"
        )
    return value


def _unreadable(what: str) -> RegistryError:
    return RegistryError("sign.unreadable", SIGNATURE_NAME, f"not a model_signing bundle: {what}", STALE_FIX)


def _base64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise _unreadable(f"{where} is not base64") from err


def read_bundle(data: bytes) -> SignedManifest:
    """Parse ``model.sig`` strictly (the light install's reader: no model_signing, no cryptography):
    a Sigstore bundle holding a DSSE envelope over model_signing's in-toto statement, ``files``
    serialization with sha256, every resource once, and the statement's root digest equal to the
    sha256 over the resources' digests (so an edited or cut manifest does not parse).  It proves
    the file is well formed and what it claims; only the signature check against a public key
    (:func:`signature_problems` with ``public_key``) proves who signed it."""
    if not data.strip():
        raise _unreadable("the file is empty")
    try:
        bundle = parse_json(data, SIGNATURE_NAME)
    except RegistryError as err:
        raise _unreadable(err.problem.message) from err
    if not isinstance(bundle, dict) or bundle.get("mediaType") != BUNDLE_MEDIA_TYPE:
        raise _unreadable(f"mediaType is not {BUNDLE_MEDIA_TYPE}")
    hint = _field(
        _field(_field(bundle, "verificationMaterial", dict, ""), "publicKey", dict, "verificationMaterial."),
        "hint",
        str,
        "verificationMaterial.publicKey.",
    )
    envelope = _field(bundle, "dsseEnvelope", dict, "")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise _unreadable(f"dsseEnvelope.payloadType is not {PAYLOAD_TYPE}")
    signatures = _field(envelope, "signatures", list, "dsseEnvelope.")
    if len(signatures) != 1 or not _base64(
        _field(signatures[0], "sig", str, "dsseEnvelope.signatures[0]."), "dsseEnvelope.signatures[0].sig"
    ):
        raise _unreadable("dsseEnvelope.signatures must hold one signature")
    try:
        statement = parse_json(
            _base64(_field(envelope, "payload", str, "dsseEnvelope."), "dsseEnvelope.payload"),
            f"{SIGNATURE_NAME} payload",
        )
    except RegistryError as err:
        raise _unreadable(f"the signed statement: {err.problem.message}") from err
    if (
        not isinstance(statement, dict)
        or statement.get("_type") != STATEMENT_TYPE
        or statement.get("predicateType") != PREDICATE_TYPE
    ):
        raise _unreadable(
            f"the signed statement is not an in-toto {STATEMENT_TYPE} with predicateType {PREDICATE_TYPE}"
        )
    subjects = _field(statement, "subject", list, "statement.")
    root = (
        _field(_field(subjects[0], "digest", dict, "subject."), "sha256", str, "subject.digest.")
        if len(subjects) == 1
        else None
    )
    if root is None:
        raise _unreadable("the statement must name one subject")
    predicate = _field(statement, "predicate", dict, "statement.")
    serialization = _field(predicate, "serialization", dict, "predicate.")
    if serialization.get("method") != "files" or serialization.get("hash_type") != "sha256":
        raise _unreadable("predicate.serialization is not model_signing's files serialization with sha256")
    files: dict[str, str] = {}
    hasher = sha256()
    for number, resource in enumerate(_field(predicate, "resources", list, "predicate.")):
        name, digest = (resource.get(k) if isinstance(resource, dict) else None for k in ("name", "digest"))
        if not (
            isinstance(name, str)
            and isinstance(digest, str)
            and _HEX64.fullmatch(digest)
            and resource.get("algorithm") == "sha256"
        ):
            raise _unreadable(f"predicate.resources[{number}] is not a name with a sha256 digest")
        if name in files or path_problem(name):
            raise _unreadable(f"predicate.resources[{number}] names {name[:80]!r} twice or outside the folder")
        files[name] = digest
        hasher.update(bytes.fromhex(digest))
    if hasher.hexdigest() != root:
        raise _unreadable("the subject's digest is not the digest over the resources (an edited or cut manifest)")
    return SignedManifest(files, hint)


def _verify(data: bytes, public_key: Path) -> None:
    """The cryptographic check (the signing extra): model_signing verifies the bundle's signature with
    ``public_key``."""
    *_, sign_ec_key, sign_sigstore_pb, _signing = _model_signing()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / SIGNATURE_NAME).write_bytes(data)
        signature = sign_sigstore_pb.Signature.read(Path(tmp) / SIGNATURE_NAME)
    sign_ec_key.Verifier(public_key).verify(signature)


def signature_problems(
    data: bytes,
    files: Mapping[str, str],
    signer_fingerprint: str | None,
    public_key: Path | None,
    fix: str = RESIGN_FIX,
) -> list[Problem]:
    """Why ``model.sig`` (``data``) is not a signature of exactly ``files`` by the recorded signer
    (and, given ``public_key``, by that key); empty when it is.  ``fix``: what to do about a file
    that differs from what was signed (a local registry: sign again; a remote: re-publish)."""
    try:
        signed = read_bundle(data)
    except RegistryError as err:
        return list(err.problems)
    if public_key is not None:
        try:
            _verify(data, public_key)
        except RegistryError:
            raise
        except Exception as err:  # model_signing and cryptography raise many types for a bad bundle or signature
            return [
                Problem(
                    "sign.invalid",
                    SIGNATURE_NAME,
                    f"the signature does not verify with {public_key.name} ({type(err).__name__}: {err})",
                    RESIGN_FIX,
                )
            ]
    stale = "stale signature: " if fix == STALE_FIX else ""
    problems = []
    if signer_fingerprint is None:
        problems.append(
            Problem("sign.no-signer", INDEX_NAME, "model.sig is present but index.json records no signer", fix)
        )
    elif signed.hint != signer_fingerprint:
        problems.append(
            Problem(
                "sign.other-signer",
                SIGNATURE_NAME,
                f"signed by key {signed.hint[:16]}…, but index.json records signer {signer_fingerprint[:16]}…",
                fix,
            )
        )
    for path in sorted(set(files) | set(signed.files)):
        if path not in signed.files:
            problems.append(Problem("sign.unsigned-file", path, f"{stale}not covered by model.sig", fix))
        elif path not in files:
            problems.append(
                Problem("sign.missing-file", path, f"{stale}signed in model.sig but not in the release", fix)
            )
        elif files[path] != signed.files[path]:
            problems.append(
                Problem(
                    "sign.mismatch",
                    path,
                    f"{stale}sha256 {files[path][:12]}… but model.sig signed {signed.files[path][:12]}…",
                    fix,
                )
            )
    return problems


@dataclass(frozen=True)
class SignaturePolicy:
    """How publish, pull and verify-remote treat ``model.sig``: a present one must sign exactly the
    files; ``required`` also wants it present and verified against ``public_key``."""

    public_key: Path | None = None
    required: bool = False

    def __post_init__(self) -> None:
        if self.required and self.public_key is None:  # index.json's fingerprint alone is the publisher's word
            raise RegistryError(
                "args.missing",
                "--public-key",
                "--require-signature needs the signer's public key",
                "pass --public-key SIGNER.pub (from the publisher; its fingerprint is on the card)",
            )

    def problems(
        self,
        data: bytes | None,
        sums: Mapping[str, str],
        sums_bytes: bytes,
        signer: Signer | None,
        fix: str = RESIGN_FIX,
    ) -> list[Problem]:
        """Why ``data`` (the bytes of model.sig, None: there is none) does not pass for the release
        that ``sums`` (and ``sums_bytes``, SHA256SUMS itself) describes, signed by ``signer``."""
        if data is None:
            if signer is not None:  # the card promises a signature and prints the verify command
                return [
                    Problem(
                        "sign.missing",
                        SIGNATURE_NAME,
                        f"index.json records signer {signer.fingerprint[:16]}… but there is no model.sig",
                        f"restore model.sig, or {STALE_FIX}",
                    )
                ]
            return (
                [Problem("sign.missing", SIGNATURE_NAME, "no model.sig, and a signature is required", RESIGN_FIX)]
                if self.required
                else []
            )
        return signature_problems(
            data, signed_files(sums, sums_bytes), signer.fingerprint if signer else None, self.public_key, fix
        )

    def folder_problems(
        self,
        repo: Repo,
        sums: Mapping[str, str],
        sums_bytes: bytes | None = None,
        signer: Signer | None = None,
        fix: str = RESIGN_FIX,
    ) -> list[Problem]:
        """:meth:`problems` for a registry folder whose SHA256SUMS (``sums``; ``sums_bytes``: its
        bytes, read again when None) was checked against its bytes; ``signer``: index.json's, read
        when None.  A model.sig that is a link or not a regular file is refused unread."""
        path = repo.root / SIGNATURE_NAME
        if path.is_symlink() or (os.path.lexists(path) and not path.is_file()):
            return [
                Problem(
                    "sign.not-a-file",
                    SIGNATURE_NAME,
                    "model.sig is a symlink or not a regular file, so it could vouch for any bytes",
                    f"remove it, then {STALE_FIX}",
                )
            ]
        if signer is None and repo.index_path.is_file() and not is_dataset(repo.root):
            signer = repo.load_index().registry.signer
        if not path.is_file():
            return self.problems(None, sums, b"", signer, fix)
        if path.stat().st_size > MAX_SIGNATURE_BYTES:
            return [_unreadable(f"larger than {MAX_SIGNATURE_BYTES >> 20} MiB").problem]
        data = repo.read_bytes(path)
        return self.problems(
            data, sums, repo.read_bytes(repo.sums_path) if sums_bytes is None else sums_bytes, signer, fix
        )


# -- Detached signatures over one document (gate receipts), with the same EC key ----------------------------------
#
# DSSE's pre-authentication encoding (the envelope model_signing's bundles use): the signature covers
# the payload's type and bytes together, so a receipt's signature never verifies as anything else.


def _pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def sign_document(payload_type: str, payload: bytes, key: Path) -> tuple[str, str]:
    """(base64 ECDSA-SHA256 signature of ``payload`` as ``payload_type``, fingerprint of the public key)."""

    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415 optional dependency: cryptography
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 optional dependency: cryptography

    private = _private_key(key)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signature = private.sign(_pae(payload_type, payload), ec.ECDSA(hashes.SHA256()))
    return base64.b64encode(signature).decode("ascii"), fingerprint(public)


@dataclass(frozen=True)
class TrustedKey:
    """A public key a command was told to trust, by its file and fingerprint."""

    path: Path
    pem: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.pem)

    @classmethod
    def read(cls, path: Path, option: str) -> TrustedKey:
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 optional dependency: cryptography
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 optional dependency: cryptography

        fix = f"pass the PEM public key of the signer to {option} (e.g. `openssl ec -in KEY.pem -pubout -out KEY.pub`)"
        try:
            pem = path.read_bytes()
            public = serialization.load_pem_public_key(pem)
        except (OSError, ValueError, TypeError) as err:
            raise RegistryError("sign.bad-key", path, f"not a PEM public key ({err})", fix) from err
        if not isinstance(public, ec.EllipticCurvePublicKey):
            raise RegistryError("sign.bad-key", path, "not an elliptic-curve public key", fix)
        return cls(
            path, public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )

    def verifies(self, payload_type: str, payload: bytes, signature: str) -> bool:
        """Whether ``signature`` (base64) is this key's over ``payload`` as ``payload_type``."""

        from cryptography.exceptions import InvalidSignature  # noqa: PLC0415 optional dependency: cryptography
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415 optional dependency: cryptography
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 optional dependency: cryptography

        public = serialization.load_pem_public_key(self.pem)
        assert isinstance(public, ec.EllipticCurvePublicKey)
        try:
            public.verify(
                base64.b64decode(signature, validate=True), _pae(payload_type, payload), ec.ECDSA(hashes.SHA256())
            )
        except (InvalidSignature, binascii.Error, ValueError):
            return False
        return True
