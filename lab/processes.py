"""Start, inspect and stop lab components, each in its own process group."""

import contextlib
import ctypes
import os
import pathlib
import random
import signal
import socket
import subprocess
import time

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def free_port() -> int:
    """A free loopback port below the ephemeral range, so no outgoing connection grabs it before we bind."""
    ephemeral_low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _attempt in range(200):
        port = random.randrange(10000, max(ephemeral_low, 10001))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in 10000-{ephemeral_low}")


def _new_group_dying_with_parent():
    os.setsid()
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(argv: list[str], log_path: pathlib.Path, *, tie_to_parent: bool) -> int:
    """Start argv in a new session (own process group) with output to log_path; return its pid.

    tie_to_parent: the kernel kills it when this process dies (even by SIGKILL), so tests never leak it.
    """
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=not tie_to_parent,
            preexec_fn=_new_group_dying_with_parent if tie_to_parent else None,
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


# Popen objects of children started here, so they are reaped (no zombies) once stopped.
_CHILDREN: dict[int, subprocess.Popen] = {}


def alive(pid: int, exe: str) -> bool:
    """True while pid runs: a child started here by its Popen; any other pid when it runs exe and is no zombie.

    A child started here is judged by poll() alone: its pid cannot be reused before it is reaped, and its
    /proc cmdline is empty for a moment after Popen returns (the close-on-exec pipe Popen waits on closes
    before execve has set up the new argv), which a loaded machine makes long enough to see.
    """
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return cmdline.decode() == exe and state != "Z"


def exit_status(pid: int) -> str:
    """How a child started here ended: 'exit code N', 'killed by SIGNAME', or 'running'/'unknown'."""
    child = _CHILDREN.get(pid)
    if child is None:
        return "unknown (not started by this process)"
    code = child.poll()
    if code is None:
        return "running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in a process group, from /proc."""
    members = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def process_tree(pid: int) -> list[int]:
    """A process and its live (non-zombie) descendants, parents first, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        tree.append(current)
        todo += children.get(current, [])
    return tree


def signal_tree(pid: int, sig: int) -> None:
    """Send `sig` to a process and its descendants (e.g. SIGSTOP/SIGCONT a server and its workers)."""
    for member in process_tree(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, sig)


def log_tail(path: pathlib.Path, lines: int = 60) -> str:
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def mem_available_mib() -> int:
    for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return -1


def rss_bytes(pid: int) -> int:
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def stop_all(procs: dict[int, str], timeout: float = 10.0) -> None:
    """SIGKILL every live process group and wait until they are gone.

    Lab clusters are throwaway, so there is no graceful phase: kube-apiserver alone takes more than
    30 s to finish on SIGTERM once etcd is gone, and nothing of their state is kept.
    """
    live = {pid: exe for pid, exe in procs.items() if alive(pid, exe)}
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        live = {pid: exe for pid, exe in live.items() if alive(pid, exe)}
        time.sleep(0.02)
    for pid in procs:
        child = _CHILDREN.pop(pid, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
