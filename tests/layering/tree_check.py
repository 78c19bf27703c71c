"""Why: the checks of this folder (layers, one home, the layout's listing)
each read a tree and report what is wrong in it, and each proves itself
on a scratch tree with planted faults. This is their shared frame: the
command line, the scratch tree, and the judgement of a self-test."""
import os
import re
import sys
import tempfile

SOURCE = re.compile(r"\.(h|cc|cu|cuh)$")


def source_lines(root, folders):
    """(path from root, line number, line) of every C++/CUDA source under
    `folders`, in a stable order."""
    for top in folders:
        for folder, _, files in sorted(os.walk(os.path.join(root, top))):
            for name in sorted(files):
                if not SOURCE.search(name):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        yield os.path.relpath(path, root), number, line


def reports_in_scratch_tree(files, check):
    """check(root) run on a scratch tree holding `files` ({path: text})."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)) or root, exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        return check(root)


def judge_self_test(reported, expected, what):
    """0 when `reported` (lines "path:...") names exactly the `expected`
    paths, once each; else 1, saying so."""
    for line in reported:
        print("  reported: " + line)
    if sorted(line.split(":")[0] for line in reported) != sorted(expected):
        print("FAIL: expected exactly one report for each of %s" % sorted(expected))
        return 1
    print("ok: each %s reported once, the rest not at all" % what)
    return 0


def main(argv, doc, check, self_test, ok_message, failed_message):
    """The command line every check shares: ROOT, or --self-test."""
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(doc)
        return 2
    found = check(argv[1])
    for line in found:
        print(line)
    if found:
        print(failed_message % len(found))
        return 1
    print(ok_message)
    return 0


def run(doc, check, self_test, ok_message, failed_message):
    sys.exit(main(sys.argv, doc, check, self_test, ok_message, failed_message))
