#!/usr/bin/env python3
"""Why: the dashboard and alerts are only as good as the series a real
Prometheus collects. This starts Debian's Prometheus with the project's
deploy/prometheus/prometheus.yml (only the coordinator's address changed to
loopback) and runs `mixtrain local` on a 2-worker fp16 job whose initial
loss scale (2^40) overflows fp16 at once and whose short growth interval
keeps overflowing it, the way a real run hits inf gradients, with the
gradient-range telemetry every 25 steps; then a short 2-worker compute fp8
job (delayed scaling). Then, through Prometheus's HTTP API, it checks that
both workers were found through /sd/workers, that the text every process
served passes `promtool check metrics`, that every Grafana panel's query
returns data for its job (the FP8 row's for the fp8 job), that
the loss-scale series shows the backoff, that the overflow and NaN/Inf
counters moved as far as the job's summary says, and that the alert rules
evaluate without error.

Usage: prometheus_stack_test.py BIN_DIR SOURCE_DIR PROMETHEUS PROMTOOL
"""
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

INIT_SCALE = 2.0 ** 40
# 5000 steps: about 40 s on two cores, so that Prometheus, which finds the
# workers through /sd/workers (5 s refresh) and scrapes every 5 s, has
# several samples of every series (2500 steps, 20 s, once left only one).
SPEC = f"""version: 1
name: overflow-drill
model: {{arch: gpt, layers: 2, heads: 2, dim: 64, seq_len: 32, vocab: 256}}
data: {{train: "builtin:demo", val_fraction: 0.1, format: text}}
train: {{steps: 5000, micro_batch: 4, lr: 1.0e-3, min_lr: 1.0e-4, warmup_steps: 10,
        eval_every: 250, eval_batches: 2}}
precision: {{compute: fp16, loss_scale: dynamic, init_scale: {INIT_SCALE:.0f}, growth_interval: 5,
            min_scale: 1.0, on_min_scale: continue, stats_every: 25}}
zero: {{stage: 2}}
resources: {{workers: 2}}
checkpoint: {{every: 100000}}
retries: {{max_restarts: 0}}
"""
# The fp8 job: long enough for several scrapes of its FP8 series.
FP8_SPEC = """version: 1
name: fp8-drill
model: {arch: gpt, layers: 2, heads: 2, dim: 64, seq_len: 32, vocab: 256}
data: {train: "builtin:demo", val_fraction: 0.1, format: text}
train: {steps: 1500, micro_batch: 4, lr: 1.0e-3, min_lr: 1.0e-4, warmup_steps: 10,
        eval_every: 500, eval_batches: 2}
precision: {compute: fp8, stats_every: 25, fp8: {scaling: delayed, amax_history: 16}}
zero: {stage: 1}
resources: {workers: 2}
checkpoint: {every: 100000}
retries: {max_restarts: 0}
"""
# Grafana's interval variables for a 5 s scrape interval ($__rate_interval
# is at least four scrape intervals).
RATE_INTERVAL = "20s"


class TestFailure(Exception):
    pass


