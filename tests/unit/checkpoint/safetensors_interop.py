"""Why: our safetensors files must be readable by other tools and theirs by
us. This reader and writer are written from the format's specification
alone (8-byte little-endian header length, JSON header, little-endian data
tiling the rest of the file), independent of our C++ code:
  1. the C++ tool writes the reference tensors; we parse and check them;
  2. we write the same tensors our own way; the C++ tool reads and checks.
Usage: safetensors_interop.py TOOL WORKDIR. Exits 77 (skip) without numpy.
"""
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not available; skipping")
    sys.exit(77)

# The same table as safetensors_interop_tool.cc.
REFERENCES = [
    ("f32", "F32", [2, 3], [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5]),
    ("f16", "F16", [4], [0.0, 1.0, -2.5, 65504.0]),
    ("bf16", "BF16", [2, 2], [1.0, -0.5, 3.0, 256.0]),
    ("e4m3", "F8_E4M3", [4], [0.0, 1.0, -1.75, 448.0]),
    ("e5m2", "F8_E5M2", [4], [0.0, 1.0, -1.5, 57344.0]),
    ("i32", "I32", [3], [-7, 0, 2147483647]),
    ("scalar", "F32", [], [3.25]),
]
ITEM_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I32": 4}


def decode_fp8(code, exponent_bits, mantissa_bits):
    """OCP fp8 code -> float (E4M3: bias 7, S.1111.111 NaN; E5M2: bias 15)."""
    bias = (1 << (exponent_bits - 1)) - 1
    sign = -1.0 if code & 0x80 else 1.0
    exponent = (code >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = code & ((1 << mantissa_bits) - 1)
    if exponent_bits == 4 and exponent == 15 and mantissa == 7:
        return float("nan")
    if exponent_bits == 5 and exponent == 31:
        return sign * float("inf") if mantissa == 0 else float("nan")
    if exponent == 0:
        return sign * mantissa / (1 << mantissa_bits) * 2.0 ** (1 - bias)
    return sign * (1 + mantissa / (1 << mantissa_bits)) * 2.0 ** (exponent - bias)


FP8_FORMATS = {"F8_E4M3": (4, 3), "F8_E5M2": (5, 2)}


def decode(dtype, raw):
    if dtype == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(np.float64).tolist()
    if dtype == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float64).tolist()
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64).tolist()
    if dtype in FP8_FORMATS:
        return [decode_fp8(b, *FP8_FORMATS[dtype]) for b in raw]
    if dtype == "I32":
        return np.frombuffer(raw, dtype="<i4").tolist()
    raise ValueError("unknown dtype " + dtype)


def encode(dtype, values):
    if dtype == "F32":
        return np.array(values, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.array(values, dtype="<f2").tobytes()
    if dtype == "BF16":  # every reference value is exact in bf16: truncate
        bits = np.array(values, dtype="<f4").view(np.uint32) >> 16
        return bits.astype("<u2").tobytes()
    if dtype in FP8_FORMATS:  # the code that decodes to each exact value
        table = {decode_fp8(c, *FP8_FORMATS[dtype]): c for c in range(128)}
        table.update({-decode_fp8(c, *FP8_FORMATS[dtype]): c | 0x80 for c in range(1, 128)})
        return bytes(table[v] for v in values)
    if dtype == "I32":
        return np.array(values, dtype="<i4").tobytes()
    raise ValueError("unknown dtype " + dtype)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check_ours(path):
    content = open(path, "rb").read()
    (length,) = struct.unpack("<Q", content[:8])
    if (8 + length) % 8 != 0:
        fail("header length %d leaves the data unaligned" % length)
    header_bytes = content[8:8 + length]
    if not header_bytes.startswith(b"{") or header_bytes.rstrip(b" ") != header_bytes.strip():
        fail("header is not a JSON object padded with trailing spaces")
    header = json.loads(header_bytes.decode("utf-8"))
    if header.pop("__metadata__", None) != {"origin": "mixtrain"}:
        fail("metadata differs")
    data = content[8 + length:]
    spans = sorted(tuple(entry["data_offsets"]) for entry in header.values())
    covered = 0
    for begin, end in spans:
        if begin != covered:
            fail("data section is not tiled at byte %d" % begin)
        covered = end
    if covered != len(data):
        fail("data section has %d bytes, tensors cover %d" % (len(data), covered))
    if set(header) != {name for name, _, _, _ in REFERENCES}:
        fail("tensor names differ: %s" % sorted(header))
    for name, dtype, shape, values in REFERENCES:
        entry = header[name]
        if entry["dtype"] != dtype or entry["shape"] != shape:
            fail("%s: dtype/shape %s %s" % (name, entry["dtype"], entry["shape"]))
        begin, end = entry["data_offsets"]
        if end - begin != ITEM_SIZE[dtype] * max(1, int(np.prod(shape))):
            fail("%s: span %d does not match its shape" % (name, end - begin))
        decoded = decode(dtype, data[begin:end])
        if decoded != [float(v) if dtype != "I32" else v for v in values]:
            fail("%s: decoded %s, expected %s" % (name, decoded, values))


def write_theirs(path):
    # Data in table order, header keys in reverse order, metadata last,
    # json.dumps' default spacing: all legal, all unlike our writer.
    blobs, entries, offset = [], {}, 0
    for name, dtype, shape, values in REFERENCES:
        blob = encode(dtype, values)
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header = {name: entries[name] for name in reversed(list(entries))}
    header["__metadata__"] = {"origin": "python"}
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    tool, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    ours = os.path.join(workdir, "from_mixtrain.safetensors")
    theirs = os.path.join(workdir, "from_python.safetensors")
    for path in (ours, theirs):
        if os.path.exists(path):
            os.remove(path)
    subprocess.run([tool, "write", ours], check=True)
    check_ours(ours)
    write_theirs(theirs)
    result = subprocess.run([tool, "check", theirs])
    if result.returncode != 0:
        fail("the C++ reader refused or misread the Python-written file")
    print("safetensors interop: both directions agree")


if __name__ == "__main__":
    main()
