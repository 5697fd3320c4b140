"""Lab packs: the class's progress, student by student and question by question."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .base import require

__all__ = ["class_progress_chart", "STATUS_COLORS"]

#: Colour of each answer status.
STATUS_COLORS = {"right": "#2e8b57", "wrong": "#c0392b", "unanswered": "#d5d8dc"}


def class_progress_chart(frame: pd.DataFrame, title: str | None = None,
                         cell: int = 18) -> alt.VConcatChart:
    """A grid of students × questions coloured by status, and the count per question.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per (student, question) with columns ``student``, ``question`` and
        ``status`` (``"right"``, ``"wrong"`` or ``"unanswered"``), students in the order
        to draw, each student's questions in the order asked (the output of
        :func:`perfkit.lab.grade`; students may be asked different questions, each column
        goes where it is first asked); ``attempts`` and ``answer`` go into
        the tooltip when present.
    title : str, optional
        Chart title.
    cell : int
        Size of one grid cell in pixels.

    Returns
    -------
    altair.VConcatChart
        The grid above (a row per student, a column per question), stacked bars below (per
        question, how many students are right, wrong or have not answered).
    """
    require(frame, ("student", "question", "status"), "class_progress_chart")
    students = list(dict.fromkeys(frame["student"].astype(str)))
    # in the order they are asked: students may be asked different questions (a pipeline
    # job's bubble, another job's exposed communication), so by each question's earliest
    # place in a student's list, then by first appearance
    place = pd.DataFrame({"question": frame["question"].astype(str).to_numpy(),
                          "at": frame.groupby("student", sort=False).cumcount().to_numpy()})
    first = place.groupby("question", sort=False)["at"].min()
    questions = sorted(first.index, key=lambda q: first[q])
    data = pd.DataFrame({"student": frame["student"].astype(str),
                         "question": frame["question"].astype(str),
                         "status": frame["status"].astype(str)})
    tooltip = [alt.Tooltip("student:N"), alt.Tooltip("question:N"), alt.Tooltip("status:N")]
    if "attempts" in frame.columns:
        data["attempts"] = pd.to_numeric(frame["attempts"], errors="coerce").fillna(0) \
            .astype(int).to_numpy()
        tooltip.append(alt.Tooltip("attempts:Q"))
    color = alt.Color("status:N", title="answer",
                      scale=alt.Scale(domain=list(STATUS_COLORS),
                                      range=list(STATUS_COLORS.values())))
    x = alt.X("question:N", sort=questions, title=None,
              axis=alt.Axis(labelAngle=-40, labelLimit=160))
    grid = alt.Chart(data).mark_rect(stroke="white", strokeWidth=1).encode(
        x=x, y=alt.Y("student:N", sort=students, title=None), color=color,
        tooltip=tooltip,
    ).properties(width=cell * len(questions), height=cell * len(students),
                 title=title or "The class, question by question")
    counts = data.groupby(["question", "status"], sort=False).size().reset_index(name="n")
    bars = alt.Chart(counts).mark_bar().encode(
        x=x, y=alt.Y("n:Q", title="students", stack=True,  # whole students only
                     axis=alt.Axis(tickMinStep=1, format="d")),
        color=color, order=alt.Order("status:N"),
        tooltip=[alt.Tooltip("question:N"), alt.Tooltip("status:N"), alt.Tooltip("n:Q")],
    ).properties(width=cell * len(questions), height=120)
    return alt.vconcat(grid, bars, spacing=8)
