"""Type promotion: the whole lattice table, checked against JAX's published behaviour.

Each row/column is an operand type (``i*``/``f*`` are Python int/float, which are
weakly typed); each cell is the result of ``jnp.add``, ``*`` marking a weak result.
"""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes

TABLE_X64_OFF = """
          b    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64    i*    f*
    b     b    i8   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32  i32*  f32*
   i8    i8    i8   i16   i32   i32   i16   i32   i32   i32  bf16   f16   f32   f32    i8  f32*
  i16   i16   i16   i16   i32   i32   i16   i32   i32   i32  bf16   f16   f32   f32   i16  f32*
  i32   i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   i32  f32*
  i64   i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   i32  f32*
   u8    u8   i16   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32    u8  f32*
  u16   u16   i32   i32   i32   i32   u16   u16   u32   u32  bf16   f16   f32   f32   u16  f32*
  u32   u32   i32   i32   i32   i32   u32   u32   u32   u32  bf16   f16   f32   f32   u32  f32*
  u64   u32   i32   i32   i32   i32   u32   u32   u32   u32  bf16   f16   f32   f32   u32  f32*
 bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f32  bf16  bf16
  f16   f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f32   f16   f16
  f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32
  f64   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32
   i*  i32*    i8   i16   i32   i32    u8   u16   u32   u32  bf16   f16   f32   f32  i32*  f32*
   f*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  bf16   f16   f32   f32  f32*  f32*
"""

TABLE_X64_ON = """
          b    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64    i*    f*
    b     b    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64  i64*  f64*
   i8    i8    i8   i16   i32   i64   i16   i32   i64  f64*  bf16   f16   f32   f64    i8  f64*
  i16   i16   i16   i16   i32   i64   i16   i32   i64  f64*  bf16   f16   f32   f64   i16  f64*
  i32   i32   i32   i32   i32   i64   i32   i32   i64  f64*  bf16   f16   f32   f64   i32  f64*
  i64   i64   i64   i64   i64   i64   i64   i64   i64  f64*  bf16   f16   f32   f64   i64  f64*
   u8    u8   i16   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64    u8  f64*
  u16   u16   i32   i32   i32   i64   u16   u16   u32   u64  bf16   f16   f32   f64   u16  f64*
  u32   u32   i64   i64   i64   i64   u32   u32   u32   u64  bf16   f16   f32   f64   u32  f64*
  u64   u64  f64*  f64*  f64*  f64*   u64   u64   u64   u64  bf16   f16   f32   f64   u64  f64*
 bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f64  bf16  bf16
  f16   f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f64   f16   f16
  f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   f32   f32
  f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64
   i*  i64*    i8   i16   i32   i64    u8   u16   u32   u64  bf16   f16   f32   f64  i64*  f64*
   f*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  bf16   f16   f32   f64  f64*  f64*
"""

SHORT = {"b": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
         "u16": "uint16", "u32": "uint32", "u64": "uint64", "bf16": "bfloat16", "f16": "float16",
         "f32": "float32", "f64": "float64"}


def _parse(table):
    lines = [line.split() for line in table.strip().splitlines()]
    cols = lines[0]
    return [(row[0], col, cell) for row in lines[1:] for col, cell in zip(cols, row[1:])]


def _operand(name):
    if name == "i*":
        return 1
    if name == "f*":
        return 1.0
    return jnp.zeros((), dtypes.dtype(SHORT[name]))


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


@pytest.mark.parametrize("a,b,cell", [t for t in _parse(TABLE_X64_OFF) if "*" not in t[0] + t[1]])
def test_promotion_under_jit_matches_eager(a, b, cell):
    out = ember.jit(jnp.add)(_operand(a), _operand(b))
    assert (out.dtype, out.weak_type) == _expected(cell)


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
