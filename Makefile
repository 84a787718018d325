# Two entry points do all set-up on a fresh machine (Python 3.11+ with venv):
#   make serve   install into .venv and start the server with the embedded defaults
#   make test    install the project with its test tools into .venv and run the test suite
#   make demo    train, validate, export and run a detector on generated data (./demo, offline)
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: serve demo test lint docs install install-dev clean

serve: $(VENV)/.installed
	$(VENV)/bin/yolo-orch serve

# DEMO_ARGS passes options through: make demo DEMO_ARGS=--keep-serving
demo: $(VENV)/.installed
	$(VENV)/bin/yolo-orch demo $(DEMO_ARGS)

# The Ray tests skip outside a network namespace; the second line runs them inside one that
# has nothing but loopback (unshare -n: root, as in CI), since Ray binds every interface. The
# third runs the acceptance tier again with its servers on PostgreSQL (a throwaway cluster).
test: $(VENV)/.installed-dev
	$(PY) -m pytest -m "not gpu" --durations=25
	$(PY) -m tests.on_ray.netns
	$(PY) -m pytest -m "acceptance and not gpu" --server-database postgresql tests/acceptance --durations=10

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check src tests migrations bench tools
	$(VENV)/bin/ruff format --check src tests migrations bench tools
	$(VENV)/bin/mypy src bench tests/gpu tools
	$(VENV)/bin/lint-imports

# The configuration reference is rendered from the settings model (tests check it is current).
docs: $(VENV)/.installed-dev
	$(PY) -m yolo_orch.config.reference > docs/configuration.md

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

$(PY):
	python3 -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -e '.[yolo]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP) install -e '.[test,ray]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) var demo .pytest_cache .mypy_cache .ruff_cache
