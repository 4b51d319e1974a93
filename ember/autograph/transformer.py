"""The source-to-source rewrite of one function's syntax tree.

Three passes, in order, each over one function's own scope (a nested ``def`` gets the same
passes when the walk reaches it):

1. ``return`` inside a statement becomes an assignment of the result and a flag, and the
   statements after it run under ``if not ag__did_return``; the function returns the result at
   its end (``ag__.returned`` / ``ag__.final_return``).
2. ``break`` / ``continue`` become flags, the statements after them guarded the same way; a
   ``while`` tests ``not ag__brk_N and test``; ``ag__.for_stmt`` runs a ``for`` body under
   ``if not ag__brk_N`` (or, over a traced range, tests the flag).
3. ``if`` / ``while`` / ``for`` become calls of ``ag__.if_stmt`` / ``while_stmt`` / ``for_stmt``
   with their blocks as local functions that take and return the variables the statement
   assigns; ``a if c else b``, ``and`` / ``or`` / ``not``, and chained comparisons become calls of
   ``ag__`` helpers; every other call ``f(...)`` becomes ``ag__.call(f)(...)`` (converting user
   functions as they are called).

Every generated node takes the line and column of the user's statement it comes from, so that
tracebacks and messages show the user's lines.
"""
from __future__ import annotations

import ast
import copy
from typing import Any, Iterator

RETVAL, DID_RETURN = "ag__retval", "ag__did_return"
_LIST_METHODS = ("append", "extend", "insert")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.While)


def _name(id: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id, ctx=ast.Store() if store else ast.Load())


def _ag(attr: str) -> ast.Attribute:
    return ast.Attribute(value=_name("ag__"), attr=attr, ctx=ast.Load())


def _call(func: ast.expr, *args: ast.expr, **kwargs: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[ast.keyword(arg=k, value=v) for k, v in kwargs.items()])


def _assign(target: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[_name(target, True)], value=value)


def _const(value: Any) -> ast.Constant:
    return ast.Constant(value=value)


def _not(expr: ast.expr) -> ast.UnaryOp:
    return ast.UnaryOp(op=ast.Not(), operand=expr)


def _lambda(body: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), body=body)


def _located(nodes: list, origin: Any) -> list:
    """``nodes`` with the user's location wherever they have none."""
    for node in nodes:
        child: Any
        for child in ast.walk(node):
            if "lineno" in child._attributes and not hasattr(child, "lineno"):
                ast.copy_location(child, origin)
                # (one line, the statement's first: a traceback shows `while i < n:`, not its whole block)
                child.end_lineno = origin.lineno
                child.end_col_offset = origin.col_offset
    return nodes


def _guard(node: ast.If, jump: str) -> ast.If:
    """Mark an ``if`` the converter made to skip what follows a jump (named so in the log)."""
    marked: Any = node
    marked._ag_kind = f"the code after a {jump}"
    return node


def own_scope(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes under ``node`` that belong to its function's scope (not nested defs, lambdas,
    classes or comprehensions)."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (*_SCOPES, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            stack.extend(ast.iter_child_nodes(n))


def _own_loop_scope(stmts: list) -> Iterator[ast.AST]:
    """The nodes of a loop body whose ``break`` / ``continue`` belong to that loop."""
    stack = list(stmts)
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (*_SCOPES, *_LOOPS)):
            stack.extend(ast.iter_child_nodes(n))
        elif isinstance(n, _LOOPS):
            stack.extend(n.orelse)  # (a loop's else clause is outside it)


def assigned(stmts: list) -> list[str]:
    """The variables that ``stmts`` assign, in first-assignment order (nested scopes excluded;
    the converter's own functions too)."""
    names: list[str] = []

    def add(name: str) -> None:
        if name not in names and not name.startswith("ag__fn_") and name != "ag__":
            names.append(name)

    for stmt in stmts:
        for n in [stmt, *own_scope(stmt)]:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for alias in n.names:
                    add((alias.asname or alias.name).split(".")[0])
            elif isinstance(n, ast.ExceptHandler) and n.name:
                add(n.name)
    return names


