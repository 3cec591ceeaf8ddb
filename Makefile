# cardd — the two commands of the quick start are `make demo` and `make test`.
# Both set up what they need: the system tools the tests use and a local .venv installed from
# the hashed lock (requirements/lock.txt), so every machine runs the versions CI ran.
# The quick start supports Debian 12 with Python 3.11; `make` says so when run elsewhere.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LOCK   := requirements/lock.txt
RUNTIME_LOCK := requirements/runtime.txt
TOOLS  := .venv-tools
UV     := $(TOOLS)/bin/uv
SYSTEM_TOOLS := umockdev-run udevadm unshare systemd-analyze tmux debootstrap dpkg-deb mosquitto mosquitto_passwd
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# How the locks are made (make lock): one resolution for every platform and Python the ranges
# allow (--universal, from 3.11), a hash for every file of each pinned release, wheels only (an
# sdist would build with whatever its build backend's newest release is).
LOCK_ARGS := --quiet --universal --python-version 3.11 --generate-hashes --only-binary :all: --emit-build-options \
             --custom-compile-command "make lock"

.PHONY: demo test test-latest lock typecheck platform sysdeps venv bench diagrams check-diagrams api-schema \
        check-api-schema floor-schema check-floor-schema floor-openapi check-floor-openapi floor-reasons \
        floor-demo floor-screenshots clean wheel deb

# One line when this is not the platform the quick start is tested on; a stop when Python is
# older than cardd can run on (pyproject.toml: requires-python).
platform:
	@py=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none); \
	if ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then \
	  if [ "$$py" = none ]; then echo "make: cardd needs Python 3.11 or newer, and there is no $(PYTHON) (set PYTHON=...)"; \
	  else echo "make: cardd needs Python 3.11 or newer, and $(PYTHON) is Python $$py (set PYTHON=...)"; fi; exit 1; fi; \
	os=$$( . /etc/os-release 2>/dev/null && echo "$$ID $$VERSION_ID"); \
	if [ "$$os" != "debian 12" ] || [ "$$py" != "3.11" ]; then \
	  echo "make: the quick start is tested on Debian 12 with Python 3.11; this is $${os:-an unknown system} with Python $$py, so it may not pass here"; fi

# The venv holds exactly the lock: made anew whenever the lock or pyproject.toml changes, every
# file checked against its hash, then cardd itself (editable, built with the locked setuptools).
$(STAMP): pyproject.toml $(LOCK)
	@# Debian ships venv without ensurepip unless python3-venv is installed
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3-venv >/dev/null; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r $(LOCK)
	@# (setuptools' warning that an editable install's folders shadow the package is for other layouts)
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip check --disable-pip-version-check
	touch $(STAMP)

venv: $(STAMP)

# umockdev and udev are needed by the udev rule tests, systemd (systemd-analyze) by the unit test,
# tmux by the test of `cardctl watch` in a real terminal, debootstrap (and dpkg-deb) by the test of
# the Debian package in a clean Debian root, mosquitto (and mosquitto_passwd) by the floor export's
# tests, which start their own brokers on free ports; installed only when missing. Debian starts
# and enables a system mosquitto on 127.0.0.1:1883 when the package is installed where systemd
# runs: the one installed here is stopped and disabled again (the tests never use 1883).
# (mosquitto is in /usr/sbin, which a user's PATH may lack.) PostgreSQL's server (Debian's
# postgresql, its programs in /usr/lib/postgresql/VERSION/bin) by cardfloor's tests, which start
# private clusters of their own in temporary folders; the cluster Debian creates and starts on
# installation is stopped and disabled the same way. Debian's chromium by the pit page's tests,
# which drive it with Playwright (never a browser of Playwright's own: docs/dependencies.md).
sysdeps:
	@missing=""; for t in $(SYSTEM_TOOLS); do PATH="$$PATH:/usr/sbin:/sbin" command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing initdb"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages for:$$missing"; \
	  had_mosquitto=$$(PATH="$$PATH:/usr/sbin:/sbin" command -v mosquitto || true); \
	  had_postgres=$$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null || true); \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq umockdev udev util-linux systemd tmux debootstrap dpkg mosquitto mosquitto-clients postgresql chromium >/dev/null; \
	  if [ -z "$$had_mosquitto" ] && [ -d /run/systemd/system ]; then \
	    $(SUDO) systemctl disable --now --quiet mosquitto.service || true; fi; \
	  if [ -z "$$had_postgres" ] && [ -d /run/systemd/system ]; then \
	    $(SUDO) systemctl disable --now --quiet postgresql.service || true; fi; \
	fi

# the real daemon (cardd --simulate) through a whole shoe, with `cardctl watch` live; DEMO_ARGS=--fast for seconds
demo: platform $(STAMP)
	$(PY) -m cardd.cli.demo $(DEMO_ARGS)

# the pit page on a floor of its own: mosquitto, PostgreSQL, cardfloor and four tables dealing with
# faults; prints the page's address and a log-in; Ctrl-C stops it all (FLOOR_DEMO_ARGS=--port 8481)
floor-demo: platform sysdeps $(STAMP)
	$(PY) -m cardd.cli.floor_demo $(FLOOR_DEMO_ARGS)

# docs/floor-page.png, docs/table-page.png, docs/alarms-page.png: the pit page in Chromium on a test floor
floor-screenshots: sysdeps $(STAMP)
	$(PY) -m tests.floor.browser.screenshots docs

