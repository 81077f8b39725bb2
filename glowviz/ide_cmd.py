"""Entry of the IDE for the CLI dispatcher: `glowviz [MODEL]` -> `open_ide(model, options)`."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compiler.pipeline import CompileOptions

#: How long quitting waits for worker threads to finish what they were doing (a pass, a view's
#: data) before the process leaves them behind.
QUIT_GRACE_S = 1.0


def open_ide(model_path: str | None, options: CompileOptions | None = None) -> int:
    """Open the IDE on `model_path` (None: the default sample model). Returns the exit code."""
    from glowviz.app import GlowvizApp

    # Our own loop, not asyncio.run(): asyncio.run() joins the thread workers' executor before
    # it returns, so a compile stuck in one long pass (a hostile model, an LLVM JIT of a huge
    # module) kept the process at 99% CPU after `q` until it finished, if ever. Closing the
    # loop shuts its executor down without waiting; what still runs is left behind below.
    loop = asyncio.new_event_loop()
    app = GlowvizApp(model_path, options)
    app.exit_on_hangup(loop)
    try:
        app.run(loop=loop)
    except BaseException as e:
        # Ctrl-C, or SIGHUP/SIGTERM before the app's own handlers were up (the CLI's handler
        # raised it inside the loop): a worker may be waiting on the dead loop
        # (call_from_thread) and would keep the process alive forever.
        leave_stuck_workers(_exit_code(e))
        raise
    finally:
        loop.close()
    code = app.return_code or 0  # 128 + N after signal N (SIGHUP, SIGTERM), as a shell reports
    leave_stuck_workers(code)
    return code


def _exit_code(e: BaseException) -> int:
    if isinstance(e, KeyboardInterrupt):
        return 130
    signum = e.args[0] if e.args else None
    return 128 + signum if isinstance(signum, int) else 1


def leave_stuck_workers(code: int, grace_s: float = QUIT_GRACE_S) -> None:
    """After the IDE has quit (terminal restored): give worker threads `grace_s` to finish,
    then end the process with `code` if any is still running. Python's own exit would join
    them (the executor's exit hook), and a thread cannot be interrupted."""
    deadline = time.monotonic() + grace_s
    for t in _workers():
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in _workers()):
        from compiler.backends.llvm.cache import flush_writes

        flush_writes()  # os._exit skips the exit hook that finishes the JIT cache's entries
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return open_ide(args[0] if args else None)


if __name__ == "__main__":
    raise SystemExit(main())
