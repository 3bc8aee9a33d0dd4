#!/usr/bin/env bash
# Installs clients/python into a fresh venv (with pytest, from PyPI) and runs
# its tests against the installed package. Extra arguments go to pytest.
# LOCUS_CLUSTER_FILE=cluster.toml adds the tests against a real cluster.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
venv="$(mktemp -d "${TMPDIR:-/tmp}/locus-py-venv.XXXXXX")"
trap 'rm -rf "$venv"' EXIT

"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here" pytest

# Run from the venv's folder so that the installed package is the one tested,
# not the source tree beside the tests.
cd "$venv"
"$venv/bin/python" -c 'import locus_client; print("testing", locus_client.__file__)'
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/tests" "$@"
