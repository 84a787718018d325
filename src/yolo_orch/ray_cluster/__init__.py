"""The Ray executor: jobs run on the GPUs of a Ray cluster's nodes, admitted by our dispatcher.

Imported only with `executor = "ray"` (it needs the `ray` extra). The store stays the truth and
the dispatcher keeps admission; Ray only runs what it is handed, on the node it is told.
"""

import os

# Before anything imports ray (which reads this once): Ray's C++ failure signal handler takes
# SIGTERM too, and arms an alarm that aborts the server 3 s later, in the middle of its drain.
os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
