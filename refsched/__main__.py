import sys

from refsched.cli import main

sys.exit(main())
