"""Runs in the judge's process: the verdict of one input/output test, by its dataset's own comparison rule.

The tests of an input/output task (:class:`~convcodeworld_gym.tasks.io.IOTask`) are generated unittest methods, each
one line that calls :func:`check_stdio` or :func:`check_call` with the case's input, its expected output, the rule and
the per-test time limit. The program's process gets the input alone: its wrapper runs the model's code on it and
sends back what happened as data (a ``dict`` of text, and for a call the value returned); it never sees the expected
output and never says whether it passed. Here, in the judge, that data is checked for shape, timed on the judge's own
clock, and compared with the expected output by the rule named (:data:`RULES`), each written from its dataset's judge:

* ``"livecodebench"`` (``lcb_runner/evaluation/testing_util.py``): standard input: both texts stripped and split into
  lines, each line stripped; the line counts must agree, and each pair of lines be equal, or else their
  whitespace-separated tokens be equal read as ``decimal.Decimal``. A call: the value returned (a tuple read as a
  list) equals the JSON-decoded expected value.
* ``"apps"`` and ``"taco"`` (``hendrycks/apps`` ``eval/testing_util.py``; TACO's ``metrics/testing_util.py`` descends
  from it): standard input: the chain of looser comparisons APPS applies to the lines of the output (stripped text,
  stripped lines, lines without blank ones, numbers within ``numpy.allclose``'s tolerance line by line, then each
  line as a set of tokens, the lines as a set, and the same with numbers rounded to 3 decimals). A call: the value
  returned equals the expected output or its first element (outputs are stored as one-element lists), a tuple read
  as a list, a list of tuples as a list of lists; JSON's string keys of a dict taken as ints, as both judges do.
* ``"codecontests"`` (``google-deepmind/code_contests``, ``execution/tester_sandboxer.cc``, ``OutputsMatch``): both
  texts split on whitespace into lower-cased tokens; equal token lists pass; else the counts must agree and each pair
  match: two numbers within an absolute 1e-5 (two integers exactly), anything else equal as text.

A program that exits with a nonzero status fails under ``taco`` and ``codecontests`` (their judges run a process and
read its status); ``livecodebench`` and ``apps`` ignore ``SystemExit`` as their judges do. An exception the program
raised fails the test under every rule.

A failing test's message gives the input, the expected output, the program's output and its standard error or
traceback, each long one cut to its first and last lines (:func:`trim_text`, the execution feedback's own cut): the
execution feedback shows it for the tests it shows. Standard library only, so that any runtime interpreter's judge
imports it; ``__unittest`` keeps this module's frames out of a failure's traceback.

Holds:
    RULES             the rules by name
    STDIO_RULES       the rules a standard-input task may name
    CALL_RULES        the rules a call task may name
    compare           whether the program's output matches the expected one under a rule, and why not
    rule_exit_counts  whether a nonzero exit status fails a test under a rule
    decode_expected   a call test's expected value as its rule reads the stored text
    check_stdio       one standard-input test: call, time, check, compare; fail the test with the facts
    check_call        one function-call test, the same way
    trim_text         cut a long text to its first and last lines
"""

from __future__ import annotations

import decimal
import json
import math
import re
import time
from collections.abc import Callable
from typing import Any

__all__ = ["RULES", "STDIO_RULES", "CALL_RULES", "compare", "check_stdio", "check_call", "trim_text", "rule_exit_counts",
           "decode_expected"]

__unittest = True  # unittest leaves this module's frames out of a failing test's traceback

#: The rules by name; the same names serve both kinds of task.
RULES = ("livecodebench", "apps", "taco", "codecontests")
#: The rules a standard-input task may name, and those a call task may (CodeContests has only standard input).
STDIO_RULES = RULES
CALL_RULES = ("livecodebench", "apps", "taco")

_clock = time.monotonic  # bound at import: a test cannot change the clock it is timed by

#: A field of a failure's message this long or longer is cut to its first and last lines.
FIELD_TRIM_CHARS = 1000
FIELD_FRONT_CHARS = 400
FIELD_REAR_CHARS = 400


