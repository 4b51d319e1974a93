"""A small layout engine for printed programs: documents of text, breaks, groups and nesting.

The jaxpr printer (``ember.core.ir``) describes a program as a document and lets this module
choose where lines break, so that long programs wrap exactly where JAX's printer wraps them.
The model is Wadler's and Lindig's ("Strictly Pretty"): a *break* prints as its text (usually a
space) or as a newline indented to the current nesting; a *group* prints all of its breaks as
text when the whole group, laid flat, fits in what is left of the line, and otherwise prints its
own breaks as newlines and decides for each group inside it afresh. Only the group itself is
measured, not the text that follows it on the line (JAX's rule too).

::

    doc = group(concat([text("["), nest(2, concat([brk(""), text("x=1"), brk(), text("y=2")])),
                        brk(""), text("]")]))
    layout(doc, width=80)  # '[x=1 y=2]', or one parameter per line when it does not fit
"""
from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["Doc", "brk", "concat", "group", "layout", "join", "nest", "nil", "text"]


class Doc:
    """A document. ``width`` is its length laid flat (every break as its text)."""

    __slots__ = ("width",)

    def __add__(self, other: "Doc") -> "Doc":
        return concat([self, other])


class _Text(Doc):
    __slots__ = ("text",)

    def __init__(self, s: str) -> None:
        self.text, self.width = s, len(s)


class _Break(Doc):
    __slots__ = ("text",)

    def __init__(self, s: str) -> None:
        self.text, self.width = s, len(s)


class _Concat(Doc):
    __slots__ = ("children",)

    def __init__(self, children: Sequence[Doc]) -> None:
        self.children = children
        self.width = sum(c.width for c in children)


class _Nest(Doc):
    __slots__ = ("indent", "child")

    def __init__(self, indent: int, child: Doc) -> None:
        self.indent, self.child, self.width = indent, child, child.width


class _Group(Doc):
    __slots__ = ("child",)

    def __init__(self, child: Doc) -> None:
        self.child, self.width = child, child.width


_NIL = _Concat(())


def nil() -> Doc:
    return _NIL


def text(s: str) -> Doc:
    return _Text(s)


def brk(s: str = " ") -> Doc:
    """A line break, or ``s`` where its group is laid flat."""
    return _Break(s)


def concat(children: Iterable[Doc]) -> Doc:
    return _Concat(tuple(children))


def nest(indent: int, child: Doc) -> Doc:
    """``child`` with the lines its breaks start indented ``indent`` more."""
    return _Nest(indent, child)


def group(child: Doc) -> Doc:
    return _Group(child)


def join(separator: Doc, docs: Iterable[Doc]) -> Doc:
    parts: list[Doc] = []
    for d in docs:
        if parts:
            parts.append(separator)
        parts.append(d)
    return concat(parts)


_FLAT, _BREAK = True, False


def layout(doc: Doc, width: int = 80) -> str:
    """Lay ``doc`` out in lines of ``width`` columns where its groups allow."""
    out: list[str] = []
    column = 0
    agenda: list[tuple[int, bool, Doc]] = [(0, _BREAK, doc)]  # (indent, flat?, document), a stack
    while agenda:
        indent, flat, d = agenda.pop()
        kind = type(d)
        if kind is _Text:
            out.append(d.text)
            column += d.width
        elif kind is _Concat:
            agenda.extend((indent, flat, c) for c in reversed(d.children))
        elif kind is _Break:
            if flat:
                out.append(d.text)
                column += d.width
            else:
                out.append("\n" + " " * indent)
                column = indent
        elif kind is _Nest:
            agenda.append((indent + d.indent, flat, d.child))
        else:  # a group: flat if it fits on what is left of the line (a flat group's groups stay flat)
            agenda.append((indent, flat or column + d.width <= width, d.child))
    return "".join(out)