# --- pass 1: returns -------------------------------------------------------------------------------
def _has_return(node: ast.AST) -> bool:
    return isinstance(node, ast.Return) or any(isinstance(n, ast.Return) for n in own_scope(node))


class _Returns:
    def __init__(self, where: Any) -> None:
        self.where = where

    def block(self, stmts: list, in_loop: bool) -> list:
        out: list = []
        for i, s in enumerate(stmts):
            returns = _has_return(s)  # (before the statement is rewritten)
            out += self.stmt(s, in_loop)
            if not returns or isinstance(s, ast.Return):
                if isinstance(s, ast.Return):
                    break  # (what follows a return never runs)
                continue
            rest = stmts[i + 1:]
            if in_loop:
                out += _located([_guard(ast.If(test=_name(DID_RETURN), body=[ast.Break()], orelse=[]), "return")], s)
                out += self.block(rest, in_loop)
            elif rest:
                out += _located([_guard(ast.If(test=_not(_name(DID_RETURN)), body=self.block(rest, in_loop),
                                               orelse=[]), "return")], rest[0])
            break
        return out

    def stmt(self, s: ast.stmt, in_loop: bool) -> list:
        if isinstance(s, ast.Return):
            value = s.value if s.value is not None else _const(None)
            out = [_assign(RETVAL, value), _assign(DID_RETURN, _const(True))] + ([ast.Break()] if in_loop else [])
            return _located(out, s)
        if not _has_return(s):
            return [s]
        if isinstance(s, ast.If):
            s.body, s.orelse = self.block(s.body, in_loop) or [ast.Pass()], self.block(s.orelse, in_loop)
        elif isinstance(s, _LOOPS):
            first = next(n for n in own_scope(s) if isinstance(n, ast.Return))
            marked: Any = s
            marked._ag_returns = f"{self.where.filename}:{first.lineno}"  # (read by ControlFlow)
            s.body = self.block(s.body, True) or [ast.Pass()]
            s.orelse = self.block(s.orelse, in_loop)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            s.body = self.block(s.body, in_loop) or [ast.Pass()]
        elif isinstance(s, ast.Try):
            s.body = self.block(s.body, in_loop) or [ast.Pass()]
            for h in s.handlers:
                h.body = self.block(h.body, in_loop) or [ast.Pass()]
            s.orelse, s.finalbody = self.block(s.orelse, in_loop), self.block(s.finalbody, in_loop)
        return [s]


def lower_returns(fdef: ast.FunctionDef, where: Any) -> None:
    """Pass 1 on ``fdef`` (in place): nothing changes when its only ``return`` ends it."""
    body = fdef.body
    tail = body[-1] if isinstance(body[-1], ast.Return) else None
    if not any(isinstance(n, ast.Return) and n is not tail for n in own_scope(fdef)):
        return
    lowered = _Returns(where).block(body[:-1] if tail is not None else body, False)
    prologue = _located([_assign(RETVAL, _call(_ag("Undefined"), _const(RETVAL))),
                         _assign(DID_RETURN, _const(False))], body[0])
    location = _const(f"{where.filename}:{fdef.lineno}")
    if tail is not None:
        last = tail.value if tail.value is not None else _const(None)
        result = _call(_ag("returned"), _name(DID_RETURN), _name(RETVAL), _lambda(last), location)
        epilogue = _located([ast.Return(value=result)], tail)
    else:
        result = _call(_ag("final_return"), _name(DID_RETURN), _name(RETVAL), location)
        epilogue = _located([ast.Return(value=result)], body[-1])
    fdef.body = prologue + lowered + epilogue


