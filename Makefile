# Two commands take a fresh machine to a running demo and to passing tests:
#   make demo    venv + install, compile the bundled sample corpus offline, answer a question
#   make test    venv + install, check the package layering (make lint), run the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
HOME_DIR := $(CURDIR)/.c2s
SAMPLE_QUESTION ?= How do I connect a custom domain to my booking site?

.PHONY: install demo lint test dev clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: install
	DAGSTER_HOME=$(HOME_DIR) $(VENV)/bin/c2s compile c2s_pipeline/sample_corpus --corpus sample --out out/sample
	$(VENV)/bin/c2s ask --tree out/sample "$(SAMPLE_QUESTION)"

# The layering of the packages ([tool.importlinter] in pyproject.toml): c2s_cli on top of
# c2s_pipeline | c2s_agent (independent) on top of c2s_core, and no import circles.
lint: install
	$(VENV)/bin/lint-imports

# Two workers, a test file each at a time (its module fixtures stay in one process): the suite
# is sized for 2 cores.
test: install lint
	$(VENV)/bin/pytest -q -n 2 --dist loadfile

# The same asset graph in the Dagster UI (http://127.0.0.1:3000), sharing c2s compile's instance.
dev: install
	mkdir -p $(HOME_DIR) && test -f $(HOME_DIR)/dagster.yaml || cp dagster.yaml $(HOME_DIR)/dagster.yaml
	DAGSTER_HOME=$(HOME_DIR) $(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1

clean:
	rm -rf out .c2s .pytest_cache
