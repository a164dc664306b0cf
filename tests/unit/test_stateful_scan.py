"""Kernels whose work can depend on time or on earlier calls, found in their PTX on the CPU:
refused by default in one line that names the kernel, the instruction and its source line,
timed with --allow-stateful, recorded in the manifest; honest kernels pass. NVRTC compiles the
kernels written here (no GPU); the scanner's own rules are also pinned on hand-written PTX."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sweeper_kernels import external as ex
from sweeper_kernels.errors import KernelError
from sweeper_kernels.scan import TIME_REGISTERS, scan
from typer.testing import CliRunner

from sweeper import api
from sweeper.cli import app
from sweeper.plan.gpus import lookup
from sweeper.run.external import kernels_from_manifest
from sweeper.run.replay import ModelExecutor

ROOT = Path(__file__).resolve().parents[2]
L2 = lookup("h200").l2_bytes
SIG = 'extern "C" __global__ void k_fp32(const float* __restrict__ x, float* __restrict__ y,\n'
SIG += "                                  unsigned long long n)"
LOOP = (
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += (unsigned long long)gridDim.x * blockDim.x)\n"
)

# The kernel of the issue: it reads the GPU clock and keeps a call counter in a device global,
# and skips one call in four when the call starts within 2 us (at 1.98 GHz) of the previous
# one ending: inside back-to-back graph replay (hot mode), never after a pause.
CHEAT = f"""__device__ long long last_end;
__device__ unsigned int calls;

{SIG} {{
  __shared__ int skip;
  if (threadIdx.x == 0) {{
    long long start = clock64();  // <- the first finding
    unsigned int call = atomicAdd(&calls, 1u) / gridDim.x;  // <- atomic
    skip = start - last_end < 3960 && call % 4 == 3;
  }}
  __syncthreads();
  if (!skip)
{LOOP}      y[i] = x[i] > 0.f ? x[i] : 0.f;
  __syncthreads();
  if (threadIdx.x == 0) last_end = clock64();  // <- store
}}
"""

STATEFUL = {
    "cheat": (CHEAT, "reads %clock64", r"mov\.u64 %rd\d+, %clock64"),
    "globaltimer": (
        f"""{SIG} {{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));  // <- the first finding
{LOOP}    y[i] = x[i] > 0.f ? x[i] : (t == 1 ? 1.f : 0.f);
}}
""",
        "reads %globaltimer",
        r"mov\.u64 %rd\d+, %globaltimer",
    ),
    "atomic_counter": (
        f"""__device__ unsigned int counter;

{SIG} {{
  if (threadIdx.x == 0) atomicAdd(&counter, 1u);  // <- the first finding
{LOOP}    y[i] = x[i] > 0.f ? x[i] : 0.f;
}}
""",
        "atomically updates the module-scope variable counter",
        r"red\.global\.add\.u32 \[counter\], 1|atom\.global\.add\.u32 %r\d+, \[%rd\d+\], 1",
    ),
    "device_array": (
        f"""__device__ float history[256];

{SIG} {{
{LOOP}    y[i] = x[i] > 0.f ? x[i] : 0.f;
  if (threadIdx.x == 0) history[blockIdx.x % 256] = x[0];  // <- the first finding
}}
""",
        "stores to the module-scope variable history",
        r"st\.global\.f32 \[%rd\d+\], %f\d+",
    ),
    "writes_input": (
        f"""{SIG} {{
{LOOP}    {{ y[i] = x[i] > 0.f ? x[i] : 0.f; const_cast<float*>(x)[i] = 0.f; }}  // <- the first finding
}}
""",
        "writes to its input x",
        r"st\.global\.(f32|u32|b32) \[%rd\d+\], \S+",
    ),
    "reads_output": (
        f"""{SIG} {{
{LOOP}    {{ float v = x[i] > 0.f ? x[i] : 0.f; if (y[i] != v) y[i] = v; }}  // <- the first finding
}}
""",
        "reads its output y",
        r"ld\.global\.f32 %f\d+, \[%rd\d+\]",
    ),
}

HONEST = {
    # a __constant__, a read-only __device__ table, a shared-memory atomic, a printf that
    # never runs, __launch_bounds__: nothing survives from one call to the next
    "tables": f"""__constant__ float zero_c = 0.f;
__device__ float table[4] = {{0.f, 0.f, 0.f, 0.f}};

