#!/usr/bin/env python3
"""Why: a fact kept in two files drifts apart at the next change (issue 32:
the frame header was coded three times, the progress fields mapped three
times, HOST:PORT split twice, the exit status of an error written four
times, the service's timing agreed on in comments). Each such fact now has
one home; this fails, naming file, line and fact, when the code that
states it shows up anywhere else in the product code.

Usage: check_homes.py ROOT          check the tree at ROOT
       check_homes.py --self-test   plant a second copy of each fact in a
                                    scratch tree and expect it reported
"""
import re

import tree_check

# (fact, what states it, the files where it may be stated).
HOMES = [
    ("little-endian integers byte by byte",
     re.compile(r"(<<|>>)\s*\(\s*8\s*\*|\bsize\s*>>\s*(8|16|24)\b"),
     ["engine/common/little_endian.cc"]),
    ("HOST:PORT split at its last colon",
     re.compile(r"(rfind|find_last_of)\(\s*':'\s*\)"),
     ["engine/common/host_port.cc"]),
    ("a step's values paired with their wire fields",
     re.compile(r"set_(tokens_per_second|grad_norm|learning_rate)\("),
     ["proto/step_progress.h"]),
    ("the exit status of an error",
     re.compile(r"kInvalidArgument\s*\?\s*2\s*:\s*1"),
     ["engine/common/error.h"]),
    ("the engine's error codes as status codes",
     re.compile(r"absl::StatusCode::kResourceExhausted"),
     ["net/error_status.cc"]),
    ("the service's reconnect and keepalive timing, as a number",
     re.compile(r"(MAX_RECONNECT_BACKOFF_MS|MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS"
                r"|GRPC_ARG_KEEPALIVE_TIME_MS)\s*,\s*\d|kReconnectMarginMs"),
     ["server/coordinator_server.cc"]),  # the coordinator's own ping period
    ("the job database's schema",
     re.compile(r"(ALTER|CREATE) TABLE (IF NOT EXISTS )?(jobs|attempts|events|logs|assignments)\b"
                r"|user_version\s*="),
     ["server/job_schema.cc"]),
    ("NCCL's channel count",
     re.compile(r"maxCTAs\s*=\s*\d"),
     []),
]
FOLDERS = ["engine", "proto", "net", "jobspec", "launch", "client", "server", "worker"]


def violations(root):
    found = []
    for source, number, line in tree_check.source_lines(root, FOLDERS):
        for fact, pattern, homes in HOMES:
            if pattern.search(line) and source not in homes:
                found.append("%s:%d: %s, whose home is %s: %s" % (
                    source, number, fact, " or ".join(homes) or "a named constant",
                    line.strip()))
    return found


def self_test():
    planted = {
        "worker/a.cc": "  for (int i = 0; i < 4; ++i) b |= p[i] << (8 * i);\n",
        "launch/b.cc": "  const size_t colon = address.rfind(':');\n",
        "client/c.cc": "  progress.set_grad_norm(step.grad_norm);\n",
        "server/d.cc": "  return e.code() == ErrorCode::kInvalidArgument ? 2 : 1;\n",
        "worker/e.cc": "  return absl::StatusCode::kResourceExhausted;\n",
        "net/f.cc": "  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);\n",
        "server/i.cc": '  db.exec("ALTER TABLE jobs ADD COLUMN x INTEGER");\n',
        "engine/comm/g.cc": "  config.maxCTAs = 16;\n",
    }
    clean = {
        "engine/common/little_endian.cc": "  v |= c << (8 * i);\n",
        "engine/common/host_port.cc": "  address.rfind(':');\n",
        "proto/step_progress.h": "  out.set_grad_norm(step.grad_norm);\n",
        "engine/common/error.h": "  return code == ErrorCode::kInvalidArgument ? 2 : 1;\n",
        "server/h.cc": "  config.maxCTAs = kNcclMaxChannels;\n",
    }
    assert len(planted) == len(HOMES), "one plant per fact"
    reported = tree_check.reports_in_scratch_tree({**planted, **clean}, violations)
    return tree_check.judge_self_test(reported, planted, "planted second copy")


if __name__ == "__main__":
    tree_check.run(__doc__, violations, self_test, "ok: every fact in its one home",
                   "%d fact(s) stated outside their home")
