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
    """Text that is not strict JSON: the message, and its line and column when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


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
        raise Invalid(str(error)) from None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {duplicate!r} appears twice in one object")
    return obj


def _position(text, index):
    """(line, column) of `index` in `text`, counted in characters as JSONDecodeError does."""
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


# Only read when a text was refused: strings are skipped so that their content is not taken
# for numbers or brackets.
_STRING_OR_NUMBER = re.compile(r'"(?:[^"\\]+|\\.)*"|-?([0-9]+)(\.[0-9]+)?([eE][-+]?[0-9]+)?')
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]+|\\.)*"|([\[{])|([\]}])')


def _long_integer(text):
    """Invalid for an integer over Python's digit limit, placed at that integer."""
    limit = sys.get_int_max_str_digits()
    for match in _STRING_OR_NUMBER.finditer(text):
        digits = match.group(1)
        if digits and not (match.group(2) or match.group(3)) and len(digits) > limit:
            return Invalid(
                f"an integer of {len(digits)} digits: at most {limit} are allowed",
                *_position(text, match.start()),
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
        *_position(text, match.start()),
    )
