"""Redis's glob patterns (``KEYS``, ``SCAN ... MATCH``) over byte-string keys.

The syntax is Redis's ``stringmatchlen``: ``*`` any run of bytes, ``?`` one byte, ``[abc]``,
``[^abc]`` and ``[a-z]`` classes, ``\\x`` the byte x itself. A pattern compiles to a list of
tokens, each ``STAR`` or the set of bytes one position may hold, and is matched by the classic
two-pointer algorithm (backtrack to the last ``*`` only), which takes at most len(key) x
len(pattern) steps: no pattern can make a match run away (a regular expression with nested stars
backtracks exponentially in the worst case).

``literal_prefix`` is what every matching key starts with: KEYS and SCAN read only that range of
okapikv's ordered keys instead of the whole key space.
"""

from __future__ import annotations

from dataclasses import dataclass

STAR = None
_ANY = frozenset(range(256))


@dataclass(frozen=True, slots=True)
class Pattern:
    source: bytes
    tokens: tuple[frozenset[int] | None, ...]
    prefix: bytes
    #: the pattern is the prefix followed by one ``*`` (or nothing): matching is a prefix test
    prefix_only: bool
    exact: bool  # no special character at all

    def matches(self, key: bytes) -> bool:
        if self.exact:
            return key == self.prefix
        if self.prefix_only:
            return key.startswith(self.prefix)
        return _match(self.tokens, key)


def compile_pattern(pattern: bytes) -> Pattern:
    tokens: list[frozenset[int] | None] = []
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char == 42:  # *
            if not tokens or tokens[-1] is not STAR:
                tokens.append(STAR)
        elif char == 63:  # ?
            tokens.append(_ANY)
        elif char == 92 and index + 1 < size:  # \x
            index += 1
            tokens.append(frozenset((pattern[index],)))
        elif char == 91:  # [
            index, allowed = _char_class(pattern, index + 1)
            tokens.append(allowed)
        else:
            tokens.append(frozenset((char,)))
        index += 1
    prefix = bytearray()
    for token in tokens:
        if token is STAR or len(token) != 1:
            break
        prefix += bytes(token)
    literal = len(prefix)
    rest = tokens[literal:]
    return Pattern(pattern, tuple(tokens), bytes(prefix), prefix_only=rest == [STAR],
                   exact=not rest)


def _char_class(pattern: bytes, index: int) -> tuple[int, frozenset[int]]:
    """The class starting at ``index`` (after ``[``): where it ends (its ``]``) and its bytes. An
    unterminated class ends with the pattern, as in Redis."""
    size = len(pattern)
    negate = index < size and pattern[index] == 94  # ^
    if negate:
        index += 1
    allowed: set[int] = set()
    while index < size:
        char = pattern[index]
        if char == 92 and index + 1 < size:
            index += 1
            allowed.add(pattern[index])
        elif char == 93:  # ]
            break
        elif index + 2 < size and pattern[index + 1] == 45 and pattern[index + 2] != 93:  # a-z
            low, high = sorted((char, pattern[index + 2]))
            allowed.update(range(low, high + 1))
            index += 2
        else:
            allowed.add(char)
        index += 1
    return index, frozenset(_ANY - allowed if negate else allowed)


def _match(tokens: tuple[frozenset[int] | None, ...], key: bytes) -> bool:
    position = 0
    count = len(tokens)
    star = -1
    star_key = 0
    at = 0
    size = len(key)
    while at < size:
        token = tokens[position] if position < count else _NONE
        if token is STAR:
            star, star_key = position, at
            position += 1
        elif token is not _NONE and key[at] in token:
            position += 1
            at += 1
        elif star >= 0:
            position = star + 1
            star_key += 1
            at = star_key
        else:
            return False
    while position < count and tokens[position] is STAR:
        position += 1
    return position == count


_NONE = frozenset[int]()
