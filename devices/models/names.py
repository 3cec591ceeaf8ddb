"""The tracker's name for each device (its model's ``NAME``: the ``device`` of its events and
STATE's ``devices``) by the name the configuration and cardctl give it, the device's role.

A module of its own, importing nothing, so cardctl reads it without loading the models, the
tracker or the daemon."""
from __future__ import annotations

#: a device's role ("shoe", "shuffler": ``[devices]`` in the configuration, cardctl's DEVICE) ->
#: the tracker's model name
MODEL_NAMES = {"shoe": "shoe-reader", "shuffler": "shuffler"}
