# memstream: `make run` serves the embedded stack with sample data; `make test` runs everything.
PY ?= python3.11
UV_VERSION := 0.13.8
UV := .tools/bin/uv
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := .venv

.PHONY: install run test system-deps lint typecheck schemas dashboards bench-ingest bench-results bench-load-extra clean

$(UV):
	$(PY) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

## install: build .venv at the repo root from uv.lock, compiled to bytecode (the packages' and
## ours: a command then starts without compiling what it imports, even where
## PYTHONDONTWRITEBYTECODE keeps Python from caching it)
install: $(UV)
	$(UV) sync --frozen --compile-bytecode --python $(PY)
	@.venv/bin/python -m compileall -q libs services tools >/dev/null

## run: the embedded stack (broker, graph server, workers, API) with sample data
run: install
	.venv/bin/memstream up --sample-data

## system-deps: Debian's Prometheus (promtool and the server), Chromium (explorer tests),
## PostgreSQL (the data-key store's second adapter; the tests start their own server) and
## libgomp1 (OpenMP, which the learned ranker's LightGBM wheel links against). Two checkouts
## installing at once take turns (flock) instead of failing on apt's lock.
system-deps:
	@{ command -v promtool && command -v prometheus && test -x /usr/bin/chromium && ls /usr/lib/postgresql/*/bin/postgres && $(PY) -c "import ctypes; ctypes.CDLL('libgomp.so.1')"; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then flock /tmp/memstream-system-deps.lock sh -c 'apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq prometheus chromium postgresql libgomp1 >/dev/null'; \
	  else echo "prometheus, promtool, chromium, postgresql or libgomp1 missing: run 'sudo apt-get install prometheus chromium postgresql libgomp1'" >&2; exit 1; fi; }

## test: lint, type-check and the whole suite against real servers (three workers: the tests
## wait on servers as much as they compute); the type check runs beside the suite, its
## verdict read at the end
test: install system-deps
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	@rm -f .typecheck.log; (.venv/bin/mypy > .typecheck.log 2>&1; echo $$? >> .typecheck.log) & \
	  .venv/bin/pytest -n 3 --dist loadfile; status=$$?; wait; \
	  echo "--- mypy"; cat .typecheck.log; \
	  test "$$(tail -n 1 .typecheck.log)" = 0 && exit $$status; exit 1

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck: install
	.venv/bin/mypy

## schemas: regenerate schemas/ from the pydantic models
schemas: install
	.venv/bin/python -m memstream.schemas schemas

## dashboards: regenerate the Grafana dashboards in deploy/grafana/dashboards/
dashboards: install
	.venv/bin/python -m memstream_dashboards deploy/grafana/dashboards

## bench-ingest: the ingest benchmark (a measurement, not a test)
bench-ingest: install
	.venv/bin/memstream bench ingest --events 100000

# The LoCoMo development split (not in the repository): make bench-results LOCOMO=path/to/it
LOCOMO ?= bench/data/locomo-dev.json
RESULTS ?= bench/results
## bench-results: run every bench (about 25 min), keep the JSON, rewrite docs/benchmarks.md
bench-results: install
	mkdir -p $(RESULTS)
	.venv/bin/memstream bench ingest --events 100000 --spine-only --json > $(RESULTS)/ingest-spine.json
	.venv/bin/memstream bench ingest --events 100000 --json > $(RESULTS)/ingest-full.json
	.venv/bin/memstream bench embed --docs 20000 --locomo $(LOCOMO) --keys --json > $(RESULTS)/embed.json
	.venv/bin/memstream bench locomo --data $(LOCOMO) --out $(RESULTS)/locomo.jsonl --json > $(RESULTS)/locomo.json
	.venv/bin/memstream bench train --data $(LOCOMO) --json > $(RESULTS)/train.json
	.venv/bin/memstream bench load --events 10000 --json > $(RESULTS)/load-10000.json
	.venv/bin/memstream bench load --events 100000 --checkouts 1000 --json > $(RESULTS)/load-100000.json
	.venv/bin/memstream bench chaos --json > $(RESULTS)/chaos.json
	.venv/bin/memstream bench scale --events 20000 --json > $(RESULTS)/scale.json
	.venv/bin/memstream bench learn --json > $(RESULTS)/learn.json
	.venv/bin/memstream bench neighbours --json > $(RESULTS)/neighbours.json
	.venv/bin/memstream bench read-after --json > $(RESULTS)/read-after.json
	.venv/bin/memstream bench report --results $(RESULTS) --page docs/benchmarks.md

## bench-load-extra: the 1M row and the 100k row with the HNSW build on (about 20 min)
bench-load-extra: install
	mkdir -p $(RESULTS)
	.venv/bin/memstream bench load --events 1000000 --json > $(RESULTS)/load-1000000.json
	MEMSTREAM_VECTOR_OPTIMIZE=true .venv/bin/memstream bench load --events 100000 --json \
		> $(RESULTS)/load-100000-hnsw.json
	.venv/bin/memstream bench report --results $(RESULTS) --page docs/benchmarks.md

clean:
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache
