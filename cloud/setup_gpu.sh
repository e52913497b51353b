#!/usr/bin/env bash
# cloud/gpu.yaml's setup (under its time limit): first the driver, which torch's CUDA build needs (DRIVER_MIN,
# set by make cloud from the torch pin), then .venv from the repository's make target. pyproject.toml needs
# Python 3.11+; where the image's python3 is older, uv's 3.11 builds .venv.
set -euo pipefail
if command -v nvidia-smi >/dev/null; then
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
  if [ "$(printf '%s\n%s\n' "${DRIVER_MIN:?}" "$driver" | sort -V | head -n 1)" != "$DRIVER_MIN" ]; then
    echo "setup: NVIDIA driver $driver is older than $DRIVER_MIN, the oldest torch's CUDA build runs on:" \
      "launch an image with a newer driver (IMAGE_ID=ami-...), or pin a torch built for an older CUDA" >&2
    exit 1
  fi
  echo "setup: NVIDIA driver $driver (torch's CUDA build needs $DRIVER_MIN or newer)"
else
  echo "setup: no nvidia-smi: no NVIDIA driver here, the runs will train on the CPU"
fi
if python3 -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then PY=python3
else curl -LsSf https://astral.sh/uv/install.sh | sh && ~/.local/bin/uv python install 3.11 \
  && PY="$(~/.local/bin/uv python find 3.11)"; fi
make venv PYTHON="$PY"
