"""A Python service as a profiler meets one: pure-Python functions sharing
one thread's CPU in units drawn at random, a C extension (zlib) called
between Python frames, a thread asleep and a thread blocked on a socket
read. It measures its own truth.

Usage: mixed.py SECONDS. The fixture protocol of profiler-fixtures: a
ready line with the ids, then "go" on stdin starts the measured phase;
its results (nanoseconds, key=value) are printed when it ends, and the
process lingers until stdin closes.
"""
import os
import random
import socket
import sys
import threading
import time
import zlib

DATA = bytes(random.Random(7).getrandbits(8) for _ in range(1 << 16))


def heavy(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def light(n):
    total = 0
    for i in range(n):
        total ^= i
    return total


def squeeze():
    # zlib's native frames run under this function and above the
    # thread's Python callers.
    return len(zlib.compress(DATA, 6))


def compute(deadline, spent):
    rng = random.Random(1)
    units = (heavy, heavy, light, squeeze)
    while time.monotonic() < deadline:
        unit = rng.choice(units)
        begin = time.thread_time_ns()
        if unit is squeeze:
            squeeze()
        else:
            unit(20000)
        spent[unit.__name__] += time.thread_time_ns() - begin


def waiter(deadline, slept):
    while time.monotonic() < deadline[0]:
        begin = time.monotonic_ns()
        time.sleep(0.05)
        slept["waiter"] += time.monotonic_ns() - begin


def reader(sock, blocked):
    begin = time.monotonic_ns()
    sock.recv(16)
    blocked["reader"] += time.monotonic_ns() - begin


def waiting(name, ids, started, body, *args):
    # The wait for "go" is outside the measured functions.
    ids[name] = threading.get_native_id()
    started.wait()
    body(*args)


def main():
    seconds = float(sys.argv[1])
    spent = {"heavy": 0, "light": 0, "squeeze": 0}
    slept = {"waiter": 0}
    blocked = {"reader": 0}
    ids = {"pid": os.getpid(), "main": threading.get_native_id()}
    deadline = [0.0]
    started = threading.Event()
    left, right = socket.socketpair()
    threads = [
        threading.Thread(target=waiting, args=("waiter", ids, started, waiter, deadline, slept)),
        threading.Thread(target=waiting, args=("reader", ids, started, reader, left, blocked)),
    ]
    for thread in threads:
        thread.start()
    while len(ids) < 4:
        time.sleep(0.001)
    print("ready", " ".join(f"{k}={v}" for k, v in ids.items()), flush=True)
    sys.stdin.readline()
    deadline[0] = time.monotonic() + seconds
    started.set()
    compute(deadline[0], spent)
    right.send(b"x")
    for thread in threads:
        thread.join()
    results = {f"{k}_ns": v for part in (spent, slept, blocked) for k, v in part.items()}
    print(" ".join(f"{k}={v}" for k, v in results.items()), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
