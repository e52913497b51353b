# cloud/gpu.yaml's setup (under its time limit): .venv from the repository's make target. pyproject.toml needs
# Python 3.11+; where the image's python3 is older, uv's 3.11 builds .venv.
set -euo pipefail
if python3 -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then PY=python3
else curl -LsSf https://astral.sh/uv/install.sh | sh && ~/.local/bin/uv python install 3.11 \
  && PY="$(~/.local/bin/uv python find 3.11)"; fi
make venv PYTHON="$PY"