extern "C" __global__ void __launch_bounds__(256) k_fp32(const float* __restrict__ x,
    float* __restrict__ y, unsigned long long n) {{
  __shared__ unsigned int arrived;
  if (threadIdx.x == 0) arrived = 0;
  __syncthreads();
  atomicAdd(&arrived, 1u);
  if (n == 3 && arrived == 7) printf("n %llu\\n", n);
{LOOP}    y[i] = x[i] > zero_c ? x[i] : table[i & 3];
}}
""",
    # a timer read and never used (asm volatile: the compiler keeps the read)
    "unused_timer": f"""{SIG} {{
  long long t0 = clock64();
{LOOP}    y[i] = x[i] > 0.f ? x[i] : 0.f;
  long long t1 = clock64();
  (void)(t1 - t0);
}}
""",
    # a clock read in another kernel of the file: the scan reads only k_fp32 and what it calls
    "clock_elsewhere": f"""{SIG} {{
{LOOP}    y[i] = x[i] > 0.f ? x[i] : 0.f;
}}

extern "C" __global__ void timing_probe(long long* out) {{ *out = clock64(); }}
""",
}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("SWEEPER_CACHE", str(path))
    return path


def _write(tmp_path: Path, source: str, name: str = "k.cu") -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


def _marked_line(source: str) -> int:
    """The 1-based line of the source marked `// <- the first finding`."""
    (line,) = [i for i, t in enumerate(source.splitlines(), 1) if "<- the first finding" in t]
    return line


def _files(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for r in roots if r.exists() for p in sorted(r.rglob("*"))
            if p.is_file()}  # fmt: skip


# ---- each stateful kernel refused with its reason; accepted with allow_stateful --------------


@pytest.mark.parametrize("case", sorted(STATEFUL))
def test_a_stateful_kernel_is_refused_naming_kernel_instruction_and_line(case, tmp_path, cache):
    source, what, instruction = STATEFUL[case]
    path = _write(tmp_path, source)
    with pytest.raises(KernelError) as e:
        ex.check(ex.load_kernel(f"{path}:k"), ["fp32"])
    line = str(e.value)
    assert "\n" not in line
    m = re.match(rf"^{re.escape(str(path))}:(\d+): k_fp32 {re.escape(what)} \(`(.*?)`\)", line)
    assert m, line
    assert int(m[1]) == _marked_line(source), line
    assert re.fullmatch(instruction, m[2]), m[2]
    assert line.endswith(ex.STATEFUL_HINT)
    assert not (cache / "kernels" / "external").exists() or not any(
        (cache / "kernels" / "external").glob("k_fp32_*.ptx")
    )  # a refused kernel leaves no cache entry

    allowed = ex.load_kernel(f"{path}:k", allow_stateful=True)
    ex.check(allowed, ["fp32"])  # accepted
    record = allowed.describe()
    assert record["allow_stateful"] is True and record["scan"]["scanned"] == ["fp32"]
    assert record["scan"]["findings"][0] == line.split(": " + ex.STATEFUL_HINT)[0].split(" and ")[0]


def test_the_cheat_of_the_issue_is_found_for_all_it_does(tmp_path):
    path = _write(tmp_path, CHEAT)
    k = ex.load_kernel(f"{path}:k", allow_stateful=True)
    found = scan(ex.ptx(k, "fp32"), "k_fp32", str(path))
    lines = CHEAT.splitlines()
    got = {(f.what, lines[f.source[1] - 1].split("//")[-1].strip()) for f in found}
    assert got == {
        ("reads %clock64", "<- the first finding"),
        ("atomically updates the module-scope variable calls", "<- atomic"),
        ("reads %clock64", "<- store"),
        ("stores to the module-scope variable last_end", "<- store"),
    }, got
    with pytest.raises(KernelError, match=r": k_fp32 reads %clock64 \(.*\) and 3 more: "):
        ex.check(ex.load_kernel(f"{path}:k"), ["fp32"])


def test_ptx_read_back_from_the_cache_is_scanned_again(tmp_path):
    """An allowed run fills the cache; a later run without the opt-in is still refused."""
    path = _write(tmp_path, STATEFUL["globaltimer"][0])
    ex.check(ex.load_kernel(f"{path}:k", allow_stateful=True), ["fp32"])
    assert any((tmp_path / "cache" / "kernels" / "external").glob("k_fp32_*.ptx"))
    with pytest.raises(KernelError, match=r"reads %globaltimer"):
        ex.check(ex.load_kernel(f"{path}:k"), ["fp32"])


# ---- honest kernels pass ---------------------------------------------------------------------


@pytest.mark.parametrize("example", ["relu_v2", "relu_vec"])
def test_the_examples_are_not_refused(example):
    k = ex.load_kernel(f"{ROOT / 'examples' / example}.cu:{example}")
    dtypes = ["fp32", "fp16", "bf16", "int8"]
    ex.check(k, dtypes)
    for d in dtypes:
        assert scan(ex.ptx(k, d), f"{example}_{d}", k.path) == []
    assert k.describe()["scan"] == {"scanned": dtypes, "findings": []}
    assert k.describe()["allow_stateful"] is False


@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_kernels_with_constants_tables_and_shared_atomics_are_not_refused(case, tmp_path):
    path = _write(tmp_path, HONEST[case])
    k = ex.load_kernel(f"{path}:k")
    ex.check(k, ["fp32"])
    text = ex.ptx(k, "fp32")
    assert scan(text, "k_fp32", str(path)) == []
    if case == "unused_timer":  # the reads are in the PTX, and reach nothing
        assert text.count("%clock64") == 2


def test_the_clock_in_another_kernel_of_the_file_is_found_in_that_kernel(tmp_path):
    """The scan is per kernel: the probe beside an honest kernel is still a finding of its own."""
    path = _write(tmp_path, HONEST["clock_elsewhere"])
    text = ex.ptx(ex.load_kernel(f"{path}:k"), "fp32")
    (f,) = scan(text, "timing_probe", str(path))
    assert f.what == "reads %clock64" and f.function == "timing_probe"


# ---- the CLI: one line, non-zero exit, nothing written ---------------------------------------


@pytest.mark.parametrize("command", ["audit", "run --kernel", "run --baseline", "kernels check"])
def test_the_cli_refuses_a_stateful_kernel_in_one_line_and_writes_nothing(command, tmp_path):
    path = _write(tmp_path, CHEAT)
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    before = _files(tmp_path)
    spec = f"{path}:k"
    args = {
        "audit": ["audit", spec, "--plan", str(plan.path)],
        "run --kernel": ["run", str(plan.path), "--kernel", spec],
        "run --baseline": ["run", str(plan.path), "--baseline", spec],
        "kernels check": ["kernels", "check", spec, "--dtypes", "fp32"],
    }[command]
    if command != "kernels check":
        args += ["--dtypes", "fp32", "--root", str(tmp_path / "res")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].startswith(
        f"error: {path}:{_marked_line(CHEAT)}: k_fp32 reads %clock64 (`mov.u64 "
    ), lines[0]
    assert "--allow-stateful" in lines[0]
    assert _files(tmp_path) == before  # no run folder, no cache entry, nothing changed
    assert not (tmp_path / "res").exists()


def test_kernels_check_accepts_a_stateful_kernel_with_the_opt_in(tmp_path):
    path = _write(tmp_path, CHEAT)
    res = CliRunner().invoke(
        app, ["kernels", "check", f"{path}:k", "--dtypes", "fp32", "--allow-stateful"]
    )
    assert res.exit_code == 0, res.output
    assert res.output.strip() == "ext-k-b256-stride1: k_fp32 compile for sm_90"


@pytest.mark.no_gpu
@pytest.mark.parametrize("command", ["audit", "run --kernel", "run --baseline"])
def test_with_the_opt_in_a_stateful_kernel_gets_to_the_gpu(command, tmp_path):
    path = _write(tmp_path, CHEAT)
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    spec = f"{path}:k"
    args = {
        "audit": ["audit", spec, "--plan", str(plan.path)],
        "run --kernel": ["run", str(plan.path), "--kernel", spec],
        "run --baseline": ["run", str(plan.path), "--baseline", spec],
    }[command]
    res = CliRunner().invoke(
        app, [*args, "--dtypes", "fp32", "--root", str(tmp_path / "res"), "--allow-stateful"]
    )
    assert res.exit_code == 1
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no usable CUDA driver"), res.output
    assert not (tmp_path / "res").exists()


# ---- the manifest records the scan -----------------------------------------------------------


class ModelRunningKernel(ModelExecutor):
    """A model GPU whose candidates are the user's kernel's variants, described as
    GpuExecutor describes them."""

    def __init__(self, kernel, **kw):
        super().__init__({kernel.config: lambda ws, l2: 5000.0}, **kw)
        self.kernel = kernel

    def describe(self) -> dict:
        doc = super().describe()
        doc["device"]["sm_count"] = 132
        doc["device"]["max_threads_per_sm"] = 2048
        return {**doc, "external": [self.kernel.describe()], "kernel_source": "f" * 64}

    def variants(self, grid, dtype):
        return [self.kernel.variant(dtype)]


@pytest.mark.parametrize("allow", [False, True])
def test_the_manifest_records_what_was_scanned_and_what_was_allowed(allow, tmp_path):
    source = CHEAT if allow else HONEST["tables"]
    path = _write(tmp_path, source)
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    k = ex.load_kernel(f"{path}:k", allow_stateful=allow)
    model = ModelRunningKernel(k, l2_bytes=L2, baseline=lambda ws, l2: 5000.0,
                               copy=lambda ws, l2: 5500.0, noise=0.0)  # fmt: skip
    run_dir, _ = api.audit(f"{path}:k", str(plan.path), executor=model, policy="none",
                           out_root=str(tmp_path / "res"), run_id="a", sizes="4:5",
                           allow_stateful=allow)  # fmt: skip
    (doc,) = json.loads((run_dir / "manifest.json").read_text())["external"]
    assert doc["allow_stateful"] is allow
    assert doc["scan"]["scanned"] == ["fp32"]
    if allow:
        assert len(doc["scan"]["findings"]) == 4
        assert doc["scan"]["findings"][0].startswith(f"{path}:{_marked_line(CHEAT)}: k_fp32 ")
    else:
        assert doc["scan"]["findings"] == []
    # a resumed run takes the opt-in from the manifest (or from its own --allow-stateful)
    man = {"external": [doc]}
    assert kernels_from_manifest(man)[0][0].allow_stateful is allow
    assert kernels_from_manifest(man, allow_stateful=True)[0][0].allow_stateful is True


# ---- the scanner's rules on hand-written PTX -------------------------------------------------

PTX = """
.version 8.0
.target sm_90
.address_size 64