def trim_text(text: str, *, threshold: int, front_chars: int, rear_chars: int) -> str:
    """Cut ``text`` of ``threshold`` characters or more to its first and last lines: 5 each when it has 10 lines or
    more, its one line when it has one, else half its lines; the front keeps at most ``front_chars`` characters, the
    back at most ``rear_chars``, joined by a line ``...``. The execution feedback's cut
    (:func:`convcodeworld_gym.feedback.execution.trim_feedback`) is this one with the reference's sizes.

    >>> trim_text("abc", threshold=10, front_chars=2, rear_chars=2)
    'abc'
    >>> trim_text("x" * 30, threshold=10, front_chars=4, rear_chars=3)
    'xxxx\\n...\\nxxx'
    """
    if len(text) < threshold:
        return text
    if threshold <= 0 and not text:
        return text
    lines = text.splitlines()
    if len(lines) >= 10:
        window = 5
    elif len(lines) == 1:
        window = 1
    else:
        window = len(lines) // 2
    front = "\n".join(lines[:window])[:front_chars]
    rear = "\n".join(lines[-window:])[-rear_chars:]  # as the reference slices: a 0 back window keeps it whole
    return front + "\n...\n" + rear


def _field(text: str) -> str:
    return trim_text(text, threshold=FIELD_TRIM_CHARS, front_chars=FIELD_FRONT_CHARS, rear_chars=FIELD_REAR_CHARS)


# ----------------------------------------------------------------------------- LiveCodeBench

def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[decimal.Decimal] | None:
    try:
        return [decimal.Decimal(token) for token in line.split()]
    except (decimal.InvalidOperation, ValueError, ArithmeticError):
        return None


def _livecodebench_stdio(got: str, expected: str) -> str | None:
    """LiveCodeBench's standard-input rule; None when ``got`` matches, else why not.

    >>> _livecodebench_stdio("2.5\\n", "2.500000"), _livecodebench_stdio("1 2", "1  2\\n\\n")
    (None, None)
    >>> _livecodebench_stdio("1\\n2", "1"), _livecodebench_stdio("3", "4")
    ('the output has 2 lines where 1 were expected', 'line 1 differs: 3 where 4 was expected')
    """
    mine, theirs = _stripped_lines(got), _stripped_lines(expected)
    if len(mine) != len(theirs):
        return f"the output has {len(mine)} lines where {len(theirs)} were expected"
    for number, (a, b) in enumerate(zip(mine, theirs), start=1):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        try:
            if da is not None and db is not None and da == db:
                continue
        except (decimal.InvalidOperation, ArithmeticError):  # a signalling NaN cannot be compared
            pass
        return f"line {number} differs: {_short(a)} where {_short(b)} was expected"
    return None


