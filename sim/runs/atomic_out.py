"""Write an output folder whole or not at all (`--out DIR` of `python -m sim run`, live replay).

A run writes five files. Written in place, a run killed half-way (Ctrl-C, a time limit, a full
disk) leaves a folder whose CSVs are the new run's and whose trace is the old one's, and nothing
says so; two runs writing one folder at once interleave their files the same way. Here:

1. A lock, `.DIR.lock` beside the folder (flock, so the kernel drops it when the process
   dies, however it dies). A second writer of the same folder while the first holds it fails at
   once with one line (`OutputBusy`): it does not wait, and it does not mix.
2. The files go into a fresh hidden folder beside it, `.DIR.partial-PID`, on the same filesystem.
3. One rename puts them in place. A new folder: rename(2), atomic. A folder an earlier run
   wrote: Linux's renameat2(RENAME_EXCHANGE) swaps the two folders in one step, then the old
   one is deleted (elsewhere: rename the old one aside first, a moment without the folder but
   never a mix). A reader sees the old run whole or the new run whole.

Leftovers of a killed writer (`.DIR.partial-*`) are deleted by the next writer, under the lock.
A folder holding other files than a run's is not swapped (that would move them): refused, one
line, before the run's files are written.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path


class OutputBusy(OSError):
    """Another process is writing the same output folder right now."""


AT_FDCWD = -100
RENAME_EXCHANGE = 2  # linux/fs.h: swap the two names atomically


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):  # glibc < 2.28
        return False
    if call(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):  # a filesystem without it: the fallback
        return False
    raise OSError(err, f"cannot put the new files in place: {os.strerror(err)}", str(b))


def write_folder(out_dir: str | Path, names: Iterable[str], write: Callable[[Path], None]) -> Path:
    """Call `write(folder)` to fill a fresh folder with the files `names`, then put it at
    `out_dir` in one step (see the module's docstring). Returns `out_dir` as a Path."""
    out = Path(os.path.abspath(out_dir))  # ("out/.." named by its real name)
    names = set(names)
    if not out.name:
        raise IsADirectoryError(f"--out {out_dir}: give a folder of its own, not the root")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out_dir} is a file; give a folder")
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(parent / f".{out.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputBusy(
                f"another run is writing {out_dir} right now; wait for it to end "
                "or give another --out folder"
            ) from None
        if out.is_dir():
            other = sorted(p.name for p in out.iterdir() if p.name not in names)
            if other:
                raise FileExistsError(
                    f"--out {out_dir} holds other files than a run's "
                    f"({', '.join(other[:3])}); give a new or empty "
                    "folder"
                )
        for stale in parent.glob(f".{out.name}.partial-*"):  # a killed writer's (we hold the
            shutil.rmtree(stale, ignore_errors=True)  # lock: no live writer owns them)
        partial = parent / f".{out.name}.partial-{os.getpid()}"
        partial.mkdir()
        try:
            write(partial)
            _put_in_place(partial, out)
        finally:
            shutil.rmtree(partial, ignore_errors=True)  # the old run's files, or ours on error
    finally:
        os.close(lock)  # (releases the flock)
    return Path(out_dir)


def _put_in_place(partial: Path, out: Path) -> None:
    """`partial` becomes `out`; what was at `out` ends up at `partial` (deleted by the caller)."""
    if not out.exists():
        os.rename(partial, out)
        return
    if _exchange(partial, out):
        return
    aside = partial.with_name(partial.name + "-old")
    os.rename(out, aside)
    os.rename(partial, out)
    with contextlib.suppress(OSError):
        os.rename(aside, partial)  # so that the caller deletes it
