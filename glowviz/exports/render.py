"""Writing export files: atomic writes, and DOT -> SVG/PDF/PNG through Graphviz.

Every file an export produces goes through `atomic_write`: the bytes are written to a temporary
file in the destination's directory and moved over the target with `os.replace`, so a reader
(or a CI job) never sees half a file and a failed export never clobbers the previous one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from compiler.errors import CompilerError

#: Formats Graphviz renders for us.
GRAPHVIZ_FORMATS = ("svg", "pdf", "png")
#: Pixels per inch of PNG exports (figures and graphs alike): print quality at column width.
PNG_DPI = 200

INSTALL_HINT = "install Graphviz: apt-get install graphviz"


class ExportError(CompilerError):
    """An export cannot be produced (bad view/format combination, missing tool, bad stage,
    an output directory that does not exist): bad input, exit 2."""


class OutputError(ExportError):
    """The output could not be written (disk full, permission denied, a closed pipe): exit 3.
    The message names the file the user asked for, never the temporary file beside it."""


def check_output_path(path: str | os.PathLike[str]) -> None:
    """Refuse an output whose directory does not exist (before any work is done)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise ExportError(f"output directory does not exist: {directory}")
    if target.is_dir():
        raise ExportError(f"output is a directory: {target}")


def _unnamed_file(directory: Path) -> int | None:
    """An unnamed file in `directory` (Linux O_TMPFILE), or None where that is unsupported."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        return os.open(directory, flag | os.O_RDWR, 0o666)  # the umask applies, as for open()
    except OSError:
        return None


def _remove_stale_temps(directory: Path, name: str) -> None:
    """Temp files of earlier writes of `name` whose process died (SIGKILL in the instant
    between naming the finished file and renaming it over the target)."""
    for tmp in directory.glob(f".{glob.escape(name)}.*.tmp"):
        pid = tmp.name[len(name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                tmp.unlink()


def _name_unnamed(fd: int, dest: str) -> bool:
    """Give the unnamed file `fd` the name `dest`: linkat(fd, "", AT_EMPTY_PATH), else through
    /proc/self/fd (each refused by some kernels, sandboxes or filesystems)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        at_fdcwd, at_empty_path = -100, 0x1000
        if libc.linkat(fd, b"", at_fdcwd, os.fsencode(dest), at_empty_path) == 0:
            return True
    except (OSError, AttributeError):
        pass
    try:
        os.link(f"/proc/self/fd/{fd}", dest, follow_symlinks=True)
        return True
    except OSError:
        return False


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open a temporary file beside `path`; on success it replaces `path`, on error it vanishes.

    Interrupted at any moment (an exception, SIGINT, even SIGKILL) the target keeps its old
    content and no temp file stays: on Linux the data is written into an unnamed file
    (O_TMPFILE) that only gets a name, `.NAME.PID.tmp`, once complete, just before it is
    renamed over the target; elsewhere a named temp file is removed on any exception.
    """
    target = Path(path)
    check_output_path(target)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise ExportError(f"output directory does not exist: {directory}")
    _remove_stale_temps(directory, target.name)
    fd = _unnamed_file(directory)
    tmp: str | None = None
    if fd is None:
        try:
            fd, tmp = tempfile.mkstemp(
                prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=directory
            )
        except OSError as e:
            raise OutputError(f"cannot write '{target}': {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
            if tmp is None:
                name = str(directory / f".{target.name}.{os.getpid()}.tmp")
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
                if not _name_unnamed(fh.fileno(), name):
                    with open(name, "wb") as copy:  # no way to name it: copy it
                        tmp = name
                        os.lseek(fh.fileno(), 0, os.SEEK_SET)
                        shutil.copyfileobj(open(fh.fileno(), "rb", closefd=False), copy)
                        copy.flush()
                        os.fsync(copy.fileno())
                tmp = name
            else:
                # mkstemp creates 0600 files; give the result the permissions open() would.
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if isinstance(e, OSError):
            # The temporary file's name means nothing to the user: name the target (exit 3).
            raise OutputError(f"cannot write '{target}': {e.strerror or e}") from None
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write `data` (text is UTF-8 encoded) to `path` atomically."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path) as fh:
        fh.write(payload)


def atomic_write_with(path: str | os.PathLike[str], writer: Callable[[BinaryIO], None]) -> None:
    """Let `writer` fill a file object, then move the result over `path` atomically."""
    with atomic_file(path) as fh:
        writer(fh)


def dot_program() -> str | None:
    """The path of the Graphviz `dot` found on PATH, or None."""
    return shutil.which("dot")


def have_dot() -> bool:
    return dot_program() is not None


def require_dot() -> None:
    if not have_dot():
        raise ExportError("the Graphviz 'dot' program was not found on PATH", hint=INSTALL_HINT)


#: Seconds Graphviz may take for one layout ($GLOWVIZ_DOT_TIMEOUT); the exports are sized so
#: every benchmark model renders in a few seconds, so this only stops a runaway layout.
DOT_TIMEOUT = 120.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the child gets SIGKILL when glowviz dies, even by SIGKILL (no orphaned `dot`)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:  # noqa: BLE001 - best effort; the parent also kills it on the way out
        pass


def run_graphviz(args: list[str], source: str, *, timeout: float | None = None) -> bytes:
    """Run a Graphviz program on DOT text and return its stdout. The child never outlives the
    call: it is killed on any exception (Ctrl-C, SIGTERM through the CLI, a timeout) and, on
    Linux, when this process dies."""
    import subprocess
    import sys
    import threading

    require_dot()
    limit = (
        timeout
        if timeout is not None
        else float(os.environ.get("GLOWVIZ_DOT_TIMEOUT", DOT_TIMEOUT))
    )
    # preexec_fn is unsafe with threads (the IDE exports from a worker): only in the main thread.
    main_thread = threading.current_thread() is threading.main_thread()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent if main_thread and sys.platform == "linux" else None,
        )
    except FileNotFoundError:
        raise ExportError("the Graphviz 'dot' program was not found", hint=INSTALL_HINT) from None
    try:
        out, err = proc.communicate(source.encode("utf-8"), timeout=limit)
    except subprocess.TimeoutExpired:
        raise ExportError(
            f"Graphviz took longer than {limit:g} s; stopped it",
            hint="draw less: --detail grouped, --subgraph NODE --radius K, or --pass PASS "
            "(or raise GLOWVIZ_DOT_TIMEOUT)",
        ) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise ExportError(f"Graphviz failed: {lines[-1] if lines else proc.returncode}")
    return out


def render_dot(source: str, fmt: str, *, engine: str = "dot") -> bytes:
    """Lay out and render DOT text with Graphviz; returns the file's bytes, deterministic
    (no version comment in SVG, no creation date in PDF unless SOURCE_DATE_EPOCH sets one)."""
    if fmt not in GRAPHVIZ_FORMATS:
        raise ExportError(
            f"Graphviz cannot render format '{fmt}' here",
            hint=f"choose one of: {', '.join(GRAPHVIZ_FORMATS)}",
        )
    args = [engine, f"-T{fmt}"] + ([f"-Gdpi={PNG_DPI}"] if fmt == "png" else [])
    try:
        out = run_graphviz(args, source)
    except ExportError as e:
        if e.message.startswith("Graphviz failed:"):
            raise ExportError(
                e.message.replace("Graphviz failed:", f"Graphviz failed to render {fmt}:", 1)
            ) from None
        raise
    if fmt == "svg":
        out = _strip_svg_comment_version(out)
    elif fmt == "pdf":
        out = pdf_dates(out)
    return out


_PDF_DATE = re.compile(rb"/(CreationDate|ModDate) *\((D:[^)]*)\)")


def source_date() -> str | None:
    """SOURCE_DATE_EPOCH (reproducible builds) as a PDF date `D:YYYYMMDDHHMMSSZ`, else None."""
    import time

    raw = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not raw.isdigit():
        return None
    return time.strftime("D:%Y%m%d%H%M%SZ", time.gmtime(int(raw)))


def pdf_dates(pdf: bytes) -> bytes:
    """A PDF without the time it was made: each /CreationDate or /ModDate is blanked (or set to
    SOURCE_DATE_EPOCH's date) with spaces of the same length, so the xref offsets stay right."""
    date = source_date()

    def fix(m: re.Match[bytes]) -> bytes:
        whole = m.group(0)
        if date is None:
            return b" " * len(whole)
        key = b"/" + m.group(1)
        new = key + b" (" + date.encode() + b")"
        if len(new) > len(whole):  # pragma: no cover - Graphviz's dates are long enough
            return b" " * len(whole)
        return new + b" " * (len(whole) - len(new))

    return _PDF_DATE.sub(fix, pdf)


def _strip_svg_comment_version(svg: bytes) -> bytes:
    """Graphviz stamps its version in an SVG comment; drop it so files diff across machines."""
    # The comment spans two lines ("<!-- Generated by graphviz version X\n -->"): remove it whole.
    return _VERSION_COMMENT.sub(b"", svg, count=1)


_VERSION_COMMENT = re.compile(rb"<!-- Generated by graphviz.*?-->\n?", re.DOTALL)


__all__ = [
    "DOT_TIMEOUT",
    "GRAPHVIZ_FORMATS",
    "INSTALL_HINT",
    "ExportError",
    "OutputError",
    "check_output_path",
    "pdf_dates",
    "run_graphviz",
    "source_date",
    "atomic_file",
    "atomic_write",
    "atomic_write_with",
    "have_dot",
    "render_dot",
    "require_dot",
]
