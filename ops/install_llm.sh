#!/usr/bin/env bash
# Install llama-cpp-python[server] (the local default LLM runtime) into a virtualenv.
#
#   bash ops/install_llm.sh [VENV]        # VENV defaults to .venv
#
# Idempotent: does nothing when the pinned version and its server extra already import.
# The wheel is built once, portably, and cached in ${TASKFINDER_WHEEL_CACHE:-~/.cache/taskfinder/wheels}:
# a native build (-march=native) dies with SIGILL on some of our hosts, so the build pins the
# CPU features instead (AVX2/FMA/F16C, no native tuning). A build takes ~15 minutes on 2 cores;
# if one is already running (ours or anyone's), this script waits for its wheel instead of
# starting a second compile.
set -euo pipefail

VERSION=0.3.36
VENV="${1:-.venv}"
CACHE="${TASKFINDER_WHEEL_CACHE:-$HOME/.cache/taskfinder/wheels}"
WAIT_S="${TASKFINDER_WHEEL_WAIT_S:-3600}"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
    echo "install_llm: no virtualenv at $VENV (create it first: python3 -m venv $VENV)" >&2
    exit 1
fi

if "$PY" - "$VERSION" <<'PYCODE' 2>/dev/null
import sys
import llama_cpp
import llama_cpp.server.app  # the [server] extra: fastapi, uvicorn, sse-starlette, pydantic-settings
sys.exit(llama_cpp.__version__ != sys.argv[1])
PYCODE
then
    echo "install_llm: llama-cpp-python $VERSION[server] already installed in $VENV"
    exit 0
fi

find_wheel() {
    ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true
}

mkdir -p "$CACHE"
wheel="$(find_wheel)"
if [ -z "$wheel" ] && pgrep -f "pip wheel" >/dev/null; then
    echo "install_llm: a wheel build is already running; waiting up to ${WAIT_S}s for it"
    waited=0
    while pgrep -f "pip wheel" >/dev/null && [ "$waited" -lt "$WAIT_S" ]; do
        sleep 10
        waited=$((waited + 10))
    done
    wheel="$(find_wheel)"
    if [ -z "$wheel" ]; then
        if pgrep -f "pip wheel" >/dev/null; then
            echo "install_llm: the build is still running after ${WAIT_S}s; run this script again later" >&2
        else
            echo "install_llm: the running build produced no wheel in $CACHE; run this script again" >&2
        fi
        exit 1
    fi
fi
if [ -z "$wheel" ]; then
    echo "install_llm: building llama-cpp-python $VERSION (portable CPU build, ~15 min)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
        "$VENV/bin/pip" wheel --no-deps "llama-cpp-python==$VERSION" -w "$CACHE"
    wheel="$(find_wheel)"
fi

echo "install_llm: installing $wheel[server] into $VENV"
"$VENV/bin/pip" install --disable-pip-version-check "$wheel[server]"
