"""A stdlib-only API client that the tests run under other uids and gids.

    python api_client.py SOCKET            send each stdin line, print every reply line
    python api_client.py SOCKET --junk N   send N bytes without a newline, then print what came back

It prints {"connect": "EACCES"} when the socket refuses it (not in the socket's group).
"""
import json
import socket
import sys


def main() -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(sys.argv[1])
    except PermissionError:
        print(json.dumps({"connect": "EACCES"}))
        return 0
    stream = sock.makefile("rwb")
    print(stream.readline().decode().rstrip("\n"), flush=True)  # VERSION
    if len(sys.argv) > 3 and sys.argv[2] == "--junk":
        chunk = b"x" * (1 << 20)
        left = int(sys.argv[3])
        try:
            while left > 0:
                sock.sendall(chunk[:left])
                left -= len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        print(json.dumps({"unsent": max(left, 0)}))
        for line in stream:
            print(line.decode().rstrip("\n"))
        return 0
    for request in sys.stdin.buffer:
        stream.write(request)
        stream.flush()
        reply = stream.readline()
        if not reply:
            break
        print(reply.decode().rstrip("\n"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
