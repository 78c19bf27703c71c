#!/usr/bin/env python3
"""Why: README's "Layout" is where a newcomer learns what each folder is
for; a folder or engine module added without a line there is invisible.
This fails, naming each one, when a top-level folder or file of the tree
(hidden ones aside, but .ci/), an engine module or a tests/ folder has no
entry in the layout's listing.

Usage: check_layout_doc.py ROOT          check the tree at ROOT
       check_layout_doc.py --self-test   leave entries out of a scratch
                                         README and expect each reported
"""
import os
import re

import tree_check

# Not the project's own: build trees and what .gitignore keeps out.
IGNORED = re.compile(r"^(build|build-.*|third_party|checkpoints|__pycache__)$")


def listing(readme):
    """(indented, name) for each name the first code block under "## Layout"
    lists: each line's first word, and the words after it while each ends
    in a comma ("a.yml, b.yml   ...")."""
    text = open(readme, encoding="utf-8").read()
    section = text.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    names = set()
    for line in block.splitlines():
        indented = line[:1].isspace()
        for word in line.split():
            names.add((indented, word.rstrip(",").rstrip("/")))
            if not word.endswith(","):
                break
    return names


def expected(root):
    """(indented, name) for what the listing must hold: top-level entries
    unindented (tests/ by its folders), engine modules indented."""
    wanted = set()
    for name in sorted(os.listdir(root)):
        if (name.startswith(".") and name != ".ci") or IGNORED.match(name):
            continue
        if name == "tests":
            for sub in sorted(os.listdir(os.path.join(root, "tests"))):
                if os.path.isdir(os.path.join(root, "tests", sub)):
                    wanted.add((False, "tests/" + sub))
        else:
            wanted.add((False, name))
    for module in sorted(os.listdir(os.path.join(root, "engine"))):
        if os.path.isfile(os.path.join(root, "engine", module, "CMakeLists.txt")):
            wanted.add((True, module))
    return wanted


def gaps(root):
    listed = listing(os.path.join(root, "README.md"))
    return ["README.md: \"Layout\" lists no %s%s" % ("engine/" if indented else "", name)
            for indented, name in sorted(expected(root) - listed)]


def self_test():
    readme = ("# x\n\n## Layout\n\ntext\n\n```\n"
              "engine/         the engine\n"
              "  common/         helpers\n"
              "a.yml, b.yml    two files\n"
              "tests/unit/     suites\n"
              "```\n\n## Next\n")
    tree = {path: "" for path in [
        "engine/common/CMakeLists.txt", "engine/plan/CMakeLists.txt", "a.yml", "b.yml",
        "tests/unit/x.cc", "tests/layering/y.py", "cmake/z.cmake", ".ci/run", ".gitignore",
        "build/junk"]}
    tree["README.md"] = readme
    reported = tree_check.reports_in_scratch_tree(tree, gaps)
    left_out = [".ci", "README.md", "cmake", "tests/layering", "engine/plan"]
    status = tree_check.judge_self_test(reported, ["README.md"] * len(left_out),
                                        "entry left out")
    named = all(any(line.endswith(" " + name) for line in reported) for name in left_out)
    return status if named else 1


if __name__ == "__main__":
    tree_check.run(__doc__, gaps, self_test,
                   "ok: README's layout lists every folder and engine module",
                   "%d entries missing from README's layout")
