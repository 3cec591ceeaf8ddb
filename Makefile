# cardd — the two commands of the quick start are `make demo` and `make test`.
# Both set up what they need: the system tools the tests use and a local .venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SYSTEM_TOOLS := umockdev-run udevadm unshare systemd-analyze tmux
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test typecheck sysdeps venv bench diagrams check-diagrams api-schema check-api-schema clean

$(STAMP): pyproject.toml
	@# Debian ships venv without ensurepip unless python3-venv is installed
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3-venv >/dev/null; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

venv: $(STAMP)

# umockdev and udev are needed by the udev rule tests, systemd (systemd-analyze) by the unit test,
# tmux by the test of `cardctl watch` in a real terminal;
# installed only when missing.
sysdeps:
	@missing=""; for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages for:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq umockdev udev util-linux systemd tmux >/dev/null; \
	fi

# the real daemon (cardd --simulate) through a whole shoe, with `cardctl watch` live; DEMO_ARGS=--fast for seconds
demo: $(STAMP)
	$(PY) -m cardd.cli.demo $(DEMO_ARGS)

test: sysdeps $(STAMP) check-diagrams check-api-schema typecheck
	$(PY) -m pytest -q

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

bench: $(STAMP)
	$(PY) benchmarks/link.py
	$(PY) benchmarks/deal.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
