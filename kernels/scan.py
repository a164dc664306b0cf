"""What in a kernel's PTX can make its work depend on time or on earlier calls. No GPU, no numba.

A kernel that reads a clock can tell a call inside back-to-back graph replay from one after a
pause; a kernel that keeps a counter in device memory can tell the fourth call from the first.
Either can skip work where sweeper's hot mode measures and do it where the output is checked,
and read faster than it is. `scan(ptx, entry)` lists, for one `.entry` and every function it
calls, each instruction that

  * reads a special register whose value changes between calls or over time: %clock,
    %clock_hi, %clock64, %globaltimer, %globaltimer_lo, %globaltimer_hi, the performance
    counters %pm0..%pm7 and %pm0_64..%pm7_64, %gridid (a number per launch) and
    %current_graph_exec (tells a graph launch from a plain one);
  * stores, or does an atomic or reduction, to a module-scope `.global` variable (a
    `__device__` or `__managed__` variable, a `static __device__` one in a function), or stores
    such a variable's address anywhere (a call's parameter included: where it goes is not
    followed);
  * writes to its input x (the first parameter) or reads its output y (the second), which
    survive from one call to the next in hot mode.

Addresses are followed through registers within a function, flow-insensitively (a register
that any instruction derives from a variable's address counts as that address everywhere in
the function), so a store through a pointer computed from `&counter` is found wherever the
arithmetic happens. Reads of `.global` variables, `.const` and `.shared` data, and atomics on
shared memory are not findings: they carry nothing from one call to the next. A read of a
clock is a finding wherever it is, in a branch the kernel never takes included: the scan reads
code, not what it does. Only a read whose value reaches nothing the kernel does is not a
finding: the value is followed through registers (any instruction that computes a register
from it, a load from an address derived from it, an instruction guarded by a predicate derived
from it) and a read is a finding as soon as it reaches a store, an atomic or reduction, a
copy, a call's parameter, a branch, a return or any other instruction that writes no register.
A timer left in and never used changes nothing the kernel does, so it is not refused.

Each finding carries the PTX line and, when the PTX has line info (`.loc`, NVRTC's
--generate-line-info), the source file and line it came from (for code inlined from a header,
the line of the user's file it was inlined at).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# special registers whose values depend on time or on how many launches came before
TIME_REGISTERS = (
    "clock", "clock_hi", "clock64", "globaltimer", "globaltimer_lo", "globaltimer_hi",
    *(f"pm{i}" for i in range(8)), *(f"pm{i}_64" for i in range(8)),
    "gridid", "current_graph_exec",
)  # fmt: skip
_SREG_RE = re.compile(
    r"%(" + "|".join(sorted(TIME_REGISTERS, key=len, reverse=True)) + r")(?![\w$])"
)
_IDENT = r"[A-Za-z_$][\w$]*"
_IDENT_RE = re.compile(rf"(?<![%\w$.]){_IDENT}")
_REG_RE = re.compile(r"%[A-Za-z_$][\w$]*")
_FUNC_RE = re.compile(rf"\.(entry|func)\s+(?:\([^)]*\)\s*)?({_IDENT})")
_GLOBAL_RE = re.compile(r"^(?:\.(?:visible|extern|weak|common)\s+)*\.global\s")
_LOC_RE = re.compile(r"^\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*\binlined_at\s+(\d+)\s+(\d+)\s+\d+)?")
_FILE_RE = re.compile(r'^\.file\s+(\d+)\s+"([^"]*)"')
_BRACKET_RE = re.compile(r"\[([^\]]*)\]")
_PRED_RE = re.compile(r"^@!?%[\w$]+\s+")

_X, _Y = "input x", "output y"


@dataclass(frozen=True)
class Finding:
    """One instruction that can carry state from one call to the next."""

    function: str  # the .entry or .func it is in
    what: str  # "reads %globaltimer", "atomically updates the module-scope variable calls", ...
    instruction: str  # the PTX statement
    ptx_line: int  # 1-based line of the PTX
    source: tuple[str, int] | None = None  # (file, line) from the PTX's line info

    def where(self) -> str:
        return f"{self.source[0]}:{self.source[1]}" if self.source else f"PTX line {self.ptx_line}"

    def line(self) -> str:
        """`FILE:LINE: FUNC what (`instruction`)`."""
        return f"{self.where()}: {self.function} {self.what} (`{self.instruction}`)"


@dataclass
class _Function:
    name: str
    kind: str  # entry | func
    params: list[str]
    body: list[tuple[int, str, tuple | None]]  # (PTX line, statement, its .loc)


def _statements(ptx: str):
    """(line number, part) for each `;`-separated statement, comments removed; braces and
    the `;` that ends a statement come out as parts of their own."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), ptx, flags=re.S)
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0]
        for part in re.split(r"([{};])", line):
            part = part.strip()
            if part:
                yield no, part