.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.global .align 4 .u32 flag;
.global .align 1 .b8 $str[3] = {104, 105, 0};
.const .align 4 .u32 limit = 7;

.func helper(
	.param .b64 helper_param_0
)
{
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [helper_param_0];
	st.u32 [%rd1], 1;
	ret;
}

.visible .entry passes(
	.param .u64 passes_param_0,
	.param .u64 passes_param_1,
	.param .u64 passes_param_2
)
{
	.reg .b64 %rd<9>;
	.reg .b32 %r<4>;
	mov.u64 %rd1, flag;
	add.s64 %rd2, %rd1, 0;
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 [param0+0], %rd2;
	call.uni helper, (param0);
	}
	ret;
}

.visible .entry prints(
	.param .u64 prints_param_0,
	.param .u64 prints_param_1,
	.param .u64 prints_param_2
)
{
	.reg .b64 %rd<9>;
	.reg .b32 %r<4>;
	ld.const.u32 %r1, [limit];
	ld.global.u32 %r2, [flag];
	mov.u64 %rd1, $str;
	cvta.global.u64 %rd2, %rd1;
	{ // callseq 1, 0
	.param .b64 param0;
	st.param.b64 [param0+0], %rd2;
	.param .b64 param1;
	st.param.b64 [param1+0], 0;
	.param .b32 retval0;
	call.uni (retval0), vprintf, (param0, param1);
	}
	ret;
}

