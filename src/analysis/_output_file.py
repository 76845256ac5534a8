"""`replace_file`: a file appears under its name only once it is written in full.

``ghost trace-decisions --output PATH`` writes a report that can be a
gigabyte long, piece by piece as it is read back from disk. Written in place,
a failure halfway (a full disk, an interrupt, a crash) would leave half a
report under the name, which a later reader could take for the whole. So the
report goes to a temporary file beside it (same directory, so same file
system), and is renamed over the name only when complete: a reader sees the
old file or the new one, never a part.

* A symbolic link is followed: the file it points to is replaced, as writing
  through the link replaced its contents before.
* An existing file keeps its permission bits; a new one gets those of a
  plain ``open(path, "wb")`` (0666 less the umask), not ``mkstemp``'s 0600.
* A name that is not a regular file (a device such as ``/dev/null``, a FIFO,
  a directory) cannot be replaced by a rename: it is opened and written as
  before, and a directory fails to open as before.
* An existing file in a directory where no file can be made (read-only for
  this user) is written in place, as before: the name can be written, only
  not replaced. That write is not atomic; it is the one case that is not.
* The temporary file is synced before the rename, so a crash just after it
  cannot leave an empty or partial file under the name.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from typing import IO, Final

__all__ = ["replace_file"]

_BUFFER: Final = 1 << 20


def replace_file(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write`` with a stream, then put what it wrote under ``path`` in one rename.

    Args:
        path: the file to create or replace.
        write: writes the whole content to the binary stream it is given.

    Raises:
        OSError: the temporary file cannot be made or written, or not renamed
            (nothing is then left under ``path`` or beside it); or, for a
            name that is not a regular file, it cannot be opened or written.
        BaseException: whatever ``write`` raises (nothing is left then either).
    """
    target = os.path.realpath(path)
    try:
        found: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        with open(path, "wb") as stream:  # a device or FIFO, as before
            write(stream)
        return
    mode = stat.S_IMODE(found.st_mode) if found is not None else 0o666 & ~_umask()
    directory, name = os.path.split(target)
    try:
        descriptor, temporary = tempfile.mkstemp(
            dir=directory, prefix=f".{name}.", suffix=".partial"
        )
    except PermissionError:
        if found is None or not os.access(target, os.W_OK):
            raise
        with open(path, "wb") as stream:  # the directory is closed to us; the file is not
            write(stream)
        return
    try:
        with os.fdopen(descriptor, "wb", buffering=_BUFFER) as stream:
            os.fchmod(stream.fileno(), mode)
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _umask() -> int:
    # The only way to read the umask is to set it; set it straight back.
    current = os.umask(0o022)
    os.umask(current)
    return current
