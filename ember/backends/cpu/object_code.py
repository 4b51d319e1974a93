"""The object code of disk-cache entries, checked in Python before LLVM sees it.

A payload is the sha256 of the object code, taken when MCJIT handed the code over, then the
code. LLVM trusts an object it loads: a malformed one makes it call ``report_fatal_error`` or
fail an assertion (either aborts the interpreter), or makes its runtime linker write outside
the memory it allocated. ``inspect`` refuses, in Python, every such object it can see; what it
cannot see (the instructions, data and addends of a well-formed object) is trusted, as any local
code cache must trust the processes that can write to it (``ember.backends.disk_cache``).
"""
from __future__ import annotations

import functools
import hashlib
import re
import struct
from typing import NamedTuple

DIGEST_SIZE = 32


class _Machine(NamedTuple):
    """The host's ELF object code: its ``e_machine``, byte order, and the relocation types that
    LLVM's runtime linker (RuntimeDyldELF) implements for it, each with the bytes it patches."""

    number: int
    byteorder: str
    relocations: dict[int, int]


# NONE, 64, PC32, PLT32, GOTPCREL, 32, 32S, 16, 8, PC8, PC64, GOTPC32, GOT64, GOTPC64, GOTPCRELX,
# REX_GOTPCRELX. No thread-local ones (which rewrite the instructions around them): ember has none.
_X86_64_RELOCATIONS = {0: 0, 1: 8, 2: 4, 4: 4, 9: 4, 10: 4, 11: 4, 12: 2, 14: 1, 15: 1, 24: 8, 26: 4,
                       27: 8, 29: 8, 41: 4, 42: 4}
# NONE, ABS64/32/16, PREL64/32/16, MOVW_UABS_G0_NC/G1_NC/G2_NC/G3, LD_PREL_LO19, ADR_PREL_LO21,
# ADR_PREL_PG_HI21, ADD_ABS_LO12_NC, LDST8_ABS_LO12_NC, TSTBR14, CONDBR19, JUMP26, CALL26,
# LDST16/32/64/128_ABS_LO12_NC, ADR_GOT_PAGE, LD64_GOT_LO12_NC, PLT32.
_AARCH64_RELOCATIONS = {0: 0, 0x101: 8, 0x102: 4, 0x103: 2, 0x104: 8, 0x105: 4, 0x106: 2,
                        **dict.fromkeys((0x108, 0x10a, 0x10c, 0x10d, 0x111, 0x112, 0x113, 0x115, 0x116,
                                         0x117, 0x118, 0x11a, 0x11b, 0x11c, 0x11d, 0x11e, 0x12b, 0x137,
                                         0x138, 0x13a), 4)}
_MACHINES = {"x86_64": _Machine(62, "little", _X86_64_RELOCATIONS),
             "aarch64": _Machine(183, "little", _AARCH64_RELOCATIONS),
             "aarch64_be": _Machine(183, "big", _AARCH64_RELOCATIONS)}
_NOT_ELF = ("darwin", "macos", "ios", "windows", "win32", "cygwin", "mingw")

_SHT_NULL, _SHT_PROGBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOTE, _SHT_NOBITS = 0, 1, 2, 3, 4, 7, 8
_SECTION_TYPES = {_SHT_PROGBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOTE, _SHT_NOBITS,
                  0x70000001}  # SHT_X86_64_UNWIND (.eh_frame)
_SHF_TLS = 0x400
_STT_SECTION, _STT_FILE = 3, 4
_SYMBOL_TYPES = {0, 1, 2, _STT_SECTION, _STT_FILE}  # NOTYPE, OBJECT, FUNC, SECTION, FILE
_SHN_UNDEF, _SHN_ABS = 0, 0xFFF1
_MAX_ALIGNMENT = 1 << 16
_MAX_ZERO_FILLED = 64 << 20
# DWARF pointer encodings the unwinder decodes when it registers .eh_frame: absptr, udata2/4/8,
# sdata2/4/8 (the byte counts), absolute or pc-relative; any other makes libgcc abort.
_POINTER_SIZES = {0x00: 8, 0x02: 2, 0x03: 4, 0x04: 8, 0x0A: 2, 0x0B: 4, 0x0C: 8}


