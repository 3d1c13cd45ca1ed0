#!/usr/bin/env python3
"""Writes an MNIST-style image set as an image folder of PNG files, the layout
`tfm vit train --data DIR` reads as torchvision's ImageFolder does:

    OUT/train/<class>/<n>.png   the training split
    OUT/val/<class>/<n>.png     the test split

Fashion-MNIST's classes get their names, other sets their digits. Standard library only.

    /usr/bin/python3 scripts/idx_to_folder.py /usr/share/datasets/fashion-mnist fashion-png [--limit N]
"""
import argparse
import gzip
import os
import struct
import zlib

FASHION = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def find(directory, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    raise SystemExit(f"{directory}/{stem}[.gz]: not found")


def png(width, height, grey):
    """An 8-bit greyscale PNG: each row behind filter byte 0."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + grey[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def write_split(source, split, out, names, limit):
    (count, rows, cols), pixels = read_idx(find(source, split + "-images-idx3-ubyte"))
    _, labels = read_idx(find(source, split + "-labels-idx1-ubyte"))
    written = [0] * len(names)  # (a limit per class: every class in both splits, as vit train wants them)
    for i in range(count):
        if limit and written[labels[i]] >= limit:
            continue
        written[labels[i]] += 1
        folder = os.path.join(out, names[labels[i]])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{i:05d}.png"), "wb") as f:
            f.write(png(cols, rows, pixels[i * rows * cols:(i + 1) * rows * cols]))
    return sum(written)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="directory of {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]")
    parser.add_argument("out", help="the image folder to write")
    parser.add_argument("--limit", type=int, default=0, help="at most this many images of each class in each split (0: all)")
    a = parser.parse_args()
    names = FASHION if "fashion" in os.path.abspath(a.source) else [str(d) for d in range(10)]
    train = write_split(a.source, "train", os.path.join(a.out, "train"), names, a.limit)
    val = write_split(a.source, "t10k", os.path.join(a.out, "val"), names, a.limit)
    print(f"{a.out}: {train} training and {val} validation images in {len(names)} class folders")


if __name__ == "__main__":
    main()
