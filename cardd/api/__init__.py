"""The local API: JSON lines on a Unix socket, with roles from the peer's credentials (docs/api.md)."""