def _tuple_as_list(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _livecodebench_call(got: Any, expected: Any) -> str | None:
    """LiveCodeBench's functional rule: a tuple is read as a list, then equality.

    >>> _livecodebench_call((1, 2), [1, 2]), _livecodebench_call(3, 4)
    (None, 'the value returned differs from the expected one')
    """
    return None if _equal(_tuple_as_list(got), expected) else "the value returned differs from the expected one"


# ----------------------------------------------------------------------------- APPS and TACO

def _allclose(mine: list[float], theirs: list[float]) -> bool:
    """``numpy.allclose(mine, theirs)`` for two lists of floats of the same length (rtol 1e-5, atol 1e-8; equal
    infinities match, NaN matches nothing)."""
    for a, b in zip(mine, theirs):
        if a == b:
            continue
        if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
            return False
        if abs(a - b) > 1e-8 + 1e-5 * abs(b):
            return False
    return True


def _floats(items: list[str]) -> list[float] | None:
    try:
        return [float(item) for item in items]
    except (ValueError, OverflowError):
        return None


def _apps_stdio(got: str, expected: str) -> str | None:
    """APPS's chain of comparisons on the lines of the output (see the module docstring); None when one matches.

    >>> _apps_stdio("1 2 \\n3\\n", "1 2\\n3"), _apps_stdio("0.3333333", "0.33333334"), _apps_stdio("2 1\\n3", "3\\n1 2")
    (None, None, None)
    >>> _apps_stdio("12", "1\\n2")
    'no comparison of the chain matches'
    """
    lines = got.splitlines()  # what APPS's capture of standard output gives
    if "\n".join(lines).strip() == expected.strip():
        return None
    if "\n".join(line.strip() for line in lines).strip() == expected.strip():
        return None
    if lines == [expected]:
        return None
    wanted = [line.strip() for line in expected.split("\n") if line]
    if lines == wanted:
        return None
    lines = [line for line in lines if line]
    if lines == wanted:
        return None
    mine, theirs = _floats(lines), _floats(wanted)
    if mine is not None and theirs is not None and len(mine) == len(theirs) and _allclose(mine, theirs):
        return None
    wanted_sets = [frozenset(line.split()) for line in wanted]
    mine_sets = [frozenset(tokens) for tokens in (line.split() for line in lines) if tokens]
    if set(mine_sets) == set(wanted_sets):
        return None
    try:
        if {frozenset(round(float(t), 3) for t in s) for s in mine_sets} == \
                {frozenset(round(float(t), 3) for t in s) for s in wanted_sets}:
            return None
    except (ValueError, OverflowError):
        pass
    return "no comparison of the chain matches"


def _apps_call(got: Any, expected: Any) -> str | None:
    """APPS's and TACO's call rule: equal to the expected output or to its first element.

    >>> _apps_call([1, 2], [[1, 2]]), _apps_call((3,), [3]), _apps_call([(1, 2)], [[[1, 2]]]), _apps_call(5, [6])
    (None, None, None, 'the value returned differs from the expected one')
    """
    got = _tuple_as_list(got)
    if _equal(got, expected):
        return None
    if isinstance(expected, list) and expected and _equal(got, expected[0]):
        return None
    if isinstance(got, list) and got and isinstance(got[0], tuple) and isinstance(expected, list) and expected:
        if _equal([list(item) if isinstance(item, tuple) else item for item in got], expected[0]):
            return None
    return "the value returned differs from the expected one"


def _int_keys(value: Any) -> Any:
    """JSON's string keys of a dict as ints, where both judges convert them: a dict output, or a list whose first
    element is a dict, becomes a one-element list of that dict with int keys; left as it is where a key is no int.

    >>> _int_keys({"1": "a"}), _int_keys([{"2": 3}]), _int_keys({"x": 1})
    ([{1: 'a'}], [{2: 3}], {'x': 1})
    """
    try:
        if isinstance(value, dict):
            return [{int(k): v for k, v in value.items()}]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return [{int(k): v for k, v in value[0].items()}]
    except (ValueError, TypeError):
        pass
    return value


# ----------------------------------------------------------------------------- CodeContests

# ASCII digits only, as the dataset's checker reads numbers (C++ streams): float() and int() also take other scripts'
# digits, so "٣.5" read as 3.5 passed where 3.5 was expected.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.ASCII)
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)


def _integer_text(token: str) -> str:
    """An integer token's canonical text (no ``+``, no leading zeros, ``0`` for ``-0``): compared as text, since
    ``int()`` refuses more than 4300 digits (``sys.get_int_max_str_digits``), which a right answer may have.

    >>> _integer_text("+007"), _integer_text("-0"), _integer_text("-12")
    ('7', '0', '-12')
    """
    digits = token.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if token.startswith("-") and digits != "0" else digits


def _token_match(a: str, b: str) -> bool:
    """Whether two output tokens are the same by CodeContests' checker: integers exactly, other numbers within
    1e-5, anything else as text.

    >>> _token_match("9" * 5000, "0" + "9" * 5000), _token_match("1.000001", "1"), _token_match("-0", "0")
    (True, True, True)
    """
    if _INTEGER.fullmatch(a) and _INTEGER.fullmatch(b):
        return _integer_text(a) == _integer_text(b)
    if _NUMBER.fullmatch(a) and _NUMBER.fullmatch(b):
        return abs(float(a) - float(b)) < 1e-5
    return a == b


def _codecontests_stdio(got: str, expected: str) -> str | None:
    """CodeContests' checker: lower-cased whitespace tokens, numbers within 1e-5.

    >>> _codecontests_stdio("YES\\n1.000001 2", "yes 1.0 2"), _codecontests_stdio("1 2", "1 2 3")
    (None, 'the output has 2 tokens where 3 were expected')
    >>> _codecontests_stdio("100000000000000001", "100000000000000000")
    'token 1 differs: 100000000000000001 where 100000000000000000 was expected'
    """
    mine, theirs = got.lower().split(), expected.lower().split()
    if mine == theirs:
        return None
    if len(mine) != len(theirs):
        return f"the output has {len(mine)} tokens where {len(theirs)} were expected"
    for number, (a, b) in enumerate(zip(mine, theirs), start=1):
        if not _token_match(a, b):
            return f"token {number} differs: {_short(a)} where {_short(b)} was expected"
    return None


