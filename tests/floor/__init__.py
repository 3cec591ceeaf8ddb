"""cardfloor's tests: the archive on a real PostgreSQL, the service, its API."""
