"""`python -m tack`: what a bug report about Tack needs (tack.show_config())."""

import sys

from tack._config import show_config

if __name__ == "__main__":
    show_config()
    sys.exit(0)
