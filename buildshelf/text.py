"""Words for people: file names and paths shown as one printable line, whatever bytes the
file system gave (so that a name can neither forge a log line nor break the JSON of
/healthz), and counts with their nouns."""


def counted(number: int, noun: str) -> str:
    """'1 build', '2 builds', '0 problems': the nouns used here take an s."""
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


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
