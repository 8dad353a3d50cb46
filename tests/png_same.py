#!/usr/bin/env python3
"""Whether two PNG pictures look the same: the same size, and at most 0.5% of the pixels differ
by more than 48 of 255 in a channel (anti-aliasing and font hinting may move a few edge pixels;
a changed value, label, colour scale or layout moves far more). Plain zlib, no imaging library.

Usage: tests/png_same.py EXPECTED.png ACTUAL.png   exit 0 alike, 1 not (saying how), 2 unreadable
"""
import struct
import sys
import zlib


def decode(path):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit, non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s is not a PNG" % path)
    pos, idat, width = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace:
                raise ValueError("%s: only 8-bit non-interlaced pictures" % path)
            bpp = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
            if not bpp:
                raise ValueError("%s: colour type %d" % (path, color))
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, rows, bpp


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    try:
        we, he, re_, bpp_e = decode(sys.argv[1])
        wa, ha, ra, bpp_a = decode(sys.argv[2])
    except (OSError, ValueError, zlib.error) as e:
        print("png_same: %s" % e)
        return 2
    if (we, he, bpp_e) != (wa, ha, bpp_a):
        print("png_same: %s is %dx%d, %s is %dx%d" % (sys.argv[1], we, he, sys.argv[2], wa, ha))
        return 1
    differ = 0
    for y in range(he):
        e, a = re_[y], ra[y]
        for x in range(we):
            if any(abs(e[x * bpp_e + k] - a[x * bpp_e + k]) > 48 for k in range(bpp_e)):
                differ += 1
    if differ > 0.005 * we * he:
        print("png_same: %s and %s differ in %d of %d pixels" % (sys.argv[1], sys.argv[2], differ, we * he))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