# The tests run in TEST_WORKERS processes side by side (pytest-xdist): most of them wait on a real
# daemon, pty or subprocess, not on the CPU, so on 2 cores more workers than cores keep them busy
# (46 daemon and journal tests: 62 s in one process, 40-43 s with 2 or 3 workers, 37 s with 4 on
# a quiet machine; under others' load 3 did best, 52 s against 76 and 93). Each test makes its own
# folders, sockets, tmux servers and Unix groups, so any test may run beside any other. Each test
# file runs whole in one worker (--dist loadfile), so what a module builds once for its tests (the
# wheel, the Debian package) is built once: with xdist 3.8 here, --dist loadgroup spread a group's
# tests over the workers and each rebuilt it, about a minute of CPU each. TEST_WORKERS=0: one process. The 30 slowest are listed at the end: where
# the suite's 15 minutes go. The files go out in collection order (--no-loadscope-reorder; xdist's
# default sends the files with the most tests first), which tests/conftest.py starts with the
# slowest files (SLOW_FILES_FIRST): the last files handed out are short ones, so the run does not
# end with one worker alone in a minute-long file.
TEST_WORKERS ?= 3

test: platform sysdeps $(STAMP) check-diagrams check-api-schema check-floor-schema check-floor-openapi typecheck
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30

# The whole of `make test` on the newest releases the ranges in pyproject.toml allow, in its own
# venv (.venv-latest), the lock untouched: what the next `make lock` would bring, found on the
# day someone chooses to look.
test-latest: platform
	rm -rf .venv-latest
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip setuptools
	.venv-latest/bin/python -m pip install --quiet --disable-pip-version-check --upgrade -e '.[test,bench]'
	.venv-latest/bin/python -m pip list --disable-pip-version-check --format=freeze > .venv-latest/versions.txt
	touch .venv-latest/.installed
	PYTEST_ADDOPTS="--deselect tests/test_lock.py::test_what_the_venv_runs_is_the_lock" \
	  $(MAKE) --no-print-directory test VENV=.venv-latest

# uv, itself installed from a hashed lock (requirements/tools.txt), makes the locks.
$(UV): requirements/tools.txt
	rm -rf $(TOOLS)
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/tools.txt

# Refresh the locks to the newest releases the ranges allow (PACKAGE=name: that one only, the
# rest kept), then `make test` and commit them with what changed (docs/dependencies.md).
lock: $(UV)
	$(UV) pip compile pyproject.toml requirements/build.in --extra test --extra bench --extra floor $(LOCK_ARGS) \
	  $(if $(PACKAGE),--upgrade-package $(PACKAGE),--upgrade) -o $(LOCK)
	$(UV) pip compile pyproject.toml requirements/build.in --constraint $(LOCK) $(LOCK_ARGS) -o $(RUNTIME_LOCK)
	$(UV) pip compile requirements/tools.in $(LOCK_ARGS) $(if $(PACKAGE),,--upgrade) -o requirements/tools.txt

# mypy over every package and the tests, at the strictness stated in pyproject.toml
typecheck: $(STAMP)
	$(VENV)/bin/mypy

diagrams: $(STAMP)
	$(PY) -m devices.diagrams --write docs/state-machines.md

check-diagrams: $(STAMP)
	$(PY) -m devices.diagrams --check docs/state-machines.md

# The local API's JSON Schema, generated from its messages (cardd/api/protocol.py).
api-schema: $(STAMP)
	$(PY) -m cardd.api.schema --write docs/api-schema.json

check-api-schema: $(STAMP)
	$(PY) -m cardd.api.schema --check docs/api-schema.json

floor-schema: $(STAMP)
	$(PY) -m cardd.export.schema --write docs/floor-schema.json

check-floor-schema: $(STAMP)
	$(PY) -m cardd.export.schema --check docs/floor-schema.json

# cardfloor's HTTP API as OpenAPI, generated from its route table and Structs (cardd/floor/api.py).
floor-openapi: $(STAMP)
	$(PY) -m cardd.floor.openapi --write docs/floor-openapi.json

check-floor-openapi: $(STAMP)
	$(PY) -m cardd.floor.openapi --check docs/floor-openapi.json

# The reason codes in words for the pit page, from docs/deal-tracking.md's table (tests/floor/
# test_web_files.py checks the file is current).
floor-reasons: $(STAMP)
	$(PY) -m cardd.floor.reason_texts

# cardd's wheel in dist/, built from a clean copy of the packages with the locked setuptools
# (packaging/build_wheel.py; docs/install.md, section 7)
wheel: $(STAMP)
	$(PY) packaging/build_wheel.py dist

# dist/cardd_<version>_<arch>.deb: a venv under /opt/cardd from the hashed runtime lock and the
# wheel, the unit, the udev rules, sysusers.d and tmpfiles.d, the example configuration
# (packaging/build_deb.py; docs/install.md, section 0; docs/dependencies.md says why dpkg-deb)
deb: $(STAMP)
	@command -v dpkg-deb >/dev/null || { echo "make deb: needs dpkg-deb (Debian's dpkg)"; exit 1; }
	$(PY) packaging/build_deb.py dist

bench: $(STAMP)
	$(PY) benchmarks/link.py
	$(PY) benchmarks/deal.py

clean:
	rm -rf $(VENV) .venv-latest $(TOOLS) .pytest_cache .hypothesis dist
