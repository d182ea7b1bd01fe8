"""Deep research under kills and faults: nothing lost, nothing bought twice, every wait bounded.

    .venv/bin/python -m bench.deep_reliability [--only kill|never|faults|races] [--never-defaults]

Real `gsd-research` processes against the fake Perplexity (run in this process; its request log counts
the paid requests it accepted). Prints one JSON document with the figures.

kill:    a blocking `deep` whose answer takes 6 s is killed 1 s after its request reached the provider
         (SIGTERM as the Bash tool's timeout sends it, then kill -9); the report is then taken from
         `jobs wait` or from the same `deep` call. Counted: paid requests, submits sent, ledger lines.
never:   a provider that never answers the submit, PERPLEXITY_POLLING_TIMEOUT_MS=1500: seconds until the
         job is `failed`, against the documented schedule max_attempts x T + the backoffs between
         attempts, and the rounds of the agent's `jobs wait --timeout 100` loop until it ends.
         `--never-defaults` runs it with the shipped retry settings (3 attempts, 30 s then 60 s backoff:
         94.5 s); by default with retry_backoff 2 s (3 x 1.5 + 2 + 4 = 10.5 s).
faults:  429, 500, 503, timeout, malformed, HTML 401 on the submit (before the provider took anything)
         and on every poll (after it accepted the request), in blocking and async mode; then submits the
         provider accepted (and billed) whose answer was lost (a 500 or no answer), Sonar async (an
         idempotency key exists) and the Agent API (none exists), in both modes.
races:   4 identical `deep` calls started at once (blocking, then --async): jobs created, paid requests;
         odd provider answers after acceptance: one 404 on a poll (Sonar, Agent API), 404 on every poll,
         Retry-After 100000 on every poll, a poll answer about another request; a blocking call whose
         `--timeout 2` is shorter than the research (8 s), then `jobs wait`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench.jobs_crash import BIN, env_for, live_worker_pid

HTTP = {"connect_timeout": 2, "read_timeout": 1.0, "max_retries": 2, "backoff_base": 0.05, "backoff_max": 0.2,
        "deadline": 20}
SUBMIT = "/perplexity/async/chat/completions"
FAULTS = [("429", "status", {"status": 429}), ("500", "status", {"status": 500}),
          ("503", "status", {"status": 503}), ("timeout", "timeout", {"delay": 3.0}),
          ("malformed", "malformed", {}), ("html-401", "html", {})]


def home_with(root: Path, name: str, **deep) -> Path:
    home = root / name
    home.mkdir(parents=True)
    cfg = {"http": HTTP, "deep": {"poll_interval": 0.2, "idle_exit": 2, **deep}}
    (home / "config.yaml").write_text(yaml.safe_dump(cfg))
    return home


def call(env: dict, *args: str, timeout: float = 300) -> tuple[int, dict, float]:
    started = time.monotonic()
    proc = subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=timeout)
    elapsed = time.monotonic() - started
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), round(elapsed, 2)


def ledger_lines(home: Path) -> int:
    path = home / "usage" / "ledger.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def reset(server) -> None:
    server.clear_faults()
    server.reset_log()
    server.state.clear()


def stop_worker(home: Path) -> None:
    pid = live_worker_pid(home, wait=0.2)
    if pid:
        os.kill(pid, signal.SIGKILL)


# -- kill ------------------------------------------------------------------------------------------

def kill_run(server, root: Path, sig: int, recover: str) -> dict:
    from tests.fakes.perplexity import paid

    reset(server)
    server.state["pplx_async_delay"] = 6.0  # a slow answer
    home = home_with(root, f"kill-{sig}-{recover}", autostart=recover == "jobs wait")
    env = env_for(home, server.url)
    query = f"killed blocking call ({signal.Signals(sig).name}, {recover})"
    started = time.monotonic()
    proc = subprocess.Popen([str(BIN), "deep", query], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    while not paid(server.state) and time.monotonic() - started < 30:
        time.sleep(0.01)
    reached = time.monotonic() - started
    time.sleep(1.0)
    killed_at = time.monotonic()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    exit_s = time.monotonic() - killed_at
    _, listed, _ = call(env, "jobs", "list")
    rows = [j for j in listed["jobs"] if j["query"] == query]
    job_id = rows[0]["conversation_id"] if rows else None
    if recover == "jobs wait":
        code, doc, _ = call(env, "jobs", "wait", str(job_id), "--timeout", "60")
    else:
        code, doc, _ = call(env, "deep", query)
    report = {
        "signal": signal.Signals(sig).name, "recovered_by": recover if recover == "jobs wait" else "the same deep call",
        "request_reached_provider_after_s": round(reached, 2), "process_exit_after_signal_s": round(exit_s, 3),
        "answer_on_kill": (json.loads(out).get("error") or {}).get("code") if out.strip() else None,
        "job_listed_after_kill": bool(rows), "recovery_exit": code, "report_returned": bool(doc.get("report")),
        "attached_to_job": (doc.get("metadata") or {}).get("attached_to_job"),
        "total_s": round(time.monotonic() - started, 2),
        "paid_requests": len(paid(server.state)), "submits_sent": len(server.hits(SUBMIT, method="POST")),
        "ledger_lines": ledger_lines(home),
    }
    stop_worker(home)
    return report


# -- never-answering provider ------------------------------------------------------------------------

def never_run(server, root: Path, defaults: bool) -> dict:
    from gsd_research.deep.settings import DEFAULTS, DeepSettings

    reset(server)
    server.state["pplx_hang"] = {"submit": float("inf")}
    deep = {"autostart": True} if defaults else {"autostart": True, "retry_backoff": 2.0}
    home = home_with(root, f"never-{defaults}", **deep)
    settings = DeepSettings(retry_backoff=deep.get("retry_backoff", DEFAULTS["retry_backoff"]))
    timeout = 1.5
    schedule = settings.max_attempts * timeout + sum(settings.backoff(i) for i in range(1, settings.max_attempts))
    env = dict(env_for(home, server.url), PERPLEXITY_POLLING_TIMEOUT_MS="1500")
    started = time.monotonic()
    _, queued, _ = call(env, "deep", "--async", "a provider that never answers")
    job_id = queued["conversation_id"]
    rounds, outcome = 0, None
    while rounds < 10:  # the skill's loop: wait again only on exit 6 / JOB_RUNNING
        rounds += 1
        code, doc, _ = call(env, "jobs", "wait", job_id, "--timeout", "100")
        outcome = (code, (doc.get("error") or {}).get("code"))
        if code != 6:
            break
    status = json.loads((home / "conversation-logs" / job_id / "status.json").read_text())
    from gsd_research.deep.store import parse_iso

    failed_after = round(parse_iso(status["failedAt"]) - parse_iso(status["createdAt"]), 2)
    server.state.pop("pplx_hang", None)
    stop_worker(home)
    return {"settings": "shipped defaults" if defaults else "retry_backoff 2 s", "timeout_s": timeout,
            "max_attempts": settings.max_attempts,
            "backoffs_s": [settings.backoff(i) for i in range(1, settings.max_attempts)],
            "documented_schedule_s": schedule, "status": status["status"],
            "attempt_codes": [e["code"] for e in status.get("errors") or []],
            "failed_after_s_wall_clock": failed_after,
            "agent_loop_rounds": rounds, "agent_loop_outcome": outcome,
            "agent_loop_total_s": round(time.monotonic() - started, 2),
            "submits_sent": len(server.hits(SUBMIT, method="POST")),
            "idempotency_keys": len({r.json().get("idempotency_key") for r in server.hits(SUBMIT, method="POST")})}


# -- fault matrix ----------------------------------------------------------------------------------------

def fault_run(server, root: Path, name: str, kind: str, opts: dict, mode: str, phase: str) -> dict:
    from tests.fakes.perplexity import paid

    reset(server)
    server.state["pplx_async_delay"] = 0.3
    home = home_with(root, f"fault-{name}-{mode}-{phase}", autostart=False, retry_backoff=0.5)
    env = dict(env_for(home, server.url), PERPLEXITY_POLLING_TIMEOUT_MS="20000")
    if phase == "before acceptance":
        server.add_fault(SUBMIT, kind, times=1000, method="POST", **opts)
    else:
        server.add_fault(SUBMIT + "/", kind, times=1000, method="GET", **opts)
    query = f"fault {name} {mode} {phase}"
    if mode == "blocking":
        code, doc, elapsed = call(env, "deep", query)
        err = doc.get("error") or {}
        job_id = (err.get("details") or {}).get("conversation_id")
    else:
        _, queued, _ = call(env, "deep", "--async", query)
        job_id = queued["conversation_id"]
        _, _, elapsed = call(env, "jobs", "worker", "--once")
        code, doc, _ = call(env, "jobs", "wait", job_id, "--timeout", "1")
        err = doc.get("error") or {}
    posts = server.hits(SUBMIT, method="POST")
    accepted = paid(server.state)
    row = {"fault": name, "mode": mode, "phase": phase, "exit": code, "code": err.get("code"),
           "cause": (err.get("details") or {}).get("cause"), "seconds": elapsed,
           "submits_sent": len(posts), "idempotency_keys": len({p.json().get("idempotency_key") for p in posts}),
           "paid_requests": len(accepted), "paid_again_after_acceptance": max(0, len(accepted) - 1),
           "job_kept": bool(job_id and (home / "conversation-logs" / job_id).exists())}
    if mode == "blocking" and phase == "after acceptance" and job_id:
        server.clear_faults()  # the provider recovers: the kept request is finished
        status = json.loads((home / "conversation-logs" / job_id / "status.json").read_text())
        if status["status"] == "failed":  # failed for good (a rejected key): asking again resumes its request
            call(env, "deep", query)
            row["recovered_by"] = "the same deep call"
        else:
            call(env, "jobs", "worker", "--once")
            row["recovered_by"] = "jobs worker --once"
        final = json.loads((home / "conversation-logs" / job_id / "status.json").read_text())
        row["after_recovery"] = final["status"]
        row["paid_requests"] = len(paid(server.state))
    row["ledger_lines"] = ledger_lines(home)
    row["ledger_estimated"] = estimated_lines(home)
    return row


def estimated_lines(home: Path) -> int:
    path = home / "usage" / "ledger.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(bool(json.loads(line).get("estimated")) for line in lines)


def lost_run(server, root: Path, lose: str, mode: str, api: str) -> dict:
    """The provider accepts (and bills) the submit, then its answer is lost (a 500, or no answer at all)."""
    from tests.fakes.perplexity import paid

    reset(server)
    server.state.update(pplx_async_delay=0.3, pplx_lose=1, pplx_lose_kind=lose)
    home = home_with(root, f"lost-{lose}-{mode}-{api}", autostart=False, retry_backoff=0.5, api=api)
    env = dict(env_for(home, server.url), PERPLEXITY_POLLING_TIMEOUT_MS="20000")
    query = f"lost answer {lose} {mode} {api}"
    if mode == "blocking":
        code, doc, elapsed = call(env, "deep", query)
    else:
        _, queued, _ = call(env, "deep", "--async", query)
        _, _, elapsed = call(env, "jobs", "worker", "--once")
        code, doc, _ = call(env, "jobs", "wait", queued["conversation_id"], "--timeout", "1")
    path = SUBMIT if api == "sonar" else "/perplexity/v1/agent"
    posts = server.hits(path, method="POST")
    err = doc.get("error") or {}
    server.state.pop("pplx_hang", None)
    return {"answer_lost_by": lose, "mode": mode, "api": api, "exit": code, "code": err.get("code"),
            "cause": (err.get("details") or {}).get("cause"), "seconds": elapsed, "submits_sent": len(posts),
            "idempotency_keys": len({p.json().get("idempotency_key") for p in posts}),
            "paid_requests": len(paid(server.state)), "ledger_lines": ledger_lines(home),
            "ledger_estimated": estimated_lines(home)}


# -- races and odd answers ---------------------------------------------------------------------------------

def identical_run(server, root: Path, mode: str) -> dict:
    """4 identical calls started at once: one job, one payment."""
    from tests.fakes.perplexity import paid

    reset(server)
    server.state["pplx_async_delay"] = 1.0
    home = home_with(root, f"identical-{mode}", autostart=True, concurrency=2)
    env = env_for(home, server.url)
    args = [str(BIN), "deep", *(["--async"] if mode == "async" else []), f"asked four times at once ({mode})"]
    started = time.monotonic()
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    docs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    ids = {d.get("conversation_id") for d in docs}
    if mode == "async":
        for job_id in ids:
            call(env, "jobs", "wait", str(job_id), "--timeout", "60")
    elapsed = round(time.monotonic() - started, 2)
    time.sleep(0.3)
    stop_worker(home)
    return {"mode": mode, "calls": 4, "exits": [p.returncode for p in procs], "distinct_jobs": len(ids),
            "job_folders": len(list((home / "conversation-logs").iterdir())), "seconds": elapsed,
            "paid_requests": len(paid(server.state)), "ledger_lines": ledger_lines(home)}


def odd_run(server, root: Path, name: str) -> dict:
    """One odd provider behaviour after acceptance: the outcome, its time and what was paid."""
    from tests.fakes.perplexity import paid

    reset(server)
    server.state["pplx_async_delay"] = 8.0 if name == "short --timeout" else 0.3
    api = "agent" if name == "one 404 (Agent API)" else "sonar"
    home = home_with(root, f"odd-{name.replace(' ', '-')}", autostart=False, api=api, retry_backoff=0.5,
                     retry_backoff_max=30)
    env = env_for(home, server.url)
    poll = SUBMIT + "/" if api == "sonar" else "/perplexity/v1/responses/"
    other = {"id": "OTHER-JOB", "status": "COMPLETED", "model": "sonar-deep-research",
             "response": {"id": "OTHER-JOB", "model": "sonar-deep-research",
                          "choices": [{"message": {"content": "REPORT OF ANOTHER JOB"}}], "usage": {}}}
    faults = {"one 404 (Sonar)": ("status", 1, {"status": 404}), "one 404 (Agent API)": ("status", 1, {"status": 404}),
              "404 on every poll": ("status", 1000, {"status": 404}),
              "Retry-After 100000 on every poll": ("status", 1000, {"status": 429, "retry_after": "100000"}),
              "another request's answer": ("status", 1000, {"status": 200, "body": other})}
    if name in faults:
        kind, times, opts = faults[name]
        server.add_fault(poll, kind, times=times, method="GET", **opts)
    query = f"odd answer: {name}"
    started = time.monotonic()
    if name in ("404 on every poll", "Retry-After 100000 on every poll"):
        job_id = call(env, "deep", "--async", query)[1]["conversation_id"]
        call(env, "jobs", "worker", "--once")
        code, doc, _ = call(env, "jobs", "wait", job_id, "--timeout", "1")
    else:
        code, doc, _ = call(env, "deep", query, *(["--timeout", "2"] if name == "short --timeout" else []))
    elapsed = round(time.monotonic() - started, 2)
    err = doc.get("error") or {}
    row = {"case": name, "exit": code, "code": err.get("code"), "cause": (err.get("details") or {}).get("cause"),
           "seconds": elapsed, "report_of_another_request_taken": "REPORT OF ANOTHER JOB" in json.dumps(doc)}
    if name == "short --timeout":  # the job goes on with its own attempt time: wait for it
        wait_code, _, _ = call(env, "jobs", "wait", err["details"]["conversation_id"], "--timeout", "60")
        row.update(then_jobs_wait_exit=wait_code, total_s=round(time.monotonic() - started, 2))
    row.update(submits_sent=len(server.hits("/perplexity", method="POST")), paid_requests=len(paid(server.state)),
               ledger_lines=ledger_lines(home), ledger_estimated=estimated_lines(home))
    return row


ODD = ["one 404 (Sonar)", "one 404 (Agent API)", "404 on every poll", "Retry-After 100000 on every poll",
       "another request's answer", "short --timeout"]


def main() -> None:
    from tests.fakes.server import make_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["kill", "never", "faults", "races"], default=None)
    parser.add_argument("--never-defaults", action="store_true")
    args = parser.parse_args()
    server = make_server("perplexity")
    root = Path(tempfile.mkdtemp(prefix="gsd-deep-reliability-"))
    report: dict = {"load_average_1m": round(os.getloadavg()[0], 2)}
    try:
        if args.only in (None, "kill"):
            report["kill"] = [kill_run(server, root, sig, how) for sig in (signal.SIGTERM, signal.SIGKILL)
                              for how in ("jobs wait", "deep")]
        if args.only in (None, "never"):
            report["never_answering"] = never_run(server, root, args.never_defaults)
        if args.only in (None, "faults"):
            report["faults"] = [fault_run(server, root, name, kind, opts, mode, phase)
                                for phase in ("before acceptance", "after acceptance")
                                for mode in ("blocking", "async") for name, kind, opts in FAULTS]
            report["lost_submit_answers"] = [lost_run(server, root, lose, mode, api) for api in ("sonar", "agent")
                                             for mode in ("blocking", "async") for lose in ("500", "hang")]
        if args.only in (None, "races"):
            report["identical_calls"] = [identical_run(server, root, mode) for mode in ("blocking", "async")]
            report["odd_answers"] = [odd_run(server, root, name) for name in ODD]
    finally:
        server.state.pop("pplx_hang", None)
        server.stop()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.exit(main())