class _Section(NamedTuple):
    name: int
    type: int
    flags: int
    address: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


class BadObject(Exception):
    """What makes an object unsafe to hand to LLVM."""


@functools.cache
def elf_machine(triple: str) -> _Machine | None:
    """The host's object format, from the triple llvmlite reports; None where the checks cannot
    read it (not ELF, or another machine): there the disk cache is not used."""
    arch, _, system = triple.partition("-")
    if any(word in system for word in _NOT_ELF) and not system.endswith("-elf"):
        return None
    return _MACHINES.get(arch)


def inspect(payload: bytes, source: str, triple: str) -> tuple[str, list[str]]:
    """What is wrong with a disk-cache payload for the IR ``source`` ("" if nothing: it is safe to
    hand to MCJIT), and the symbols its object imports (for ``_load`` to look up)."""
    machine = elf_machine(triple)
    if machine is None:
        return f"object code for {triple} cannot be checked", []
    digest, obj = payload[:DIGEST_SIZE], payload[DIGEST_SIZE:]
    if len(digest) < DIGEST_SIZE or hashlib.sha256(obj).digest() != digest:
        return "the object code does not match the checksum taken when it was generated", []
    try:
        return "", check_elf(obj, machine, defined_functions(source))
    except BadObject as error:
        return f"not a loadable object for {triple}: {error}", []
    except (struct.error, IndexError, UnicodeDecodeError) as error:  # read past a bound not checked above
        return f"not a loadable object for {triple}: malformed ({type(error).__name__}: {error})", []


