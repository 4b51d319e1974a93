"""``python -m benchmarks``: run the side-by-side benchmark table (see ``benchmarks/run.py``)."""
from benchmarks.run import main

main()
