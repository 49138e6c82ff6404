"""A small PNG decoder (zlib + struct), enough for browser screenshots: 8-bit RGB or RGBA, not interlaced.

Pure Python and still quick on a full-page screenshot: the 'up' filter and colour searches run as whole-
row operations (big-integer arithmetic, bytes.find); only 'average' and 'paeth' rows loop per byte.
"""

import itertools
import re
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {2: 3, 6: 4}  # colour type -> bytes per pixel at bit depth 8
_LOW_SEVEN_BITS = {}  # row length -> 0x7f7f...; cached masks for the carry-free byte addition


class Image:
    def __init__(self, width, height, channels, rows):
        self.width = width
        self.height = height
        self.channels = channels
        self.rows = rows  # one bytes object per row, channels bytes per pixel

    def count_colour(self, rgb):
        """How many pixels have exactly this (r, g, b) colour."""
        needle, step, count = bytes(rgb), self.channels, 0
        for row in self.rows:
            position = row.find(needle)
            while position >= 0:
                if position % step == 0:  # a match straddling two pixels is not a pixel
                    count += 1
                position = row.find(needle, position + 1)
        return count


def _chunks(data):
    position = len(SIGNATURE)
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        yield data[position + 4:position + 8], data[position + 8:position + 8 + length]
        position += 12 + length


def _add_bytes(first, second):
    """Byte-wise (a + b) mod 256 of two equal-length byte strings, as one big-integer operation."""
    length = len(first)
    low = _LOW_SEVEN_BITS.get(length)
    if low is None:
        low = _LOW_SEVEN_BITS[length] = int.from_bytes(b"\x7f" * length, "big")
    a, b = int.from_bytes(first, "big"), int.from_bytes(second, "big")
    # Add the low 7 bits (no carry can leave a byte), then xor in the top bits: carry-free per byte.
    total = ((a & low) + (b & low)) ^ ((a ^ b) & ~low)
    return total.to_bytes(length, "big")


def _unfilter_sub(line, bpp):
    row = bytearray(len(line))
    for channel in range(bpp):
        sums = itertools.accumulate(line[channel::bpp])
        row[channel::bpp] = bytes(map((0xFF).__and__, sums))
    return bytes(row)


def _unfilter_average(line, previous, bpp):
    row = bytearray(line)
    for i in range(len(row)):
        left = row[i - bpp] if i >= bpp else 0
        row[i] = (row[i] + ((left + previous[i]) >> 1)) & 0xFF
    return bytes(row)


def _paeth_bytes(row, previous, bpp, start, end):
    for i in range(start, end):
        left = row[i - bpp] if i >= bpp else 0
        up, up_left = previous[i], previous[i - bpp] if i >= bpp else 0
        to_left, to_up, to_up_left = abs(up - up_left), abs(left - up_left), abs(left + up - 2 * up_left)
        if to_left <= to_up and to_left <= to_up_left:
            row[i] = (row[i] + left) & 0xFF
        elif to_up <= to_up_left:
            row[i] = (row[i] + up) & 0xFF
        else:
            row[i] = (row[i] + up_left) & 0xFF


def _unfilter_paeth(line, previous, bpp):
    """Screenshots are mostly flat background: where the row above repeats its pixel (up == up_left)
    paeth predicts 'left', so a run of zero residuals there just repeats the pixel to the left.
    Those runs are filled with slicing; only the rest is decoded byte by byte."""
    row = bytearray(line)
    cursor = 0
    for start, end in _flat_zero_runs(line, previous, bpp):
        _paeth_bytes(row, previous, bpp, cursor, start)
        pixel = bytes(row[start - bpp:start])
        row[start:end] = (pixel * ((end - start) // bpp + 1))[:end - start]
        cursor = end
    _paeth_bytes(row, previous, bpp, cursor, len(row))
    return bytes(row)


def _flat_zero_runs(line, previous, bpp, shortest=8):
    """(start, end) byte ranges with zero residuals where the row above equals itself one pixel left."""
    zero_run = re.compile(b"\\x00{%d,}" % (shortest * bpp))
    for run in zero_run.finditer(line):
        start, end = max(run.start(), bpp), run.end()
        above = int.from_bytes(previous[start:end], "big") ^ int.from_bytes(previous[start - bpp:end - bpp], "big")
        same_as_left = above.to_bytes(end - start, "big")
        for flat in zero_run.finditer(same_as_left):
            yield start + flat.start(), start + flat.end()


def _unfilter(kind, line, previous, bpp):
    if kind == 0:
        return bytes(line)
    if kind == 1:
        return _unfilter_sub(line, bpp)
    if kind == 2:
        return _add_bytes(line, previous)
    if kind == 3:
        return _unfilter_average(line, previous, bpp)
    if kind == 4:
        return _unfilter_paeth(line, previous, bpp)
    raise ValueError(f"unknown PNG filter {kind}")


def decode(data):
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG file")
    header, compressed = None, []
    for kind, body in _chunks(data):
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
    if header is None:
        raise ValueError("PNG without a header chunk")
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in _CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour_type}, interlace {interlace}")
    channels = _CHANNELS[colour_type]
    raw = zlib.decompress(b"".join(compressed))
    stride = width * channels
    rows, previous = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        previous = _unfilter(raw[start], raw[start + 1:start + 1 + stride], previous, channels)
        rows.append(previous)
    return Image(width, height, channels, rows)
