"""Type promotion: the whole lattice table, checked against JAX's published behaviour.

Each row/column is an operand type (``i*``/``f*``/``c*`` are Python int/float/complex, which
are weakly typed); each cell is the result of ``jnp.add``, ``*`` marking a weak result. The
tables are also checked cell by cell against JAX itself.
"""
import jax  # the reference the tables are checked against
import jax.numpy as jax_numpy
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes

TABLE_X64_OFF = """
           b    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128    i*    f*    c*
    b      b    i8   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32   c64   c64  i32*  f32*  c64*
   i8     i8    i8   i16   i32   i32   i16   i32   i32   i32  bf16   f16   f32   f32   c64   c64    i8  f32*  c64*
  i16    i16   i16   i16   i32   i32   i16   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i16  f32*  c64*
  i32    i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i32  f32*  c64*
  i64    i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i32  f32*  c64*
   u8     u8   i16   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32   c64   c64    u8  f32*  c64*
  u16    u16   i32   i32   i32   i32   u16   u16   u32   u32  bf16   f16   f32   f32   c64   c64   u16  f32*  c64*
  u32    u32   i32   i32   i32   i32   u32   u32   u32   u32  bf16   f16   f32   f32   c64   c64   u32  f32*  c64*
  u64    u32   i32   i32   i32   i32   u32   u32   u32   u32  bf16   f16   f32   f32   c64   c64   u32  f32*  c64*
 bf16   bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f32   c64   c64  bf16  bf16   c64
  f16    f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f32   c64   c64   f16   f16   c64
  f32    f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   c64   c64   f32   f32   c64
  f64    f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   c64   c64   f32   f32   c64
  c64    c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64
 c128    c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64
   i*   i32*    i8   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32   c64   c64  i32*  f32*  c64*
   f*   f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  bf16   f16   f32   f32   c64   c64  f32*  f32*  c64*
   c*   c64*  c64*  c64*  c64*  c64*  c64*  c64*  c64*  c64*   c64   c64   c64   c64   c64   c64  c64*  c64*  c64*
"""

TABLE_X64_ON = """
           b    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128    i*    f*    c*
    b      b    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128  i64*  f64* c128*
   i8     i8    i8   i16   i32   i64   i16   i32   i64  f64*  bf16   f16   f32   f64   c64  c128    i8  f64* c128*
  i16    i16   i16   i16   i32   i64   i16   i32   i64  f64*  bf16   f16   f32   f64   c64  c128   i16  f64* c128*
  i32    i32   i32   i32   i32   i64   i32   i32   i64  f64*  bf16   f16   f32   f64   c64  c128   i32  f64* c128*
  i64    i64   i64   i64   i64   i64   i64   i64   i64  f64*  bf16   f16   f32   f64   c64  c128   i64  f64* c128*
   u8     u8   i16   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128    u8  f64* c128*
  u16    u16   i32   i32   i32   i64   u16   u16   u32   u64  bf16   f16   f32   f64   c64  c128   u16  f64* c128*
  u32    u32   i64   i64   i64   i64   u32   u32   u32   u64  bf16   f16   f32   f64   c64  c128   u32  f64* c128*
  u64    u64  f64*  f64*  f64*  f64*   u64   u64   u64   u64  bf16   f16   f32   f64   c64  c128   u64  f64* c128*
 bf16   bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f64   c64  c128  bf16  bf16   c64
  f16    f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f64   c64  c128   f16   f16   c64
  f32    f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   c64  c128   f32   f32   c64
  f64    f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64  c128  c128   f64   f64  c128
  c64    c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64  c128   c64  c128   c64   c64   c64
 c128   c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128
   i*   i64*    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64   c64  c128  i64*  f64* c128*
   f*   f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  bf16   f16   f32   f64   c64  c128  f64*  f64* c128*
   c*  c128* c128* c128* c128* c128* c128* c128* c128* c128*   c64   c64   c64  c128   c64  c128 c128* c128* c128*
"""

