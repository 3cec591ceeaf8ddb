"""Helpers shared by the test packages: the async runner, the one wait-until, recorders and clocks."""
