"""What decoding a JSON body will cost in memory, read from its bytes before decoding.

A body's size says little about its decoded size: each of the million `{}`
in 3.2 MB of `[{},{},...]` becomes a dict, and the body about 25 times its
bytes. Counting the bytes that can open a value (`,`, `{`, `[`, inside
strings too) bounds the number of values from above, at C speed and
without building anything (a few milliseconds for 3 MiB). Pure.
"""

import re

# The most a counted value was measured to hold once decoded and checked for
# soundness (`json_limits.json_problem`), with its key and its slot in the
# parent (tracemalloc, CPython 3.11; bodies of one shape each, 0.2 to 3.2 MB):
# up to 145 bytes for an object of many distinct keys while its table grows,
# 123 for one-entry objects, 49 for `{}` (counted twice: its `{` and its `,`),
# about 90 for Kubernetes objects.
BYTES_PER_VALUE = 160
# Characters of a decoded string take 1, 2 or 4 bytes, the widest of the
# string's characters deciding. A raw UTF-8 lead byte from 0xF0 or an escaped
# surrogate is a character beyond U+FFFF; one from 0xC4, or an escape past
# U+00FF, one beyond U+00FF. An over-estimate where a match is no character
# (an escaped backslash before `u`) costs a reservation, never memory.
_FOUR_BYTE = re.compile(rb"[\xf0-\xff]|\\u[dD][89abAB]")
_TWO_BYTE = re.compile(rb"[\xc4-\xef]|\\u(?!00)")


def values_at_most(body: bytes) -> int:
    """An upper bound of the JSON values in `body` (each member's value counted; keys not)."""
    return body.count(b",") + body.count(b"{") + body.count(b"[") + 1


def _ascii(body: bytes) -> bool:
    """Whether every string `body` holds is ASCII (escapes are counted as not)."""
    return body.isascii() and b"\\u" not in body


def text_width(body: bytes) -> int:
    """Bytes per character, at most, of the text `body` decodes to."""
    if _ascii(body):
        return 1
    if _FOUR_BYTE.search(body):
        return 4
    return 2 if _TWO_BYTE.search(body) else 1


def decoded_bytes(body: bytes) -> int:
    """An estimate, from above, of the memory `body` holds while decoded and checked: its
    bytes; the text they decode to, the strings that text holds and the soundness
    check's copy of them, each at the text's width, and that copy encoded to UTF-8
    unless it is ASCII (no more bytes than the body's); and every value it may hold."""
    copies = 1 + 3 * text_width(body) + (0 if _ascii(body) else 1)
    return len(body) * copies + BYTES_PER_VALUE * values_at_most(body)


def least_decoded_bytes(size: int) -> int:
    """What `decoded_bytes` is for any body of `size` bytes at least (text of one-byte
    characters, no values): what a body is reserved at while it is read."""
    return 4 * size
