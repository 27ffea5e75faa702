"""Read a torch-zip ``.pth`` (what ``torch.save`` writes) without torch and without running it.

The archive is read with :mod:`zipfile`, bounded before anything is read (members stored, few and
small besides the tensor storages), every small member's CRC checked.  ``data.pkl`` is read by the
interpreter below, not by :mod:`pickle`: it knows the opcodes of data (numbers, strings, tuples,
lists, dicts, the memo) and the handful of globals a file of plain tensors names
(``torch._utils._rebuild_tensor_v2``/``_v3``, ``_rebuild_parameter``, the ``torch.*Storage`` types,
dtypes, ``collections.OrderedDict``), and it never calls, imports or builds anything else: those
globals are not looked up but stand for the records built here.  Any other global or opcode is
refused when it is read.  That is stricter than ``torch.load(weights_only=True)``, which still
imports the modules it allows and builds real objects.

What comes out is, per tensor, its dtype (the safetensors name), shape, strides, storage offset and
where its storage's bytes lie in the file; :meth:`TorchZip.data` reads a tensor's elements in
row-major order.
"""

from __future__ import annotations

import itertools
import math
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import RegistryError
from .dtypes import ITEMSIZE
from .miss import MANIFEST_MEMBER, torch_zip_folder, zip_refusals

# What torch.save writes, bounded before anything is read (a zip bomb must cost nothing): every
# member stored uncompressed, the tensor storages under data/, and a handful of small members
# (data.pkl, byteorder, version, .data/serialization_id, ..., and an adapter's miss.json).
MAX_ZIP_SMALL_MEMBERS = 16
MAX_ZIP_SMALL_MEMBER_BYTES = 64 << 20  # data.pkl of a 13B checkpoint is well under 1 MiB

_RESAVE = "re-save the tensors with torch.save (it stores members uncompressed)"
_REDOWNLOAD = "download or copy the file again and compare its sha256"
_ONLY_TENSORS = "on a machine you trust, re-save only the tensors: torch.save({name: tensor, ...}, path)"
_FLAT = "save a flat dict of tensors (if they are nested, e.g. under 'state_dict', save that dict alone)"

# The typed storages torch pickles a tensor's storage as, by the dtype they hold.
_STORAGE_DTYPE = {
    "BoolStorage": "BOOL",
    "ByteStorage": "U8",
    "CharStorage": "I8",
    "ShortStorage": "I16",
    "IntStorage": "I32",
    "LongStorage": "I64",
    "HalfStorage": "F16",
    "BFloat16Storage": "BF16",
    "FloatStorage": "F32",
    "DoubleStorage": "F64",
}
# Typed storages torch loads but the registry does not handle: named, then refused as a dtype.
_UNHANDLED_STORAGES = {
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
}
# Dtypes without a typed storage (float8, uint16…) are pickled as an UntypedStorage plus the dtype.
_DTYPE_NAME = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "uint16": "U16", "int16": "I16",
    "uint32": "U32", "int32": "I32", "uint64": "U64", "int64": "I64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64",
}  # fmt: skip


@dataclass(frozen=True)
class _Global:
    """A global the pickle names and this reader allows: a tag, never the object itself."""

    kind: str  # "rebuild_v2", "rebuild_v3", "parameter", "ordered_dict", "storage", "dtype"
    dtype: str | None = None  # storages and dtypes: the safetensors name (None: untyped bytes)


def _allowed_globals() -> dict[tuple[str, str], _Global]:
    allowed = {
        ("collections", "OrderedDict"): _Global("ordered_dict"),
        ("torch._utils", "_rebuild_tensor_v2"): _Global("rebuild_v2"),
        ("torch._utils", "_rebuild_tensor_v3"): _Global("rebuild_v3"),
        ("torch._utils", "_rebuild_parameter"): _Global("parameter"),
        ("torch.storage", "UntypedStorage"): _Global("storage"),
    }
    allowed.update(
        {("torch", name): _Global("storage", code) for name, code in {**_STORAGE_DTYPE, **_UNHANDLED_STORAGES}.items()}
    )
    allowed.update({("torch", name): _Global("dtype", code) for name, code in _DTYPE_NAME.items()})
    return allowed