def check_elf(obj: bytes, machine: _Machine, functions: set[bytes],
              sizes: dict[str, int] | None = None) -> list[str]:
    """Raise ``BadObject`` unless ``obj`` is a well-formed ELF64 relocatable object for
    ``machine`` that defines ``functions``; the names of the symbols it imports. ``sizes``, if
    given, receives each global function's size in bytes by name."""
    order = "<" if machine.byteorder == "little" else ">"
    if len(obj) < 64 or obj[:4] != b"\x7fELF":
        raise BadObject("no ELF header")
    if obj[4] != 2:
        raise BadObject(f"ELF class {obj[4]}, not 64-bit")
    if obj[5] != (1 if machine.byteorder == "little" else 2) or obj[6] != 1:
        raise BadObject(f"byte order {obj[5]} or ELF version {obj[6]}, this host is {machine.byteorder}-endian")
    (kind, number, version, _entry, _phoff, shoff, _flags, ehsize, _phentsize, phnum, shentsize, shnum,
     shstrndx) = struct.unpack_from(order + "HHIQQQIHHHHHH", obj, 16)
    if kind != 1:
        raise BadObject(f"ELF type {kind}, not a relocatable object")
    if number != machine.number:
        raise BadObject(f"ELF machine {number}, this host's is {machine.number}")
    if version != 1 or ehsize != 64 or phnum != 0 or shentsize != 64:
        raise BadObject("unexpected ELF header fields (version, header size, program headers, "
                         "section header size)")
    if not 0 < shnum < 0xFF00 or shoff < 64 or shoff + 64 * shnum > len(obj):
        raise BadObject(f"section header table ({shnum} at offset {shoff}) outside the object's "
                         f"{len(obj)} bytes")
    sections = [_Section(*struct.unpack_from(order + "IIQQQQIIQQ", obj, shoff + 64 * i)) for i in range(shnum)]
    if sections[0].type != _SHT_NULL:
        raise BadObject("section 0 is not the null section")
    zero_filled = 0
    for i, section in enumerate(sections[1:], 1):
        if section.type not in _SECTION_TYPES or section.flags & _SHF_TLS:
            raise BadObject(f"section {i}: type {section.type:#x}, flags {section.flags:#x}")
        if section.align & (section.align - 1) or section.align > _MAX_ALIGNMENT:
            raise BadObject(f"section {i}: alignment {section.align}")
        if section.type == _SHT_NOBITS:
            zero_filled += section.size
        elif section.offset + section.size > len(obj):
            raise BadObject(f"section {i} ({section.size} bytes at {section.offset}) runs past the end of "
                             f"the object's {len(obj)} bytes")
    if zero_filled > _MAX_ZERO_FILLED:
        raise BadObject(f"{zero_filled} bytes of zero-filled sections")
    section_names = _string_table(obj, sections, shstrndx, "section names")
    if any(section.name >= len(section_names) for section in sections):
        raise BadObject("a section name outside the section name table")

    tables = [i for i, section in enumerate(sections) if section.type == _SHT_SYMTAB]
    if len(tables) > 1:
        raise BadObject("more than one symbol table")
    symbols: list[tuple[int, int, int, int, int, int]] = []
    names = b""
    if tables:
        table = sections[tables[0]]
        if table.entsize != 24 or table.size % 24 or table.info > table.size // 24:
            raise BadObject("a symbol table of odd size")
        names = _string_table(obj, sections, table.link, "symbol names")
        symbols = list(struct.iter_unpack(order + "IBBHQQ", obj[table.offset:table.offset + table.size]))
        if symbols and any(symbols[0]):
            raise BadObject("symbol 0 is not the null symbol")
    imports, defined = [], set()
    for j, (name, info, _other, index, value, size) in enumerate(symbols[1:], 1):
        kind, binding = info & 0xF, info >> 4
        if name >= len(names) or kind not in _SYMBOL_TYPES or binding > 2:  # LOCAL, GLOBAL, WEAK
            raise BadObject(f"symbol {j}: name {name}, type {kind}, binding {binding}")
        text = names[name:names.index(b"\0", name)]
        if index == _SHN_UNDEF or index == _SHN_ABS:
            if kind == _STT_SECTION:
                raise BadObject(f"section symbol {j} without a section")
            if index == _SHN_UNDEF and text:
                imports.append(text.decode())
        elif index >= shnum:  # common, extended indices and other reserved ones: not ember's
            raise BadObject(f"symbol {j}: section index {index:#x}")
        elif kind != _STT_FILE and value + size > sections[index].size:
            raise BadObject(f"symbol {j} ({size} bytes at {value}) outside its section")
        elif kind == 2 and binding:
            defined.add(text)
            if sizes is not None:
                sizes[text.decode(errors="replace")] = size
    if functions - defined:
        raise BadObject(f"it does not define {sorted(functions - defined)[0].decode(errors='replace')}")

    for i, section in enumerate(sections):
        if section.type != _SHT_RELA:
            continue
        if section.entsize != 24 or section.size % 24 or not tables or section.link != tables[0]:
            raise BadObject(f"relocation section {i}: entry size, size or symbol table")
        if not 0 < section.info < shnum or sections[section.info].type == _SHT_NOBITS:
            raise BadObject(f"relocation section {i} patches section {section.info}")
        limit, entries = sections[section.info].size, obj[section.offset:section.offset + section.size]
        for offset, info, _addend in struct.iter_unpack(order + "QQq", entries):
            kind, symbol = info & 0xFFFFFFFF, info >> 32
            width = machine.relocations.get(kind)
            if width is None:
                raise BadObject(f"relocation type {kind}, which LLVM's runtime linker does not implement")
            if offset + width > limit:
                raise BadObject(f"a relocation at {offset} patches bytes outside its {limit}-byte section")
            if symbol >= len(symbols) or symbol and symbols[symbol][1] & 0xF == _STT_FILE:
                raise BadObject(f"a relocation of symbol {symbol} ({len(symbols)} in the table)")

    for section in sections:
        end = section_names.find(b"\0", section.name)
        if section_names[section.name:end] == b".eh_frame":
            if section.type == _SHT_NOBITS:
                raise BadObject(".eh_frame without contents")
            _check_eh_frame(obj[section.offset:section.offset + section.size], order)
    return imports


def _string_table(obj: bytes, sections: list[_Section], index: int, what: str) -> bytes:
    if not 0 < index < len(sections) or sections[index].type != _SHT_STRTAB:
        raise BadObject(f"no table of {what}")
    table = obj[sections[index].offset:sections[index].offset + sections[index].size]
    if not table.endswith(b"\0"):
        raise BadObject(f"the table of {what} is not NUL-terminated")
    return table


