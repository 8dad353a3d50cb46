"""The safetensors writer every golden script uses (Debian 12 has no safetensors package):
an 8-byte aligned JSON header padded with spaces, tensors in insertion order with contiguous
data offsets, little-endian data, written to a temporary file and renamed."""
import json
import os
import struct

import numpy as np

DTYPES = {np.dtype("float32"): "F32", np.dtype("int64"): "I64", np.dtype("bool"): "BOOL",
          np.dtype("uint8"): "U8"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> torch tensor (float32, int64, bool or uint8); metadata: dict or None."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        a = t.detach().cpu().numpy().copy(order="C")  # (ascontiguousarray would make 0-d 1-d)
        if a.dtype != np.bool_:
            a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        raw = a.tobytes()
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * (-len(js) % 8)  # the data buffer starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