_ALLOWED = _allowed_globals()


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: str | None  # None: an UntypedStorage (bytes)
    numel: int


@dataclass(frozen=True)
class StoredTensor:
    """A tensor as data.pkl describes it: a view (offset and strides in elements) of a storage."""

    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    storage: str  # the storage's key: its bytes are the member <folder>/data/<key>

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.stride), strict=True):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def span(self) -> int:
        """Elements of the storage the view reaches, from its offset (0 for an empty tensor)."""
        return (
            0
            if self.numel == 0
            else 1 + sum((size - 1) * stride for size, stride in zip(self.shape, self.stride, strict=True))
        )


@dataclass(frozen=True)
class TorchZip:
    """What a torch-zip ``.pth`` holds, read without torch: a flat ``{name: tensor}`` map."""

    path: Path
    tensors: dict[str, StoredTensor]
    storage_offsets: dict[str, int]  # storage key -> where its bytes start in the file
    has_manifest: bool  # a MiSS adapter's miss.json member is there

    def data(self, name: str) -> bytes:
        """The tensor's elements in row-major order, as the file stores them (little-endian)."""
        tensor = self.tensors[name]
        itemsize = ITEMSIZE[tensor.dtype]
        with open(self.path, "rb") as handle:
            handle.seek(self.storage_offsets[tensor.storage] + tensor.offset * itemsize)
            stored = handle.read(tensor.span() * itemsize)
        if tensor.contiguous:
            return stored
        return _gather(memoryview(stored), tensor.shape, tensor.stride, itemsize)


def _gather(stored: memoryview, shape: tuple[int, ...], stride: tuple[int, ...], itemsize: int) -> bytes:
    """The elements of a strided view, row by row (a row whose elements are adjacent in one slice)."""
    if not shape:
        return bytes(stored[:itemsize])
    out = bytearray()
    last, step = shape[-1], stride[-1]
    for index in itertools.product(*(range(size) for size in shape[:-1])):
        start = sum(i * s for i, s in zip(index, stride[:-1], strict=True))
        if step == 1:
            out += stored[start * itemsize : (start + last) * itemsize]
        else:
            for j in range(last):
                at = (start + j * step) * itemsize
                out += stored[at : at + itemsize]
    return bytes(out)


def read_torch_zip(path: str | Path) -> TorchZip:
    """The tensors of a torch-zip ``.pth``; refuses damage, anything torch.save does not write, and a
    pickle that is not a flat ``{str: tensor}`` map of plain tensors."""
    path = Path(path)
    with zip_refusals(path), zipfile.ZipFile(path) as archive:
        folder = torch_zip_folder(archive, path)
        members = archive.infolist()
        _check_members_as_torch_writes_them(path, folder, members)
        small = {}
        for info in members:
            if not info.filename.startswith(f"{folder}/data/"):
                small[info.filename] = archive.read(info)  # read whole: zipfile checks the CRC at the end
        byteorder = small.get(f"{folder}/byteorder", b"little")
        if byteorder != b"little":
            raise RegistryError(
                "weights.corrupt-zip",
                path,
                f"the tensors are stored {byteorder[:16]!r}-endian; the registry reads little-endian files",
                _RESAVE,
            )
        loaded, storages = _Unpickler(small[f"{folder}/data.pkl"], path).load()
        tensors = _flat_tensor_map(path, loaded)
        offsets = {key: _storage_offset(path, archive, folder, storage) for key, storage in storages.items()}
    for name, tensor in tensors.items():
        storage = storages[tensor.storage]
        itemsize = ITEMSIZE[tensor.dtype]
        elements = storage.numel if storage.dtype is not None else storage.numel // itemsize
        if tensor.offset + tensor.span() > elements:
            raise RegistryError(
                "weights.corrupt-zip", path, f"tensor {name!r:.80} reaches past the end of its storage", _REDOWNLOAD
            )
    return TorchZip(path, tensors, offsets, f"{folder}/{MANIFEST_MEMBER}" in small)


