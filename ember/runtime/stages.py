"""Ahead-of-time stages, as JAX's: ``jit(f).trace(*args)`` -> ``Traced`` -> ``.lower()`` -> ``Lowered``
-> ``.compile()`` -> ``Compiled`` (``jit(f).lower(*args)`` takes the first two steps at once).

``Traced`` holds the program as traced (``.jaxpr``) and its output types; ``Lowered`` shows the
optimized IR (``as_text()``); ``Compiled`` runs like ``f`` on arguments of that signature and
reports a static cost model (``cost_analysis()``).
"""
from __future__ import annotations

from typing import Any

from ember import errors, tree_util
from ember.backends import registry
from ember.backends.protocols import Executable
from ember.compiler import optimize
from ember.compiler.cost import cost_analysis
from ember.core.array import ShapeDtypeStruct
from ember.core.avals import aval_of_value
from ember.core.ir import ClosedJaxpr
from ember.errors import JaxRuntimeError
from ember.runtime.cache import warn_unusable_donations
from ember.runtime.executable import compile_jaxpr


class ArgInfo:
    """One argument of a traced function, as ``Traced.args_info`` gives it: its type and whether
    it is donated (JAX's ``jax.stages.ArgInfo``)."""

    __slots__ = ("_aval", "donated")

    def __init__(self, _aval: Any, donated: bool) -> None:
        self._aval, self.donated = _aval, donated

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ArgInfo) and (self._aval, self.donated) == (other._aval, other.donated)

    def __hash__(self) -> int:
        return hash((self._aval, self.donated))

    def __repr__(self) -> str:
        return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"


class Traced:
    """A jitted function traced for one signature (``jit(f).trace(*args)``), not yet lowered."""

    def __init__(self, jitted: Any, closed: ClosedJaxpr, in_tree: Any, out_tree: Any, statics: tuple,
                 donated: frozenset[int] = frozenset(), placement: Any = None) -> None:
        self._jitted = jitted
        self._parts = (closed, in_tree, out_tree, statics, donated, placement)
        self.jaxpr = closed
        self.fun_name = errors.function_name(jitted, "fun")

    @property
    def in_avals(self) -> list:
        return self.jaxpr.in_avals

    @property
    def args_info(self) -> Any:
        """The arguments' ``ArgInfo`` (type, donation), in the structure of ``(args, kwargs)``."""
        donated = self._parts[4]
        return tree_util.tree_unflatten(self._parts[1], [ArgInfo(a, i in donated)
                                                         for i, a in enumerate(self.jaxpr.in_avals)])

    @property
    def out_info(self) -> Any:
        return _out_info(self.jaxpr, self._parts[2])

    def lower(self) -> "Lowered":
        return Lowered(self._jitted, *self._parts)


def _out_info(closed: ClosedJaxpr, out_tree: Any) -> Any:
    return tree_util.tree_unflatten(out_tree, [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)
                                               for a in closed.out_avals])


class Lowered:
    def __init__(self, jitted: Any, closed: ClosedJaxpr, in_tree: Any, out_tree: Any, statics: tuple,
                 donated: frozenset[int] = frozenset(), placement: Any = None) -> None:
        self._jitted = jitted
        self._placement = placement  # (mesh, input shardings, output shardings) over a device mesh, or None
        self._closed = closed
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._statics = statics
        self._donated = donated  # flat positions of donated arguments (as in the jit call)

    @property
    def in_avals(self) -> list:
        return self._closed.in_avals

    @property
    def out_info(self) -> Any:
        return _out_info(self._closed, self._out_tree)

    def jaxpr(self) -> ClosedJaxpr:
        """The program as traced, before optimization."""
        return self._closed

    def optimized(self) -> ClosedJaxpr:
        return optimize(self._closed)

    def as_text(self, dialect: str | None = None) -> str:
        """The optimized IR; another dialect is the compiled program's text in it, if its backend
        has one (``dialect="llvm"``: the native CPU backend's LLVM IR). On a device backend that
        compiles StableHLO (PJRT) the default is that module, as JAX's ``Lowered.as_text()``."""
        if dialect is None and _on_device():
            return self.compile().as_text()
        if dialect in (None, "ir", "jaxpr"):
            return str(self.optimized())
        return self.compile().as_text(dialect)

    def compiler_ir(self, dialect: str | None = None) -> "CompilerIR":
        """The program as the compiler takes it. JAX gives XLA's module here (StableHLO by
        default, ``dialect="hlo"`` an HLO computation). On a PJRT device backend the StableHLO
        module it compiles is that program; on the CPU ember compiles its own IR with LLVM, so
        every dialect JAX names gives ember's optimized IR (the text ``as_text()`` prints), in an
        object with the methods callers use on JAX's (``str``, ``as_hlo_text``). ``"llvm"`` gives
        the native backend's LLVM IR."""
        if dialect not in _DIALECTS:
            raise ValueError(f"unknown dialect: {dialect}")
        if dialect in (None, "stablehlo", "mhlo") and _on_device():  # (the module the plugin compiles)
            return CompilerIR(self.as_text(), getattr(self._jitted, "__name__", "fun"))
        text = self.as_text("llvm" if dialect == "llvm" else None)
        return CompilerIR(text, getattr(self._jitted, "__name__", "fun"))

    def compile(self, compiler_options: dict[str, Any] | None = None, *,
                device_assignment: Any = None) -> "Compiled":
        """Compile for the lowered signature. ``compiler_options`` are XLA's (``xla_...`` names):
        ember does not run XLA, so they are accepted and change nothing; a name that is not an
        XLA option is refused, as XLA refuses an option it does not know."""
        unknown = [name for name in (compiler_options or {}) if not str(name).startswith("xla_")]
        if unknown:
            raise JaxRuntimeError(f"INVALID_ARGUMENT: No such compile option: {unknown[0]!r} (ember takes XLA's "
                                  "options, named xla_..., and ignores them: it compiles with LLVM, not XLA)")
        executable = compile_jaxpr(self._closed, name=self._jitted.__name__, donated=self._donated,
                                   placement=self._placement)
        warn_unusable_donations(executable, stacklevel=3)
        return Compiled(self, executable)

    def cost_analysis(self) -> dict[str, float]:
        return cost_analysis(self.optimized())


