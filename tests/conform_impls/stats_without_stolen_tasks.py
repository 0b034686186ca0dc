"""A proxy in front of a pool implementation, standing for one written before batch steals:
its hello declares no profile (so no ``batch_steals``), and its ``stats`` answers leave out
``stolen_tasks``. Every other line passes through unchanged.

    python stats_without_stolen_tasks.py COMMAND [ARGS...]
"""

import json
import subprocess
import sys

child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, bufsize=1)
for line in sys.stdin:
    child.stdin.write(line)
    child.stdin.flush()
    answer = child.stdout.readline()
    if not answer:
        break
    message = json.loads(answer)
    ok = message.get("ok")
    if isinstance(ok, dict):
        ok.pop("profile", None)  # the hello's
        ok.pop("stolen_tasks", None)  # a stats answer's
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
child.stdin.close()
child.wait()