def _check_members_as_torch_writes_them(path: Path, folder: str, members: list[zipfile.ZipInfo]) -> None:
    small = [m for m in members if not m.filename.startswith(f"{folder}/data/")]
    if len(small) > MAX_ZIP_SMALL_MEMBERS:
        raise RegistryError(
            "weights.zip-members",
            path,
            f"{len(small)} members besides the tensor data; torch.save writes fewer than {MAX_ZIP_SMALL_MEMBERS}",
            _RESAVE,
        )
    for member in members:
        if member.compress_type != zipfile.ZIP_STORED:
            raise RegistryError(
                "weights.zip-compressed",
                path,
                f"member {member.filename} is compressed; torch.save stores every member",
                _RESAVE,
            )
        if member in small and member.file_size > MAX_ZIP_SMALL_MEMBER_BYTES:
            raise RegistryError(
                "weights.zip-member-size",
                path,
                f"member {member.filename} holds {member.file_size} bytes; torch.save's small members are "
                f"far below {MAX_ZIP_SMALL_MEMBER_BYTES}",
                _RESAVE,
            )


def _storage_offset(path: Path, archive: zipfile.ZipFile, folder: str, storage: _Storage) -> int:
    """Where the storage's bytes start in the file, from its member's local header; the member must
    hold every byte data.pkl says the storage has."""
    name = f"{folder}/data/{storage.key}"
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise RegistryError(
            "weights.corrupt-zip",
            path,
            f"data.pkl names storage {storage.key!r:.40}, which the archive lacks",
            _REDOWNLOAD,
        ) from None
    nbytes = storage.numel * (ITEMSIZE[storage.dtype] if storage.dtype is not None else 1)
    if info.file_size < nbytes:
        raise RegistryError(
            "weights.corrupt-zip",
            path,
            f"storage {storage.key!r:.40} holds {info.file_size} bytes, fewer than the {nbytes} data.pkl says",
            _REDOWNLOAD,
        )
    fp = archive.fp
    assert fp is not None
    fp.seek(info.header_offset)
    local = fp.read(30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise RegistryError(
            "weights.corrupt-zip", path, f"member {name} has no local header where the directory says", _REDOWNLOAD
        )
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    if fp.read(name_length) != info.orig_filename.encode("utf-8"):
        raise RegistryError(
            "weights.corrupt-zip", path, f"member {name}'s local header names another file", _REDOWNLOAD
        )
    start = info.header_offset + 30 + name_length + extra_length
    if start + info.file_size > path.stat().st_size:
        raise RegistryError("weights.corrupt-zip", path, f"member {name} reaches past the end of the file", _REDOWNLOAD)
    return start


def _flat_tensor_map(path: Path, loaded: Any) -> dict[str, StoredTensor]:
    if not isinstance(loaded, dict):
        raise RegistryError(
            "weights.not-tensor-map", path, f"holds a {type(loaded).__name__}, not a dict of tensors", _FLAT
        )
    if not loaded:
        raise RegistryError("weights.not-tensor-map", path, "holds an empty dict: no tensors", _FLAT)
    for key, value in loaded.items():
        if not isinstance(key, str) or not isinstance(value, StoredTensor):
            raise RegistryError(
                "weights.not-tensor-map",
                path,
                f"entry {_shown(key)} is a {type(value).__name__.lstrip('_')}, not a dense tensor",
                _FLAT,
            )
    return dict(loaded)


# ----------------------------------------------------------------------------------------------
# data.pkl


class _Refused(Exception):
    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code = code


def _malformed(reason: str) -> _Refused:
    return _Refused("weights.corrupt-zip", reason)


def _unsafe(reason: str) -> _Refused:
    return _Refused("weights.unsafe-pickle", reason)


class _Unpickler:
    """The opcodes of data (protocols 2 to 5), the memo, and the globals in ``_ALLOWED``."""

    def __init__(self, data: bytes, path: Path):
        self.data, self.path, self.at = data, path, 0
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: dict[int, Any] = {}
        self.storages: dict[str, _Storage] = {}

    def load(self) -> tuple[Any, dict[str, _Storage]]:
        try:
            return self._run(), self.storages
        except _Refused as refused:
            if refused.code == "weights.unsafe-pickle":
                raise RegistryError(
                    refused.code,
                    self.path,
                    f"the pickle builds objects other than tensors, so it was not loaded ({refused})",
                    _ONLY_TENSORS,
                ) from None
            if refused.code == "weights.dtype":
                raise RegistryError(
                    refused.code, self.path, str(refused), f"convert the tensors to one of {', '.join(ITEMSIZE)}"
                ) from None
            raise RegistryError(
                refused.code,
                self.path,
                f"data.pkl is not a pickle of tensors torch.save writes ({refused})",
                _REDOWNLOAD,
            ) from None
        except (IndexError, KeyError, TypeError, ValueError, struct.error, UnicodeDecodeError) as error:
            raise RegistryError(
                "weights.corrupt-zip",
                self.path,
                f"data.pkl is not a well-formed pickle ({type(error).__name__} at byte {self.at})",
                _REDOWNLOAD,
            ) from None

    # reading ----------------------------------------------------------------------------------

    def _take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise _malformed(f"it ends inside an opcode at byte {self.at}")
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk

    def _uint(self, n: int) -> int:
        return int.from_bytes(self._take(n), "little")

    def _line(self) -> str:
        end = self.data.find(b"\n", self.at)
        if end < 0:
            raise _malformed("a GLOBAL without its newline")
        return self._take(end - self.at + 1)[:-1].decode("utf-8")

    def _pop_mark(self) -> list[Any]:
        if not self.marks:
            raise _malformed("an opcode needs a MARK that is not there")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    # the machine ------------------------------------------------------------------------------

    def _run(self) -> Any:
        ops = self._opcodes()
        while True:
            code = self._take(1)[0]
            if code == 0x2E:  # STOP
                if len(self.stack) != 1 or self.marks:
                    raise _malformed("STOP with a stack that does not hold one object")
                return self.stack.pop()
            op = ops.get(code)
            if op is None:
                name = _OPCODE_NAMES.get(code, f"0x{code:02x}")
                raise _unsafe(f"it uses the pickle opcode {name}, which a file of tensors does not need")
            op()

    def _opcodes(self) -> dict[int, Callable[[], None]]:
        push = self.stack.append
        return {
            0x80: lambda: self._proto(self._take(1)[0]),  # PROTO
            0x95: lambda: self._skip(8),  # FRAME: a length hint only
            0x28: lambda: self.marks.append(len(self.stack)),  # MARK
            0x7D: lambda: push({}),  # EMPTY_DICT
            0x5D: lambda: push([]),  # EMPTY_LIST
            0x29: lambda: push(()),  # EMPTY_TUPLE
            0x74: lambda: push(tuple(self._pop_mark())),  # TUPLE
            0x85: lambda: push((self.stack.pop(),)),  # TUPLE1
            0x86: lambda: self._tuple(2),  # TUPLE2
            0x87: lambda: self._tuple(3),  # TUPLE3
            0x6C: lambda: push(self._pop_mark()),  # LIST
            0x64: lambda: push(self._dict(self._pop_mark(), {})),  # DICT
            0x61: lambda: self._append([self.stack.pop()]),  # APPEND
            0x65: lambda: self._append(self._pop_mark()),  # APPENDS
            0x73: lambda: self._setitems([self.stack.pop(-2), self.stack.pop()]),  # SETITEM
            0x75: lambda: self._setitems(self._pop_mark()),  # SETITEMS
            0x4A: lambda: push(int.from_bytes(self._take(4), "little", signed=True)),  # BININT
            0x4B: lambda: push(self._uint(1)),  # BININT1
            0x4D: lambda: push(self._uint(2)),  # BININT2
            0x8A: lambda: push(int.from_bytes(self._take(self._uint(1)), "little", signed=True)),  # LONG1
            0x47: lambda: push(struct.unpack(">d", self._take(8))[0]),  # BINFLOAT
            0x4E: lambda: push(None),  # NONE
            0x88: lambda: push(True),  # NEWTRUE
            0x89: lambda: push(False),  # NEWFALSE
            0x58: lambda: push(self._take(self._uint(4)).decode("utf-8")),  # BINUNICODE
            0x8C: lambda: push(self._take(self._uint(1)).decode("utf-8")),  # SHORT_BINUNICODE
            0x8D: lambda: push(self._take(self._uint(8)).decode("utf-8")),  # BINUNICODE8
            0x42: lambda: push(self._take(self._uint(4))),  # BINBYTES
            0x43: lambda: push(self._take(self._uint(1))),  # SHORT_BINBYTES
            0x71: lambda: self._put(self._uint(1)),  # BINPUT
            0x72: lambda: self._put(self._uint(4)),  # LONG_BINPUT
            0x94: lambda: self._put(len(self.memo)),  # MEMOIZE
            0x68: lambda: push(self._get(self._uint(1))),  # BINGET
            0x6A: lambda: push(self._get(self._uint(4))),  # LONG_BINGET
            0x30: lambda: self._skip(0, self.stack.pop()),  # POP
            0x31: lambda: self._skip(0, self._pop_mark()),  # POP_MARK
            0x63: lambda: push(self._global(self._line(), self._line())),  # GLOBAL
            0x93: self._stack_global,  # STACK_GLOBAL
            0x51: lambda: push(self._persistent(self.stack.pop())),  # BINPERSID
            0x52: self._reduce,  # REDUCE
            0x62: self._build,  # BUILD
        }

    def _skip(self, n: int, _dropped: Any = None) -> None:
        self._take(n)

    def _proto(self, version: int) -> None:
        if not 2 <= version <= 5:
            raise _malformed(f"pickle protocol {version}")

    def _tuple(self, n: int) -> None:
        items = tuple(self.stack[-n:]) if len(self.stack) >= n else None
        if items is None:
            raise _malformed("a tuple of more items than the stack holds")
        del self.stack[-n:]
        self.stack.append(items)

    def _dict(self, items: list[Any], into: dict[Any, Any]) -> dict[Any, Any]:
        if len(items) % 2:
            raise _malformed("a dict of an odd number of items")
        for key, value in zip(items[::2], items[1::2], strict=True):
            if type(key) not in (str, int):  # nothing else hashes without recursing (a tuple nested a million deep)
                raise _malformed(f"a dict key that is a {type(key).__name__}")
            into[key] = value
        return into

    def _append(self, items: list[Any]) -> None:
        target = self.stack[-1]
        if not isinstance(target, list):
            raise _malformed(f"APPEND to a {type(target).__name__}")
        target.extend(items)

    def _setitems(self, items: list[Any]) -> None:
        target = self.stack[-1]
        if not isinstance(target, dict):
            raise _malformed(f"SETITEM on a {type(target).__name__}")
        self._dict(items, target)

    def _put(self, key: int) -> None:
        self.memo[key] = self.stack[-1]

    def _get(self, key: int) -> Any:
        if key not in self.memo:
            raise _malformed(f"memo {key} is read before it is written")
        return self.memo[key]

    def _global(self, module: str, name: str) -> _Global:
        allowed = _ALLOWED.get((module, name))
        if allowed is None:
            raise _unsafe(f"it names {module}.{name}")
        return allowed

    def _stack_global(self) -> None:
        name, module = self.stack.pop(), self.stack.pop()
        if not isinstance(module, str) or not isinstance(name, str):
            raise _malformed("STACK_GLOBAL of something other than two strings")
        self.stack.append(self._global(module, name))

    def _persistent(self, pid: Any) -> _Storage:
        """``('storage', storage type, key, location, numel)``: a storage, by its member's name."""
        if not (
            isinstance(pid, tuple)
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _Global)
            and pid[1].kind == "storage"
        ):
            raise _unsafe(f"a persistent id other than a storage's ({_shown(pid)})")
        _, kind, key, _location, numel = pid
        if not isinstance(key, str) or not key.isdigit() or type(numel) is not int or numel < 0:
            raise _malformed(f"a storage record with key {_shown(key)} and size {_shown(numel)}")
        if kind.dtype is not None and kind.dtype not in ITEMSIZE:
            raise _Refused("weights.dtype", f"a storage holds {kind.dtype}, a dtype the registry does not handle")
        storage = _Storage(key, kind.dtype, numel)
        if self.storages.setdefault(key, storage) != storage:
            raise _malformed(f"storage {key} is named with two types or sizes")
        return storage

    def _reduce(self) -> None:
        args, func = self.stack.pop(), self.stack.pop()
        if not isinstance(func, _Global) or not isinstance(args, tuple):
            raise _malformed("REDUCE of something other than an allowed global and a tuple")
        if func.kind == "ordered_dict" and args == ():
            self.stack.append(OrderedDict())
        elif func.kind == "rebuild_v2" and len(args) in (6, 7):
            self.stack.append(self._tensor(args[0], args[1], args[2], args[3], None, args[5:]))
        elif (
            func.kind == "rebuild_v3"
            and len(args) in (7, 8)
            and isinstance(args[6], _Global)
            and args[6].kind == "dtype"
        ):
            self.stack.append(self._tensor(args[0], args[1], args[2], args[3], args[6].dtype, args[5:6] + args[7:]))
        elif (
            func.kind == "parameter" and len(args) == 3 and isinstance(args[0], StoredTensor) and _empty_hooks(args[2])
        ):
            self.stack.append(args[0])
        else:
            raise _unsafe(f"it calls {func.kind} with arguments a plain tensor does not have")

    def _tensor(
        self, storage: Any, offset: Any, shape: Any, stride: Any, dtype: str | None, rest: tuple[Any, ...]
    ) -> StoredTensor:
        """``_rebuild_tensor_v2/v3(storage, offset, size, stride, requires_grad, hooks[, dtype][, metadata])``."""
        hooks, metadata = rest[0], rest[1:]
        if (
            not isinstance(storage, _Storage)
            or not _empty_hooks(hooks)
            or any(not isinstance(m, dict) for m in metadata)
        ):
            raise _unsafe("a tensor rebuilt from something other than a storage, or with backward hooks")
        dtype = dtype or storage.dtype
        if dtype is None or (storage.dtype is not None and storage.dtype != dtype):
            raise _malformed(f"a tensor of storage {storage.key} without a dtype it can hold")
        if dtype not in ITEMSIZE:
            raise _Refused("weights.dtype", f"a tensor is {dtype}, a dtype the registry does not handle")
        if not (
            isinstance(shape, tuple)
            and isinstance(stride, tuple)
            and len(shape) == len(stride)
            and all(type(d) is int and d >= 0 for d in (offset, *shape, *stride))
        ):
            raise _malformed(f"a tensor with offset {_shown(offset)}, size {_shown(shape)} and stride {_shown(stride)}")
        return StoredTensor(dtype, shape, stride, offset, storage.key)

    def _build(self) -> None:
        state, target = self.stack.pop(), self.stack[-1]
        # torch.save of a module's state_dict() pickles an OrderedDict with its _metadata attribute:
        # accepted and dropped; state on anything else is refused.
        if not (type(target) is OrderedDict and isinstance(state, dict)):
            raise _unsafe(f"it sets the state of a {type(target).__name__}")


def _shown(value: Any) -> str:
    """A value for a message: short, and never a repr of a structure nested without bound."""
    if isinstance(value, str | int) or (isinstance(value, tuple) and all(type(v) is int for v in value)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a {type(value).__name__.lstrip('_')}"


def _empty_hooks(hooks: Any) -> bool:
    return isinstance(hooks, dict) and not hooks


_OPCODE_NAMES = {
    0x69: "INST", 0x6F: "OBJ", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX",
    0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x50: "PERSID",
    0x49: "INT", 0x4C: "LONG", 0x53: "STRING", 0x56: "UNICODE",
    0x70: "PUT", 0x67: "GET", 0x8B: "LONG4", 0x8E: "BINBYTES8",
    0x8F: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x96: "BYTEARRAY8",
    0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER", 0x32: "DUP",
}  # fmt: skip
