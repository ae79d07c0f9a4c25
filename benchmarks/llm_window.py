"""The llm policy against a real llama.cpp server (llama-cpp-python) at each context window, side by side.

For each window: start ``python -m llama_cpp.server --n_ctx W`` with the given model, run
``kiln optimize TASK --policy llm`` against it without ``--context-window`` (the server reports its
window nowhere: the run must learn it), and keep, per request, the usage the server returned (its
own token count) with the reply's finish reason and whether tools were sent, the exit code, the
``kiln:`` lines of stderr and run.json's tokens, and the server's log lines for each request
(``prompt eval``: the tokens it evaluated, which with its prefix cache is the part of the prompt
not shared with the request before). The figures go to ``--out`` (JSON, with provenance).

    python benchmarks/llm_window.py --server-python /work/llm/venv/bin/python \
        --gguf /work/llm/venv/.../SmolLM2-135M-Instruct.Q4_1.gguf --windows 4096,8192
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance

_PROMPT = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
_TOTAL = re.compile(r"total time =\s*[\d.]+ ms /\s*(\d+) tokens")


def serve(python: str, gguf: str, window: int, port: int, log: Path, threads: int) -> subprocess.Popen:
    command = [python, "-m", "llama_cpp.server", "--model", gguf, "--n_ctx", str(window), "--port", str(port)]
    command += ["--model_alias", "local", "--n_threads", str(threads)]
    server = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://localhost:{port}/v1/models", timeout=1).read()
            return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit(f"the server did not start: see {log}")


def server_requests(log: Path) -> list[dict[str, int]]:
    """Each served request's evaluated prompt tokens and total tokens, as the server's log says, in order."""
    prompts, totals = [], []
    for line in log.read_text(errors="replace").splitlines():
        if m := _PROMPT.search(line):
            prompts.append(int(m.group(1)))
        elif m := _TOTAL.search(line):
            totals.append(int(m.group(1)))
    return [{"prompt_evaluated": p, "total_evaluated": t} for p, t in zip(prompts, totals, strict=False)]


def exchanges(record: Path) -> list[dict]:
    rows = []
    for path in sorted(record.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            data = json.loads(line)
            if "request" not in data:
                continue  # the stream's header
            response = data.get("response") or {}
            rows.append(
                {
                    "prompt_tokens": response.get("prompt_tokens"),
                    "completion_tokens": response.get("completion_tokens"),
                    "finish_reason": response.get("finish_reason"),
                    "window_learned": response.get("window"),
                    "tools_sent": bool(data["request"].get("tools")),
                    "error": data.get("error"),
                }
            )
    return rows


def one_window(args: argparse.Namespace, window: int, work: Path) -> dict:
    log, record, out = work / f"server-{window}.log", work / f"record-{window}", work / f"out-{window}"
    server = serve(args.server_python, args.gguf, window, args.port, log, args.threads)
    started = time.monotonic()
    try:
        command = [sys.executable, "-m", "kernelkiln", "optimize", args.task, "--policy", "llm", "--model", "local"]
        command += ["--base-url", f"http://localhost:{args.port}/v1", "--budget", str(args.budget), "--threads", "1"]
        command += ["--record", str(record), "--out", str(out), "--store", f"sqlite:///{work / f'kiln-{window}.db'}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    finally:
        server.terminate()
        server.wait(timeout=30)
    run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    served = server_requests(log)
    recorded = exchanges(record)
    rows = [r for r in recorded if r["prompt_tokens"] is not None]
    return {
        "window": window,
        "exit_code": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "stderr": [line for line in done.stderr.splitlines() if line.startswith("kiln")],
        "run_json_tasks": {
            name: {
                k: t.get(k)
                for k in (
                    "status",
                    "reason",
                    "attempts",
                    "prompt_tokens",
                    "completion_tokens",
                    "prompt_tiers",
                    "adoptions_owed",
                    "adoptions_not_stated",
                )
            }
            for name, t in run.get("tasks", {}).items()
        },
        "requests": recorded,
        "server_log": served,
        "run_json_matches_usage": {
            name: (t.get("prompt_tokens"), t.get("completion_tokens"))
            == (sum(r["prompt_tokens"] for r in rows), sum(r["completion_tokens"] for r in rows))
            for name, t in run.get("tasks", {}).items()
        },
        "least_reply_room": min((window - r["prompt_tokens"] for r in rows), default=None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-python", required=True, help="a python with llama-cpp-python[server]")
    parser.add_argument("--gguf", required=True, help="the model file the server loads")
    parser.add_argument("--windows", default="4096,8192", help="context windows, comma-separated")
    parser.add_argument("--task", default="row_softmax")
    parser.add_argument("--budget", type=int, default=3)
    parser.add_argument("--port", type=int, default=8078)
    parser.add_argument("--threads", type=int, default=2, help="the server's threads")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/figures/llm-window.json"))
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="kiln-llm-window-") as tmp:
        for window in (int(w) for w in args.windows.split(",")):
            print(f"window {window}…", file=sys.stderr, flush=True)
            results.append(one_window(args, window, Path(tmp)))
            print(json.dumps(results[-1], indent=1), file=sys.stderr, flush=True)
    args.out.write_text(json.dumps({"provenance": provenance(), "runs": results}, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
