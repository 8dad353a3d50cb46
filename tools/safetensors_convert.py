#!/usr/bin/env python3
"""Convert a PyTorch state_dict (or any named tensors) to safetensors and back, with numpy alone.

torch 1.13 has no `safetensors` package; this script needs only numpy, and torch only to read or
write .pt files. The safetensors layout it reads and writes (the format's spec): an 8-byte
little-endian header length N, N bytes of JSON {"__metadata__": {str: str}, name: {"dtype",
"shape", "data_offsets": [begin, end]}} padded with spaces to a multiple of 8, then the tensors'
bytes, little-endian, row-major, back to back.

    python3 tools/safetensors_convert.py IN OUT [--add-prefix P] [--strip-prefix P]

IN and OUT by extension: .safetensors, .npz (numpy.savez), or .pt/.pth/.bin (torch.load /
torch.save; a state_dict, a dict holding one under "state_dict" or "model", or a whole
nn.Module). Keys keep the state_dict's order. Examples:

    python3 tools/safetensors_convert.py mha.pt mha.safetensors     # for attn_params_load
    python3 tools/safetensors_convert.py mha.safetensors mha.pt     # for module.load_state_dict

As a module: save_file(dict_of_arrays, path, metadata=None) and load_file(path) -> (dict of
numpy arrays, metadata). BF16 tensors are read as float32 (numpy has no bfloat16); from torch
they are written as BF16.
"""
import argparse
import collections
import json
import struct
import sys

import numpy as np

# safetensors dtype <-> numpy dtype (little-endian); BF16 travels as raw uint16 bits
DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
BF16 = "BF16"


class Bf16:
    """bfloat16 values as their raw uint16 bits (numpy has no bfloat16)."""

    def __init__(self, bits):
        self.bits = np.ascontiguousarray(bits, dtype="<u2")
        self.shape = self.bits.shape

    def to_float32(self):
        return (self.bits.astype("<u4") << 16).view("<f4")


def _dtype_name(array):
    if isinstance(array, Bf16):
        return BF16
    for name, dt in DTYPES.items():
        if array.dtype == dt or array.dtype == dt.newbyteorder("="):
            return name
    raise ValueError(f"dtype {array.dtype} has no safetensors equivalent this script writes")


def save_file(tensors, path, metadata=None):
    """Writes {name: numpy array or Bf16} to path in order; metadata: {str: str} or None."""
    header = collections.OrderedDict()
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, offset = [], 0
    for name, array in tensors.items():
        dtype = _dtype_name(array)
        data = array.bits if dtype == BF16 else np.ascontiguousarray(array, dtype=DTYPES[dtype])
        blob = data.tobytes()
        header[name] = {"dtype": dtype, "shape": list(data.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def load_file(path):
    """Reads path: (OrderedDict {name: numpy array}, metadata dict), checking the layout."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"{path}: header of {n} bytes, the file has {len(raw) - 8} after the length")
    header = json.loads(raw[8:8 + n].decode("utf-8"), object_pairs_hook=collections.OrderedDict)
    data = memoryview(raw)[8 + n:]
    metadata = dict(header.pop("__metadata__", {}) or {})
    out = collections.OrderedDict()
    for name, info in header.items():
        dtype, shape = info["dtype"], tuple(int(d) for d in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name!r} has data_offsets [{begin}, {end}] outside the data")
        item = 2 if dtype == BF16 else DTYPES[dtype].itemsize if dtype in DTYPES else None
        if item is None:
            raise ValueError(f"{path}: tensor {name!r} has dtype {dtype}, not one this script reads")
        if (end - begin) != item * int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name!r}: {end - begin} bytes for shape {list(shape)} of {dtype}")
        if dtype == BF16:
            out[name] = Bf16(np.frombuffer(data[begin:end], dtype="<u2").reshape(shape)).to_float32()
        else:
            out[name] = np.frombuffer(data[begin:end], dtype=DTYPES[dtype]).reshape(shape).copy()
    return out, metadata


def _torch():
    try:
        import torch
    except ImportError:
        sys.exit("safetensors_convert: .pt files need torch (python3 -c 'import torch' failed)")
    return torch


def _state_dict_of(obj, torch):
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, dict) and not any(torch.is_tensor(v) for v in obj.values()):
        for key in ("state_dict", "model"):
            if isinstance(obj.get(key), dict):
                return _state_dict_of(obj[key], torch)
    if not isinstance(obj, dict):
        sys.exit(f"safetensors_convert: expected a state_dict (a dict of tensors), got {type(obj).__name__}")
    skipped = [k for k, v in obj.items() if not torch.is_tensor(v)]
    if skipped:
        print(f"safetensors_convert: skipped entries that are not tensors: {', '.join(map(str, skipped))}",
              file=sys.stderr)
    return collections.OrderedDict((k, v) for k, v in obj.items() if torch.is_tensor(v))


def read_any(path):
    """{name: numpy array or Bf16}, metadata from .safetensors, .npz or a torch file."""
    if path.endswith(".safetensors"):
        return load_file(path)
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return collections.OrderedDict((k, z[k]) for k in z.files), {}
    torch = _torch()
    sd = _state_dict_of(torch.load(path, map_location="cpu"), torch)
    out = collections.OrderedDict()
    for name, t in sd.items():
        t = t.detach().cpu().contiguous()
        out[name] = Bf16(t.view(torch.int16).numpy().view("<u2")) if t.dtype == torch.bfloat16 else t.numpy()
    return out, {"format": "pt"}


def write_any(tensors, metadata, path):
    if path.endswith(".safetensors"):
        save_file(tensors, path, metadata)
    elif path.endswith(".npz"):
        np.savez(path, **{k: (v.to_float32() if isinstance(v, Bf16) else v) for k, v in tensors.items()})
    else:
        torch = _torch()
        torch.save(collections.OrderedDict(
            (k, torch.from_numpy(np.array(v.to_float32() if isinstance(v, Bf16) else v))) for k, v in tensors.items()),
            path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help=".safetensors, .npz or .pt/.pth/.bin")
    ap.add_argument("output", help=".safetensors, .npz or .pt/.pth/.bin")
    ap.add_argument("--strip-prefix", default="", help="drop this prefix from the keys that have it")
    ap.add_argument("--add-prefix", default="", help="put this prefix before every key")
    args = ap.parse_args(argv)
    tensors, metadata = read_any(args.input)
    renamed = collections.OrderedDict()
    for name, array in tensors.items():
        if args.strip_prefix and name.startswith(args.strip_prefix):
            name = name[len(args.strip_prefix):]
        renamed[args.add_prefix + name] = array
    write_any(renamed, metadata, args.output)
    print(f"{args.output}: {len(renamed)} tensors")


if __name__ == "__main__":
    main()
