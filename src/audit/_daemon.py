"""`AuditDaemon`: the process that owns the audit files and the signing key (ADR 0034).

It listens on a Unix domain socket; each connection is one gate and one run,
served on a thread of its own (`audit._daemon_run.DaemonRun`) and written to
its own MCAP file in the output directory, named for its ``run_id``. Runs
share nothing but the process: a connection that breaks the protocol is
cut and its run sealed, and the others go on.

Access is the file system's: the socket is created mode 0600 (0660 with a
group, for agents running under another user in that group), the output
directory 0700: only the daemon's user (and root) can open the runs. Run
under an OS user of its own, the daemon keeps the key and the files out of
the agent's reach; the kernel's ``SO_PEERCRED`` names each
peer, and the ``/run`` record keeps it.

`stop` (SIGTERM, SIGINT) stops accepting, lets each connection finish the
request in hand, and seals every open run (``ended: "daemon_stopped"``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import stat
import threading
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit._chain import Durability, ProcessIdentity
from audit._daemon_run import DaemonRun, RunSettings, make_recording_sink, peer_identity
from audit._mcap_sink import McapAuditSink
from audit._wire import MAX_FRAME_BYTES
from runtime import AuditError
from runtime._logging import get_event_log

__all__ = ["DAEMON_DURABILITIES", "AuditDaemon"]

_log = get_event_log("ghost.audit.daemon")

DAEMON_DURABILITIES: Final[tuple[Durability, ...]] = ("process", "fsync")
"""The modes the daemon offers: an acknowledgement always means the record is written."""

_BACKLOG: Final = 64


class AuditDaemon:
    """Accept gates on a Unix socket and write each one's run to its own MCAP file.

    Args:
        socket_path: where to listen. A stale socket (no daemon answers on
            it) is replaced; anything else at that path is refused.
        out_dir: where the runs are written (made mode 0700).
        signing_key: signs every run's checkpoint notes; None: unsigned.
        key_name: the key name in the notes (default from the key id).
        durability: ``"process"`` (acknowledged once handed to the OS) or
            ``"fsync"`` (once on disk).
        group: a group id whose members may connect (socket 0660); None: the
            daemon's user only. It gives no access to the runs.
        max_frame_bytes: the largest frame accepted; a larger one cuts the
            connection before its body is read.
        checkpoint_every_records: as `McapAuditSink`.
        checkpoint_every_ns: as `McapAuditSink`.

    Raises:
        ValueError: an unknown ``durability`` or a ``max_frame_bytes`` below 1 KiB.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        out_dir: str | os.PathLike[str],
        *,
        signing_key: Ed25519PrivateKey | None = None,
        key_name: str | None = None,
        durability: Durability = "process",
        group: int | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        checkpoint_every_records: int = 100,
        checkpoint_every_ns: int = 1_000_000_000,
    ) -> None:
        if durability not in DAEMON_DURABILITIES:
            raise ValueError(f"durability must be one of {DAEMON_DURABILITIES}, got {durability!r}")
        if max_frame_bytes < 1024:
            raise ValueError(f"max_frame_bytes must be at least 1024, got {max_frame_bytes}")
        self._socket_path = Path(socket_path)
        self._out_dir = Path(out_dir)
        self._group = group

        def make_sink(path: Path) -> McapAuditSink:
            return make_recording_sink(
                path,
                durability=durability,
                signing_key=signing_key,
                key_name=key_name,
                checkpoint_every_records=checkpoint_every_records,
                checkpoint_every_ns=checkpoint_every_ns,
            )

        self._settings = RunSettings(
            out_dir=self._out_dir,
            make_sink=make_sink,
            max_frame_bytes=max_frame_bytes,
            writer=ProcessIdentity(pid=os.getpid(), uid=os.geteuid(), gid=os.getegid()),
        )
        self._lock = threading.Lock()
        self._runs: dict[DaemonRun, threading.Thread] = {}
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    @property
    def socket_path(self) -> Path:
        """The socket the daemon listens on."""
        return self._socket_path

    @property
    def out_dir(self) -> Path:
        """Where the runs are written."""
        return self._out_dir

    def start(self) -> None:
        """Create the output directory and the socket, and begin listening.

        Raises:
            AuditError: the directory or socket cannot be created, or another
                daemon already answers on the socket.
        """
        try:
            self._out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self._out_dir, 0o700)
        except OSError as exc:
            raise AuditError(f"cannot prepare the output directory {self._out_dir}: {exc}") from exc
        self._remove_stale_socket()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # The socket file is born 0600: no moment when another user could connect.
        umask = os.umask(0o177)
        try:
            listener.bind(os.fspath(self._socket_path))
        except OSError as exc:
            listener.close()
            raise AuditError(
                f"cannot listen on {self._socket_path}: {exc.strerror or exc}"
            ) from exc
        finally:
            os.umask(umask)
        try:
            if self._group is not None:
                os.chown(self._socket_path, -1, self._group)
                os.chmod(self._socket_path, 0o660)
            listener.listen(_BACKLOG)
        except OSError as exc:
            listener.close()
            raise AuditError(
                f"cannot listen on {self._socket_path}: {exc.strerror or exc}"
            ) from exc
        self._listener = listener
        _log.info(
            "ghost.audit_daemon_started",
            socket=str(self._socket_path),
            out_dir=str(self._out_dir),
            pid=os.getpid(),
        )

    def serve(self) -> None:
        """Accept connections until `stop`; then seal every open run and return.

        Raises:
            AuditError: `start` was not called.
        """
        listener = self._listener
        if listener is None:
            raise AuditError("AuditDaemon.serve before start")
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is listener and not self._stopping.is_set():
                        self._accept(listener)
        self._shut_down()

    def stop(self) -> None:
        """Ask `serve` to stop; safe from a signal handler and from any thread."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        try:
            peer = peer_identity(conn)
        except OSError as exc:
            _log.warning("ghost.audit_daemon_peer_unknown", error=type(exc).__name__)
            conn.close()
            return
        conn.setblocking(True)  # noqa: FBT003 -- the socket API's own flag
        run = DaemonRun(conn, peer, self._settings, self._stopping.is_set)
        thread = threading.Thread(
            target=self._serve_run, args=(run,), name=f"ghost-audit-{peer.pid}", daemon=True
        )
        with self._lock:
            self._runs[run] = thread
        _log.info("ghost.audit_daemon_connected", pid=peer.pid, uid=peer.uid, gid=peer.gid)
        thread.start()

    def _serve_run(self, run: DaemonRun) -> None:
        try:
            run.serve()
        finally:
            with self._lock:
                self._runs.pop(run, None)

    def _shut_down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with contextlib.suppress(OSError):
            self._socket_path.unlink()
        with self._lock:
            runs = dict(self._runs)
        for run in runs:
            run.stop_reading()
        for thread in runs.values():
            thread.join()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        _log.info("ghost.audit_daemon_stopped", sealed=len(runs))

    def _remove_stale_socket(self) -> None:
        try:
            mode = os.lstat(self._socket_path).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise AuditError(f"cannot use {self._socket_path}: {exc.strerror or exc}") from exc
        if not stat.S_ISSOCK(mode):
            raise AuditError(f"refusing to replace {self._socket_path}: it is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(os.fspath(self._socket_path))
        except OSError:
            # Nobody answers: a daemon that died left it behind.
            self._socket_path.unlink()
            return
        finally:
            probe.close()
        raise AuditError(f"another audit daemon is listening on {self._socket_path}")
