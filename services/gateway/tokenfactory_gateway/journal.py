"""Local usage journal: what a request will be billed is on disk before the client has the bytes it pays for.

Files in `spool_dir`, per gateway process (the "owner"):
  <owner>.lock             flock(LOCK_EX) held for the owner's lifetime: free means the owner is gone
  <owner>.<seq>.journal    JSON lines, each one write(2) (kept by the kernel when the process is killed):
                           {"k":"o",..} a request was admitted (before it is forwarded),
                           {"k":"p",..} a stream's progress (before its bytes go to the client),
                           {"k":"d",..} the ledger row (before the response's last byte)
One segment is active. The metering writer seals it when it takes a batch (the batch is exactly the done rows
of that segment) and deletes it once the batch is in PostgreSQL; if the insert fails the segment stays, and is
replayed from disk. A new segment starts with a snapshot (opened + latest progress) of every request still in
flight, so deleting an older one never loses a request.
A dead owner's segments are replayed by whichever process locks its lock file first: done rows as written,
requests opened but never done as rows marked `gateway_terminated` carrying the last progress they reached.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pathlib
import re
import secrets
import socket

import orjson

LOG = logging.getLogger("tokenfactory_gateway.metering")
SEGMENT = re.compile(r"^(?P<owner>[A-Za-z0-9_-]+)\.(?P<seq>\d{8})\.journal$")
LEGACY = re.compile(r"^usage\.(jsonl|replay-\d+)$")  # spool files of releases before the journal


class Segment:
    __slots__ = ("done", "fd", "path")

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.done = 0  # done rows written to it

    def write(self, line: bytes) -> None:
        os.write(self.fd, line + b"\n")

    def write_all(self, lines: list[bytes]) -> None:
        if lines:
            os.write(self.fd, b"\n".join(lines) + b"\n")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Journal:
    def __init__(self, directory: str):
        self.dir = pathlib.Path(directory)
        host = re.sub(r"[^A-Za-z0-9-]", "_", socket.gethostname())[:40]
        self.owner = f"{host}-{os.getpid()}-{secrets.token_hex(3)}"
        self._lock_fd = -1
        self._seq = 0
        self._active: Segment | None = None
        self._live: dict[str, list[bytes | None]] = {}  # request id -> [opened line, latest progress line]
        self.dirty = False  # written since the last fsync

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        # Locked before it gets its name: a visible lock file is always held while its owner lives.
        claiming = self.dir / f".{self.owner}.lock.new"
        self._lock_fd = os.open(claiming, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        claiming.rename(self.dir / f"{self.owner}.lock")
        self._active = self._new_segment()

    def close(self, clean: bool) -> None:
        """clean: every done row is in PostgreSQL and nothing is in flight, so nothing needs replaying."""
        if self._active:
            self._active.close()
            if clean and not self._live:
                self._active.path.unlink(missing_ok=True)
        if self._lock_fd >= 0:
            if clean and not self._live and not self.segment_paths(self.owner):
                (self.dir / f"{self.owner}.lock").unlink(missing_ok=True)
            os.close(self._lock_fd)  # releases the lock: what is left is replayed by the next process
            self._lock_fd = -1

    # -- writing (each call is one write(2), done before the bytes it covers are sent) --------------
    def opened(self, request_id: str, line: bytes) -> None:
        self._active.write(line)
        self._live[request_id] = [line, None]
        self.dirty = True

    def progressed(self, request_id: str, line: bytes) -> None:
        self._active.write(line)
        entry = self._live.get(request_id)
        if entry is not None:
            entry[1] = line
        self.dirty = True

    def done(self, request_id: str, line: bytes) -> None:
        self._active.write(line)
        self._active.done += 1
        self._live.pop(request_id, None)
        self.dirty = True

    def seal(self) -> Segment:
        """Start a new segment (with a snapshot of the requests in flight); returns the previous one."""
        sealed, self._active = self._active, self._new_segment()
        self._active.write_all([line for entry in self._live.values() for line in entry if line is not None])
        sealed.close()
        return sealed

    def fsync_fd(self) -> int | None:
        """A duplicate of the active segment's descriptor to fsync off the event loop (caller closes it)."""
        if not self.dirty or self._active is None or self._active.fd < 0:
            return None
        self.dirty = False
        return os.dup(self._active.fd)

    def _new_segment(self) -> Segment:
        self._seq += 1
        return Segment(self.dir / f"{self.owner}.{self._seq:08d}.journal")

    # -- reading back ----------------------------------------------------------------------------
    def segment_paths(self, owner: str) -> list[pathlib.Path]:
        found = []
        for path in self.dir.glob(f"{owner}.*.journal"):
            match = SEGMENT.match(path.name)
            if match and match["owner"] == owner:
                found.append((int(match["seq"]), path))
        return [path for _seq, path in sorted(found)]

    @contextlib.contextmanager
    def claim_dead_owner(self, lock_path: pathlib.Path):
        """Yields the segments of the owner of `lock_path` if it is gone (its lock is free), else None."""
        owner = lock_path.name[: -len(".lock")]
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            yield None
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield None  # alive
                return
            if not _same_file(fd, lock_path):
                yield None  # replayed and removed by another process meanwhile
                return
            yield owner
        finally:
            os.close(fd)

    def dead_owner_locks(self) -> list[pathlib.Path]:
        return sorted(p for p in self.dir.glob("*.lock") if p.name != f"{self.owner}.lock")

    def legacy_files(self) -> list[pathlib.Path]:
        return sorted(p for p in self.dir.iterdir() if LEGACY.match(p.name))


def _same_file(fd: int, path: pathlib.Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def read_lines(path: pathlib.Path) -> list[dict]:
    """The journal objects of a file; a torn last line (host crash mid-write) is skipped and logged."""
    objects = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            LOG.error("skipping unreadable line %d of %s", number, path)
            continue
        if isinstance(obj, dict):
            objects.append(obj)
    return objects
