"""Pure-Python CPU work DEPTH Python frames deep, for the bench: the cost
of a sample with Python frames. The fixture protocol: a ready line,
"go" on stdin, SECONDS of work, a result line (loops done), then it
lingers until stdin closes.

Usage: deep.py SECONDS DEPTH
"""
import os
import sys
import time


def spin(deadline):
    loops = 0
    while time.monotonic() < deadline:
        for i in range(1000):
            loops += i & 1
    return loops


def level(n, deadline):
    if n <= 1:
        return spin(deadline)
    return level(n - 1, deadline)


def main():
    seconds, depth = float(sys.argv[1]), int(sys.argv[2])
    print(f"ready pid={os.getpid()}", flush=True)
    sys.stdin.readline()
    loops = level(depth, time.monotonic() + seconds)
    print(f"loops={loops}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
