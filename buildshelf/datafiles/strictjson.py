"""JSON text read strictly: what JSON or Python cannot carry faithfully is refused, and every
refusal says where in the text it is.

Refused beyond what `json` refuses: bytes that are not UTF-8, `NaN` and `Infinity`, a key
written twice in one object. Integers over Python's digit limit and nesting too deep for its
parser are placed at the integer or where the nesting passes `NESTING_SHOWN`.
"""

import json
import re
import sys

# Deeper than this is reported (a project file needs 5); Python's parser stops near 1,000.
NESTING_SHOWN = 100


class Invalid(Exception):
    """Text that is not strict JSON: the message, and its line and column when known; `key`,
    for a key written twice in one object, that key (a file whose keys may be secrets words
    its own message)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None, key=None):
        super().__init__(message)
        self.message, self.line, self.column, self.key = message, line, column, key


def text_of(data: bytes) -> str:
    """`data` decoded from UTF-8 (a BOM allowed), or Invalid with line and column."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        column = len(data[line_start : error.start].decode("utf-8", "replace")) + 1
        raise Invalid("not valid UTF-8", data.count(b"\n", 0, error.start) + 1, column) from None


def loads(text: str):
    """The value `text` holds, or Invalid."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise Invalid(error.msg, error.lineno, error.colno) from None
    except RecursionError:
        raise _too_deep(text) from None
    except ValueError as error:  # from the hooks, which know no position, or int()
        if str(error).startswith("Exceeds the limit"):  # int(): sys.set_int_max_str_digits
            raise _long_integer(text) from None
        raise _refused_by_a_hook(text) from None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {duplicate!r} appears twice in one object")
    return obj


def position(text: str, index: int) -> tuple[int, int]:
    """(line, column) of `index` in `text`, counted in characters as JSONDecodeError does."""
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


# Only read when a text was refused: strings are skipped so that their content is not taken
# for numbers or brackets. TOKEN reads text that is JSON (or JSON but for what the hooks
# refused) a token at a time: a string, a bracket or separator, or a literal.
TOKEN = re.compile(r'\s*(?:("(?:[^"\\]+|\\.)*")|([][{}:,])|([^][{}:,"\s]+))')
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]+|\\.)*"|-?([0-9]+)(\.[0-9]+)?([eE][-+]?[0-9]+)?')
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]+|\\.)*"|([\[{])|([\]}])')


def _refused_by_a_hook(text):
    """Invalid for the first NaN or Infinity, or key written twice in one object, in `text`
    (JSON but for them), placed: the parser's hooks that refuse them know no place."""
    objects = []  # per open array (None) or object ([whether a key comes next, keys seen])
    for match in TOKEN.finditer(text):
        string, mark, literal = match.groups()
        if literal in ("NaN", "Infinity", "-Infinity"):
            return Invalid(f"{literal} is not valid JSON", *position(text, match.start(3)))
        if mark == "{":
            objects.append([True, set()])
        elif mark == "[":
            objects.append(None)
        elif mark in ("}", "]"):
            objects.pop()
        elif mark == "," and objects[-1] is not None:
            objects[-1][0] = True
        elif string is not None and objects and objects[-1] is not None and objects[-1][0]:
            key, (_, seen) = json.loads(string), objects[-1]
            objects[-1][0] = False
            if key in seen:
                return Invalid(
                    f"key {key!r} appears twice in one object",
                    *position(text, match.start(1)),
                    key=key,
                )
            seen.add(key)
    return Invalid("not valid JSON")  # not reached: the hooks refuse only those


def _long_integer(text):
    """Invalid for an integer over Python's digit limit, placed at that integer."""
    limit = sys.get_int_max_str_digits()
    for match in _STRING_OR_NUMBER.finditer(text):
        digits = match.group(1)
        if digits and not (match.group(2) or match.group(3)) and len(digits) > limit:
            return Invalid(
                f"an integer of {len(digits)} digits: at most {limit} are allowed",
                *position(text, match.start()),
            )
    return Invalid(f"an integer of more than {limit} digits")


def _too_deep(text):
    """Invalid for nesting too deep to parse, placed where it passes NESTING_SHOWN."""
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        if match.group(1):
            depth += 1
            if depth > NESTING_SHOWN:
                break
        elif match.group(2):
            depth -= 1
    else:
        return Invalid("arrays and objects nested too deeply to read")
    return Invalid(
        f"arrays and objects nested more than {NESTING_SHOWN} levels deep "
        "(a project file needs 5): too deep to read",
        *position(text, match.start()),
    )
