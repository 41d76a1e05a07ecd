#!/usr/bin/python3
"""An independent safetensors reader (json and struct only, no ringtrain code) for the tests.

  safetensors_tool.py check-against-checkpoint FILE CKPT
      FILE's tensors are exactly CKPT's parameters (read with h5dump): the same names, no
      lm_head, every value bit for bit, the GPT blocks' dense weights transposed ({in, out},
      Hugging Face's Conv1D), the rest as stored; metadata "format" is "pt".
  safetensors_tool.py compare FILE1 FILE2 TOLERANCE
      the same names and shapes, every value within TOLERANCE; prints the largest difference.
  safetensors_tool.py differ FILE1 FILE2 AT-LEAST
      the same names and shapes, and some value differs by at least AT-LEAST.
  safetensors_tool.py without FILE OUT NAME      OUT is FILE without tensor NAME.
  safetensors_tool.py overlap FILE OUT           OUT's first two tensors (by offset) share bytes.
  safetensors_tool.py dtype FILE OUT NAME DTYPE  OUT is FILE with NAME's dtype said to be DTYPE
                                                 (the same bytes: a valid file for a 4-byte type).
  safetensors_tool.py value FILE OUT NAME INDEX VALUE
                                                 OUT is FILE with NAME's value INDEX set to VALUE
                                                 (nan, inf, -inf or a number).
  safetensors_tool.py sparse OUT NAME BYTES      OUT holds one F32 tensor NAME of BYTES bytes, a
                                                 valid file whose data is a hole (no disk used).
  safetensors_tool.py long-header OUT LENGTH     OUT says its header is LENGTH bytes, and is a
                                                 sparse file larger than that.

The reader checks the format as the specification states it: 8-byte little-endian header
length, a JSON object starting with '{', offsets relative to the data after the header, the
tensors back to back covering all of it.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def read(path):
    """(metadata, {name: (shape, raw little-endian bytes)}) of a safetensors file."""
    blob = open(path, "rb").read()
    (length,) = struct.unpack("<Q", blob[:8])
    header_text = blob[8:8 + length]
    if not header_text.startswith(b"{"):
        fail(f"{path}: the header does not start with '{{'")
    header = json.loads(header_text)
    data = blob[8 + length:]
    metadata = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, stop = info["data_offsets"]
        if info["dtype"] != "F32" or begin != end:
            fail(f"{path}: {name}: dtype {info['dtype']}, begins at {begin}, expected {end}")
        count = 1
        for d in info["shape"]:
            count *= d
        if stop - begin != 4 * count:
            fail(f"{path}: {name}: {stop - begin} bytes for shape {info['shape']}")
        tensors[name] = (list(info["shape"]), data[begin:stop])
        end = stop
    if end != len(data):
        fail(f"{path}: the tensors cover {end} of {len(data)} bytes")
    return metadata, tensors


def floats(raw):
    return struct.unpack("<%df" % (len(raw) // 4), raw)


def transposed(raw, rows, cols):
    values = floats(raw)
    return struct.pack("<%df" % len(values),
                       *(values[r * cols + c] for c in range(cols) for r in range(rows)))


def checkpoint_parameter(checkpoint, name, scratch):
    """The raw little-endian float32 bytes of /parameters/NAME, through h5dump."""
    out = os.path.join(scratch, "tensor.bin")
    subprocess.run(["h5dump", "-d", "/parameters/" + name, "-b", "LE", "-o", out, checkpoint],
                   check=True, stdout=subprocess.DEVNULL)
    return open(out, "rb").read()


def checkpoint_names(checkpoint):
    listing = subprocess.run(["h5ls", checkpoint + "/parameters"], check=True,
                             capture_output=True, text=True).stdout
    return {line.split()[0] for line in listing.splitlines() if line.strip()}


def check_against_checkpoint(path, checkpoint):
    metadata, tensors = read(path)
    if metadata.get("format") != "pt":
        fail(f"{path}: metadata {metadata}")
    names = checkpoint_names(checkpoint)
    if set(tensors) != names or any(n.startswith("lm_head") for n in tensors):
        fail(f"names {sorted(tensors)} against the checkpoint's {sorted(names)}")
    moved = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name, (shape, raw) in tensors.items():
            saved = checkpoint_parameter(checkpoint, name, scratch)
            if name.startswith("h.") and name.endswith(CONV1D):
                saved = transposed(saved, shape[1], shape[0])  # saved {out, in}, file {in, out}
                moved += 1
            if saved != raw:
                fail(f"{name}: the file's values are not the checkpoint's")
    print(f"ok: {len(tensors)} tensors equal to the checkpoint's ({moved} transposed)")


def same_layout(a, b):
    if {n: s for n, (s, _) in a.items()} != {n: s for n, (s, _) in b.items()}:
        fail("the two files hold other names or shapes")


def largest_difference(path1, path2):
    _, a = read(path1)
    _, b = read(path2)
    same_layout(a, b)
    return max(max((abs(x - y) for x, y in zip(floats(a[n][1]), floats(b[n][1]))), default=0)
               for n in a)


def write(path, metadata, tensors, offsets):
    header = dict(offsets)
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    data = b"".join(raw for _, raw in tensors.values())
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)


def layout(tensors):
    offsets, end = {}, 0
    for name, (shape, raw) in tensors.items():
        offsets[name] = {"dtype": "F32", "shape": shape, "data_offsets": [end, end + len(raw)]}
        end += len(raw)
    return offsets


def main(argv):
    command = argv[1]
    if command == "check-against-checkpoint":
        check_against_checkpoint(argv[2], argv[3])
    elif command == "compare":
        largest = largest_difference(argv[2], argv[3])
        if largest > float(argv[4]):
            fail(f"values differ by up to {largest}")
        print(f"ok: the largest difference is {largest}")
    elif command == "differ":
        largest = largest_difference(argv[2], argv[3])
        if largest < float(argv[4]):
            fail(f"the values differ by at most {largest}")
        print(f"ok: they differ by up to {largest}")
    elif command == "without":
        metadata, tensors = read(argv[2])
        del tensors[argv[4]]
        write(argv[3], metadata, tensors, layout(tensors))
    elif command == "overlap":
        metadata, tensors = read(argv[2])
        offsets = layout(tensors)
        second = list(offsets.values())[1]
        second["data_offsets"] = [o - 4 for o in second["data_offsets"]]
        write(argv[3], metadata, tensors, offsets)
    elif command == "dtype":
        metadata, tensors = read(argv[2])
        offsets = layout(tensors)
        offsets[argv[4]]["dtype"] = argv[5]
        write(argv[3], metadata, tensors, offsets)
    elif command == "value":
        metadata, tensors = read(argv[2])
        shape, raw = tensors[argv[4]]
        index = int(argv[5])
        raw = raw[:4 * index] + struct.pack("<f", float(argv[6])) + raw[4 * index + 4:]
        tensors[argv[4]] = (shape, raw)
        write(argv[3], metadata, tensors, layout(tensors))
    elif command == "sparse":
        size = int(argv[4])
        header = {argv[3]: {"dtype": "F32", "shape": [size // 4], "data_offsets": [0, size]}}
        text = json.dumps(header).encode()
        text += b" " * (-(8 + len(text)) % 8)
        with open(argv[2], "wb") as out:
            out.write(struct.pack("<Q", len(text)) + text)
            out.truncate(8 + len(text) + size)
    elif command == "long-header":
        length = int(argv[3])
        with open(argv[2], "wb") as out:
            out.write(struct.pack("<Q", length) + b"{}")
            out.truncate(8 + 2 * length)
    else:
        fail("unknown command " + command)


if __name__ == "__main__":
    main(sys.argv)
