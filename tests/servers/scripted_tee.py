"""``scripted_tee.py LOG COMMAND...``: run COMMAND as a stdio server, appending every line the
client writes to LOG before passing it on. COMMAND's stdout and stderr are this process's, so
the client reads the real server directly; COMMAND stays in this process's group.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading


def main() -> None:
    log_path, command = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert child.stdin is not None

    def forward(signum: int, frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)

    def pump() -> None:
        assert child.stdin is not None
        with open(log_path, "ab") as log:
            for line in sys.stdin.buffer:
                log.write(line if line.endswith(b"\n") else line + b"\n")
                log.flush()
                try:
                    child.stdin.write(line)
                    child.stdin.flush()
                except (BrokenPipeError, OSError):
                    break
        try:
            child.stdin.close()
        except OSError:
            pass

    threading.Thread(target=pump, daemon=True).start()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