# ----------------------------------------------------------------------------- the rules

_STDIO: dict[str, Callable[[str, str], str | None]] = {
    "livecodebench": _livecodebench_stdio, "apps": _apps_stdio, "taco": _apps_stdio, "codecontests": _codecontests_stdio,
}
_CALL: dict[str, Callable[[Any, Any], str | None]] = {
    "livecodebench": _livecodebench_call, "apps": _apps_call, "taco": _apps_call,
}
#: The rules whose judges fail a program that exits with a nonzero status.
_EXIT_COUNTS = frozenset({"taco", "codecontests"})


def rule_exit_counts(rule: str) -> bool:
    """Whether a nonzero exit status fails a test under ``rule``.

    >>> rule_exit_counts("taco"), rule_exit_counts("livecodebench")
    (True, False)
    """
    return rule in _EXIT_COUNTS


def decode_expected(rule: str, expected: str) -> Any:
    """The expected value of a call test as its rule reads the stored text: JSON, with the judges' int keys for
    ``apps`` and ``taco``.

    >>> decode_expected("livecodebench", "[1, 2]"), decode_expected("taco", '[{"1": 2}]')
    ([1, 2], [{1: 2}])
    """
    value = json.loads(expected)
    return _int_keys(value) if rule in ("apps", "taco") else value


def compare(rule: str, kind: str, got: Any, expected: Any) -> str | None:
    """None when ``got`` (the program's standard output, or the value its call returned) matches ``expected`` (the
    expected text, or the decoded expected value) under ``rule``; else why not, in a few words.

    >>> compare("livecodebench", "stdio", "3\\n", "3"), compare("codecontests", "stdio", "NO", "no")
    (None, None)
    >>> compare("nope", "stdio", "", "")
    Traceback (most recent call last):
    ...
    ValueError: unknown rule 'nope' for stdio tests; the rules are: livecodebench, apps, taco, codecontests
    """
    table = _STDIO if kind == "stdio" else _CALL if kind == "call" else None
    if table is None:
        raise ValueError(f"unknown kind {kind!r}; the kinds are 'stdio' and 'call'")
    if rule not in table:
        raise ValueError(f"unknown rule {rule!r} for {kind} tests; the rules are: {', '.join(table)}")
    return table[rule](got, expected)


# ----------------------------------------------------------------------------- data only

_SCALARS = (str, int, float, bool, type(None))
_MAX_DEPTH = 200


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain Python data (numpy scalars as Python's), or raise ``TypeError``: only data is compared, so
    nothing of the program's decides an equality (a value that crossed as a stand-in of a program object is no data).
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if depth > _MAX_DEPTH:
        raise TypeError("a value nested too deep")
    if kind is list or kind is tuple:
        items = [_plain(item, depth + 1) for item in value]
        return items if kind is list else tuple(items)
    if kind is dict:
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in value.items()}
    if kind is set or kind is frozenset:
        return kind(_plain(item, depth + 1) for item in value)
    if getattr(kind, "__module__", "") == "numpy" and getattr(value, "shape", None) == ():  # a numpy scalar
        item = value.item()
        if type(item) in _SCALARS:
            return item
    raise TypeError(f"a value of type {kind.__name__} is no plain data")


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an uncomparable pair is unequal
        return False