# --- pass 2: break and continue ------------------------------------------------------------------
class _Jumps:
    def __init__(self) -> None:
        self.count = 0

    def _rewrite_blocks(self, node: ast.AST) -> None:
        """Replace every loop with a break / continue in the own scope by its lowered form."""
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                new = []
                for s in block:
                    if not isinstance(s, _SCOPES):
                        self._rewrite_blocks(s)
                    new += self.loop(s) if isinstance(s, _LOOPS) else [s]
                setattr(node, field, new)
        for h in getattr(node, "handlers", []) or []:
            self._rewrite_blocks(h)

    def loop(self, loop: ast.For | ast.While) -> list:
        jumps = [n for n in _own_loop_scope(loop.body) if isinstance(n, (ast.Break, ast.Continue))]
        has_break = any(isinstance(n, ast.Break) for n in jumps)
        has_continue = any(isinstance(n, ast.Continue) for n in jumps)
        orelse, loop.orelse = loop.orelse, []
        if not jumps:
            return [loop] + orelse
        self.count += 1
        brk, cont = f"ag__brk_{self.count}", f"ag__cont_{self.count}"
        flags = [f for f, used in ((brk, has_break), (cont, has_continue)) if used]
        body = self.block(loop.body, brk, cont, flags)
        if has_continue:
            body = _located([_assign(cont, _const(False))], loop) + body
        before: list = []
        after = orelse
        if has_break:
            before = _located([_assign(brk, _const(False))], loop)
            marked: Any = loop
            marked._ag_break = brk  # (read by ControlFlow)
            if isinstance(loop, ast.While):
                loop.test = _located([ast.BoolOp(op=ast.And(), values=[_not(_name(brk)), loop.test])], loop)[0]
            # (a for's later iterations are skipped by ag__.for_stmt, which knows the flag)
            if orelse:
                after = _located([_guard(ast.If(test=_not(_name(brk)), body=orelse, orelse=[]), "break")], orelse[0])
        loop.body = body or [ast.Pass()]
        return before + [loop] + after

    def block(self, stmts: list, brk: str, cont: str, flags: list[str]) -> list:
        out: list = []
        for i, s in enumerate(stmts):
            if isinstance(s, (ast.Break, ast.Continue)):
                out += _located([_assign(brk if isinstance(s, ast.Break) else cont, _const(True))], s)
                break
            jumps = not isinstance(s, _SCOPES) and any(isinstance(n, (ast.Break, ast.Continue))
                                                       for n in _own_loop_scope([s]))
            if jumps:
                self.inner(s, brk, cont, flags)
            out.append(s)
            rest = stmts[i + 1:]
            if jumps and rest:
                guard = _name(flags[0]) if len(flags) == 1 else \
                    ast.BoolOp(op=ast.Or(), values=[_name(f) for f in flags])
                jump = "break" if flags == [brk] else "continue" if flags == [cont] else "break/continue"
                out += _located([_guard(ast.If(test=_not(guard), body=self.block(rest, brk, cont, flags), orelse=[]),
                                        jump)], rest[0])
                break
        return out

    def inner(self, s: ast.stmt, brk: str, cont: str, flags: list[str]) -> None:
        if isinstance(s, ast.If):
            s.body = self.block(s.body, brk, cont, flags) or [ast.Pass()]
            s.orelse = self.block(s.orelse, brk, cont, flags)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            s.body = self.block(s.body, brk, cont, flags) or [ast.Pass()]
        elif isinstance(s, ast.Try):
            s.body = self.block(s.body, brk, cont, flags) or [ast.Pass()]
            for h in s.handlers:
                h.body = self.block(h.body, brk, cont, flags) or [ast.Pass()]
            s.orelse, s.finalbody = self.block(s.orelse, brk, cont, flags), self.block(s.finalbody, brk, cont, flags)
        elif isinstance(s, _LOOPS):  # (a jump in its else clause belongs to the enclosing loop)
            s.orelse = self.block(s.orelse, brk, cont, flags)


