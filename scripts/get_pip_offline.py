"""Stand-in for ansible-test's get-pip.py, whose download host is unreachable here.

Bootstraps pip from the interpreter's own ensurepip, then installs the exact pip
version ansible-test asks for from the package index.
"""

import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install", *args])  # noqa: S603 (args come from ansible-test)
