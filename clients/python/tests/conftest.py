import os
import sys

# The tests import their helpers (fakeserver.py) from this folder.
sys.path.insert(0, os.path.dirname(__file__))
