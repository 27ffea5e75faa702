"""The ``registry`` command: a thin shell over the core, and its one contract.

Each command parses options, calls its function in :mod:`registry.ops`, and hands the result to
the output sink (:mod:`registry.cli.output`): a human summary or, with ``--json``, one JSON
document on stdout.  Failures are handled here, once, for every command (see
:class:`RegistryGroup`): a refusal, a usage error, a missing extra, a failing machine each become
``error: <file>: <what>; fix: <how>`` lines on stderr, under ``--json`` also
``{"ok": false, "problems": [...]}`` on stdout, and the exit code of :class:`~registry.core.errors.Exit`.
``REGISTRY_DEBUG=1`` adds the full traceback, causes included.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from .. import __version__
from ..core import sigbus
from ..core.errors import Exit, Problem, RegistryError
from .output import Output, ReadsFlagOnRefusal, flag_given

TORCH_MODULES = {"torch", "numpy", "safetensors", "rwkv", "ninja"}
HF_MODULES = {"transformers", "tokenizers", "fla", "peft", "triton", "einops", "accelerate"}
F = TypeVar("F", bound=Callable[..., Any])
_TOKEN_SHAPED = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")


def registry_option(help_text: str = "The registry directory (env RWKV_REGISTRY).") -> Callable:
    """``-C DIR`` / ``RWKV_REGISTRY``: the registry directory, with the same meaning on every command."""
    return click.option(
        "-C",
        "--registry",
        "registry",
        type=click.Path(file_okay=False, path_type=Path),
        default=".",
        show_default=True,
        envvar="RWKV_REGISTRY",
        help=help_text,
    )


REGISTRY_OPT = registry_option()
DIR_ARG = click.argument("directory", type=click.Path(file_okay=False, path_type=Path), required=False)


def card_front_options(card: str) -> Callable[[F], F]:
    """``--title`` and ``--license`` of a new registry's ``card`` (the model card, the dataset card)."""

    def apply(command: F) -> F:
        command = click.option(
            "--license", "license_", help="SPDX license id for the card's front matter (omit when none is chosen)."
        )(command)
        return click.option("--title", help=f"Title shown on the {card}.")(command)

    return apply


def registry_dir(directory: Path | None, registry: Path) -> Path:
    """The registry a command with an optional positional DIR works on: DIR, else ``-C``/``RWKV_REGISTRY``."""
    if directory is None:
        return registry
    source = click.get_current_context().get_parameter_source("registry")
    if source != ParameterSource.DEFAULT and Path(directory).absolute() != Path(registry).absolute():
        raise usage_error(
            "-C", f"DIR {directory} and -C/RWKV_REGISTRY {registry} name different registries", "give one of them"
        )
    return directory


def usage_error(option: str, what: str, fix: str) -> RegistryError:
    """A command line the command cannot run (options that exclude each other, one missing): exit 2."""
    return RegistryError("usage", option, what, fix, Exit.USAGE)


# ----------------------------------------------------------------------------------------------
# Failures, handled once for every command


def _machine_error(err: OSError) -> RegistryError:
    """A failing machine (disk full, no permission, a path of the wrong kind) as one line."""
    fixes = {
        errno.ENOSPC: "free disk space (or inodes) and run the command again",
        errno.EDQUOT: "free space within your quota and run the command again",
        errno.EFBIG: "raise the file-size limit (ulimit -f) or free space, and run the command again",
        errno.EACCES: "give your user write access to it (or run as its owner) and run the command again",
        errno.EPERM: "give your user write access to it (or run as its owner) and run the command again",
        errno.EROFS: "run the command on a writable file system",
        errno.EISDIR: "remove or rename the directory that stands where a file belongs",
        errno.ENOTDIR: "remove or rename the file that stands where a directory belongs",
    }
    fix = fixes.get(err.errno or 0, "check the file and run the command again")
    path = err.filename2 or err.filename  # a rename names its target second: the file the user knows
    return RegistryError(
        f"fs.{errno.errorcode.get(err.errno or 0, 'error').lower()}", path, err.strerror or str(err), fix, Exit.MACHINE
    )


def _as_registry_error(exc: BaseException) -> RegistryError | None:
    if isinstance(exc, RegistryError):
        return exc
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in TORCH_MODULES:
        return RegistryError(
            "install.needs-torch",
            exc.name,
            "this command reads or writes tensors and needs the torch extra",
            "pip install 'rwkv-registry[torch]'",
        )
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in HF_MODULES:
        return RegistryError(
            "install.needs-hf",
            exc.name,
            "this command writes and checks Transformers files and needs the hf extra",
            "pip install 'rwkv-registry[hf]'",
        )
    if isinstance(exc, ImportError | OSError) and (broken := _importing(exc, TORCH_MODULES)):
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return RegistryError(
            "install.broken-torch",
            broken,
            f"this command needs the torch extra, and importing {broken} failed ({first})",
            "reinstall the torch extra: pip install --force-reinstall 'rwkv-registry[torch]'",
        )
    if isinstance(exc, OSError):
        return _machine_error(exc)
    return None


