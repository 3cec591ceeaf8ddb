"""``cardfloor``'s entry point (pyproject's console script): the floor service.

    cardfloor [--config FILE]                 run: the broker's messages into the archive, the
                                              floor alarms, the HTTP API (docs/floor-service.md)
    cardfloor --check-config [--config FILE]  check the configuration and exit (0 or 2)
    cardfloor --version
    cardfloor user add|passwd|remove|list     the pit page's users (cardd/floor/users.py)

Exit codes as cardd's: 0 after a clean stop (SIGTERM or Ctrl-C once it runs), 1 when it cannot
start (the HTTP API's address taken, its tokens, users or session key unreadable) or fails, 2 for a configuration or
command line it cannot use, 130 for a Ctrl-C before it runs (its imports: quietly). This module
imports nothing at its top but core.ctrl_c, so that Ctrl-C prints no traceback either.
"""
from __future__ import annotations

import sys

from core.ctrl_c import run_entry_point

EXIT_OK, EXIT_STARTUP, EXIT_CONFIG = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    return run_entry_point(lambda: _cardfloor(argv))


def _cardfloor(argv: list[str] | None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["user"]:
        from cardd.floor.users import main as users_main
        return users_main(given[1:])
    import argparse
    import asyncio

    import structlog

    from cardd.floor.config import DEFAULT_PATH, FloorConfigError, load_config

    ap = argparse.ArgumentParser(prog="cardfloor", description="The floor service: every table's export "
                                 "archived in PostgreSQL, the floor's alarms, the pit's HTTP API.")
    ap.add_argument("--config", default=str(DEFAULT_PATH), metavar="FILE",
                    help=f"the configuration file (default {DEFAULT_PATH})")
    ap.add_argument("--check-config", action="store_true", help="check the configuration and exit (0 or 2)")
    ap.add_argument("--log-format", choices=("auto", "console", "json"), default=None,
                    help="auto: readable on a terminal, JSON lines otherwise (default: the configuration's)")
    ap.add_argument("--version", action="version", version=_release())
    args = ap.parse_args(argv)
    _configure_logging(args.log_format or "auto", "info")
    try:
        config = load_config(args.config)
    except FloorConfigError as exc:
        print(f"cardfloor: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check_config:
        served = [what for what, key in (("the API's tokens", config.http.tokens_file),
                                         ("the pit page's users", config.http.users_file)) if key is not None]
        http = "no HTTP (no http.tokens_file nor http.users_file)" if not served else \
            f"HTTP on {config.http.listen} for {' and '.join(served)}"
        print(f"{args.config}: ok (brokers {', '.join(config.broker.urls)}, client id {config.broker.client_id}, "
              f"{http})")
        return EXIT_OK
    _configure_logging(args.log_format or config.log.format, config.log.level)
    from cardd.floor.service import StartupError, serve
    try:
        asyncio.run(serve(config, args.config))
    except StartupError as exc:
        print(f"cardfloor: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # a fault: one line here, the traceback at debug level
        structlog.get_logger("cardfloor").debug("cardfloor failed", exc_info=True)
        print(f"cardfloor: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    return EXIT_OK


def _release() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"cardfloor {version('cardd')}"
    except PackageNotFoundError:
        return "cardfloor (not installed)"


def _configure_logging(fmt: str, level: str) -> None:
    """structlog as the daemon writes it: readable on a terminal, one JSON object a line otherwise
    (under systemd), on stderr; the standard library's logging (uvicorn, asyncio) through it too."""
    import logging
    import os

    import structlog
    from structlog.typing import Processor

    out = sys.stderr
    journal = os.environ.get("JOURNAL_STREAM")
    rendered = fmt if fmt != "auto" else "console" if out.isatty() and not journal else "json"
    threshold = logging.getLevelNamesMapping()[level.upper()]
    last: list[Processor] = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()] \
        if rendered == "json" else [structlog.dev.ConsoleRenderer(colors=out.isatty() and "NO_COLOR" not in os.environ)]
    shared: list[Processor] = [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
                               structlog.processors.TimeStamper(fmt="iso", utc=True)]
    structlog.configure(processors=[*shared, structlog.processors.StackInfoRenderer(), *last],
                        wrapper_class=structlog.make_filtering_bound_logger(threshold),
                        logger_factory=structlog.WriteLoggerFactory(out), cache_logger_on_first_use=True)
    handler = logging.StreamHandler(out)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *last]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(threshold)


if __name__ == "__main__":
    sys.exit(main())
