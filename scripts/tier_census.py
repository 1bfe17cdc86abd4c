"""What each test tier ran: the pytest ids in its log, and the real components it started, counted from /proc.

run_lanes.py gives every tier's process tree TF_TIER=<tier>. A process is that tier's when TF_TIER is in its own
environment or its nearest ancestor's that has one: the tier's own children (pytest's PostgreSQL, Redis, vLLM, API
servers). podman gives conmon a clean environment, so a container's processes (the podman hosts' kubelets, static
pods, engine pods) reach a conmon without TF_TIER: its container name (conmon -n) is looked up among the names the
tiers' podman commands gave (--name), each podman seen as it starts (the kernel's process connector reports every
exec; without it, only the podman processes a scan finds). A component is counted once per main process seen (a
restart counts again); a container process no tier of this run named (a container started before it, or by another
run) is counted under "?".
"""

import json
import os
import pathlib
import re
import socket
import struct
import threading
import time

# name -> is (comm, cmdline) one of the component's processes? The main one is the process whose parent is not.
COMPONENTS = {
    "kubelet": lambda comm, cmd: comm == "kubelet",
    "kube-apiserver": lambda comm, cmd: comm == "kube-apiserver",
    "etcd": lambda comm, cmd: comm == "etcd",
    "kwok": lambda comm, cmd: comm == "kwok",
    "vllm": lambda comm, cmd: bool(re.search(r"vllm(\.entrypoints\.openai\.api_server| serve\b)", cmd)),
    "postgres": lambda comm, cmd: comm == "postgres",
    "redis-server": lambda comm, cmd: comm == "redis-server",
    "prometheus": lambda comm, cmd: comm == "prometheus",
    "gateway": lambda comm, cmd: "tokenfactory_gateway" in cmd,
    "status-keeper": lambda comm, cmd: "tokenfactory_status_keeper" in cmd,
    # One conmon per podman container: the podman hosts (and any other container a tier runs). `podman exec` runs a
    # conmon of its own, whose session id (-u) is not the container's (-c): not counted.
    "podman-container": lambda comm, cmd: (
        comm == "conmon" and option_value(cmd.split(), "-c") == option_value(cmd.split(), "-u")
    ),
}
# The kernel's process connector (linux/connector.h, linux/cn_proc.h): exec events of every process.
NETLINK_CONNECTOR, CN_IDX_PROC, CN_VAL_PROC, NLMSG_DONE, PROC_CN_MCAST_LISTEN, PROC_EVENT_EXEC = 11, 1, 1, 3, 1, 2
# pytest's short test summary (-rA): "PASSED tests/unit/test_x.py::test_y[param]" (SKIPPED lines carry no id).
RESULT_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (?:\.\./)*(\S+::\S+)")


def test_ids(log: pathlib.Path) -> list:
    """The ids of every test a tier's log reports, with its outcome, in order (`../` of Molecule's paths dropped)."""
    found = []
    with log.open(errors="replace") as lines:
        for line in lines:
            match = RESULT_LINE.match(line)
            if match:
                found.append(f"{match[1]} {match[2]}")
    return found


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _cmdline(pid: str) -> str:
    return " ".join(_argv(pid))


def _stat(pid: str) -> tuple:
    """(comm, ppid) of a process, or ('', '') when it is gone."""
    text = _read(f"/proc/{pid}/stat").decode(errors="replace")
    if ")" not in text:
        return "", ""
    comm = text[text.index("(") + 1 : text.rindex(")")]
    return comm, text[text.rindex(")") + 2 :].split()[1]


def option_value(argv: list, *names: str) -> str:
    """The value of the first of `names` in argv ("--name X" or "--name=X"; '' when absent)."""
    for index, arg in enumerate(argv):
        for name in names:
            if arg == name and index + 1 < len(argv):
                return argv[index + 1]
            if arg.startswith(f"{name}="):
                return arg[len(name) + 1 :]
    return ""


def _env_tier(pid: str) -> str:
    for item in _read(f"/proc/{pid}/environ").split(b"\0"):
        if item.startswith(b"TF_TIER="):
            return item[len(b"TF_TIER=") :].decode(errors="replace")
    return ""


