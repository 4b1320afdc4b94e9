#!/usr/bin/env python3
"""Writes small PyTorch files that ask for far more memory than their size, for the
readers' regression tests (tests/unit/core/checkpoint/torch_pickle_test.cpp). Python's standard
library only: the archives are laid out as torch.save lays them out, with deflated
records where torch.save would store them."""
import struct
import zipfile


def binunicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def binint(v):
    return b"J" + struct.pack("<i", v)


def tensor(key, numel, size, stride):
    """_rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', numel), 0, size, stride, False, OrderedDict())"""
    p = glob("torch._utils", "_rebuild_tensor_v2") + b"("
    p += b"(" + binunicode("storage") + glob("torch", "FloatStorage") + binunicode(key)
    p += binunicode("cpu") + binint(numel) + b"tQ"
    p += binint(0) + b"(" + b"".join(binint(s) for s in size) + b"t"
    p += b"(" + b"".join(binint(s) for s in stride) + b"t"
    p += b"\x89" + glob("collections", "OrderedDict") + b")Rt" + b"R"
    return p


def state_dict(items):
    p = b"\x80\x02}("
    for name, t in items:
        p += binunicode(name) + t
    return p + b"u."


def write(path, records, compress):
    top = path.rsplit(".", 1)[0]
    with zipfile.ZipFile(path, "w") as z:
        for name, data in records:
            z.writestr(zipfile.ZipInfo(f"{top}/{name}"), data,
                       compress_type=zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED)


# data.pkl of 10 MB (a list of None) deflated to about 10 KB.
write("pickle_bomb.pt", [("data.pkl", b"\x80\x02](" + b"N" * (10 << 20) + b"e."),
                         ("byteorder", b"little"), ("version", b"3\n")], {"data.pkl"})
# One tensor whose storage is 8 MB of zeros deflated to about 8 KB.
write("zero_storage.pt", [("data.pkl", state_dict([("w", tensor("0", 2 << 20, [2 << 20], [1]))])),
                          ("byteorder", b"little"), ("data/0", bytes(8 << 20)), ("version", b"3\n")],
      {"data/0"})
# Views of one float with stride 0: a few hundred bytes asking for 5 x 256 MB.
write("stride0_views.pt", [("data.pkl", state_dict([(f"w{i}", tensor("0", 1, [8192, 8191], [0, 0]))
                                                     for i in range(5)])),
                           ("byteorder", b"little"), ("data/0", bytes(4)), ("version", b"3\n")], set())