def _parse(ptx: str):
    """(functions by name, module-scope .global variable names, .file table)."""
    functions: dict[str, _Function] = {}
    variables: set[str] = set()
    files: dict[int, str] = {}
    depth = 0
    header: list[str] = []  # the statement parts of a function header at depth 0
    current: _Function | None = None
    loc: tuple[int, int, int | None, int | None] | None = None
    for no, part in _statements(ptx):
        if part == ";":
            if depth == 0:
                header = []  # a prototype without a body: `.extern .func vprintf(...);`
            continue
        if part == "{":
            if depth == 0 and header:
                m = _FUNC_RE.search(" ".join(header))
                if m:
                    params = re.findall(rf"\.param\s+[^,()]*?({_IDENT})\s*(?:\[\d*\])?\s*[,)]",
                                        " ".join(header) + ")")  # fmt: skip
                    current = _Function(m.group(2), m.group(1), params, [])
                    functions[current.name] = current
                header = []
            depth += 1
            continue
        if part == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                current = None
            continue
        if depth == 0:
            fm = _FILE_RE.match(part)
            if fm:
                files[int(fm.group(1))] = fm.group(2)
            elif _GLOBAL_RE.match(part):
                decl = part.split("=", 1)[0]
                decl = re.sub(r"\[[^\]]*\]", " ", decl).split()
                if decl:
                    variables.add(decl[-1])
            elif _FUNC_RE.search(part) or header:
                header.append(part)
            continue
        if current is None:
            continue
        lm = _LOC_RE.match(part)
        if lm:
            f, ln, fi, li = lm.groups()
            loc = (int(f), int(ln), int(fi) if fi else None, int(li) if li else None)
            continue
        if part.startswith(".") or part.endswith(":"):
            continue  # .reg/.shared/.local declarations, labels
        current.body.append((no, part, loc))
    return functions, variables, files


def _split(stmt: str) -> tuple[str, list[str]]:
    """(opcode, operands) of a statement, a guard predicate removed; operands split at commas
    outside braces."""
    op, _, rest = _PRED_RE.sub("", stmt).replace("\t", " ").partition(" ")
    operands, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            operands.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        operands.append(cur.strip())
    return op.strip(), operands


_WRITES = ("st", "atom", "red")
_NO_DEST = ("st", "red", "bar", "barrier", "bra", "call", "ret", "exit", "membar", "fence",
            "prefetch", "prefetchu", "trap", "brkpt", "nanosleep")  # fmt: skip


def _origins(text: str, taint: dict[str, frozenset], variables: set[str]) -> frozenset:
    out: set = set()
    for r in _REG_RE.findall(text):
        out |= taint.get(r, frozenset())
    for ident in _IDENT_RE.findall(text):
        if ident in variables:
            out.add(("var", ident))
    return frozenset(out)


def _taint(fn: _Function, variables: set[str]) -> dict[str, frozenset]:
    """For each register, the addresses it may hold: ("var", NAME), x or y (entry only)."""
    params = {}
    if fn.kind == "entry" and len(fn.params) >= 2:
        params = {fn.params[0]: _X, fn.params[1]: _Y}
    taint: dict[str, frozenset] = {}
    changed = True
    while changed:
        changed = False
        for _, stmt, _ in fn.body:
            op, ops = _split(stmt)
            base = op.split(".", 1)[0]
            if not ops or base in _NO_DEST or op.startswith(("cp.", "multimem.st", "multimem.red")):
                continue
            dests = _REG_RE.findall(ops[0])
            if base == "ld" and op.startswith("ld.param"):
                src = _BRACKET_RE.search(" ".join(ops[1:]))
                name = src.group(1).split("+")[0].strip() if src else ""
                new = frozenset({params[name]}) if name in params else frozenset()
                new |= _origins(" ".join(ops[1:]), taint, variables) - {("var", name)}
            elif base in ("ld", "atom", "ldu"):
                new = frozenset()  # a loaded value is data, not the address it came from
            else:
                new = _origins(" ".join(ops[1:]), taint, variables)
            for d in dests:
                merged = taint.get(d, frozenset()) | new
                if merged != taint.get(d, frozenset()):
                    taint[d] = merged
                    changed = True
    return taint


def _name(origin) -> str:
    return origin if isinstance(origin, str) else origin[1]