.visible .entry loops(
	.param .u64 loops_param_0,
	.param .u64 loops_param_1,
	.param .u64 loops_param_2
)
{
	.reg .pred %p<3>;
	.reg .b64 %rd<9>;
	.reg .b32 %r<4>;
$L__BB2_1:
	@%p1 st.global.u32 [%rd5], %r1;
	mov.u32 %r2, %current_graph_exec; mov.u32 %r3, %pm3;
	add.u32 %r1, %r2, %r3;
	mov.u64 %rd4, flag;
	cvta.global.u64 %rd5, %rd4;
	@%p2 bra $L__BB2_1;
	ret;
}
"""


def test_an_address_passed_to_a_function_of_the_module_is_a_finding_but_not_to_vprintf():
    (f,) = scan(PTX, "passes")
    assert f.what == "stores the address of the module-scope variable flag"
    assert f.instruction == "st.param.b64 [param0+0], %rd2" and f.source is None
    assert f.line() == f"PTX line {f.ptx_line}: passes {f.what} (`{f.instruction}`)"
    assert PTX.splitlines()[f.ptx_line - 1].strip() == "st.param.b64 [param0+0], %rd2;"
    # reads of a .global and a .const variable, and a string passed to vprintf: nothing
    assert scan(PTX, "prints") == []


def test_an_address_computed_after_its_store_in_a_loop_and_two_statements_on_a_line():
    found = scan(PTX, "loops")
    assert [f.what for f in found] == [
        "stores to the module-scope variable flag",
        "reads %current_graph_exec",
        "reads %pm3",
    ]
    assert found[1].ptx_line == found[2].ptx_line


def _entry(body: str) -> str:
    return f".visible .entry e(\n\t.param .u64 e_param_0\n)\n{{\n{body}\n\tret;\n}}\n"


def test_every_time_register_is_a_finding_and_other_special_registers_are_not():
    # each value stored (to the output, through the first parameter)
    body = "\tld.param.u64 %rd100, [e_param_0];\n"
    body += "\n".join(f"\tmov.u64 %rd{i}, %{r};\n\tst.global.u64 [%rd100], %rd{i};"
                      for i, r in enumerate(TIME_REGISTERS))  # fmt: skip
    body += "\n\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %smid;\n\tmov.u32 %r3, %nctaid.x;"
    body += "\n\tst.global.u32 [%rd100], %r1;\n\tst.global.u32 [%rd100], %r2;"
    text = _entry(body)
    assert [f.what for f in scan(text, "e")] == [f"reads %{r}" for r in TIME_REGISTERS]
    assert scan(text, "absent") == []


# what a clock's value reaches, each through a chain of registers: a finding
EFFECTS = {
    "a store's value": "add.s64 %rd3, %rd2, 1;\n\tst.global.u64 [%rd1], %rd3;",
    "a store's address": "cvt.u32.u64 %r1, %rd2;\n\tmul.wide.u32 %rd3, %r1, 4;\n"
    "\tadd.s64 %rd4, %rd1, %rd3;\n\tst.global.u32 [%rd4], 0;",
    "a branch": "setp.lt.s64 %p1, %rd2, 100;\n\t@%p1 bra $L__done;\n"
    "\tst.global.u32 [%rd1], 0;\n$L__done:",
    "an early return": "setp.lt.s64 %p1, %rd2, 100;\n\t@%p1 ret;\n\tst.global.u32 [%rd1], 0;",
    "a guarded store": "setp.lt.s64 %p1, %rd2, 100;\n\t@%p1 st.global.u32 [%rd1], 0;",
    "a select then a store": "setp.lt.s64 %p1, %rd2, 100;\n\tselp.u32 %r1, 1, 0, %p1;\n"
    "\tst.global.u32 [%rd1], %r1;",
    "a load's address then a store": "and.b64 %rd3, %rd2, 1020;\n\tadd.s64 %rd4, %rd1, %rd3;\n"
    "\tld.global.u32 %r1, [%rd4];\n\tst.global.u32 [%rd1], %r1;",
    "an atomic": "cvt.u32.u64 %r1, %rd2;\n\tatom.global.add.u32 %r2, [%rd1], %r1;",
    "a call's parameter": "{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd2;\n"
    "\tcall.uni helper, (param0);\n\t}",
}


@pytest.mark.parametrize("effect", sorted(EFFECTS))
def test_a_clock_whose_value_reaches_what_the_kernel_does_is_a_finding(effect):
    body = "\tld.param.u64 %rd1, [e_param_0];\n\tmov.u64 %rd2, %globaltimer;\n\t"
    text = ".extern .func helper(.param .b64 helper_param_0);\n" + _entry(body + EFFECTS[effect])
    (f,) = scan(text, "e")
    assert f.what == "reads %globaltimer" and f.instruction == "mov.u64 %rd2, %globaltimer"


def test_a_clock_whose_value_reaches_nothing_is_not_a_finding():
    """A timer left in: read, even computed on, but nothing the kernel does depends on it."""
    body = (
        "\tld.param.u64 %rd1, [e_param_0];\n\tmov.u64 %rd2, %clock64;\n"
        "\tadd.s64 %rd3, %rd2, 7;\n\tsetp.lt.s64 %p1, %rd3, 100;\n"
        "\tmov.u64 %rd4, %globaltimer;\n\tst.global.u32 [%rd1], 0;"
    )
    assert scan(_entry(body), "e") == []
    # the same register read again where it is stored: that read is the finding, not the first
    stored = body + "\n\tmov.u32 %r1, %clock;\n\tst.global.u32 [%rd1], %r1;"
    assert [f.what for f in scan(_entry(stored), "e")] == ["reads %clock"]