SHORT = {"b": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
         "u16": "uint16", "u32": "uint32", "u64": "uint64", "bf16": "bfloat16", "f16": "float16",
         "f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128"}
PYTHON_SCALARS = {"i*": 1, "f*": 1.0, "c*": 1j}


def _parse(table):
    lines = [line.split() for line in table.strip().splitlines()]
    cols = lines[0]
    return [(row[0], col, cell) for row in lines[1:] for col, cell in zip(cols, row[1:])]


def _operand(name, numpy=jnp):
    if name in PYTHON_SCALARS:
        return PYTHON_SCALARS[name]
    return numpy.zeros((), SHORT[name])


def _expected(cell):
    return dtypes.dtype(SHORT[cell.rstrip("*")]), cell.endswith("*")


@pytest.mark.parametrize("a,b,cell", _parse(TABLE_X64_OFF))
def test_promotion_table_x64_off(a, b, cell):
    out = jnp.add(_operand(a), _operand(b))
    assert (out.dtype, out.weak_type) == _expected(cell)


@pytest.mark.parametrize("a,b,cell", _parse(TABLE_X64_ON))
def test_promotion_table_x64_on(x64, a, b, cell):
    out = jnp.add(_operand(a), _operand(b))
    assert (out.dtype, out.weak_type) == _expected(cell)


def _jax_cell(a, b):
    # (JAX's type rule without running the addition: eval_shape traces it, no compile per cell)
    out = jax.eval_shape(jax_numpy.add, _operand(a, jax_numpy), _operand(b, jax_numpy))
    short = {v: k for k, v in SHORT.items()}[out.dtype.name]
    return short + ("*" if out.weak_type else "")


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype:UserWarning")  # (JAX's, for 64-bit types)
def test_the_tables_are_jaxs():
    """Every cell as JAX computes it, with x64 off and (in a context that does not leak) on."""
    assert [_jax_cell(a, b) for a, b, _ in _parse(TABLE_X64_OFF)] == [c for _, _, c in _parse(TABLE_X64_OFF)]
    with jax.enable_x64(True):
        assert [_jax_cell(a, b) for a, b, _ in _parse(TABLE_X64_ON)] == [c for _, _, c in _parse(TABLE_X64_ON)]
    assert not jax.config.jax_enable_x64


def test_promote_types_and_result_type_with_complex(x64):
    names = [n for n in SHORT if n != "i64" and n != "u64"]
    with jax.enable_x64(True):
        for a in names:
            for b in names:
                assert jnp.promote_types(SHORT[a], SHORT[b]) == jax_numpy.promote_types(SHORT[a], SHORT[b]), (a, b)
            for scalar in PYTHON_SCALARS.values():
                assert jnp.result_type(SHORT[a], scalar) == jax_numpy.result_type(SHORT[a], scalar), (a, scalar)
    assert jnp.result_type(1j, 2.0) == np.complex128 and jnp.result_type(jnp.float16, 1j) == np.complex64
    assert jnp.result_type(jnp.zeros(2, jnp.complex64), 1.0) == np.complex64


@pytest.mark.parametrize("a,b,cell", [t for t in _parse(TABLE_X64_OFF) if "*" not in t[0] + t[1]])
def test_promotion_under_jit_matches_eager(a, b, cell):
    out = ember.jit(jnp.add)(_operand(a), _operand(b))
    assert (out.dtype, out.weak_type) == _expected(cell)


# The float8 rows: a float8 type promotes with booleans, integers and Python int / float, to
# itself ("="), and with no other floating or complex type ("-": TypePromotionError); among the
# float8 types only with itself. The same with x64 on.
FLOAT8 = {"e3m4": "float8_e3m4", "e4m3": "float8_e4m3", "e4m3b11fnuz": "float8_e4m3b11fnuz",
          "e4m3fn": "float8_e4m3fn", "e4m3fnuz": "float8_e4m3fnuz", "e5m2": "float8_e5m2",
          "e5m2fnuz": "float8_e5m2fnuz", "e8m0fnu": "float8_e8m0fnu"}
