"""`python -m cluster.executor`: one executor process (cluster.executor.process)."""

import gc
import signal
import sys

from cluster.executor.options import stop_starting

signal.signal(signal.SIGTERM, stop_starting)  # before the imports below: they are most of the start
# A process of its own: no cyclic collection until it is warm. Importing torch and the model code makes
# ~600,000 objects, and the collector walked them again and again to free ~200 (0.7-1 s of a 3 s start
# on 2 CPUs); run_executor turns it back on, with everything made so far frozen out of its reach.
gc.disable()

from cluster.executor.process import main  # noqa: E402  (after the handler and gc.disable, on purpose)

sys.exit(main())
