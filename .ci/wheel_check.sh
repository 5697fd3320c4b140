#!/usr/bin/env bash
# The install a user gets: build the sdist and the wheel (the wheel from the sdist), install
# the wheel into a fresh virtual environment (dependencies from the package registry), and
# from a temporary folder outside any checkout run `perfkit info`, `perfkit report`,
# `perfkit notebooks` + one copied notebook, the README's tour and `perfkit serve` checked in
# headless Chromium at the address it prints (its random token), and refusing one without. Then `pip install -e .` into the same environment and check that an
# editable install finds the data and notebooks too. Checks: .ci/wheel_check.py.
#
# Usage: bash .ci/wheel_check.sh [WORK_DIR]   (default: a new temporary folder, removed at
# the end unless KEEP_WHEEL_CHECK=1). Needs python3 with venv, git, and for the browser
# check Playwright in python3 (pip install -e ".[test]") and /usr/bin/chromium.
set -euo pipefail
# a failing command ends the check: say which, instead of stopping without a word
trap 'echo "wheel check: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
CHECKOUT="$(cd "$(dirname "$0")/.." && pwd)"
PY="$(command -v "${PYTHON:-python3}")"   # absolute: PATH gets the fresh venv below
WORK="${1:-$(mktemp -d "${TMPDIR:-/tmp}/perfkit-wheel-check.XXXXXX")}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
CHECK="$PY $CHECKOUT/.ci/wheel_check.py"
SERVER_PID=""
# build and pip install -e leave perfkit.egg-info in the checkout: remove it only if it is new
[ -e "$CHECKOUT/perfkit.egg-info" ] && EGG_INFO_BEFORE=1 || EGG_INFO_BEFORE=0
drop_egg_info() { [ "$EGG_INFO_BEFORE" = 1 ] || rm -rf "$CHECKOUT/perfkit.egg-info"; }
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  if [ -z "${1:-}" ] && [ "${KEEP_WHEEL_CHECK:-0}" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
# the fresh environment must not see the checkout or a developer's settings
unset PYTHONPATH PERFKIT_PROFILE PERFKIT_ENGINE
export PERFKIT_CACHE_DIR="$WORK/cache"
step() { echo; echo "== $*"; }
t0=$(date +%s)

step "build the sdist, then the wheel from it (python -m build, in its own environment)"
"$PY" -m venv "$WORK/build-env"
"$WORK/build-env/bin/pip" install -q build
"$WORK/build-env/bin/python" -m build -o "$WORK/dist" "$CHECKOUT" > "$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; exit 1; }
drop_egg_info
$CHECK dist "$WORK/dist" "$CHECKOUT"

step "install the wheel into a fresh virtual environment (dependencies from the registry)"
"$PY" -m venv "$WORK/venv"
VENV="$WORK/venv"
"$VENV/bin/pip" install -q "$WORK"/dist/perfkit-*.whl
export PATH="$VENV/bin:$PATH"
RUN="$WORK/run"            # a working folder outside any checkout
mkdir -p "$RUN"
cd "$RUN"
"$VENV/bin/python" "$CHECKOUT/.ci/wheel_check.py" installed "$CHECKOUT"

step "perfkit info sample:slow-rank"
perfkit info sample:slow-rank | tee "$RUN/info.txt"
$CHECK info "$RUN/info.txt"

step "perfkit report sample:slow-rank -o report.html"
perfkit report sample:slow-rank -o "$RUN/report.html" --no-progress
$CHECK report "$RUN/report.html"

step "perfkit notebooks nbs, then execute the copied 00_start_here.ipynb"
perfkit notebooks nbs | tee "$RUN/notebooks.txt"
grep -q "copied: 00_start_here.ipynb" "$RUN/notebooks.txt"
grep -q "jupyter lab" "$RUN/notebooks.txt"
[ "$(ls nbs/*.ipynb | wc -l)" -ge 10 ]
echo "# my edit" >> nbs/01_metrics.ipynb
perfkit notebooks nbs | tee "$RUN/notebooks2.txt"
grep -q "kept (.*01_metrics.ipynb" "$RUN/notebooks2.txt"
grep -q "# my edit" nbs/01_metrics.ipynb
(cd nbs && jupyter nbconvert --to notebook --execute 00_start_here.ipynb \
   --output executed.ipynb --ExecutePreprocessor.timeout=600)
$CHECK notebook "$RUN/nbs/executed.ipynb"

step "the README's tour"
"$VENV/bin/python" - "$CHECKOUT/README.md" <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
code = re.search(r"## A short tour\n\n```python\n(.*?)```", text, re.S).group(1)
namespace = {}
exec(compile(code, "README tour", "exec"), namespace)
assert namespace["job"].ranks, "the tour's profile did not load"
print("tour ok:", type(namespace["job"]).__name__, namespace["job"].ranks)
EOF

step "perfkit serve (its random token), and the dashboard in headless Chromium with no outside request"
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
perfkit serve --port "$PORT" --no-browser > "$RUN/serve.log" 2>&1 &
SERVER_PID=$!
URL=""   # the address perfkit serve prints, with the token it made
for _ in $(seq 120); do
  # (no match yet is no error: under set -e and pipefail a failing grep would end the check
  # silently before serve has printed its address)
  URL="${URL:-$(grep -o "http://127.0.0.1:$PORT/?token=[0-9a-f]\+" "$RUN/serve.log" | head -1 || true)}"
  if [ -n "$URL" ] && "$PY" -c "import urllib.request as u; u.urlopen('$URL', timeout=120).close()" 2>/dev/null; then
    break
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$RUN/serve.log"; exit 1; }
  sleep 1
done
[ -n "$URL" ] || { echo "perfkit serve printed no address with a token"; cat "$RUN/serve.log"; exit 1; }
$CHECK refused "http://127.0.0.1:$PORT/"
if [ -x /usr/bin/chromium ] && "$PY" -c "import playwright" 2>/dev/null; then
  $CHECK browser "$URL" || { tail -30 "$RUN/serve.log"; exit 1; }
else
  echo "SKIPPED the browser check: /usr/bin/chromium or Playwright is missing"
  "$PY" -c "import urllib.request as u; assert b'perfkit' in u.urlopen('$URL', timeout=120).read()"
fi
kill "$SERVER_PID"; wait "$SERVER_PID" || true
SERVER_PID=""

step "pip install -e the checkout into the same environment: data and notebooks still found"
"$VENV/bin/pip" install -q -e "$CHECKOUT"
drop_egg_info
"$VENV/bin/python" - "$CHECKOUT" <<'EOF'
import sys
from pathlib import Path
import perfkit
from perfkit import resources
checkout = Path(sys.argv[1]).resolve()
assert Path(perfkit.__file__).resolve().parent == checkout / "perfkit", perfkit.__file__
assert resources.data_dir().resolve() == checkout / "data", resources.data_dir()
assert resources.dashboard_notebook().resolve() == checkout / "notebooks" / "dashboard.ipynb"
assert len(perfkit.samples()) >= 7
print("editable ok: data and notebooks from", checkout)
EOF
perfkit info sample:slow-rank --findings 0 > /dev/null
echo
echo "wheel check passed in $(( $(date +%s) - t0 )) s ($WORK)"
