"""A hostile stdio server that never reads its stdin: at start it writes ``--count`` requests
(``--method``, ``ping`` by default; ids are long strings, so the client's replies fill the stdin
pipe quickly), writes a line to ``--done FILE``, then only waits for the client to close the
pipe (POLLHUP, without reading) and exits. With ``--read-after`` it then reads stdin instead,
appending ``answered N`` to the done file as the replies to its requests arrive (N counted in
order; a reply out of order is written as ``out of order``). Ends after 60 s at the latest.
No snodo import."""

from __future__ import annotations

import json
import os
import select
import sys
import time


def option(name: str, default: str) -> str:
    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args else default


def main() -> None:
    count = int(option("--count", "5000"))
    method = option("--method", "ping")
    done = option("--done", "")
    out = sys.stdout.buffer
    batch = []
    for i in range(count):
        message = {"jsonrpc": "2.0", "id": f"flood-{i:06d}-" + "x" * 80, "method": method}
        batch.append(json.dumps(message, separators=(",", ":")).encode())
        if len(batch) == 500:
            out.write(b"\n".join(batch) + b"\n")
            batch = []
    if batch:
        out.write(b"\n".join(batch) + b"\n")
    out.flush()
    if done:
        with open(done, "a") as f:
            f.write(f"{os.getpid()} flooded {count}\n")
    if "--read-after" in sys.argv:
        read_replies(count, done)
        return
    poller = select.poll()
    poller.register(0, select.POLLHUP)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        for _, events in poller.poll(50):
            if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return


def read_replies(count: int, done: str) -> None:
    answered = 0
    for line in sys.stdin.buffer:
        message = json.loads(line)
        rid = message.get("id")
        if not isinstance(rid, str) or not rid.startswith("flood-"):
            continue
        note = f"answered {answered + 1}" if rid.startswith(f"flood-{answered:06d}-") else "x"
        answered += 1
        if note == "x" or answered % 100 == 0 or answered == count:
            with open(done, "a") as f:
                f.write(("out of order" if note == "x" else note) + "\n")


if __name__ == "__main__":
    main()
