#!/usr/bin/env python3
"""Checks mosgrad's safetensors files against the format spec, with PyTorch. Never run by make test.

The `safetensors` package is not installable on the build machines (no python3-safetensors in
Debian bookworm, no network for pip), so this script reads and writes the format by the spec
(https://github.com/huggingface/safetensors, README "Format") with a few lines of struct/json, and
mirrors the reference writer's byte layout (safetensors/src/tensor.rs, `prepare`): compact JSON,
"__metadata__" first, tensors sorted by (dtype descending in the reference's enum order, name), data
in that order, header padded with spaces to a multiple of 8.
When the package is importable, every command also cross-checks against it.

  python3 tools/check_safetensors.py gen-fixture [OUT]   write tests/fixtures/tiny.safetensors
  python3 tools/check_safetensors.py dump FILE           validate strictly and print every tensor
  python3 tools/check_safetensors.py selftest            spec writer -> spec reader round trip

tests/io/test_safetensors.cpp compares mosgrad's writer byte for byte with the fixture and reads it back.
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {  # name -> (torch dtype, bytes per element); the reference's list, enough to validate sizes
    "F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "I32": (torch.int32, 4),
    "I16": (torch.int16, 2), "I8": (torch.int8, 1), "U8": (torch.uint8, 1), "BOOL": (torch.bool, 1),
}
NAME_OF = {v[0]: k for k, v in DTYPES.items()}
# The reference writer orders tensors by its Dtype enum, descending ("by alignment"), then by name.
ENUM_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny.safetensors")


def try_reference():
    try:
        import safetensors.torch as st  # noqa: F401
        return st
    except ImportError:
        return None


def spec_bytes(tensors, metadata=None):
    """The file the reference implementation writes for `tensors` (dict name -> tensor)."""
    order = sorted(tensors, key=lambda n: (-ENUM_ORDER.index(NAME_OF[tensors[n].dtype]), n))
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in order:
        t = tensors[name].contiguous()
        blob = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes() if t.numel() else b""
        header[name] = {"dtype": NAME_OF[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in header")
    return dict(pairs)


def spec_read(path):
    """Strict reader: returns (dict name -> tensor in file order, metadata). Raises on any violation."""
    with open(path, "rb") as f:
        b = f.read()
    if len(b) < 8:
        raise ValueError(f"{path}: truncated ({len(b)} bytes)")
    (n,) = struct.unpack("<Q", b[:8])
    if n > len(b) - 8:
        raise ValueError(f"{path}: header length {n} larger than the file")
    raw = b[8:8 + n]
    if not raw.startswith(b"{"):
        raise ValueError(f"{path}: header does not start with '{{'")
    header = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
    meta = header.pop("__metadata__", {}) or {}
    if not all(isinstance(v, str) for v in meta.values()):
        raise ValueError(f"{path}: metadata values must be strings")
    data = b[8 + n:]
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    covered, out = 0, {}
    for name, info in entries:
        dt, size = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        if begin != covered:
            raise ValueError(f"{path}: '{name}' starts at {begin}, expected {covered} (hole or overlap)")
        if end - begin != size * math.prod(info["shape"]):
            raise ValueError(f"{path}: '{name}' byte range does not match its shape")
        covered = end
        chunk = bytearray(data[begin:end])
        t = torch.frombuffer(chunk, dtype=dt) if chunk else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"])
    if covered != len(data):
        raise ValueError(f"{path}: data section has {len(data)} bytes, tensors cover {covered}")
    return out, meta


def fixture_tensors():
    # Keep in sync with the Safetensors.MatchesPyTorchFixture test.
    return {
        "a.bias": torch.tensor([0.5, -1.25, 3.0]),
        "b.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 - 0.3,
        "c.scalar": torch.tensor(math.pi, dtype=torch.float32),
        "d.empty": torch.zeros(0, 4),
        "e.special": torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-45], dtype=torch.float32),
    }


FIXTURE_METADATA = {"note": 'tiny "fixture"\tfor mosgrad \u2013 \u00fc'}


def gen_fixture(out):
    blob = spec_bytes(fixture_tensors(), FIXTURE_METADATA)
    st = try_reference()
    if st is not None:
        ref = st.save(fixture_tensors(), metadata=FIXTURE_METADATA)
        assert ref == blob, "reference safetensors writes different bytes than the spec writer"
        print("cross-checked with the safetensors package")
    with open(out, "wb") as f:
        f.write(blob)
    print(f"wrote {out} ({len(blob)} bytes)")
    selfcheck(out)


def selfcheck(path):
    got, meta = spec_read(path)
    want = fixture_tensors()
    assert list(got) == sorted(want), list(got)
    for name, t in want.items():
        assert got[name].shape == t.shape, name
        # Bit-exact, NaN included: compare the raw bits.
        assert torch.equal(got[name].view(torch.int32), t.view(torch.int32)), name
    assert meta == FIXTURE_METADATA, meta
    print(f"{path}: matches the fixture tensors bit for bit")


def dump(path):
    tensors, meta = spec_read(path)
    st = try_reference()
    if st is not None:
        ref = st.load_file(path)
        assert set(ref) == set(tensors) and all(torch.equal(ref[k].view(-1).view(torch.uint8), tensors[k].view(-1).view(torch.uint8)) for k in ref)
        print("cross-checked with the safetensors package")
    print(json.dumps({"metadata": meta}, ensure_ascii=False))
    for name, t in tensors.items():
        values = [float(v).hex() for v in t.reshape(-1).tolist()]
        print(json.dumps({"name": name, "dtype": NAME_OF[t.dtype], "shape": list(t.shape), "values": values}))


def selftest():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        with open(p, "wb") as f:
            f.write(spec_bytes(fixture_tensors(), FIXTURE_METADATA))
        selfcheck(p)
        with open(p, "rb") as f:
            b = f.read()
        assert (8 + struct.unpack("<Q", b[:8])[0]) % 8 == 0, "data section not 8-byte aligned"
    print("selftest ok")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "selftest"
    if cmd == "gen-fixture":
        gen_fixture(sys.argv[2] if len(sys.argv) > 2 else FIXTURE)
    elif cmd == "dump" and len(sys.argv) == 3:
        dump(sys.argv[2])
    elif cmd == "selftest":
        selftest()
    else:
        sys.exit(__doc__)
