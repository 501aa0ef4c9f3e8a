"""A supervisor of another mcpfleet build, as the CLI meets one after an upgrade.

    python3 old_supervisor.py STATE_DIR TAG [--forget-server] [__guard]

It does what a supervisor of the previous control protocol does, seen from a
client of this one:

* holds STATE_DIR/supervisor.lock as a supervisor does (flock, exclusive, for
  its whole life) with its pid on the first line;
* runs one "server": a process whose environment carries MCPFLEET_TAG=TAG, as
  a supervisor tags its servers' processes;
* listens on STATE_DIR/control.sock (private) and answers every request with
  the error line a supervisor of protocol 1 gives a request of protocol 2;
* on SIGTERM or SIGINT, tears its server down (SIGTERM, then waits for it),
  removes its socket and exits 0, releasing the lock. With --forget-server it
  exits without touching its server, which is then left running.

With `__guard`, this process is the supervisor's guardian, as a detached
supervisor has one: it runs the supervisor (itself without `__guard`) as its
child, waits for it and exits with it.

The supervisor prints `ready` on stdout once it serves.
"""

import fcntl
import os
import signal
import socket
import subprocess
import sys

ANSWER = (
    b'{"type":"error","message":"protocol version 2 is not supported '
    b'(this supervisor speaks 1)"}\n'
)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if "__guard" in sys.argv[3:]:
        args = [a for a in sys.argv if a != "__guard"]
        supervisor = subprocess.Popen([sys.executable] + args)
        sys.exit(supervisor.wait())
    state, tag = sys.argv[1], sys.argv[2]
    forget = "--forget-server" in sys.argv[3:]
    os.makedirs(state, mode=0o700, exist_ok=True)

    lock = os.open(
        os.path.join(state, "supervisor.lock"),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
        0o600,
    )
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())

    server = subprocess.Popen(
        ["sleep", "600"],
        env=dict(os.environ, MCPFLEET_TAG=tag),
        stdin=subprocess.DEVNULL,
    )

    path = os.path.join(state, "control.sock")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(16)

    def stop(_signum, _frame):
        if not forget:
            server.terminate()
            server.wait()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)

    while True:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            request = b""
            try:
                while not request.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    request += chunk
                if request:
                    conn.sendall(ANSWER)
            except OSError:
                pass


if __name__ == "__main__":
    main()
