"""Server memory per idle HTTP/1.1 keep-alive connection: opens N connections to sluice, sends
one small request on each, reads the answer, keeps them open, and prints the growth of the
server's RSS per connection. Shows how much of a status stream's memory is the connection
itself (hyper and poem's per-connection state) rather than the stream.

    python3 idle_connections.py <host:port> <server pid> <connections>
"""
import socket
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    raise SystemExit("no VmRSS")


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    pid, n = int(sys.argv[2]), int(sys.argv[3])
    before = rss_kib(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall(b"GET /health/live HTTP/1.1\r\nHost: bench\r\n\r\n")
        socks.append(s)
    answered = sum(1 for s in socks if s.recv(4096).startswith(b"HTTP/1.1 200"))
    time.sleep(2)
    during = rss_kib(pid)
    print(f"idle keep-alive connections: {n} ({answered} answered 200), "
          f"server RSS {before} -> {during} KiB: {(during - before) / n:.1f} KiB per connection")
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