def _short(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _show(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<a {type(value).__name__}>"
    return _field(text)


# ----------------------------------------------------------------------------- the tests' checks

def _message(verdict: str, sections: list[tuple[str, str]]) -> str:
    lines = [verdict]
    for title, text in sections:
        lines.append(f"{title}:")
        lines.append(text.rstrip("\n") if text.strip() else "(nothing)")
    return "\n".join(lines)


def _reply(run: Callable[[Any], Any], given: str) -> tuple[Any, float, str | None]:
    """Call the program's entry point with ``given``: (its reply, seconds on this clock, or why the call failed)."""
    started = _clock()
    try:
        reply = run(given)
    except Exception as exc:  # noqa: BLE001 - the program's process ended, or its wrapper was replaced
        return None, _clock() - started, f"{type(exc).__name__}: {exc}"
    return reply, _clock() - started, None


def _text(reply: dict, key: str) -> str:
    value = reply.get(key)
    return value if type(value) is str else ""


def _checked_reply(reply: Any, keys: tuple[str, ...]) -> dict | None:
    """The reply when it is a dict with text under each of ``keys`` (``error`` may be None), else None."""
    if type(reply) is not dict:
        return None
    for key in keys:
        value = reply.get(key)
        if not (type(value) is str or key == "error" and value is None):
            return None
    exit_code = reply.get("exit", 0)
    return reply if type(exit_code) is int else None


def _fail(test: Any, verdict: str, sections: list[tuple[str, str]]) -> None:
    test.fail(_message(verdict, sections))


def _timed_out(test: Any, seconds: float, limit_s: float, sections: list[tuple[str, str]]) -> None:
    _fail(test, f"Time limit exceeded: the program took {seconds:.2f} s on this input; the limit is {limit_s:g} s "
                "per test.", sections)


def check_stdio(test: Any, run: Callable[[str], Any], given: str, expected: str, rule: str, limit_s: float) -> None:
    """One standard-input test: run the program on ``given`` (its standard input), and fail ``test`` (a
    ``unittest.TestCase``) unless it ended within ``limit_s`` seconds on the judge's clock, raised nothing, exited as
    ``rule`` requires, and printed what matches ``expected`` under ``rule`` (:func:`compare`)."""
    facts = [("Input", _field(given)), ("Expected output", _field(expected))]
    reply, seconds, lost = _reply(run, given)
    if lost is not None:
        _fail(test, "The program did not answer on this input.", facts + [("Error", _field(lost))])
    reply = _checked_reply(reply, ("stdout", "stderr", "error"))
    if reply is None:
        _fail(test, "The program's run on this input returned no output (its wrapper was replaced).", facts)
    stdout, stderr, error = _text(reply, "stdout"), _text(reply, "stderr"), reply.get("error")
    shown = facts + [("Program output", _field(stdout))]
    if stderr.strip():
        shown.append(("Program standard error", _field(stderr)))
    if seconds > limit_s:
        _timed_out(test, seconds, limit_s, shown)
    if error is not None:
        _fail(test, "The program raised an exception on this input.", shown + [("Traceback", _field(error))])
    if rule_exit_counts(rule) and reply.get("exit", 0) != 0:
        _fail(test, f"The program exited with status {reply.get('exit')} on this input.", shown)
    why = compare(rule, "stdio", stdout, expected)
    if why is not None:
        _fail(test, f"Wrong answer: {why}.", shown)


def check_call(test: Any, run: Callable[[str], Any], given: str, expected: str, rule: str, limit_s: float) -> None:
    """One function-call test: call the program's function with the arguments ``given`` encodes (JSON; decoded in
    the program's process), and fail ``test`` unless it returned within ``limit_s`` seconds, raised nothing, and
    returned plain data that matches ``expected`` (JSON text, decoded here: :func:`decode_expected`) under ``rule``."""
    facts = [("Input", _field(given)), ("Expected output", _field(expected))]
    reply, seconds, lost = _reply(run, given)
    if lost is not None:
        _fail(test, "The program did not answer on this input.", facts + [("Error", _field(lost))])
    reply = _checked_reply(reply, ("stdout", "error"))
    if reply is None or "value" not in reply:
        _fail(test, "The program's call on this input returned no result (its wrapper was replaced).", facts)
    stdout, error = _text(reply, "stdout"), reply.get("error")
    printed = [("Program standard output", _field(stdout))] if stdout.strip() else []
    if seconds > limit_s:
        _timed_out(test, seconds, limit_s, facts + printed)
    if error is not None:
        _fail(test, "The program raised an exception on this input.", facts + printed + [("Traceback", _field(error))])
    try:
        value = _plain(reply["value"])
    except TypeError as exc:
        _fail(test, f"The function returned a value that is not data ({exc}).", facts + printed)
    shown = facts + [("Returned", _show(value))] + printed
    why = compare(rule, "call", value, decode_expected(rule, expected))
    if why is not None:
        _fail(test, f"Wrong answer: {why}.", shown)
