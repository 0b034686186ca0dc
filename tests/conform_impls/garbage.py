"""Answers the hello with a line that is not JSON."""

import sys

sys.stdin.readline()
sys.stdout.write("hello, whoever you are\n")
sys.stdout.flush()
sys.stdin.read()
