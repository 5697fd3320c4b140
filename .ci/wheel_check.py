"""Checks for .ci/wheel_check.sh: what the wheel and sdist hold, and what an installed
perfkit does from a folder outside any checkout.

Each subcommand exits non-zero with a message naming what is wrong:

``dist DIST_DIR CHECKOUT``
    The wheel holds every file of ``data/`` and ``notebooks/`` that git tracks, mapped into
    ``perfkit/_data`` and ``perfkit/_notebooks``, and nothing else there; perfkit's licence
    is in it and no other project's (the bundled data is all made by this project); the
    wheel is under :data:`WHEEL_LIMIT_BYTES` and the bundled data under
    :data:`DATA_LIMIT_BYTES` unpacked. The sdist holds every
    tracked file but ``.gitignore`` and no ``__pycache__``. (Run with any Python.)
``installed CHECKOUT``
    Run with the fresh environment's Python: ``import perfkit`` comes from that environment,
    not the checkout, and finds its data and notebooks inside the installed package.
``info OUTPUT_FILE`` / ``report HTML_FILE`` / ``notebook EXECUTED_IPYNB``
    Check what ``perfkit info sample:slow-rank`` printed, the page ``perfkit report`` wrote,
    and a notebook executed by ``jupyter nbconvert --execute``.
``refused BASE_URL``
    ``perfkit serve``'s address without its token gets the login page (no dashboard), and
    its kernels' API answers 403.
``browser URL``
    Run with a Python that has Playwright (CI's, from ``.[test]``): headless Chromium
    (``/usr/bin/chromium``, never a downloaded one) opens the served dashboard at ``URL``
    (the address ``perfkit serve`` printed, with its token) with every request off the
    server aborted and recorded; the first chart (an SVG in the overview) must draw, with
    no outside request and no page error.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

#: Largest wheel accepted (compressed; about 3.0 MB when this was written).
WHEEL_LIMIT_BYTES = 12 * 10**6
#: Largest bundled data accepted, unpacked (about 23 MB when this was written).
DATA_LIMIT_BYTES = 30 * 2**20
#: Licence files the wheel must carry (paths inside the wheel): perfkit's own, and only it.
LICENCES = ("perfkit-{version}.dist-info/licenses/LICENSE",)
MAPPING = {"data/": "perfkit/_data/", "notebooks/": "perfkit/_notebooks/"}
CHROMIUM = "/usr/bin/chromium"


def fail(message: str) -> None:
    print(f"wheel check FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def tracked(checkout: Path, *paths: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(checkout), "ls-files", "-z", "--", *paths],
                         capture_output=True, text=True, check=True).stdout
    return [p for p in out.split("\0") if p]


def check_dist(dist: Path, checkout: Path) -> None:
    wheels = sorted(dist.glob("perfkit-*.whl"))
    sdists = sorted(dist.glob("perfkit-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        fail(f"expected one wheel and one sdist in {dist}, found {wheels + sdists}")
    wheel, sdist = wheels[0], sdists[0]
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as zf:
        infos = zf.infolist()
    names = {i.filename for i in infos}
    expected = set()
    for path in tracked(checkout, "data", "notebooks"):
        for src, dst in MAPPING.items():
            if path.startswith(src):
                expected.add(dst + path[len(src):])
    packaged = {n for n in names if n.startswith(tuple(MAPPING.values()))}
    if expected - packaged:
        fail(f"the wheel lacks {sorted(expected - packaged)[:10]}")
    if packaged - expected:
        fail(f"the wheel holds untracked files {sorted(packaged - expected)[:10]}")
    for licence in LICENCES:
        if licence.format(version=version) not in names:
            fail(f"the wheel lacks the licence file {licence.format(version=version)}")
    licences = {n for n in names if Path(n).name.upper().startswith(("LICENSE", "LICENCE"))}
    extra = licences - {licence.format(version=version) for licence in LICENCES}
    if extra:
        fail(f"the wheel carries other licence files (third-party data?): {sorted(extra)}")
    readmes = [n for n in names if n.startswith("perfkit/_data/") and n.endswith("README.md")]
    if len(readmes) < 8:
        fail(f"the wheel's data has {len(readmes)} README files (provenance), expected >= 8")
    data_bytes = sum(i.file_size for i in infos if i.filename.startswith("perfkit/_data/"))
    wheel_bytes = wheel.stat().st_size
    if data_bytes > DATA_LIMIT_BYTES:
        fail(f"bundled data {data_bytes / 2**20:.1f} MiB > {DATA_LIMIT_BYTES / 2**20:.0f} MiB")
    if wheel_bytes > WHEEL_LIMIT_BYTES:
        fail(f"wheel {wheel_bytes / 1e6:.1f} MB > {WHEEL_LIMIT_BYTES / 1e6:.0f} MB")
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    missing = set(tracked(checkout)) - members - {".gitignore"}
    if missing:
        fail(f"the sdist lacks tracked files {sorted(missing)[:10]}")
    if any("__pycache__" in m for m in members):
        fail("the sdist holds __pycache__ folders")
    print(f"dist ok: {wheel.name} {wheel_bytes / 1e6:.1f} MB (limit "
          f"{WHEEL_LIMIT_BYTES / 1e6:.0f} MB), bundled data {data_bytes / 2**20:.1f} MiB "
          f"unpacked (limit {DATA_LIMIT_BYTES / 2**20:.0f} MiB), {len(packaged)} data and "
          f"notebook files; {sdist.name} {sdist.stat().st_size / 1e6:.1f} MB, "
          f"{len(members)} entries")


def check_installed(checkout: Path) -> None:
    import perfkit
    from perfkit import resources

    where = Path(perfkit.__file__).resolve().parent
    if checkout.resolve() in where.parents:
        fail(f"perfkit was imported from the checkout ({where}), not from the environment")
    if Path(sys.prefix).resolve() not in where.parents:
        fail(f"perfkit was imported from {where}, outside this environment ({sys.prefix})")
    for folder in (resources.data_dir(), resources.notebook_dir()):
        if where not in folder.resolve().parents:
            fail(f"{folder} is not inside the installed package {where}")
    table = perfkit.samples()
    if len(table) < 7 or (table["description"].str.len() == 0).any():
        fail(f"perfkit.samples() lists {len(table)} samples (some without a description)")
    if not resources.dashboard_notebook().is_file():
        fail("the installed package has no dashboard notebook")
    if len(resources.guided_notebooks()) < 10:
        fail(f"the installed package has {len(resources.guided_notebooks())} guided notebooks")
    print(f"installed ok: perfkit {perfkit.__version__} from {where}; {len(table)} samples")


def check_info(output: Path) -> None:
    text = output.read_text(encoding="utf-8")
    for needle in ("format         an Ascend text export (ascend_text)",
                   "ranks          4 (0-3)", "Top findings",
                   "/perfkit/_data/simulated/slow-rank"):
        if needle not in text:
            fail(f"perfkit info sample:slow-rank did not print {needle!r}:\n{text}")
    print("info ok")


def check_report(page_path: Path) -> None:
    page = page_path.read_text(encoding="utf-8")
    if not page.startswith("<!DOCTYPE html>") or page.count("<svg") < 2:
        fail(f"{page_path} is not a report with charts ({page.count('<svg')} SVG)")
    if "<script" in page.lower() or re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""",
                                               page, re.IGNORECASE):
        fail(f"{page_path} loads something from elsewhere")
    if not re.search(r"Rank 2 computes \d+ % slower", html.unescape(page)) \
            or "bundled sample:slow-rank" not in page:
        fail(f"{page_path} does not show the slow-rank sample's finding and name")
    print(f"report ok: {page_path.stat().st_size / 1e3:.0f} kB, {page.count('<svg')} SVG charts")


