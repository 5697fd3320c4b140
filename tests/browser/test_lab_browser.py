"""``perfkit serve --lab DIR/student-1``: the student's app in headless Chromium, offline.

A one-student pack is made here; the app must show the brief, the views and every
question, need nothing from outside this machine, and record what the student answers
with the Check button: a right answer gets the explanation, a wrong one the hint.
"""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import perfkit as pk

from .conftest import ARTIFACTS, WAIT_MS, _free_port, chromium_page

#: The token the student's app is served with (a class's instructor hands out the address).
TOKEN = "lab-browser-test-token"


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pack = pk.lab.make(tmp_path_factory.mktemp("lab") / "class", students=1, seed=2,
                       workers=1, progress=False)
    return pack / "student-1"


@pytest.fixture(scope="module")
def app(student: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PERFKIT_PROFILE", "PERFKIT_LAB")}
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "serve", "--lab",
                                 str(student), "--port", str(port), "--no-browser",
                                 "--token", TOKEN],
                                stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        try:
            yield f"http://127.0.0.1:{port}/"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def page(app: str) -> Iterator[Any]:
    with chromium_page(f"{app}?token={TOKEN}", dashboard=False,
                       owns=lambda url: url.startswith((app, app.replace("http", "ws")))
                       ) as page:
        page.wait_for_selector("text=right so far", timeout=WAIT_MS)
        try:
            yield page
        finally:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "lab_app.png"))


def _question(page: Any, title: str) -> Any:
    """The box of the question titled ``title`` ("Q5. Pipeline bubble (%)"): matched on its
    numbered title, as other questions may name it in their text."""
    heading = page.locator(".pk-lab-q").filter(has_text=re.compile(rf"Q\d+\. {re.escape(title)}"))
    return page.locator(".widget-vbox", has=heading).last


def test_the_app_shows_the_brief_views_and_questions(page: Any, student: Path) -> None:
    text = page.inner_text("body")
    sheet = json.loads((student / "lab.json").read_text())
    for q in sheet["questions"]:
        assert q["title"] in text, q["id"]
    for heading in ("Your device", "Your job (profiles/job)", "The cluster: collectives and "
                    "links", "Your IR dump: recompute patterns", "The planner"):
        assert heading in text
    assert page.locator(".pk-error").count() == 0
    assert "Traceback" not in text and "def " not in text  # sources stripped
    assert page.external == [] and page.errors == []


def test_the_step_chart_shows_the_overview_parts(page: Any, student: Path) -> None:
    """The job's step chart stacks the Overview's parts: the wait before the first device
    task (Preparing, in step_trace_time.csv) is on it whenever the job has one, and its
    bars reach the step_ms of the table (it once drew the device span only)."""
    section = page.locator(".widget-html", has=page.locator(
        "h3", has_text="Your job: the step, rank by rank")).first
    section.scroll_into_view_if_needed()
    legend = section.inner_text()
    for words in ("computing", "exposed communication", "free (device idle)"):
        assert words in legend, words
    rows = []  # every rank's step, read from step_trace_time.csv
    for path in (student / "profiles" / "job").glob("*/ASCEND_PROFILER_OUTPUT/"
                                                    "step_trace_time.csv"):
        with path.open(newline="") as f:
            rows += list(csv.DictReader(f))
    assert len(rows) == 2
    for words, column in (("before the first device task (data, launch)", "Preparing"),
                          ("pipeline bubble", "Bubble")):  # shown where a rank has it
        assert (words in legend) == any(float(r[column]) > 0 for r in rows), words
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(ARTIFACTS / "lab_step_chart.png"))
    assert page.errors == [] and page.external == []


def test_check_records_and_answers_with_hint_or_explanation(page: Any, student: Path) -> None:
    key = json.loads((student.parent / "instructor" / "key.json").read_text())
    bubble = key["entries"]["student-1"]["answers"]["bubble"]
    box = _question(page, "Pipeline bubble")
    box.locator("input[type=text]").fill(f"{bubble['answer'] * 3 + 5:.3g}")
    box.locator("button", has_text="Check").click()
    box.locator("text=Not yet.").wait_for(timeout=WAIT_MS)
    assert "idles for (pp − 1)" in box.inner_text()  # the hint
    box.locator("input[type=text]").fill(f"{bubble['answer']:.4g}")
    box.locator("button", has_text="Check").click()
    box.locator("text=Right.").wait_for(timeout=WAIT_MS)
    assert "(attempt 2)" in box.inner_text()
    attempts = pk.lab.AnswerBook(student, readonly=True).attempts()
    assert list(attempts["question"]) == ["bubble", "bubble"]
    assert list(attempts["correct"]) == [False, True]
    assert set(attempts["source"]) == {"notebook"}
    fit = _question(page, "Does the layout fit?")
    answer = key["entries"]["student-1"]["answers"]["memory_fit"]["answer"]
    fit.locator(f"label:has-text('{answer}')").first.click()
    fit.locator("button", has_text="Check").click()
    fit.locator("text=Right.").wait_for(timeout=WAIT_MS)
    assert page.errors == [] and page.external == []
