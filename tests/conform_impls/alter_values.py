"""A proxy in front of an implementation: passes every line through, but adds one to every
integer inside a result (not the hello's, not an error's). The framing stays intact: each
answer is still one JSON object, with the request's id and one ``ok`` of the same shape.

    python alter_values.py COMMAND [ARGS...]
"""

import json
import subprocess
import sys


def altered(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, list):
        return [altered(v) for v in value]
    if isinstance(value, dict):
        return {k: altered(v) for k, v in value.items()}
    return value


child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, bufsize=1)
for line in sys.stdin:
    child.stdin.write(line)
    child.stdin.flush()
    answer = child.stdout.readline()
    if not answer:
        break
    message = json.loads(answer)
    if json.loads(line).get("op") != "hello" and "ok" in message:
        message["ok"] = altered(message["ok"])
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
child.stdin.close()
child.wait()
