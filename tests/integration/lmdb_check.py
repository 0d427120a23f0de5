#!/usr/bin/env python3
"""Checks LMDB databases (read with python3-lmdb) and `dlfs-ctl lmdb show
--json` reports for the LMDB scenarios.

Used by 15_lmdb_ctl.sh and 16_lmdb_views.sh:

  lmdb_check.py files SRC DB raw|datum
      DB holds one record per file of SRC, in canonical order (paths sorted
      byte-wise): raw: key "%08d" % i, the file's bytes as value; datum: key
      "%08d_<path>", a Caffe Datum (protobuf, decoded here by hand) whose
      data is the file's bytes, encoded = 1, label = the index of the file's
      top directory among SRC's top directories (0 for files at the top).
  lmdb_check.py fixed-datum SRC DB [--records 500] [--record-size 3073] [--shape 3,32,32]
      DB has RECORDS entries and its first (key 00000000) is the Datum of the
      first record of SRC's first file (CIFAR-10 style: 1 label byte, then
      the pixels): channels, height, width, data, label.
  lmdb_check.py same-records A B
      python3-lmdb reads the same (key, value) pairs, at least one, from both.
  lmdb_check.py show-json FILE|- [--records N] [--sidecar-matches] [--form F]
                [--fixed-bin yes|no] [--locations-from S] [--sidecar-bytes-below B]
                [--print-form]
      `lmdb show --json` output (FILE, or standard input for -) says what the
      options ask; --print-form prints the sidecar's form.
"""
import argparse
import json
import os
import sys

from checklib import fail


def check(cond, msg):
    if not cond:
        fail(msg)


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def enc_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(0x80 | (v & 0x7F))
        v >>= 7
    out.append(v)
    return bytes(out)


def datum(b):
    """Field number -> value (bytes for length-delimited fields, else int)."""
    out, i = {}, 0
    while i < len(b):
        tag, i = varint(b, i)
        if tag & 7 == 2:
            n, i = varint(b, i)
            out[tag >> 3] = bytes(b[i:i + n])
            i += n
        else:
            out[tag >> 3], i = varint(b, i)
    return out


def files(args):
    import lmdb

    src, db, mode = args.src, args.db, args.values
    paths = []
    for root, dirs, names in os.walk(src):
        for f in names:
            paths.append(os.path.relpath(os.path.join(root, f), src))
    paths.sort(key=lambda p: p.encode())
    top = sorted({p.split("/")[0] for p in paths if "/" in p}, key=lambda p: p.encode())

    env = lmdb.open(db, readonly=True, lock=False)
    with env.begin() as txn:
        recs = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    check(len(recs) == len(paths), f"{len(recs)} records for {len(paths)} files")
    for i, ((k, v), p) in enumerate(zip(recs, paths)):
        with open(os.path.join(src, p), "rb") as f:
            want = f.read()
        if mode == "raw":
            check(k == b"%08d" % i, f"record {i}: key {k!r}")
            check(v == want, f"record {i} ({p}): value differs")
        else:
            check(k == (b"%08d_" % i) + p.encode(), f"record {i}: key {k!r}")
            d = datum(v)
            check(d[4] == want and d.get(7) == 1, f"record {i}: datum data/encoded wrong")
            label = top.index(p.split("/")[0]) if "/" in p else 0
            check(d.get(5, 0) == label, f"record {i}: label {d.get(5)}, want {label}")
    print(f"{len(recs)} records ok ({mode})")


def fixed_datum(args):
    import lmdb

    channels, height, width = (int(x) for x in args.shape.split(","))
    names = sorted(os.listdir(args.src))
    with open(os.path.join(args.src, names[0]), "rb") as f:
        first = f.read(args.record_size)
    env = lmdb.open(args.db, readonly=True, lock=False)
    with env.begin() as txn:
        got = txn.get(b"00000000")
        n = txn.stat()["entries"]
    check(n == args.records, f"{n} records, want {args.records}")
    check(got is not None, "no record 00000000")
    v = bytes(got)
    # channels (field 1), height (2), width (3), data (4: the pixels), label (5)
    want = (b"\x08" + enc_varint(channels) + b"\x10" + enc_varint(height) + b"\x18" + enc_varint(width)
            + b"\x22" + enc_varint(len(first) - 1) + first[1:] + b"\x28" + bytes([first[0]]))
    # A label byte >= 0x80 is a 2-byte varint: only the bytes before it are compared.
    check(v == want or (first[0] >= 0x80 and v[:-2] == want[:-1]), "datum bytes differ")
    print(f"{n} records; the first is the Datum of {names[0]}'s first record")


def same_records(args):
    import lmdb

    def records(d):
        env = lmdb.open(d, readonly=True, lock=False)
        with env.begin() as txn:
            out = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
        env.close()
        return out

    a, b = records(args.a), records(args.b)
    check(len(a) > 0, f"{args.a}: no records")
    check(a == b, f"{args.b}: {len(b)} records, not the {len(a)} of {args.a}")
    print(f"{len(a)} records: the same from both")


def show_json(args):
    if args.file == "-":
        s = json.load(sys.stdin)
    else:
        with open(args.file) as f:
            s = json.load(f)
    sc = s["sidecar"]
    if args.records is not None:
        check(s["records"] == args.records, f"{s['records']} records, want {args.records}")
    if args.sidecar_matches:
        check(sc["present"] and sc["matches"], f"sidecar not present or not matching: {sc}")
    if args.form is not None:
        check(sc["present"] and sc["form"] == args.form and sc["matches"], f"want a matching {args.form} sidecar: {sc}")
    if args.fixed_bin == "yes":
        check(s["fixed_size_bin_view"], "fixed_size_bin_view should be reported available")
    elif args.fixed_bin == "no":
        check(not s["fixed_size_bin_view"], "fixed_size_bin_view reported although the values differ in size")
    if args.locations_from is not None:
        check(s["locations_from"] == args.locations_from, f"locations from {s['locations_from']!r}, want {args.locations_from!r}")
    if args.sidecar_bytes_below is not None:
        check(sc["bytes"] < args.sidecar_bytes_below, f"sidecar of {sc['bytes']} bytes, want < {args.sidecar_bytes_below}")
    if args.print_form:
        print(sc["form"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("files", help="a database ingested from a files dataset")
    f.add_argument("src")
    f.add_argument("db")
    f.add_argument("values", choices=("raw", "datum"))
    f.set_defaults(func=files)
    x = sub.add_parser("fixed-datum", help="a database of Datum values ingested from fixed records")
    x.add_argument("src")
    x.add_argument("db")
    x.add_argument("--records", type=int, default=500)
    x.add_argument("--record-size", type=int, default=3073, help="1 label byte + the pixels")
    x.add_argument("--shape", default="3,32,32", help="channels,height,width")
    x.set_defaults(func=fixed_datum)
    r = sub.add_parser("same-records", help="two databases with the same records")
    r.add_argument("a")
    r.add_argument("b")
    r.set_defaults(func=same_records)
    j = sub.add_parser("show-json", help="dlfs-ctl lmdb show --json output")
    j.add_argument("file", help="a file, or - for standard input")
    j.add_argument("--records", type=int)
    j.add_argument("--sidecar-matches", action="store_true", help="a sidecar is present and matches")
    j.add_argument("--form", help="a present, matching sidecar of this form")
    j.add_argument("--fixed-bin", choices=("yes", "no"), help="whether the .bin view is available")
    j.add_argument("--locations-from")
    j.add_argument("--sidecar-bytes-below", type=int)
    j.add_argument("--print-form", action="store_true")
    j.set_defaults(func=show_json)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