TABLE_FLOAT8_ROW = """
      b   i8  i16  i32  i64   u8  u16  u32  u64 bf16  f16  f32  f64  c64 c128   i*   f*   c*
      =    =    =    =    =    =    =    =    =    -    -    -    -    -    -    =    =    -
"""
_ROW = _parse("\n".join(TABLE_FLOAT8_ROW.strip().splitlines()[:1] + ["x " + TABLE_FLOAT8_ROW.strip().splitlines()[1]]))


def _float8_table() -> list:
    """(row, column, cell) of every float8 row, over every type and Python scalar, float8 ones too."""
    cells = []
    for a in FLOAT8:
        cells += [(a, b, a if cell == "=" else "-") for _, b, cell in _ROW]
        cells += [(a, b, a if a == b else "-") for b in FLOAT8]
    return cells


def _float8_cell(a, b, numpy=jnp):
    names = {**SHORT, **FLOAT8}
    operands = [PYTHON_SCALARS[n] if n in PYTHON_SCALARS else numpy.zeros((), names[n]) for n in (a, b)]
    try:
        # (JAX's type rule without running the addition: eval_shape traces it, no compile per cell)
        out = jax.eval_shape(numpy.add, *operands) if numpy is jax_numpy else numpy.add(*operands)
    except ValueError as e:
        assert type(e).__name__ == "TypePromotionError" and "8-bit floats do not support implicit promotion" in str(e)
        return "-"
    return {v: k for k, v in names.items()}[out.dtype.name] + ("*" if out.weak_type else "")


@pytest.mark.parametrize("x64_on", [False, True])
def test_float8_promotion_rows(x64_on):
    names = {**SHORT, **FLOAT8}
    with ember.config.override(enable_x64=x64_on):
        assert [_float8_cell(a, b) for a, b, _ in _float8_table()] == [c for _, _, c in _float8_table()]
        assert [_float8_cell(b, a) for a, b, _ in _float8_table()] == [c for _, _, c in _float8_table()]
        for a, b, cell in _float8_table():  # (promote_types: the same, either way round)
            if b in PYTHON_SCALARS:
                continue
            if cell == "-":
                with pytest.raises(dtypes.TypePromotionError):
                    jnp.promote_types(names[b], FLOAT8[a])
            else:
                assert jnp.promote_types(FLOAT8[a], names[b]) == jnp.promote_types(names[b], FLOAT8[a]) == names[a]


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype:UserWarning")
def test_the_float8_table_is_jaxs():
    cells = [c for _, _, c in _float8_table()]
    assert [_float8_cell(a, b, jax_numpy) for a, b, _ in _float8_table()] == cells
    with jax.enable_x64(True):
        assert [_float8_cell(a, b, jax_numpy) for a, b, _ in _float8_table()] == cells

def test_promote_types_and_result_type():
    assert jnp.promote_types(jnp.int8, jnp.uint8) == jnp.int16
    assert jnp.promote_types("bfloat16", "float16") == jnp.float32
    assert jnp.result_type(jnp.int8, 1.0) == jnp.float32
    assert jnp.result_type(jnp.zeros(2, jnp.float16), 2.0) == jnp.float16
    assert jnp.result_type(jnp.zeros(2, jnp.int32), 2) == jnp.int32


def test_x64_off_canonicalizes_64_bit_requests():
    assert jnp.zeros(3, jnp.float64).dtype == jnp.float32
    assert jnp.arange(3, dtype=jnp.int64).dtype == jnp.int32
    assert jnp.asarray(np.zeros(2, np.float64)).dtype == jnp.float32
    assert jnp.asarray(np.zeros(2, np.uint64)).dtype == jnp.uint32


def test_x64_on_keeps_64_bit(x64):
    assert jnp.zeros(3, jnp.float64).dtype == jnp.float64
    assert jnp.asarray(1.0).dtype == jnp.float64
    assert jnp.asarray(np.zeros(2, np.int64)).dtype == jnp.int64


