"""The "Test yourself" quiz as a widget: one question per box, an answer, a reason.

The logic is :class:`primer.course.quiz.Quiz`; this module only wires controls to
:meth:`~primer.course.quiz.Quiz.answer`. A choice question shows its choices as radio
buttons, a number question a text box; "Check" shows the verdict and its explanation.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from primer.course.quiz import LABELS, Quiz, QuizError, QuizQuestion


def quiz_widget(quiz: Quiz) -> widgets.VBox:
    """A panel with one box per question of ``quiz``; display it in a notebook cell."""
    return widgets.VBox([_question_box(quiz, n, q) for n, q in enumerate(quiz.questions, 1)])


def _question_box(quiz: Quiz, n: int, q: QuizQuestion) -> widgets.VBox:
    prompt = widgets.HTML(f"<b>{n}. {html.escape(q.ask)}</b>")
    entry: widgets.RadioButtons | widgets.Text
    if q.choices:
        entry = widgets.RadioButtons(
            options=[(f"({LABELS[i]}) {c.text}", LABELS[i]) for i, c in enumerate(q.choices)],
            value=None, layout=widgets.Layout(width="auto"))
    else:
        entry = widgets.Text(placeholder="a number")
    button = widgets.Button(description="Check")
    verdict = widgets.HTML()

    def check(_: object) -> None:
        if entry.value in (None, ""):
            verdict.value = "<i>Pick an answer first.</i>"
            return
        try:
            feedback = quiz.answer(n, entry.value)
        except QuizError as e:
            verdict.value = f"<i>{html.escape(str(e))}</i>"
            return
        colour = "#1a7f37" if feedback.right else "#b35900"
        verdict.value = f"<span style='color:{colour}'>{html.escape(str(feedback))}</span>"

    button.on_click(check)
    return widgets.VBox([prompt, entry, widgets.HBox([button]), verdict])