def check_notebook(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    shown = 0
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                fail(f"{path.name}: {out['ename']}: {out['evalue']}")
            shown += out["output_type"] in ("display_data", "execute_result")
    if shown < 3:
        fail(f"{path.name} displayed {shown} outputs")
    print(f"notebook ok: {path.name}, {shown} outputs displayed")


def check_refused(base: str) -> None:
    import urllib.error
    import urllib.parse
    import urllib.request

    with urllib.request.urlopen(base, timeout=120) as response:
        landed, body = response.url, response.read().decode("utf-8")
    if urllib.parse.urlsplit(landed).path != "/login" or "pk-dashboard" in body:
        fail(f"{base} without the token was not refused: it answered {landed}")
    try:
        urllib.request.urlopen(f"{base}api/kernels/00000000-0000-0000-0000-000000000000",
                               timeout=120)
        fail("the kernels' API answered a request without the token")
    except urllib.error.HTTPError as exc:
        if exc.code != 403:
            fail(f"the kernels' API answered {exc.code} to a request without the token")
    print("refused ok: without the token, the login page and 403 from the API")


def check_browser(url: str) -> None:
    from urllib.parse import urlsplit

    from playwright.sync_api import sync_playwright

    parts = urlsplit(url)
    server = f"{parts.scheme}://{parts.netloc}/"

    external: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu",
                                          "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))

        def offline(route) -> None:
            if route.request.url.startswith((server, server.replace("http", "ws", 1))):
                route.continue_()
            else:
                external.append(route.request.url)
                route.abort()

        page.route("**/*", offline)
        page.goto(url, timeout=120_000)
        # the overview's first chart drawn by Vega in the page (JupyterChart, no CDN)
        page.wait_for_selector(".pk-dashboard .pk-chart svg.marks", timeout=120_000)
        text = page.inner_text("body")
        browser.close()
    if external:
        fail(f"the dashboard asked for outside resources: {external}")
    if errors:
        fail(f"the dashboard page raised errors: {errors}")
    if "Where the step time goes" not in text:
        fail("the dashboard's overview chart title is missing")
    print("browser ok: the first chart drew, no outside request, no page error")


def main(argv: list[str]) -> None:
    command, *args = argv
    if command == "dist":
        check_dist(Path(args[0]), Path(args[1]))
    elif command == "installed":
        check_installed(Path(args[0]))
    elif command == "info":
        check_info(Path(args[0]))
    elif command == "report":
        check_report(Path(args[0]))
    elif command == "notebook":
        check_notebook(Path(args[0]))
    elif command == "refused":
        check_refused(args[0])
    elif command == "browser":
        check_browser(args[0])
    else:
        fail(f"unknown check {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
