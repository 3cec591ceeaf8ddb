"""Traces of what devices said: the format (:mod:`cardd.trace.format`) and the device a replay
serves (:mod:`cardd.trace.device`), shared by cardctl and cardbench."""
