"""Words for people: file names and paths shown as one printable line, whatever bytes the
file system gave (so that a name can neither forge a log line nor break the JSON of
/healthz), counts with their nouns, and sizes."""


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
