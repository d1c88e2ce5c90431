#!/usr/bin/env python3
"""A CGI script in Python: prints its environment as JSON; POST adds the body."""
import json
import os
import sys

body = b""
if os.environ.get("REQUEST_METHOD") == "POST":
    body = sys.stdin.buffer.read(int(os.environ.get("CONTENT_LENGTH") or 0))

out = {"env": dict(os.environ), "body_length": len(body),
       "body_head": body[:64].decode("utf-8", "replace")}
data = json.dumps(out, indent=1, sort_keys=True).encode()
sys.stdout.write("Content-Type: application/json\r\nX-Brisk-Example: env\r\n\r\n")
sys.stdout.flush()
sys.stdout.buffer.write(data)