def _check_eh_frame(data: bytes, order: str) -> None:
    """The unwind records that LLVM registers with the unwinder, which walks and decodes them
    (libgcc at registration): their lengths, links and pointer encodings."""
    encodings: dict[int, int] = {}  # the pointer encoding of each CIE, by its offset
    position = 0
    while position + 4 <= len(data):
        (length,) = struct.unpack_from(order + "I", data, position)
        if length == 0:  # the terminator
            return
        start, end = position + 4, position + 4 + length
        if length < 4 or length == 0xFFFFFFFF or end > len(data):
            raise BadObject(f".eh_frame record at {position}: length {length}")
        (cie,) = struct.unpack_from(order + "I", data, start)
        if cie == 0:
            encodings[position] = _cie_encoding(data[start + 4:end])
        elif start - cie not in encodings:
            raise BadObject(f".eh_frame record at {position} points to no CIE")
        elif end - start - 4 < 2 * _POINTER_SIZES[encodings[start - cie] & 0x0F]:
            raise BadObject(f".eh_frame record at {position} is too short for its addresses")
        position = end
    if position != len(data):
        raise BadObject(".eh_frame ends inside a record")


def _cie_encoding(cie: bytes) -> int:
    """The pointer encoding of a CIE's FDEs, parsed as the unwinder does; raises if it cannot be."""
    end = cie.find(b"\0", 1)
    if end < 0 or cie[0] not in (1, 3):
        raise BadObject(f".eh_frame CIE version {cie[0]} or augmentation without its NUL")
    version, augmentation = cie[0], cie[1:end]
    if augmentation[:1] not in (b"", b"z") or set(augmentation[1:]) - set(b"RPLS"):
        raise BadObject(f".eh_frame CIE augmentation {augmentation!r}")
    position = _skip_leb128(cie, _skip_leb128(cie, end + 1))  # code and data alignment factors
    position = position + 1 if version == 1 else _skip_leb128(cie, position)  # return address register
    if not augmentation:
        return 0x00
    position = _skip_leb128(cie, position)  # the augmentation data's length
    encoding = 0x00  # absptr, without an "R"
    for letter in augmentation[1:].decode():
        if letter == "S":  # a signal frame: no data
            continue
        value = cie[position]
        position += 1
        if value == 0xFF and letter != "R":  # an omitted personality routine or LSDA
            continue
        if value & 0x0F not in _POINTER_SIZES or value & 0x70 not in (0x00, 0x10) or (
                value & 0x80 and letter != "P"):
            raise BadObject(f".eh_frame CIE pointer encoding {value:#x}")
        if letter == "R":
            encoding = value
        elif letter == "P":  # the personality routine's address
            position += _POINTER_SIZES[value & 0x0F]
    if position > len(cie):
        raise BadObject(".eh_frame CIE augmentation data runs past the record")
    return encoding


def _skip_leb128(data: bytes, position: int) -> int:
    while data[position] & 0x80:  # an IndexError (past the record) is a bad object
        position += 1
    return position + 1


_DEFINE = re.compile(r'^define\b([^@\n]*)@("(?:[^"\\]|\\.)*"|[-\w$.]+)', re.MULTILINE)
_LOCAL_LINKAGES = {"private", "internal", "available_externally"}  # no global symbol in the object


def function_sizes(obj: bytes, triple: str) -> dict[str, int]:
    """The size in bytes of each global function that ``obj`` (an object LLVM generated for
    ``triple``) defines; empty where the object cannot be read (for ``jit.perf_map``)."""
    machine = elf_machine(triple)
    sizes: dict[str, int] = {}
    if machine is not None:
        try:
            check_elf(obj, machine, set(), sizes)
        except (BadObject, struct.error, IndexError, UnicodeDecodeError):
            return {}
    return sizes


def defined_functions(source: str) -> set[bytes]:
    """The symbols of the functions that the IR text defines with external visibility."""
    names = set()
    for prefix, name in _DEFINE.findall(source):
        if _LOCAL_LINKAGES.isdisjoint(prefix.split()) and not name.isdigit():
            raw = name.strip('"').encode()
            names.add(re.sub(rb"\\([0-9A-Fa-f]{2})", lambda m: bytes.fromhex(m[1].decode()), raw)
                      if name.startswith('"') else raw)
    return names
