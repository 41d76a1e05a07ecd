#!/usr/bin/env python3
"""Gives arbitrary bytes a valid ringtrain checkpoint header (what the checkpoint fuzzer's
sealed() does): magic, format version 2, the HDF5 part's length and CRC-32C, the step, and the
header's own CRC-32C. What follows the 512-byte header is left as it is, so a forged HDF5 part
reaches libhdf5, as a deliberately forged file would.

    seal_checkpoint.py INPUT OUTPUT [STEP]

Without STEP the step is the one in INPUT's header bytes (made non-negative), as the fuzzer
keeps it; it prints the step it wrote.
"""
import struct
import sys

HEADER_BYTES = 512


def crc32c(data: bytes) -> int:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def main() -> int:
    source, target = sys.argv[1], sys.argv[2]
    data = bytearray(open(source, "rb").read())
    if len(data) <= HEADER_BYTES:
        print(f"{source}: {len(data)} bytes, no room for an HDF5 part", file=sys.stderr)
        return 1
    if len(sys.argv) > 3:
        step = int(sys.argv[3])
    else:
        step = struct.unpack_from("<Q", data, 36)[0] & 0x7FFFFFFFFFFFFFFF
    image = bytes(data[HEADER_BYTES:])
    header = bytearray(HEADER_BYTES)
    header[0:14] = b"ringtrain-ckpt"
    struct.pack_into("<IIQIq", header, 16, 2, HEADER_BYTES, len(image), crc32c(image), step)
    struct.pack_into("<I", header, 44, crc32c(bytes(header[:44])))
    with open(target, "wb") as f:
        f.write(bytes(header) + image)
    print(step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
