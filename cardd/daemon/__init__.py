"""The cardd daemon, assembled from the libraries: see app.py (start, run, stop),
tracker_service.py (the one input path: apply, journal, publish), backend.py and commands.py
(the API), state.py (STATE), devices.py, simulation.py (--simulate) and main.py (``cardd``)."""