# --- pass 3: the statements and expressions ---------------------------------------------------------
class ControlFlow(ast.NodeTransformer):
    """Pass 3 (and passes 1 and 2 for each nested function as the walk reaches it)."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.count = 0
        self.jumps = _Jumps()

    def where(self, node: ast.AST) -> ast.Constant:
        return _const(f"{self.filename}:{node.lineno}")  # type: ignore[attr-defined]

    def fresh(self, kind: str) -> str:
        self.count += 1
        return f"ag__fn_{kind}_{self.count}"

    # functions: each gets passes 1 and 2 before its body is converted
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if is_generator(node):
            return node  # (a generator's body runs as it is iterated: not converted)
        lower_returns(node, self)
        self.jumps._rewrite_blocks(node)
        self.generic_visit(node)
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return node  # (coroutines are not traced)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node  # (a class body runs once; its methods convert when called)

    # statements
    def visit_Return(self, node: ast.Return) -> Any:
        self.generic_visit(node)
        if node.value is not None and not _is_ag_helper(node.value):
            node.value = _located([_call(_ag("ret"), node.value)], node)[0]
        return node

    def _def(self, name: str, params: list[str], body: list, returns: list[str], origin: ast.AST) -> ast.FunctionDef:
        ret = ast.Return(value=ast.Tuple(elts=[_name(n) for n in returns], ctx=ast.Load()))
        fdef = ast.FunctionDef(
            name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None,
                                          kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=(body or [ast.Pass()]) + [ret], decorator_list=[], returns=None, type_comment=None)
        return _located([fdef], origin)[0]

    def _prelude(self, names: list[str], origin: ast.AST) -> list:
        """``try: x`` / ``except NameError: x = ag__.Undefined('x')`` per variable: a variable with
        no value yet enters the statement as Undefined."""
        out = []
        for n in names:
            out.append(ast.Try(body=[ast.Expr(value=_name(n))], handlers=[ast.ExceptHandler(
                type=_name("NameError"), name=None, body=[_assign(n, _call(_ag("Undefined"), _const(n)))])],
                orelse=[], finalbody=[]))
        return _located(out, origin)

    def _result(self, names: list[str], value: ast.expr, origin: ast.AST) -> list:
        if names:
            target = ast.Tuple(elts=[_name(n, True) for n in names], ctx=ast.Store())
            return _located([ast.Assign(targets=[target], value=value)], origin)
        return _located([ast.Expr(value=value)], origin)

    def _names_tuple(self, names: list[str]) -> ast.Tuple:
        return ast.Tuple(elts=[_const(n) for n in names], ctx=ast.Load())

    def _state(self, names: list[str]) -> ast.Tuple:
        return ast.Tuple(elts=[_name(n) for n in names], ctx=ast.Load())

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        names = assigned(node.body + node.orelse)
        true_fn, false_fn = self.fresh("if_true"), self.fresh("if_false")
        defs = [self._def(true_fn, names, node.body, names, node),
                self._def(false_fn, names, node.orelse, names, node.orelse[0] if node.orelse else node)]
        kind = getattr(node, "_ag_kind", None)
        extra = {"kind": _const(kind)} if kind else {}
        call = _call(_ag("if_stmt"), node.test, _name(true_fn), _name(false_fn), self._state(names),
                     self._names_tuple(names), self.where(node), **extra)
        return self._prelude(names, node) + defs + self._result(names, call, node)

    def _loop_options(self, node: ast.AST, names: list[str], body: list) -> dict:
        options: dict = {}
        brk = getattr(node, "_ag_break", None)
        if brk:
            options["brk"] = _const(brk)
        returns = getattr(node, "_ag_returns", None)
        if returns:
            options["returns"] = _const(returns)
        lists = []
        for n in [n for s in body for n in ast.walk(s)]:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "list_method" \
                    and isinstance(n.args[0], ast.Name) and n.args[0].id not in names \
                    and n.args[0].id not in lists:
                lists.append(n.args[0].id)
        if lists:
            options["outer_lists"] = ast.Tuple(elts=[ast.Tuple(elts=[_const(n), _lambda(_name(n))], ctx=ast.Load())
                                                     for n in lists], ctx=ast.Load())
        return options

    def visit_While(self, node: ast.While) -> Any:
        self.generic_visit(node)
        names = assigned(node.body)
        test_fn, body_fn = self.fresh("while_test"), self.fresh("while_body")
        test_def = self._def(test_fn, names, [], [], node)
        test_def.body = _located([ast.Return(value=node.test)], node)
        defs = [test_def, self._def(body_fn, names, node.body, names, node)]
        call = _call(_ag("while_stmt"), _name(test_fn), _name(body_fn), self._state(names), self._names_tuple(names),
                     self.where(node), **self._loop_options(node, names, node.body))
        return self._prelude(names, node) + defs + self._result(names, call, node) + node.orelse

    def visit_For(self, node: ast.For) -> Any:
        self.generic_visit(node)
        item = "ag__item"
        bind = _located([ast.Assign(targets=[node.target], value=_name(item))], node)
        body = bind + node.body
        names = assigned(body)
        body_fn = self.fresh("for_body")
        iterable = node.iter
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Call) \
                and _is_ag_call(iterable.func) and isinstance(iterable.func.args[0], ast.Name) \
                and iterable.func.args[0].id == "range" and not iterable.keywords:
            iterable = _located([_call(_ag("range_"), _name("range"), *iterable.args)], iterable)[0]
        defs = [self._def(body_fn, [item] + names, body, names, node)]
        call = _call(_ag("for_stmt"), iterable, _name(body_fn), self._state(names), self._names_tuple(names),
                     self.where(node), **self._loop_options(node, names, body))
        return self._prelude(names, node) + defs + self._result(names, call, node) + node.orelse

    # expressions
    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        call = _call(_ag("if_exp"), node.test, _lambda(node.body), _lambda(node.orelse), self.where(node))
        return _located([call], node)[0]

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        self.generic_visit(node)
        helper = "and_" if isinstance(node.op, ast.And) else "or_"
        return _located([_call(_ag(helper), *[_lambda(v) for v in node.values])], node)[0]

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _located([_call(_ag("not_"), node.operand)], node)[0]
        return node

    def visit_Compare(self, node: ast.Compare) -> Any:
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        operands = [node.left, *node.comparators]
        pairs = [ast.Compare(left=copy.deepcopy(operands[i]), ops=[op], comparators=[copy.deepcopy(operands[i + 1])])
                 for i, op in enumerate(node.ops)]
        return _located([_call(_ag("and_"), *[_lambda(p) for p in pairs])], node)[0]

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        func = node.func
        if _is_ag_call(node) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                 and func.value.id == "ag__") or (isinstance(func, ast.Name) and func.id == "super"):
            return node
        node.args = [a if isinstance(a, ast.Starred) or not _may_be_function(a) else
                     _located([_call(_ag("arg"), a)], a)[0] for a in node.args]
        for k in node.keywords:
            if k.arg is not None and _may_be_function(k.value):
                k.value = _located([_call(_ag("arg"), k.value)], k.value)[0]
        if isinstance(func, ast.Attribute) and func.attr in _LIST_METHODS and isinstance(func.value, ast.Name):
            method = _call(_ag("list_method"), func.value, _const(func.attr), _const(func.value.id))
            node.func = _located([_call(_ag("call"), method)], func)[0]  # (a user class's `append`: converted)
        else:
            node.func = _located([_call(_ag("call"), func)], func)[0]
        return node


def is_generator(fdef: ast.AST) -> bool:
    return any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in own_scope(fdef))


def _may_be_function(node: ast.expr) -> bool:
    """Whether an argument may be a function (a name, an attribute, a ``partial(...)``): literals,
    arithmetic and comparisons are not."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))


def _is_ag_helper(node: ast.AST) -> bool:
    """Whether ``node`` calls an ``ag__`` helper (``ag__.returned(...)``)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "ag__"


def _is_ag_call(node: ast.AST) -> bool:
    """Whether ``node`` is ``ag__.call(...)``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "call" \
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "ag__"
