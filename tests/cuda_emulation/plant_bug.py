# Why: the mutation tests prove that the emulation can fail: a copy of a
# real kernel source with one planted bug must make a sanitizer report.
# The bug is an explicit textual edit that must apply exactly once. When
# it no longer does (the source changed), the copy is written unchanged
# plus a static initializer that stops the test program with a message,
# so the mutation test fails loudly instead of passing without a bug.
#
# usage: plant_bug.py SOURCE OUTPUT OLD NEW
import pathlib
import sys

STOP = '''
// plant_bug.py: the planted bug no longer applies to this source.
#include <cstdio>
#include <cstdlib>
namespace {{
[[maybe_unused]] const bool planted_bug_missing =
    (std::fputs("plant_bug.py: {what} not found exactly once in {source}: "
                "update the mutation in tests/cuda_emulation/CMakeLists.txt\\n", stderr),
     std::abort(), true);
}}  // namespace
'''


def main():
    source, output, old, new = sys.argv[1:5]
    text = pathlib.Path(source).read_text()
    count = text.count(old)
    if count == 1:
        text = text.replace(old, new)
    else:
        print(f'plant_bug.py: warning: "{old}" occurs {count} times in {source}, '
              'the mutation test will fail')
        what = old.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
        text += STOP.format(what=f'\\"{what}\\"', source=source)
    out = pathlib.Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


if __name__ == '__main__':
    main()
