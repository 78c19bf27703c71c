#!/usr/bin/env python3
"""Why: the provisioned Grafana dashboard must load as-is and show only
what mixtrain exports. Grafana is not a Debian package, so this checks the
JSON the way Grafana would meet it: it parses; the uid is stable; every
datasource reference is the provisioned Prometheus uid (no ${DS_...}
import inputs); the job_id and rank variables exist and every per-task
query filters by them; the panels the README lists are there (the loss
scale on a log axis); and every metric a query names is one the worker or
coordinator really serves (metrics_exposition prints that text).

Usage: dashboard_check.py METRICS_EXPOSITION SOURCE_DIR
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

REQUIRED_PANELS = [
    "Loss", "Loss scale", "Overflow-skipped steps", "NaN/Inf events", "Gradient norm",
    "Learning rate", "Tokens/s", "Model FLOPs utilization", "Step time", "Collective bytes",
    "Collective bandwidth", "Memory by pool and kind", "Peak memory by pool", "Jobs by state",
    "Workers by state", "Restarts and preemptions", "Gradient range (log2 |g|)",
    "Gradient log2 magnitude percentiles", "Zero and subnormal gradients",
    "Gradient headroom (log2)", "FP8 amax", "FP8 scale (log2)", "FP8 saturations",
]
# Families whose series carry job_id and rank (the rest are the
# coordinator's or the agent's own).
COORDINATOR_FAMILIES = {"mixtrain_jobs", "mixtrain_workers", "mixtrain_job_restarts_total",
                        "mixtrain_job_preemptions_total",
                        "mixtrain_jobs_submitted_total", "mixtrain_schedule_latency_seconds",
                        "mixtrain_build_info"}


def exported_names(exposition):
    """Every sample name the text format can hold for the families printed."""
    text = subprocess.run([exposition], check=True, capture_output=True, text=True).stdout
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(name)
        if kind == "histogram":
            names.update({name + "_bucket", name + "_sum", name + "_count"})
        if kind == "summary":
            names.update({name + "_sum", name + "_count"})
    return names


def datasource_refs(node, path="$"):
    """(path, value) of every "datasource" key anywhere in the JSON."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield f"{path}.{key}", value
            yield from datasource_refs(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from datasource_refs(value, f"{path}[{i}]")


def main():
    exposition, source = sys.argv[1], Path(sys.argv[2])
    dashboard_path = source / "deploy/grafana/dashboards/mixtrain.json"
    provisioning = yaml.safe_load(
        (source / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = provisioning["datasources"][0]["uid"]
    provider = yaml.safe_load(
        (source / "deploy/grafana/provisioning/dashboards/mixtrain.yml").read_text())
    raw = dashboard_path.read_text()
    dashboard = json.loads(raw)
    problems = []

    if dashboard.get("uid") != "mixtrain-training":
        problems.append(f"dashboard uid is {dashboard.get('uid')!r}, links expect 'mixtrain-training'")
    if "${DS_" in raw or "__inputs" in dashboard:
        problems.append("the dashboard has import-time ${DS_...} inputs; provisioning cannot fill them")
    if provider["providers"][0]["options"]["path"] != "/etc/grafana/dashboards":
        problems.append("the dashboards provider does not read /etc/grafana/dashboards")
    for where, ref in datasource_refs(dashboard):
        if ref != {"type": "prometheus", "uid": uid}:
            problems.append(f"{where} is {ref!r}, not the provisioned uid {uid!r}")

    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for name in ("job_id", "rank"):
        if name not in variables:
            problems.append(f"no ${name} template variable")

    exported = exported_names(exposition)
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    titles = [p["title"] for p in panels]
    for title in REQUIRED_PANELS:
        if title not in titles:
            problems.append(f"no {title!r} panel")
    if len(set(p["id"] for p in dashboard["panels"])) != len(dashboard["panels"]):
        problems.append("panel ids are not unique")

    queries = [(p["title"], t["expr"]) for p in panels for t in p["targets"]]
    queries += [(f"variable {v['name']}", v["query"]["query"]) for v in variables.values()]
    for title, expr in queries:
        used = set(re.findall(r"\bmixtrain_[a-z0-9_]+", expr))
        if not used:
            problems.append(f"{title}: the query {expr!r} names no mixtrain metric")
        for name in sorted(used - exported):
            problems.append(f"{title}: {name} is not a metric mixtrain exports")
        per_task = used - COORDINATOR_FAMILIES
        if per_task and not title.startswith("variable"):
            for label in ("job_id", "rank"):
                if f'{label}=~"${label}"' not in expr:
                    problems.append(f"{title}: {expr!r} does not filter by ${label}")

    scale = next((p for p in panels if p["title"] == "Loss scale"), None)
    if scale and scale["fieldConfig"]["defaults"]["custom"].get("scaleDistribution", {}).get("type") != "log":
        problems.append("the loss scale panel's axis is not logarithmic")

    for problem in problems:
        print("dashboard_check:", problem, file=sys.stderr)
    if problems:
        return 1
    print(f"dashboard_check: {len(panels)} panels, {len(queries)} queries, all on exported metrics "
          f"and datasource uid {uid}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