def _tier_of(pid: str, conmon_tier) -> str:
    """TF_TIER of the process or of its nearest ancestor that has one; inside a container, conmon_tier(conmon's pid);
    '' outside any tier."""
    for _hop in range(64):  # a bounded walk: a pid reused mid-walk cannot loop it
        if pid in {"", "0"}:
            return ""
        tier = _env_tier(pid)
        if tier:
            return tier
        comm, parent = _stat(pid)
        if comm == "conmon":
            return conmon_tier(pid)
        pid = parent
    return ""


def _argv(pid: str) -> list:
    return [a.decode(errors="replace") for a in _read(f"/proc/{pid}/cmdline").split(b"\0") if a]


class Census(threading.Thread):
    """Polls /proc; counts[tier][component] = the component's main processes seen in that tier."""

    def __init__(self, interval: float = 0.5):
        super().__init__(name="census", daemon=True)
        self.interval, self.counts, self.seen, self.counted = interval, {}, {}, set()
        # container name -> the tier whose podman command gave it (--name); conmon pid -> its tier
        self.container_tiers, self.conmons = {}, {}
        self.lock = threading.Lock()

    def scan(self):
        looks = {}
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            comm, ppid = _stat(pid)
            if not comm:
                continue
            looks[pid] = comm
            # A process is looked at again when its name changes (an exec, e.g. runc's init becoming the API server).
            if self.seen.get(pid) == comm or pid in self.counted:
                continue
            cmd = _cmdline(pid)
            if comm == "podman":
                self.saw_podman(pid)
            for name, matches in COMPONENTS.items():
                if matches(comm, cmd) and not matches(_stat(ppid)[0], _cmdline(ppid)):
                    tier = _tier_of(pid, self.conmon_tier)
                    if tier:
                        with self.lock:
                            per_tier = self.counts.setdefault(tier, {})
                            per_tier[name] = per_tier.get(name, 0) + 1
                    self.counted.add(pid)
                    break
        # Only the live pids: a reused pid is a new process.
        self.seen = looks
        self.counted &= looks.keys()
        self.conmons = {pid: tier for pid, tier in self.conmons.items() if pid in looks}

    def saw_podman(self, pid: str):
        tier = _env_tier(pid)
        if tier:
            named = option_value(_argv(pid), "--name")
            if named:
                self.container_tiers[named] = tier

    def conmon_tier(self, pid: str) -> str:
        if pid not in self.conmons:
            self.conmons[pid] = self.container_tiers.get(option_value(_argv(pid), "-n", "--name"), "?")
        return self.conmons[pid]

    def watch_execs(self):
        """Every podman that starts, at once (netlink process connector, root only); returns when it cannot listen."""
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
            sock.bind((0, CN_IDX_PROC))
            listen = struct.pack("=IIIIHHI", CN_IDX_PROC, CN_VAL_PROC, 0, 0, 4, 0, PROC_CN_MCAST_LISTEN)
            sock.send(struct.pack("=IHHII", 16 + len(listen), NLMSG_DONE, 0, 0, 0) + listen)
        except OSError:
            return
        while True:  # a daemon thread: it ends with run_lanes
            data = sock.recv(65536)
            offset = 0
            while offset + 52 <= len(data):  # nlmsghdr (16) + cn_msg (20) + proc_event header (16) + exec pids (8)
                length = struct.unpack_from("=I", data, offset)[0]
                if struct.unpack_from("=I", data, offset + 36)[0] == PROC_EVENT_EXEC:
                    pid = str(struct.unpack_from("=I", data, offset + 52)[0])
                    if _stat(pid)[0] == "podman":
                        self.saw_podman(pid)
                offset += max(length, 16)

    def run(self):
        threading.Thread(target=self.watch_execs, name="census-execs", daemon=True).start()
        while True:  # a daemon thread: it ends with run_lanes
            time.sleep(self.interval)
            self.scan()

    def of(self, tier: str) -> dict:
        with self.lock:
            return dict(sorted(self.counts.get(tier, {}).items()))


def write(path: pathlib.Path, tiers: dict):
    """{tier: {"lane", "result", "seconds", "cpu_seconds", "tests": [...], "components": {...}}} as JSON."""
    path.write_text(json.dumps(tiers, indent=1, sort_keys=True) + "\n")
