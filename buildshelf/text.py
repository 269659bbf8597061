"""Words for people: file names and paths shown as one printable line, whatever bytes the
file system gave (so that a name can neither forge a log line nor break the JSON of
/healthz), counts with their nouns, sizes, durations, and the word a typo most likely meant."""

import difflib


def counted(number: int, noun: str) -> str:
    """'1 build', '2 builds', '0 problems': the nouns used here take an s."""
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def size(number_of_bytes: int) -> str:
    """'812 bytes', '2.2 KiB', '1.0 GiB': a file's size as people read it."""
    if number_of_bytes < 1024:
        return counted(number_of_bytes, "byte")
    number, unit = number_of_bytes / 1024, "KiB"
    for larger in ("MiB", "GiB"):
        if round(number, 1) < 1024:  # never '1,024.0 KiB'
            break
        number, unit = number / 1024, larger
    return f"{number:,.1f} {unit}"


def sizes(*numbers_of_bytes: int) -> list[str]:
    """Sizes to be read side by side, said alike: as size() says them, unless it would say
    two that differ alike; then each as its count of bytes ('3,001,287 bytes', '3,001,288
    bytes'), so that a message never mixes the forms."""
    said = [size(number) for number in numbers_of_bytes]
    if len(set(said)) < len(set(numbers_of_bytes)):
        return [counted(number, "byte") for number in numbers_of_bytes]
    return said


_UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60))


def duration(seconds: float) -> str:
    """'13 days', '1 day 4 hours', '45 minutes', 'under a minute': a time span as people
    read it, rounded down: its largest unit, and the next one while the first is under ten."""
    for index, (unit, length) in enumerate(_UNITS):
        number, rest = divmod(int(seconds), length)
        if number:
            said = counted(number, unit)
            if number < 10 and index + 1 < len(_UNITS):
                smaller, smaller_length = _UNITS[index + 1]
                if rest // smaller_length:
                    said += " " + counted(rest // smaller_length, smaller)
            return said
    return "under a minute"


def printable(name: str) -> str:
    """A file name or path as one printable line, whatever bytes the file system gave.

    Control characters (a newline would forge a log line), bytes that are not UTF-8 (they
    cannot be encoded into JSON) and backslashes (so the escapes stay unambiguous) are escaped.
    """
    if name.isprintable() and "\\" not in name:
        return name
    return "".join(ch if ch.isprintable() and ch != "\\" else _escaped(ch) for ch in name)


def _escaped(char):
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as os.fsdecode keeps it
        return f"\\x{code - 0xDC00:02x}"
    return char.encode("unicode_escape").decode("ascii")


def closest(word: str, words) -> str | None:
    """The one of `words` that `word` is most likely a typo of, or None: the rule of every
    "did you mean" (difflib's, at its cutoff)."""
    near = difflib.get_close_matches(word, words, n=1)
    return near[0] if near else None
