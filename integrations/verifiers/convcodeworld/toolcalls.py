"""The tool variant's reading of a reply, shared by the v1 and classic doors (no verifiers API imported): which
``submit_program`` call a reply's tool calls submit.

Holds:
    first_submission  the judged call of a reply: (id, code, the other calls' ids), or None
    tool_results      the tool messages that answer a reply's calls
    ONE_A_TURN        what the reply's other tool calls are answered
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["first_submission", "tool_results", "ONE_A_TURN"]

#: What every tool call of a reply but the judged one is answered.
ONE_A_TURN = "Only the first submit_program call of a reply is judged: one program a turn."


def first_submission(calls: Iterable[Any]) -> tuple[str, str, list[str]] | None:
    """The first ``submit_program`` call among ``calls`` (tool calls with ``id``, ``name`` and ``arguments``, a JSON
    text, as both verifiers APIs hold them) whose arguments carry a ``code`` string: ``(its id, the code, the other
    calls' ids)``; None when there is none (the reply submitted nothing).

    >>> from types import SimpleNamespace as Call
    >>> first_submission([Call(id="a", name="other", arguments="{}"),
    ...                   Call(id="b", name="submit_program", arguments='{"code": "x = 1"}')])
    ('b', 'x = 1', ['a'])
    >>> first_submission([Call(id="a", name="submit_program", arguments="not json")]) is None
    True
    """
    calls = list(calls)
    for index, call in enumerate(calls):
        if call.name != "submit_program":
            continue
        try:
            code = json.loads(call.arguments or "{}").get("code")
        except (ValueError, AttributeError):
            continue
        if isinstance(code, str):
            return call.id, code, [other.id for i, other in enumerate(calls) if i != index]
    return None


def tool_results(call: tuple[str, str, list[str]], answer: str) -> list[dict[str, Any]]:
    """The tool messages (wire dicts) answering a reply's calls: ``answer`` to the judged ``call``
    (:func:`first_submission`'s), :data:`ONE_A_TURN` to the others."""
    call_id, _, others = call
    return ([{"role": "tool", "tool_call_id": call_id, "content": answer}]
            + [{"role": "tool", "tool_call_id": other, "content": ONE_A_TURN} for other in others])
