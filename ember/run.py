"""``python -m ember.run script.py [args]``: run a program written for JAX on ember.

It calls ``ember.install_as_jax()`` and runs the script as ``__main__`` with ``sys.argv`` set
to the script and its arguments, as ``python script.py [args]`` would; ``-m module`` runs a
module instead, as ``python -m module`` would.
"""
from __future__ import annotations

import os
import runpy
import sys

import ember


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python -m ember.run script.py [args] | -m module [args]", file=sys.stderr)
        raise SystemExit(2)
    ember.install_as_jax()
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))  # (as python does for a script)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
