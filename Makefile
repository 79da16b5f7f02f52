# Pressloop: `make run` starts the service on embedded defaults, `make test` runs every test.
# Both set up everything they need on a fresh machine (virtual environment, packages, services).

PYTHON ?= python3
TOOLS := .venv-tools
UV := $(TOOLS)/bin/uv
VENV := .venv
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# Installed packages are compiled to bytecode once, at install: where PYTHONDONTWRITEBYTECODE is
# set (as on these machines) every process would otherwise compile every module it imports from
# source, about 2.5 s at each start of `pressloop serve` or the CLI.
export UV_COMPILE_BYTECODE := 1

.PHONY: setup run test lint bench services browser clean

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet "uv==0.13.9"

# --inexact: a narrower sync (make run) must not remove what a wider one (make test) installed.
$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --inexact --group dev
	$(VENV)/bin/python -m compileall -q pressloop
	touch $@

# The local model's runtime (llama-cpp-python) compiles from source the first time: portably,
# with GGML_NATIVE=OFF and every CPU variant of its backend side by side (the build flags are in
# pyproject.toml, [tool.uv.extra-build-variables], and in the key of uv's cache: a wheel built
# with other flags is never reused). About 15 minutes on 2 cores, once; later fresh clones take
# the cached wheel, which runs on any CPU.
# A llama-cpp-python installed before the portable build (one library, for one CPU) is rebuilt.
PORTABLE_LLAMA := find $(VENV) -name 'libggml-cpu-*.so' | grep -q .
# The compilers for it (clang 19 on arm64, installed if missing; the default gcc on x86-64).
LLAMA_ENV = $$(bash scripts/ensure-llama-toolchain.sh)
# Offline first: online, uv revalidates its cached copy of llama.cpp's source distribution with
# the index and, when the answer does not prove it unchanged, files it as a new revision and
# builds it again (the same file, the same hash: 15 minutes lost on every fresh clone). Offline,
# uv takes the newest revision its cache holds and that revision's wheel, in a second. An online
# resolve (`uv lock`, `uv add`) still files a new revision: the next sync builds it, once. With
# nothing cached the offline attempt stops at once and the online one downloads and builds.
UV_SYNC_LOCAL = env $(LLAMA_ENV) $(UV) sync --frozen --inexact --group dev --group local
SYNC_LOCAL = $(UV_SYNC_LOCAL) --offline 2>/dev/null || $(UV_SYNC_LOCAL)
$(VENV)/.synced-local: $(VENV)/.synced
	$(SYNC_LOCAL)
	$(PORTABLE_LLAMA) || $(UV_SYNC_LOCAL) --reinstall-package llama-cpp-python
	touch $@

# The outside MCP servers and clients the tests run (tests/support/npm.py), at the versions
# tests/npm/package-lock.json pins, installed again only when the lock changes. The stamp is in
# node_modules, so a removed node_modules is installed again too. 8 to 15 s on 2 cores, from a
# cold npm cache or a warm one alike: the time goes to writing 160 MB of packages, not fetching.
NPM_TESTS := tests/npm/node_modules/.installed
$(NPM_TESTS): tests/npm/package-lock.json
	npm ci --prefix tests/npm --prefer-offline --no-audit --no-fund
	touch $@

## setup: create the virtual environment and install the locked dependencies
setup: $(VENV)/.synced

## services: make sure the services the tests use are running (PostgreSQL, a local WordPress)
services:
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-wordpress.sh

## run: start the API, worker and scheduler on embedded defaults (SQLite), and a local
## WordPress to act on when PRESSLOOP_WP_URL is not set. With no provider key configured it
## first builds llama.cpp (the `local` group), prepares the offline model and uses it.
run: setup
	bash scripts/ensure-wordpress.sh || echo "(no local WordPress: its packages could not be installed)"
	$(VENV)/bin/pressloop db upgrade
	@if $(VENV)/bin/python -m pressloop.local_model needed; then \
	  echo "No provider key configured: using the offline local model (set OPENAI_API_KEY, ANTHROPIC_API_KEY, ... to use yours)."; \
	  if ! $(VENV)/bin/python -c "import llama_cpp" 2>/dev/null || ! $(PORTABLE_LLAMA); then \
	    echo "Building llama.cpp (the 'local' dependency group, every CPU variant): about 15 minutes on 2 cores, once."; \
	    { $(SYNC_LOCAL); } || exit 1; \
	    $(PORTABLE_LLAMA) || $(UV_SYNC_LOCAL) --reinstall-package llama-cpp-python || exit 1; \
	  fi; \
	  $(VENV)/bin/python -m pressloop.local_model prepare || exit 1; \
	  echo "Chat in a browser: http://127.0.0.1:$${PRESSLOOP_PORT:-8780}/ui (admin token in $${PRESSLOOP_DATA_DIR:-data}/admin-token),"; \
	  echo "or from a terminal: PRESSLOOP_PROVIDER=local $(VENV)/bin/pressloop chat 'Create a draft post titled Hello from Pressloop'"; \
	  PRESSLOOP_PROVIDER=local exec $(VENV)/bin/pressloop serve; \
	else \
	  exec $(VENV)/bin/pressloop serve; \
	fi

## browser: Debian's Chromium for the admin UI's end-to-end tests (Playwright drives it)
browser:
	bash scripts/ensure-chromium.sh

## test: run every test, on SQLite and on the real PostgreSQL, the UI in a real Chromium; in
## TEST_WORKERS processes (pytest-xdist; each has its own PostgreSQL database and fixtures): on
## 2 cores 13 min against 23 in one; TEST_WORKERS=0 runs them in one process
TEST_WORKERS ?= 2
test: setup $(VENV)/.synced-local services browser $(NPM_TESTS)
	$(VENV)/bin/pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))

## lint: ruff, mypy (strict on contracts, engine, runtime) and the layers' import contracts
## (pyproject.toml [tool.importlinter]; `make test` checks them too, tests/test_layers.py)
lint: setup
	$(VENV)/bin/ruff check pressloop tests bench
	$(VENV)/bin/ruff format --check pressloop tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

## bench: run the benchmarks and write docs/benchmarks.md; the peers' packages (the `peers`
## group: LangGraph, the OpenAI Agents SDK, Pydantic AI) are installed for it
bench: setup services
	$(UV) sync --frozen --all-groups
	$(VENV)/bin/python bench/loop_overhead.py --write docs/benchmarks.md
	$(VENV)/bin/python bench/background.py --write docs/benchmarks.md
	$(VENV)/bin/python -m bench.peers --write docs/benchmarks.md
	$(VENV)/bin/python bench/local_model.py --write docs/benchmarks.md
	$(VENV)/bin/python -m bench.tasks --out docs/benchmarks.md

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache
