"""Each process of an MPI run calls ``ember.distributed.initialize`` with a PJRT backend chosen
(``EMBER_PLATFORMS``); prints ``RESULT {...}``: whether it joined, or the error it met."""
import json

from mpi4py import MPI

import ember

try:
    ember.distributed.initialize()
    report = {"joined": True, "processes": ember.distributed.process_count()}
except RuntimeError as e:
    report = {"joined": False, "error": str(e)}
print("RESULT " + json.dumps({"rank": MPI.COMM_WORLD.Get_rank(), **report}), flush=True)