def test_python_scalars_are_weak():
    x = jnp.asarray(2.0)
    assert x.weak_type and x.dtype == jnp.float32
    assert not jnp.asarray(np.float32(2.0)).weak_type
    half = jnp.ones(3, jnp.float16)
    assert (half * 2.0).dtype == jnp.float16
    assert (jnp.ones(3, jnp.int8) + 3).dtype == jnp.int8


def test_python_int_out_of_range_is_an_overflow_error():
    with pytest.raises(OverflowError):
        jnp.ones(3, jnp.int32) + 2**40


def test_finfo_and_iinfo():
    assert jnp.finfo(jnp.bfloat16).bits == 16
    # finfo of a complex type describes its parts, as NumPy's and JAX's
    assert jnp.finfo(jnp.complex64).dtype == np.float32 and jnp.finfo(jnp.complex64).bits == 32
    assert jnp.finfo(jnp.complex128).dtype == np.float64 and jnp.finfo(np.complex128).eps == np.finfo(np.float64).eps
    assert jnp.finfo(jnp.float32).eps == np.finfo(np.float32).eps
    assert jnp.iinfo(jnp.int8).max == 127


def test_scalar_types_are_dtypes_and_constructors():
    x = jnp.float32(1.5)
    assert isinstance(x, ember.Array) and x.dtype == jnp.float32 and not x.weak_type
    assert jnp.int8(300 - 256).dtype == jnp.int8
    assert jnp.float64(1.0).dtype == jnp.float32  # canonicalized with x64 off
    assert np.dtype(jnp.bfloat16) == dtypes.bfloat16 and np.zeros(2, jnp.int16).dtype == np.int16
    assert jnp.float32 == np.float32 and jnp.float32 != jnp.float16
    assert isinstance(np.float32(1), jnp.float32)
    assert {jnp.float32: 1}[np.float32] == 1


def test_like_functions_keep_a_weak_type():
    assert jnp.zeros_like(2.0).weak_type and jnp.full_like(2.0, 3).weak_type
    assert not jnp.ones_like(jnp.float32(2)).weak_type
    assert (jnp.zeros_like(2.0) + jnp.ones(2, jnp.float16)).dtype == jnp.float16


def test_integer_exponent_and_boolean_shifts_as_jax():
    assert ember.lax.pow(jnp.full(3, 2.0), jnp.int32(3)).tolist() == [8.0, 8.0, 8.0]
    assert jnp.left_shift(jnp.array([True]), 1).dtype == jnp.int32


@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32"])
def test_float_to_integer_conversion_saturates_truncates_and_zeroes_nans_as_jax(source):
    values = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.9, -1.9, 127.5, 128.0, -129.0,
                       255.9, 256.0, 65535.0, -32768.0, 2.0**31, -2.0**31, 2.0**32, 1e30, -1e30], np.float32)
    x = values.astype(jnp.dtype(source))
    for target in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "bool"]:
        want = np.asarray(jax.device_put(x).astype(target))
        for _ in range(2):
            got = np.asarray(jnp.asarray(x).astype(target))
            assert got.dtype == want.dtype and got.tolist() == want.tolist(), (source, target)


def test_a_64_bit_request_warns_on_every_call_while_x64_is_off():
    x = jnp.ones(3, jnp.float32)
    for _ in range(3):
        with pytest.warns(UserWarning, match="Explicitly requested dtype int64 requested in astype is not available"):
            assert x.astype(np.int64).dtype == np.int32
        with pytest.warns(UserWarning, match="Explicitly requested dtype int64 requested in astype is not available"):
            assert x.astype(np.dtype("int64")).dtype == np.int32  # (equal to int, but a request by name)
        with pytest.warns(UserWarning, match="Explicitly requested dtype float64 requested in zeros is not available"):
            assert jnp.zeros(2, dtype=np.dtype("float64")).dtype == np.float32
    assert x.astype(jnp.int32).dtype == np.int32 and x.astype("int32").dtype == np.int32
    assert x.astype(int).dtype == np.int32 and x.astype(float).dtype == np.float32  # (the defaults: no warning)
