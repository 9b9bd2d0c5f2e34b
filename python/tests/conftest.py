"""pytest setup for kvx's Python tests: the package under test is the build
tree's (PYTHONPATH=build/python), which run-pytest.sh sets."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