_DIALECTS = (None, "stablehlo", "mhlo", "hlo", "jaxpr", "llvm")


def _on_device() -> bool:
    """Whether programs now run on a device backend (one whose buffers are not host memory)."""
    return not registry.get().host_buffers


class CompilerIR:
    """``Lowered.compiler_ir()``'s result: the text of the program ember compiles. ``str()`` is the
    text; ``as_hlo_text()`` is the same program under HLO's ``HloModule`` and ``ENTRY`` headings,
    for code that finds the computation by them (the lines inside are ember's IR, not HLO's)."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"CompilerIR({self.name})"

    def as_hlo_text(self, print_large_constants: bool = False) -> str:
        return f"HloModule jit_{self.name}\n\nENTRY main {{\n{self.text}\n}}\n"


class Compiled:
    def __init__(self, lowered: Lowered, executable: Executable) -> None:
        self._lowered = lowered
        self._executable = executable

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run on the dynamic arguments: static ones were fixed by ``lower`` and are not passed
        again (as JAX's compiled functions take them)."""
        lowered = self._lowered
        full_args, kwargs = list(args), dict(kwargs)
        for kind, where, value in lowered._statics:  # (in increasing position: each lands where it was)
            if kind == "#":
                full_args.insert(where, value)
            else:
                kwargs[where] = value
        dyn_args, dyn_kwargs, statics = lowered._jitted._sig.split(tuple(full_args), kwargs)
        leaves, in_tree = tree_util.flatten_for_trace((dyn_args, dyn_kwargs))
        avals = [aval_of_value(x) for x in leaves]
        if in_tree != lowered._in_tree or statics != lowered._statics or avals != lowered.in_avals:
            got = ", ".join(a.str_short() for a in avals)
            want = ", ".join(a.str_short() for a in lowered.in_avals)
            raise TypeError(f"this compiled function was lowered for arguments ({want}) with static values "
                            f"{[v for *_, v in lowered._statics]}, but was called with ({got}) and "
                            f"{[v for *_, v in statics]}. Lower and compile again for the new signature, "
                            "or call the jitted function, which compiles as needed.")
        if lowered._donated:  # run, then delete the donated Arrays, as a jit call does
            outs = lowered._jitted._call_donating(self._executable, leaves, lowered._donated)
        else:
            outs = self._executable(*leaves)
        return tree_util.tree_unflatten(lowered._out_tree, outs)

    def as_text(self, dialect: str | None = None) -> str:
        """The optimized IR, or the program in one of its backend's dialects ("llvm" on the CPU);
        the default is StableHLO where the backend compiled that (PJRT)."""
        if dialect is None and "stablehlo" in self._executable.dialects:
            return self._executable.as_text("stablehlo")
        if dialect in (None, "ir", "jaxpr"):
            return self._lowered.as_text("jaxpr")
        return self._executable.as_text(dialect)

    def cost_analysis(self) -> dict[str, float]:
        """The backend's estimate, or the static one of the IR: ``flops``, ``transcendentals`` and
        ``bytes accessed``."""
        own = self._executable.cost_analysis()
        return self._lowered.cost_analysis() if own is None else own
