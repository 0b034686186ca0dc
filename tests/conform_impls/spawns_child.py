"""Starts a child that sleeps for ten minutes, writes its pid to ``argv[1]``, then never answers.

The child inherits the process group and the stdout pipe: only killing the whole group ends it.
"""

import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "w") as pid_file:
    pid_file.write(str(child.pid))
time.sleep(600)