def _importing(exc: BaseException, packages: set[str]) -> str | None:
    """The package of ``packages`` whose import raised ``exc`` (a missing CUDA library is an
    ImportError or OSError raised by the package's own module code), else None: an OSError that
    torch raises while working (a full disk under torch.save) is not an import."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        top = str(frame.f_globals.get("__name__", "")).split(".")[0]
        if frame.f_code.co_name == "<module>" and top in packages:
            return top
        tb = tb.tb_next
    return None


def _option_name(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return max(param.opts, key=len)  # --registry rather than -C
    return param.human_readable_name


def _range_text(kind: click.IntRange) -> str:
    low = None if kind.min is None else f"{'above' if kind.min_open else 'at least'} {kind.min}"
    high = None if kind.max is None else f"{'below' if kind.max_open else 'at most'} {kind.max}"
    return " and ".join(filter(None, (low, high)))


def _usage_problem(usage: click.ClickException) -> Problem:
    """Click's own refusal of a command line as one ``<option>: <what>; fix: <how>`` problem."""
    ctx = getattr(usage, "ctx", None)
    see = f"see `{ctx.command_path if ctx else 'registry'} --help`"
    param = getattr(usage, "param", None)
    if isinstance(usage, click.MissingParameter) and param is not None:
        name = _option_name(param)
        return Problem("usage", name, "required, and not given", f"pass {name} ({see})")
    if isinstance(usage, click.BadParameter) and param is not None:
        name, kind = _option_name(param), param.type
        if isinstance(kind, click.IntRange):
            fix = f"pass {name} a whole number {_range_text(kind)}"
        elif isinstance(kind, click.Choice):
            fix = f"pass {name} one of {', '.join(map(str, kind.choices))}"
        else:
            fix = f"pass {name} a valid value ({see})"
        return Problem("usage", name, usage.message.rstrip("."), fix)
    if isinstance(usage, click.NoSuchOption | click.BadOptionUsage):
        return Problem("usage", usage.option_name, usage.message.rstrip("."), see)
    return Problem("usage", None, usage.format_message().rstrip("."), see)


def _debug(exc: BaseException) -> None:
    if os.environ.get("REGISTRY_DEBUG") not in (None, "", "0"):
        text = "".join(traceback.format_exception(exc))
        token = os.environ.get("HF_TOKEN")
        text = text.replace(token, "***") if token else text
        click.echo(_TOKEN_SHAPED.sub("hf_***", text), err=True, nl=False)


class RegistryGroup(ReadsFlagOnRefusal, click.Group):
    """The group that turns every failure into the CLI contract (see the module docstring)."""

    command_class = ReadsFlagOnRefusal
    group_class = type  # `registry dataset …`: the same handling of its commands' command lines

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        sigbus.install()
        sink = Output()
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, obj=sink, **extra)
        except click.exceptions.Exit as done:
            sys.exit(done.exit_code)
        except click.ClickException as usage:
            _debug(usage)
            sink.fail([_usage_problem(usage)], Exit.USAGE)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(Exit.REFUSED)
        except Exception as exc:  # noqa: BLE001 — translated below, or re-raised as a crash
            error = _as_registry_error(exc)
            if error is None:
                raise
            _debug(exc)
            sink.fail(error.problems, error.exit_code, error.payload)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else Exit.OK)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:  # no such command: no command's --json was read
            if flag_given(self, ctx, args):
                ctx.ensure_object(Output).json = True
            raise


@click.group(cls=RegistryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="registry")
def main() -> None:
    """Validate, maintain and publish Hugging Face repos of RWKV-7 weights.

    A registry is a folder mirrored 1:1 to a model repo: <base>/<method>/<data-version>/...,
    index.json (the machine-readable index) and SHA256SUMS at its root.

    \b
    Exit codes: 0 ok; 1 checked and found problems; 2 usage error; 3 refused
    (nothing changed); 4 Hub or network failure, retry; 5 the machine failed
    (disk full, permissions). REGISTRY_DEBUG=1 prints tracebacks.

    -C DIR (or RWKV_REGISTRY) names the registry on every command; a command that also takes a positional DIR
    accepts either (both, naming different directories, is a usage error). Run in a subfolder, a command finds the
    registry in the nearest folder above that holds index.json (stopping at the top of a git checkout). Every
    command has --help and --json (one JSON document on stdout). The command reference: docs/commands.md.
    """


def run() -> None:
    """The console entry point: run the command, then leave without the interpreter's teardown.

    Tearing torch down takes about 0.5 s here (``python -c "import torch"``: 1.5-1.9 s, against
    1.05-1.2 s ending in ``os._exit``), a tenth of a 3 GiB conversion.  When a command returns,
    everything it wrote is already fsynced and closed, so only the two streams need flushing.
    A crash (any other exception) still leaves through the normal path, traceback and all.
    """
    try:
        main()
    except SystemExit as exit_request:
        code = exit_request.code
    else:
        code = 0
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
