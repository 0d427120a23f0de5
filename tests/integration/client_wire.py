"""The client protocol (docs/client-protocol.md) written from the spec alone,
for the scenarios that test the daemon's end: no python/dlfs code, so a bug
shared by the daemon and the Python client cannot hide here."""
import array
import json
import mmap
import os
import socket
import struct

REPLY_MAX = 256 << 10
RECORD = struct.Struct("<QQIHH")


class WireError(Exception):
    def __init__(self, header):
        super().__init__(f"{header.get('code')}: {header.get('error')}")
        self.code, self.header = header.get("code"), header


def find_socket(dataset_dir):
    index = os.path.join(dataset_dir, "epochs", "0", "1", "0.index")
    return (os.getxattr(index, "user.dlfs.client_socket").decode(),
            os.getxattr(index, "user.dlfs.dataset").decode())


class Wire:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        self.regions = []

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.send(data)
        return self.receive()

    def receive(self):
        fds = array.array("i")
        data, anc, flags, _ = self.sock.recvmsg(REPLY_MAX, socket.CMSG_SPACE(16 * fds.itemsize))
        if not data:
            raise EOFError("the daemon closed the connection")
        if flags & socket.MSG_TRUNC:
            raise ValueError("reply larger than 256 KiB")
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        (n,) = struct.unpack_from("<I", data)
        header = json.loads(data[4:4 + n])
        return header, data[4 + n:], list(fds)

    def call(self, request):
        header, payload, fds = self.send_raw(json.dumps(request).encode())
        for fd in fds:
            if header.get("ok"):
                continue
            os.close(fd)
        if not header.get("ok"):
            raise WireError(header)
        return header, payload, fds

    def open(self, dataset):
        header, _, fds = self.call({"op": "open", "version": 1, "dataset": dataset})
        assert len(fds) == 2, f"open passed {len(fds)} descriptors, not 2"
        self.info, self.regions = header, []
        for region, fd in zip(header["regions"], fds):
            size = region["bytes"]
            self.regions.append(mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) if size else b"")
            os.close(fd)
        return header

    def view(self, epoch, world_size, rank):
        header, _, _ = self.call({"op": "view", "epoch": epoch, "world_size": world_size, "rank": rank})
        return header["view"], header["samples"]

    def batch(self, view, start, count, slot=0, names=False):
        """[(sample id, [member bytes], region)], header: the samples copied out of the regions."""
        header, payload, _ = self.call({"op": "batch", "view": view, "start": start, "count": count, "slot": slot,
                                        "names": names})
        n = header["count"]
        records = [RECORD.unpack_from(payload, RECORD.size * i) for i in range(n)]
        pos = RECORD.size * n
        out = []
        for offset, sample, length, region, members in records:
            spans = [(0, length)]
            if self.info["grouped"]:
                pairs = struct.unpack_from(f"<{2 * members}I", payload, pos)
                spans = list(zip(pairs[0::2], pairs[1::2]))
                pos += 8 * members
                for begin, n in spans:
                    assert begin + n <= length, f"sample {sample}: member [{begin}, +{n}) outside its {length} bytes"
            mem = self.regions[region]
            assert offset + length <= len(mem), f"sample {sample}: [{offset}, +{length}) outside region {region}"
            data = bytes(mem[offset:offset + length])
            out.append((sample, [data[b:b + n] for b, n in spans], region))
        assert pos == len(payload), f"payload of {len(payload)} bytes, {pos} parsed"
        return out, header
