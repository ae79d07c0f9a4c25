"""The worker process: a forked, sandboxed process per candidate that loads it, runs it and reports over a pipe."""
