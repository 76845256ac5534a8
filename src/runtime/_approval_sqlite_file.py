"""Opening a SQLite store's file: what it is, decided before it is written (ADR 0017, 0032).

Used by the approval store and the counter store (`StoreKind` says which:
its application id, format name, schema and error type).

`runtime._approval_sqlite` holds the store's behaviour on an open
connection; this module opens one, and turns SQLite's errors into
its kind's error (`ApprovalStoreError`, `CounterStoreError`) with a problem a user
can act on. What it promises:

**Only a ghost store is used.** At open, a file is sorted into one of
these kinds before anything is written to it:

* missing: created with mode 0600 (``create=True``), else refused;
* empty (no schema objects, no application id or user version): made a
  store (``create=True``), else refused;
* a ghost approval store of this schema version: used;
* a ghost approval store of a newer schema version: refused;
* any other SQLite database (another application id, no schema table):
  refused, and left exactly as it was;
* not SQLite at all, or damaged: refused.

Every refusal, and every failure later (a damaged row, a full disk), is an
that error, with the path and a problem a user can act on.

Several processes may open (and create) one store at the same moment: the
header and the schema are read in one snapshot, the schema is made under the
write lock and re-checked there, and the switch to WAL is retried for the
busy timeout (SQLite answers it "busy" without its busy handler).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from runtime._approval_rows import APPLICATION_ID, FORMAT, SCHEMA, SCHEMA_VERSION
from runtime._errors import ApprovalStoreError, GhostError

__all__ = ["APPROVAL_STORE", "SQLITE_BUSY", "StoreFile", "StoreKind", "primary_code"]

# SQLite primary result codes (https://sqlite.org/rescode.html).
_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26
SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_SQLITE_READONLY: Final = 8
_SQLITE_FULL: Final = 13
_SQLITE_CANTOPEN: Final = 14
# Between retries of the switch to WAL: from a millisecond, doubling, to at most 50 ms.
_FIRST_PAUSE_S: Final = 0.001
_LONGEST_PAUSE_S: Final = 0.05


@dataclass(frozen=True, slots=True)
class StoreKind:
    """What makes a file one kind of ghost store.

    Attributes:
        noun: how messages name it (``"approval store"``).
        application_id: the SQLite header's application id.
        format: the ``ghost_schema`` table's format name.
        version: the schema version this ghost writes.
        schema: the statements that make an empty file a store.
        tables: the tables a store of this kind must hold.
        error: the error for a store that cannot be used (path, problem).
    """

    noun: str
    application_id: int
    format: str
    version: int
    schema: tuple[str, ...]
    tables: frozenset[str]
    error: Callable[[str, str], GhostError]

    @property
    def a_noun(self) -> str:
        """The noun with its article (``"an approval store"``)."""
        return f"{'an' if self.noun[0] in 'aeiou' else 'a'} {self.noun}"


APPROVAL_STORE: Final = StoreKind(
    noun="approval store",
    application_id=APPLICATION_ID,
    format=FORMAT,
    version=SCHEMA_VERSION,
    schema=tuple(SCHEMA),
    tables=frozenset({"approvals", "resolutions"}),
    error=ApprovalStoreError,
)


class StoreFile:
    """The file of one SQLite store: opens it, and names its failures.

    Args:
        path: the file, as given (decoded).
        busy_timeout_s: how long a statement retries while another connection
            holds the lock.
        kind: which kind of store (default: an approval store).
    """

    __slots__ = ("busy_timeout_s", "kind", "path")

    def __init__(self, path: str, busy_timeout_s: float, kind: StoreKind = APPROVAL_STORE) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.kind = kind

    def open(self, *, create: bool) -> tuple[sqlite3.Connection, bool]:
        """Return a connection to the store, made a store if need be, and whether it was created.

        Raises:
            GhostError: (the kind's error) the file is not a store this ghost may use, or
                cannot be opened or created.
        """
        created = create and self._make_file()
        if not created:
            self._check_exists()
        try:
            conn = sqlite3.connect(
                "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=rw",
                uri=True,
                timeout=self.busy_timeout_s,
                isolation_level=None,  # autocommit: every statement commits, BEGIN when needed
                check_same_thread=False,  # the store's lock serialises the threads
            )
        except sqlite3.Error as exc:
            raise self.failure(exc) from None
        try:
            self._prepare(conn, create=create)
        except BaseException:
            conn.close()
            raise
        return conn, created

    def damaged(self, problem: str) -> GhostError:
        """The error for a store that holds what ghost never writes."""
        return self.kind.error(self.path, f"is damaged: {problem}")

    def failure(self, exc: sqlite3.Error) -> GhostError:
        """The error, with a problem a user can act on, for what SQLite raised."""
        primary = primary_code(exc)
        if primary in (SQLITE_BUSY, _SQLITE_LOCKED):
            problem = (
                f"stayed locked by another connection for more than {self.busy_timeout_s:g} s;"
                " try again"
            )
        elif primary in (_SQLITE_NOTADB, _SQLITE_CORRUPT):
            problem = "is not a SQLite database, or is damaged"
        elif primary == _SQLITE_CANTOPEN:
            problem = "cannot be opened (check that it and its directory are readable and writable)"
        elif primary == _SQLITE_READONLY:
            problem = "is read-only (its directory must be writable too, for the WAL files)"
        elif primary == _SQLITE_FULL:
            problem = "cannot be written: the disk is full"
        else:
            # SQLite's own messages name tables and constraints, never a bound value.
            problem = f"SQLite failed ({type(exc).__name__}: {exc})"
        return self.kind.error(self.path, problem)

    # --- opening ----------------------------------------------------------------------------

    def _make_file(self) -> bool:
        # O_EXCL: never follow a link planted at the path, never widen an existing file's mode.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileExistsError:
            return False
        except OSError as exc:
            raise self.kind.error(self.path, f"cannot be created: {_os_cause(exc)}") from None
        except ValueError:  # a NUL in the path
            raise self.kind.error(self.path, "is not a valid file name") from None
        os.close(fd)
        return True

    def _check_exists(self) -> None:
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            raise self.kind.error(self.path, "does not exist") from None
        except OSError as exc:
            raise self.kind.error(self.path, f"cannot be opened: {_os_cause(exc)}") from None
        except ValueError:  # a NUL in the path
            raise self.kind.error(self.path, "is not a valid file name") from None
        if stat.S_ISDIR(mode):
            raise self.kind.error(self.path, f"is a directory, not {self.kind.a_noun}")
        if not stat.S_ISREG(mode):
            # A FIFO would block the open; a device would take SQLite's side files beside it.
            raise self.kind.error(self.path, f"is not a regular file, not {self.kind.a_noun}")

    def _prepare(self, conn: sqlite3.Connection, *, create: bool) -> None:
        try:
            if self._inspect_once(conn) == "empty":
                if not create:
                    raise self.kind.error(self.path, f"is empty, not a ghost {self.kind.noun}")
                self._initialise(conn)
            mode = self._use_wal(conn)
            if mode.lower() != "wal":
                raise self.kind.error(
                    self.path,
                    f"cannot use write-ahead logging (its journal mode stays {mode!r});"
                    " keep the store on a local file system",
                )
            conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise self.failure(exc) from None

    def _use_wal(self, conn: sqlite3.Connection) -> str:
        """Switch a new store to WAL (a no-op once it is); return the journal mode."""
        # The switch takes the file's exclusive lock, and SQLite answers "busy" at once,
        # without its busy handler, when another connection holds a lock the switch
        # would deadlock on: several processes opening a just-made store at the same
        # moment. So the wait busy_timeout_s promises is ours to keep here.
        deadline = time.monotonic() + self.busy_timeout_s
        pause = _FIRST_PAUSE_S
        while True:
            try:
                (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            except sqlite3.OperationalError as exc:
                left = deadline - time.monotonic()
                if primary_code(exc) != SQLITE_BUSY or left <= 0:
                    raise
                time.sleep(min(pause, left))
                pause = min(pause * 2, _LONGEST_PAUSE_S)
            else:
                return str(mode)

    def _inspect_once(self, conn: sqlite3.Connection) -> str:
        # One read transaction, so every pragma and query sees the same snapshot. In
        # autocommit each statement would read its own: another process's creation
        # committed between reading the application id (still 0) and the schema objects
        # (now there) made a store being born look like another application's database.
        conn.execute("BEGIN DEFERRED")
        try:
            return self._inspect(conn)
        finally:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # a read: nothing to lose
                    conn.execute("ROLLBACK")

    def _inspect(self, conn: sqlite3.Connection) -> str:
        """Return ``"empty"`` or ``"store"``; raise for every other kind of file."""
        (application_id,) = conn.execute("PRAGMA application_id").fetchone()
        (user_version,) = conn.execute("PRAGMA user_version").fetchone()
        objects = conn.execute("SELECT type, name FROM sqlite_master").fetchall()
        if application_id == 0 and user_version == 0 and not objects:
            return "empty"
        tables = {name for kind, name in objects if kind == "table"}
        if application_id != self.kind.application_id or "ghost_schema" not in tables:
            raise self.kind.error(
                self.path,
                f"is another application's SQLite database, not a ghost {self.kind.noun}",
            )
        rows = conn.execute("SELECT format, version FROM ghost_schema").fetchall()
        if len(rows) != 1:
            raise self.damaged(f"its schema table does not name a ghost {self.kind.noun}")
        ((name, version),) = rows
        if name != self.kind.format or type(version) is not int:
            raise self.damaged(f"its schema table does not name a ghost {self.kind.noun}")
        if version > self.kind.version:
            raise self.kind.error(
                self.path,
                f"was written by a newer ghost (schema version {version}; this one reads"
                f" {self.kind.version}): upgrade ghost-sdk to use it",
            )
        if version != self.kind.version:
            raise self.damaged(f"its schema version {version} was never written by ghost")
        if not self.kind.tables <= tables:
            raise self.damaged("its tables are missing")
        return "store"

    def _initialise(self, conn: sqlite3.Connection) -> None:
        # IMMEDIATE: of several processes creating one store, one writes the schema;
        # the others wait, then find it made.
        # On any failure the caller closes the connection, which rolls the transaction back.
        conn.execute("BEGIN IMMEDIATE")
        if self._inspect(conn) == "empty":
            conn.execute(f"PRAGMA application_id = {int(self.kind.application_id)}")
            for statement in self.kind.schema:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO ghost_schema (format, version) VALUES (?, ?)",
                (self.kind.format, self.kind.version),
            )
        conn.execute("COMMIT")


def primary_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of an error (its low byte), if it has one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def _os_cause(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
