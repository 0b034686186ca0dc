"""Answers the hello, then dies on the next request: a message on stderr and exit status 3."""

import json
import sys

hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"id": hello["id"], "ok": {"name": "crash-after-hello",
                                                        "protocol": 1}}) + "\n")
sys.stdout.flush()
sys.stdin.readline()
sys.stderr.write("crash_after_hello: giving up on the first request\n")
sys.stderr.flush()
sys.exit(3)
