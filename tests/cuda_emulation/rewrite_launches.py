# Why: the host emulation compiles the real kernel sources with g++, which
# knows neither the <<<...>>> launch syntax nor per-block __shared__ memory.
# This rewrites one .cu file into a C++ source that cuda_emulation.h (force-
# included) can run:
#   k<<<grid, block, smem, stream>>>(args);
#     -> ::emu::launch(dim3(grid), dim3(block), smem, stream,
#                      [](auto... a) { k(a...); }, args);
#   __shared__ T name[N];
#     -> static T name_per_multiprocessor[::emu::kConcurrentBlocks][N];
#        auto& name = name_per_multiprocessor[::emu::multiprocessor_index()];
# The arguments are evaluated once on the host, as a launch does. Line
# numbers are kept and a #line directive names the .cu file, so compiler
# errors and sanitizer reports point at the real source. Anything left over
# (a launch or __shared__ declaration of another form) is an error, never
# silently compiled as plain C++.
#
# usage: rewrite_launches.py INPUT.cu OUTPUT.cc
import pathlib
import re
import sys

LAUNCH = re.compile(
    r'(?P<kernel>[A-Za-z_][\w:]*(?:<[^<>;()]*>)?)\s*<<<(?P<config>.*?)>>>\s*\((?P<args>.*?)\);',
    re.S)
SHARED = re.compile(
    r'__shared__\s+(?P<type>[\w:<>]+)\s+(?P<name>\w+)\s*(?P<dims>(?:\[[^\]]+\]\s*)+);')


def split_top_level(text):
    """Splits at the commas outside brackets."""
    parts, depth, current = [], 0, ''
    for ch in text:
        if ch in '([{<':
            depth += 1
        elif ch in ')]}>':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(current.strip())
            current = ''
        else:
            current += ch
    parts.append(current.strip())
    return parts


def keep_lines(original, replacement):
    """The replacement padded with newlines to as many lines as the original."""
    return replacement + '\n' * (original.count('\n') - replacement.count('\n'))


def rewrite_launch(match):
    config = split_top_level(match['config'])
    if len(config) != 4:
        sys.exit(f'rewrite_launches.py: expected <<<grid, block, smem, stream>>>, '
                 f'got <<<{match["config"]}>>>')
    grid, block, smem, stream = config
    launch = (f'::emu::launch(dim3({grid}), dim3({block}), {smem}, {stream}, '
              f'[](auto... a) {{ {match["kernel"]}(a...); }}, {match["args"]});')
    return keep_lines(match.group(0), launch)


def rewrite_shared(match):
    name = match['name']
    dims = ''.join(match['dims'].split())
    declaration = (f'static {match["type"]} {name}_per_multiprocessor'
                   f'[::emu::kConcurrentBlocks]{dims}; '
                   f'auto& {name} = {name}_per_multiprocessor[::emu::multiprocessor_index()];')
    return keep_lines(match.group(0), declaration)


def main():
    source, output = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    text = SHARED.sub(rewrite_shared, LAUNCH.sub(rewrite_launch, source.read_text()))
    for leftover in ('<<<', '__shared__'):
        if leftover in text:
            line = text[:text.index(leftover)].count('\n') + 1
            sys.exit(f'{source}:{line}: rewrite_launches.py cannot rewrite this {leftover}')
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(f'#line 1 "{source}"\n' + text)


if __name__ == '__main__':
    main()