def _callee(body, i: int) -> str:
    """The function the call after statement `i` calls ("" for none)."""
    for _, stmt, _ in body[i + 1 :]:
        op, ops = _split(stmt)
        if op.startswith("call"):
            return next((o for o in ops if not o.startswith("(")), "")
    return ""


def _reaches_effect(body, start: int) -> bool:
    """Whether the value statement `start` computes (a time register's) can reach anything the
    function does: followed through every instruction that writes a register (a load from a
    derived address, a guarded instruction whose guard derives from it, included) to a
    store, an atomic or reduction, a copy, a call, a branch or any other instruction that
    writes no register. Flow-insensitive, like _taint: a register derived anywhere counts
    everywhere in the function."""
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for i, (_, stmt, _) in enumerate(body):
            guard = _PRED_RE.match(stmt)
            op, ops = _split(stmt)
            base = op.split(".", 1)[0]
            writes = base in _WRITES or op.startswith(("cp.", "multimem."))
            has_dest = bool(ops) and base not in _NO_DEST and not writes
            used = _REG_RE.findall(" ".join(ops[1:] if has_dest else ops))
            used += _REG_RE.findall(guard.group()) if guard else []
            if i != start and not derived.intersection(used):
                continue
            if not has_dest or base == "atom":
                return True
            new = set(_REG_RE.findall(ops[0])) - derived
            if new:
                derived |= new
                changed = True
    return False


def _scan_function(fn: _Function, variables: set[str], defined: set[str], where) -> list[Finding]:
    taint = _taint(fn, variables)
    found = []

    def add(what: str, no: int, stmt: str, loc) -> None:
        found.append(Finding(fn.name, what, " ".join(stmt.split()), no, where(loc)))

    for i, (no, stmt, loc) in enumerate(fn.body):
        if _SREG_RE.search(stmt) and _reaches_effect(fn.body, i):
            for reg in dict.fromkeys(_SREG_RE.findall(stmt)):
                add(f"reads %{reg}", no, stmt, loc)
        op, ops = _split(stmt)
        base = op.split(".", 1)[0]
        brackets = _BRACKET_RE.findall(stmt)
        if not brackets:
            continue
        atomic = base in ("atom", "red") or op.startswith("multimem.red")
        writes = base in _WRITES or op.startswith(("cp.", "multimem.st", "multimem.red"))
        if writes:
            dest = _origins(brackets[0], taint, variables)
            for o in sorted(dest, key=str):
                if o == _X:
                    add(f"{'atomically updates' if atomic else 'writes to'} its input x",
                        no, stmt, loc)  # fmt: skip
                elif o != _Y:
                    verb = "atomically updates" if atomic else "stores to"
                    add(f"{verb} the module-scope variable {_name(o)}", no, stmt, loc)
            # an address stored anywhere, or passed to a function of the module, can be
            # written through there; the runtime's own functions (vprintf, malloc,
            # __assertfail: declared, not defined, in the module) only read their arguments
            passed = op.startswith("st.param") and _callee(fn.body, i) not in defined
            if base == "st" and not passed:
                value = _origins(" ".join(ops[1:]), taint, variables)
                for o in sorted(value, key=str):
                    if isinstance(o, tuple):
                        add(f"stores the address of the module-scope variable {o[1]}",
                            no, stmt, loc)  # fmt: skip
        reads = []
        if base in ("ld", "ldu", "atom") and not op.startswith("ld.param"):
            reads = brackets[:1]
        elif op.startswith("cp.") and len(brackets) > 1:
            reads = brackets[1:2]
        for b in reads:
            if _Y in _origins(b, taint, variables):
                add("reads its output y", no, stmt, loc)
    return found


def scan(ptx: str, entry: str, source_path: str | None = None) -> list[Finding]:
    """Every finding (see the module docstring) in `.entry entry` and the functions it calls,
    in PTX order. `source_path`: the user's file, preferred over a header when a line is
    reported for inlined code."""
    functions, variables, files = _parse(ptx)
    if entry not in functions:
        return []

    def where(loc) -> tuple[str, int] | None:
        if loc is None:
            return None
        f, ln, fi, li = loc
        path = files.get(f)
        if source_path and fi and path != source_path and files.get(fi) == source_path:
            return (source_path, li)
        return (path, ln) if path is not None else None

    order, todo = [], [entry]
    while todo:
        name = todo.pop()
        if name in order:
            continue
        order.append(name)
        for _, stmt, _ in functions[name].body:
            todo += [i for i in _IDENT_RE.findall(stmt) if i in functions and i not in order]
    found = []
    for name in order:
        found += _scan_function(functions[name], variables, set(functions), where)
    return sorted(found, key=lambda f: f.ptx_line)
