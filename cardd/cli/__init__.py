"""cardctl: the technician's and supervisor's command line (docs/cardctl.md)."""