def fail(message):
    raise TestFailure(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def api(base, path, **params):
    body = json.loads(get(f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}", timeout=30))
    if body.get("status") != "success":
        fail(f"{path} {params}: {body}")
    return body["data"]


def wait_until(what, check, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            result = check()
            if result:
                return result
        except OSError:
            pass
        time.sleep(0.5)
    fail(f"timed out waiting for {what}")


class LiveChecks(threading.Thread):
    """While the job runs: the workers appear in /sd/workers and as
    Prometheus targets, and every process's /metrics passes promtool."""

    def __init__(self, http, prometheus, promtool):
        super().__init__(daemon=True)
        self.http, self.prometheus, self.promtool = http, prometheus, promtool
        self.problems, self.checked = [], []

    def run(self):
        try:
            self.check()
        except Exception as e:  # reported by the main thread
            self.problems.append(f"{type(e).__name__}: {e}")

    def check(self):
        def busy_workers():
            groups = json.loads(get(f"http://127.0.0.1:{self.http}/sd/workers"))
            targets = [t for g in groups for t in g["targets"]]
            texts = {t: get(f"http://{t}/metrics") for t in targets}
            return texts if len(texts) == 2 and all(
                "mixtrain_steps_total{" in text for text in texts.values()) else None

        texts = wait_until("two workers running the job in /sd/workers", busy_workers, 90)
        texts[f"coordinator 127.0.0.1:{self.http}"] = get(f"http://127.0.0.1:{self.http}/metrics")
        for source, text in texts.items():
            lint = subprocess.run([self.promtool, "check", "metrics"], input=text,
                                  capture_output=True, text=True)
            if lint.returncode != 0 or lint.stdout.strip() or lint.stderr.strip():
                self.problems.append(f"promtool check metrics on {source}: {lint.stdout}{lint.stderr}")
            self.checked.append(source)

        def scraped():
            active = api(self.prometheus, "targets", state="active")["activeTargets"]
            up = [t for t in active if t["health"] == "up"]
            pools = sorted(t["scrapePool"] for t in up)
            return pools if pools == ["mixtrain-coordinator", "mixtrain-workers",
                                      "mixtrain-workers"] else None

        wait_until("Prometheus scraping the coordinator and both workers", scraped, 60)


def panel_queries(dashboard, job_id, window):
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        for target in panel["targets"]:
            expr = (target["expr"].replace("$job_id", re.escape(job_id)).replace("$rank", ".*")
                    .replace("$__rate_interval", RATE_INTERVAL).replace("$__range", window))
            yield panel["title"], target["legendFormat"], expr


def run_local(bin_dir, work, http, name, spec):
    """`mixtrain local` on 2 workers of `spec` (written to NAME.yaml, its
    summary to NAME-summary.json); returns its start and end times."""
    (work / f"{name}.yaml").write_text(spec)
    start = time.time()
    job = subprocess.run(
        [str(bin_dir / "mixtrain"), "local", f"{name}.yaml", "--workers", "2", "--http",
         f"127.0.0.1:{http}", "--summary-json", f"{name}-summary.json"],
        cwd=work, capture_output=True, text=True, timeout=240)
    end = time.time()
    if job.returncode != 0:
        fail(f"mixtrain local ({name}) exited {job.returncode}:\n{job.stdout}\n{job.stderr}")
    return start, end


def finite_values(series):
    return [float(v) for s in series for _, v in s["values"] if math.isfinite(float(v))]


def main():
    bin_dir, source = Path(sys.argv[1]), Path(sys.argv[2])
    prometheus, promtool = shutil.which(sys.argv[3]), shutil.which(sys.argv[4])
    if not prometheus or not promtool:
        print(f"prometheus_stack: {sys.argv[3]} or {sys.argv[4]} is missing: run "
              "scripts/install-deps.sh (package prometheus)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="mixtrain-prom-"))
    procs = []
    try:
        http, web = free_port(), free_port()
        config = (source / "deploy/prometheus/prometheus.yml").read_text()
        if config.count("coordinator:9400") != 2:
            fail("prometheus.yml no longer names coordinator:9400 twice (target and /sd/workers)")
        (work / "prometheus.yml").write_text(config.replace("coordinator:9400", f"127.0.0.1:{http}"))
        shutil.copy(source / "deploy/prometheus/alerts.yml", work / "alerts.yml")
        log = open(work / "prometheus.log", "w")
        procs.append(subprocess.Popen(
            [prometheus, f"--config.file={work / 'prometheus.yml'}",
             f"--storage.tsdb.path={work / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
            stdout=log, stderr=subprocess.STDOUT))
        base = f"http://127.0.0.1:{web}"
        wait_until("Prometheus ready", lambda: get(f"{base}/-/ready"), 60)

        live = LiveChecks(http, base, promtool)
        live.start()
        start, end = run_local(bin_dir, work, http, "job", SPEC)
        live.join(timeout=60)
        if live.problems or len(live.checked) != 3:
            fail(f"live checks: {live.problems}, checked {live.checked}")
        summary = json.loads((work / "job-summary.json").read_text())
        print(f"job: {end - start:.0f} s, {summary['steps']} steps, {summary['skipped_steps']} "
              f"skipped, final scale {summary['loss_scale']}")
        if summary["skipped_steps"] < 10:
            fail(f"the job was meant to overflow, but skipped {summary['skipped_steps']} steps")
        time.sleep(6)  # one more scrape interval: the last samples and staleness markers

        job_ids = api(base, "label/job_id/values", start=start, end=end + 6)
        if len(job_ids) != 1:
            fail(f"expected one job_id label value, got {job_ids}")
        job_id = job_ids[0]
        window = f"{int(end - start) + 10}s"

        fp8_start, fp8_end = run_local(bin_dir, work, http, "fp8", FP8_SPEC)
        print(f"fp8 job: {fp8_end - fp8_start:.0f} s")
        time.sleep(6)
        fp8_ids = [i for i in api(base, "label/job_id/values", start=fp8_start, end=fp8_end + 6)
                   if i != job_id]
        if len(fp8_ids) != 1:
            fail(f"expected the fp8 job's job_id, got {fp8_ids}")
        fp8_id = fp8_ids[0]
        fp8_window = f"{int(fp8_end - start) + 10}s"
        span = {"start": start, "end": fp8_end + 6, "step": 5}

        dashboard = json.loads((source / "deploy/grafana/dashboards/mixtrain.json").read_text())
        # The job and rank selectors, resolved as Grafana resolves
        # label_values(SELECTOR, LABEL): the label's values among the series
        # SELECTOR matches in the time range.
        expected = {"job_id": sorted([job_id, fp8_id]), "rank": ["0", "1"]}
        for variable in dashboard["templating"]["list"]:
            query = variable["query"]["query"].replace("$job_id", re.escape(job_id))
            selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", query).groups()
            values = api(base, f"label/{label}/values", **{"match[]": selector},
                         start=start, end=fp8_end + 6)
            print(f"  variable {variable['name']}: {values}")
            if sorted(values) != expected.get(variable["name"]):
                fail(f"variable {variable['name']} ({query}) offers {values}")
        empty = []
        queries = [q for q in panel_queries(dashboard, job_id, window)
                   if not q[0].startswith("FP8")]
        queries += [q for q in panel_queries(dashboard, fp8_id, fp8_window)
                    if q[0].startswith("FP8")]
        for title, legend, expr in queries:
            series = api(base, "query_range", query=expr, **span)["result"]
            values = finite_values(series)
            print(f"  {title:26} {legend:34} {len(series):3} series, {len(values):4} samples")
            if not values:
                empty.append(f"{title} ({expr})")
        if empty:
            fail("dashboard queries without data: " + "; ".join(empty))

        selector = f'{{job_id="{job_id}"}}'
        scales = api(base, "query_range", query=f"mixtrain_loss_scale{selector}", **span)["result"]
        if sorted(s["metric"]["rank"] for s in scales) != ["0", "1"]:
            fail(f"loss scale series: {[s['metric'] for s in scales]}")
        for s in scales:
            values = [float(v) for _, v in s["values"]]
            # Every reported scale is after at least one backoff from 2^40
            # (a scrape may catch the first steps' halvings), and fp16
            # gradients bring it down to about 2^17 and keep it there.
            if max(values) > INIT_SCALE / 2 or values[-1] > INIT_SCALE / 2 ** 10:
                fail(f"rank {s['metric']['rank']}'s loss scale shows no backoff: {values}")
            print(f"  loss scale rank {s['metric']['rank']}: {values[0]:.0f} ... {values[-1]:.0f} "
                  f"(initial {INIT_SCALE:.0f})")
        at_end = {"time": end + 6}
        overflows = api(base, "query",
                        query=f"max_over_time(mixtrain_overflow_steps_total{selector}[{window}])",
                        **at_end)["result"]
        nonfinite = api(base, "query", query=(
            f"sum by (rank) (max_over_time(mixtrain_nonfinite_events_total{selector}[{window}]))"),
                        **at_end)["result"]
        for name, result in (("overflow", overflows), ("NaN/Inf", nonfinite)):
            counts = {r["metric"]["rank"]: float(r["value"][1]) for r in result}
            if sorted(counts) != ["0", "1"] or not all(
                    0 < c <= summary["skipped_steps"] for c in counts.values()):
                fail(f"the {name} counters did not move as the job did "
                     f"({summary['skipped_steps']} skipped steps): {counts}")
            print(f"  {name} counter per rank at its last sample: {counts}")

        rules = [r for g in api(base, "rules")["groups"] for r in g["rules"]]
        broken = [f"{r['name']}: {r.get('lastError')}" for r in rules if r["health"] != "ok"]
        if not rules or broken:
            fail(f"alert rules not evaluating cleanly: {broken or 'none loaded'}")
        print(f"prometheus_stack: ok ({len(rules)} alert rules evaluate, "
              f"{len(live.checked)} /metrics endpoints pass promtool)")
        return 0
    except TestFailure as failure:
        print("prometheus_stack:", failure, file=sys.stderr)
        log = work / "prometheus.log"
        if log.exists():
            print("prometheus.log, last lines:", *log.read_text().splitlines()[-15:], sep="\n",
                  file=sys.stderr)
        return 1
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if os.environ.get("KEEP_TMP") is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)


if __name__ == "__main__":
    sys.exit(main())
