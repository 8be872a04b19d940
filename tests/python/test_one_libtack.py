"""One libtack per process, and a libtack that loads however a host loads it.

The extension links the shared libtack the package carries (tack/lib,
under its SONAME), so a C program or plugin that links a libtack of that
SONAME and then imports tack has one copy of Tack: one device registry, one
worker pool, one set of counters. A second copy (another install's libtack
loaded by path, a plugin linked against libtack.a) loads beside it, since
libtack has no initial-exec thread-locals to exhaust glibc's static TLS
reserve, but refuses every call, naming both files: whichever copy was
loaded first is the process's Tack.

Every case builds C with the system compiler and runs in a child process.
"""

import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import tack

CC = os.environ.get("CC", "cc")
TIMEOUT = 240


def library_file():
    names = [n for n in os.listdir(tack.get_library_dir()) if n.startswith("libtack.so.")]
    assert len(names) == 1, names
    return pathlib.Path(tack.get_library_dir()) / names[0]


def python_embedding():
    """Compiler and linker flags to embed this Python; skips where it has no
    shared libpython."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython to embed")
    libdir = sysconfig.get_config_var("LIBDIR")
    return ([f"-I{sysconfig.get_paths()['include']}"],
            [f"-L{libdir}", f"-lpython{sysconfig.get_config_var('LDVERSION')}", f"-Wl,-rpath,{libdir}"])


def embedded_env(tmp_path, **extra):
    """The environment in which an embedded interpreter finds this venv's
    packages (tack, NumPy) as the running one does."""
    env = dict(os.environ)
    env["PYTHONHOME"] = sys.base_prefix
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(tack.__file__))] +
                                        [p for p in sys.path if p and os.path.isdir(p)])
    env["TACK_CACHE_DIR"] = str(tmp_path / "cache")
    # The programs end without finalizing Python, whose objects a leak
    # checker (a sanitized run preloads one) would report.
    env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    env.update(extra)
    return env


def compile_c(source, output, *flags):
    src = output.with_suffix(".c")
    src.write_text(textwrap.dedent(source))
    cmd = [CC, "-std=c11", "-D_GNU_SOURCE", "-O1", "-Wall", "-Werror", "-o", str(output), str(src), *flags]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except OSError as exc:
        pytest.skip(f"no C compiler ({CC}): {exc}")
    assert run.returncode == 0, f"{' '.join(cmd)}\n{run.stderr}"
    return output


def other_install(tmp_path):
    """A second libtack file of the same SONAME, as `make install-c` puts
    one in a prefix: dlopened by its path it is a second copy of Tack."""
    lib = tmp_path / "prefix" / "lib"
    lib.mkdir(parents=True)
    copy = lib / library_file().name
    shutil.copyfile(library_file(), copy)
    return copy


def run_child(args, env=None, cwd=None):
    run = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=cwd)
    return run.returncode, run.stdout + run.stderr


# --------------------------------------------------------------------------
# Loadable anywhere

DLOPEN_COPY = """
import ctypes, sys
{before}
lib = ctypes.CDLL(sys.argv[1])
lib.tack_last_error.restype = ctypes.c_char_p
out = ctypes.c_void_p()
status = lib.tack_device_open(b"cpu", None, ctypes.c_size_t(0), ctypes.byref(out))
print("copy's open:", status, lib.tack_last_error().decode())
{after}
import tack._tack
a = tack.zeros(1000, tack.f32)
a.fill(2)
assert list(memoryview(a).cast("B").cast("f"))[:2] == [2.0, 2.0]
print("tack works")
"""

TACK_ERUNTIME = 3
REFUSAL = "this is a second copy of Tack in the process"


def test_second_libtack_dlopened_after_tack_is_refused(tmp_path):
    """Another install's libtack, loaded by path after tack: a second copy,
    whose every call is refused with a message naming both files; the
    package's Tack goes on working."""
    copy = other_install(tmp_path)
    code = DLOPEN_COPY.format(before="import tack", after="")
    rc, out = run_child([sys.executable, "-c", code, str(copy)])
    assert rc == 0 and "tack works" in out, out
    assert f"copy's open: {TACK_ERUNTIME} tack_device_open: {REFUSAL}: {copy}, loaded after {library_file()}" \
        in out, out
    assert "Link or load one libtack only" in out and "python -m tack --libs" in out, out
    assert "static TLS" not in out, out


def test_libtack_dlopened_before_tack_is_the_one_tack_uses(tmp_path):
    """The same file loaded first: the extension binds to it by its SONAME,
    so there is one copy, and nothing is refused."""
    copy = other_install(tmp_path)
    code = DLOPEN_COPY.format(before="", after="import tack")
    rc, out = run_child([sys.executable, "-c", code, str(copy)])
    assert rc == 0 and "copy's open: 0 " in out and "tack works" in out, out
    assert REFUSAL not in out, out


def test_libtack_has_no_initial_exec_tls():
    # DF_STATIC_TLS marks a library that uses the initial-exec model: glibc
    # then reserves its whole TLS block from a small fixed pool at dlopen.
    run = subprocess.run(["readelf", "-dW", str(library_file())], capture_output=True, text=True)
    if run.returncode != 0:
        pytest.skip("no readelf")
    assert "STATIC_TLS" not in run.stdout, run.stdout


def test_long_non_ascii_name_is_value_error():
    # The message once lived in a 1,024-byte buffer that cut an é in two.
    name = "é" * 511
    with pytest.raises(ValueError) as info:
        tack.device(name)
    assert name in str(info.value)


PLUGIN = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <string.h>
#include <tack/tack.h>

/* An adaptor a simulation loads: it uses Tack from C and runs Python. */
static int c_side(void)
{
    tack_device *cpu = NULL;
    int64_t n = 1000;
    tack_array *a = NULL;
    if (tack_device_open("cpu", NULL, 0, &cpu) != TACK_OK ||
        tack_array_empty(cpu, TACK_F32, 1, &n, 0, &a) != TACK_OK) {
        fprintf(stderr, "C side: %s\n", tack_last_error());
        return 1;
    }
    float one = 1.0f;
    int bad = tack_array_fill(a, &one) != TACK_OK;
    tack_array_release(a);
    tack_device_release(cpu);
    return bad;
}

static int python_side(void)
{
    if (!Py_IsInitialized())
        Py_Initialize();
    return PyRun_SimpleString(
        "import tack\n"
        "a = tack.zeros(1000, tack.f32)\n"
        "a.fill(3)\n"
        "assert list(memoryview(a).cast('B').cast('f'))[:2] == [3.0, 3.0]\n");
}

int plugin_run(int python_first)
{
    int bad = python_first ? python_side() || c_side() : c_side() || python_side();
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096], seen[4096] = "";
    int copies = 0;
    while (maps && fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "/libtack.so") && !strstr(seen, path)) {
            copies++;
            strncat(seen, path, sizeof seen - strlen(seen) - 1);
        }
    }
    if (maps)
        fclose(maps);
    printf("libtack copies: %d\n", copies);
    return bad;
}
"""

HOST = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* A host that knows nothing of Tack or Python: it loads an adaptor. Global,
 * so that the extension modules the adaptor's Python imports find
 * libpython's symbols. */
int main(int argc, char **argv)
{
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!plugin) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*run)(int) = (int (*)(int))dlsym(plugin, "plugin_run");
    int rc = run(atoi(argv[2]));
    printf("plugin ran: %d\n", rc);
    fflush(stdout);
    _Exit(rc);
}
"""


@pytest.mark.parametrize("python_first", [0, 1], ids=["c_first", "python_first"])
def test_plugin_that_embeds_python(tmp_path, python_first):
    py_cflags, py_libs = python_embedding()
    copy = other_install(tmp_path)
    plugin = compile_c(PLUGIN, tmp_path / "adaptor.so", "-shared", "-fPIC", *py_cflags, f"-I{tack.get_include()}",
                       str(copy), f"-Wl,-rpath,{copy.parent}", *py_libs)
    host = compile_c(HOST, tmp_path / "host", "-ldl")
    rc, out = run_child([str(host), str(plugin), str(python_first)], env=embedded_env(tmp_path))
    assert rc == 0 and "plugin ran: 0" in out, out
    # The extension bound to the adaptor's libtack by its SONAME.
    assert "libtack copies: 1" in out, out


# --------------------------------------------------------------------------
# One libtack per process

EMBED = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <tack/tack.h>

#define TRY(call)                                                                 \
    do {                                                                          \
        if ((call) != TACK_OK) {                                                  \
            fprintf(stderr, "%s: %s\n", #call, tack_last_error());               \
            return 1;                                                             \
        }                                                                         \
    } while (0)

static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void libtack_mappings(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096], seen[8192] = "";
    while (maps && fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "/libtack.so") && !strstr(seen, path)) {
            strncat(seen, path, sizeof seen - strlen(seen) - 1);
            printf("libtack mapping: %s", path);
        }
    }
    if (maps)
        fclose(maps);
}

int main(void)
{
    /* The simulation: a field, a kernel over it on the worker pool. */
    tack_device *cpu = NULL;
    tack_array *field = NULL;
    tack_kernel *step = NULL;
    int64_t n = 1 << 16;
    TRY(tack_device_open("cpu", NULL, 0, &cpu));
    TRY(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &field));
    TRY(tack_kernel_compile("void step(tack_index i, float *u) { u[i] += 1; }", NULL, cpu, &step));
    tack_arg arg = tack_arg_array(field);
    TRY(tack_kernel_launch(step, cpu, n, &arg, 1));
    printf("threads after the C kernel: %d\n", threads());
    printf("C arrays alive: %ld\n", tack_array_live_count());

    /* The analysis: Python imports tack and runs a kernel of its own. */
    Py_Initialize();
    if (PyRun_SimpleString(
            "import tack, tack._tack\n"
            "print('arrays Python sees before making one:', dict(tack._tack.live_counts())['arrays'])\n"
            "k = tack.Kernel('void twice(tack_index i, float *u) { u[i] *= 2; }')\n"
            "u = tack.zeros(1 << 16, tack.f32)\n"
            "u.fill(1)\n"
            "k(u)\n"
            "assert list(memoryview(u).cast('B').cast('f'))[:2] == [2.0, 2.0]\n"
            "import sys; sys.stdout.flush()\n") != 0)
        return 1;
    printf("threads after Python's kernel: %d\n", threads());
    printf("C arrays alive with Python's: %ld\n", tack_array_live_count());
    libtack_mappings();
    fflush(stdout);
    return 0;
}
"""


@pytest.mark.parametrize("link", ["package", "other_install"])
def test_c_program_embedding_python_has_one_tack(tmp_path, link):
    """The issue's in-situ set-up: a C program linking libtack (the package's,
    or another install of the same SONAME) that embeds Python and imports
    tack. One libtack mapped; one pool of TACK_NUM_THREADS threads (8, not
    15); Python counts the C program's array among its own."""
    py_cflags, py_libs = python_embedding()
    lib = library_file() if link == "package" else other_install(tmp_path)
    exe = compile_c(EMBED, tmp_path / "sim", *py_cflags, f"-I{tack.get_include()}", str(lib),
                    f"-Wl,-rpath,{lib.parent}", *py_libs)
    env = embedded_env(tmp_path, TACK_NUM_THREADS="8", TACK_SERIAL_BELOW="0")
    rc, out = run_child([str(exe)], env=env)
    print(out)
    assert rc == 0, out
    mappings = re.findall(r"libtack mapping: (.*)", out)
    assert mappings == [str(lib)], out
    assert "threads after the C kernel: 8" in out, out
    assert "threads after Python's kernel: 8" in out, out
    assert "arrays Python sees before making one: 1" in out, out
    assert "C arrays alive with Python's: 2" in out, out


# --------------------------------------------------------------------------
# A second copy, refused

SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def static_libtack(tmp_path_factory):
    """libtack.a built from this source tree, as `make install-c` installs
    it: what a plugin author links to carry Tack inside the plugin."""
    # The venv's, where the suite runs without it on PATH.
    bindir = os.path.dirname(sys.executable)
    meson, ninja = (shutil.which(tool) or shutil.which(tool, path=bindir) for tool in ("meson", "ninja"))
    if not (meson and ninja and (SOURCE_ROOT / "meson.build").is_file()):
        pytest.skip("needs meson, ninja and the source tree to build libtack.a")
    build = tmp_path_factory.mktemp("static") / "build"
    for cmd in ([meson, "setup", str(build), str(SOURCE_ROOT), "-Dpython=false", "-Dtests=false",
                 "-Dbuildtype=release"], [ninja, "-C", str(build), "libtack.a"]):
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                             env={k: v for k, v in os.environ.items() if not k.startswith(("ASAN", "LD_PRELOAD"))})
        assert run.returncode == 0, f"{' '.join(cmd)}\n{run.stdout}\n{run.stderr}"
    return build / "libtack.a"


STATIC_PLUGIN = r"""
#include <stdio.h>
#include <tack/tack.h>

/* A plugin that carries Tack inside it (libtack.a, its symbols kept to
 * itself as plugins do): Tack from C, reporting the first failure. */
int plugin_call(char *message, size_t cap)
{
    tack_device *cpu = NULL;
    int64_t n = 16;
    tack_array *a = NULL;
    float one = 1.0f;
    tack_status st = tack_device_open("cpu", NULL, 0, &cpu);
    if (st == TACK_OK)
        st = tack_array_empty(cpu, TACK_F32, 1, &n, 0, &a);
    if (st == TACK_OK)
        st = tack_array_fill(a, &one);
    snprintf(message, cap, "%s", st == TACK_OK ? "" : tack_last_error());
    tack_array_release(a);
    tack_device_release(cpu);
    return (int)st;
}

/* A handle from the host handed to the plugin, which lets it go. */
void plugin_release(tack_array *a) { tack_array_release(a); }
"""


def static_plugin(tmp_path, libtack_a):
    return compile_c(STATIC_PLUGIN, tmp_path / "static_plugin.so", "-shared", "-fPIC", f"-I{tack.get_include()}",
                     str(libtack_a), "-Wl,--exclude-libs,ALL", "-pthread", "-ldl", "-lm")


PLUGIN_CALL = """
import ctypes
def plugin_call(path):
    lib = ctypes.CDLL(path)
    message = ctypes.create_string_buffer(4096)
    status = lib.plugin_call(message, ctypes.c_size_t(len(message)))
    print("plugin's call:", status, message.value.decode())
"""


def test_static_copy_loaded_after_tack_is_refused(tmp_path, static_libtack):
    """A plugin linked against libtack.a, loaded into a process that imported
    tack: its copy is the second, and refuses its calls, naming the plugin
    and the package's libtack; tack goes on working."""
    plugin = static_plugin(tmp_path, static_libtack)
    code = PLUGIN_CALL + textwrap.dedent("""
        import sys, tack
        plugin_call(sys.argv[1])
        a = tack.zeros(4, tack.f32)
        a.fill(5)
        assert list(memoryview(a).cast("B").cast("f")) == [5.0] * 4
        print("tack works")
    """)
    rc, out = run_child([sys.executable, "-c", code, str(plugin)])
    assert rc == 0 and "tack works" in out, out
    assert f"plugin's call: {TACK_ERUNTIME} tack_device_open: {REFUSAL}: {plugin}, loaded after {library_file()}" \
        in out, out
    assert "not against libtack.a or another install" in out, out
    # Said at load as well, for a plugin that does not read its statuses.
    assert f"tack: {REFUSAL}: {plugin}" in out, out


def test_tack_imported_after_a_static_copy_is_refused(tmp_path, static_libtack):
    """The other order: the plugin's copy came first and is the process's
    Tack; the package's libtack, loaded second by `import tack`, refuses,
    naming both."""
    plugin = static_plugin(tmp_path, static_libtack)
    code = PLUGIN_CALL + textwrap.dedent("""
        import sys
        plugin_call(sys.argv[1])
        try:
            import tack
            tack.zeros(4, tack.f32)
        except RuntimeError as exc:
            print("tack refused:", exc)
        else:
            print("tack was not refused")
    """)
    rc, out = run_child([sys.executable, "-c", code, str(plugin)])
    assert rc == 0 and "plugin's call: 0 " in out, out
    # Refused at the import: the extension's first call into its libtack.
    assert f"tack refused: tack_dtype_typestr: {REFUSAL}: {library_file()}, loaded after {plugin}" in out, out


HOST_LINKING_TACK = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <tack/tack.h>

/* A program that links Tack and loads a plugin that carries its own. */
int main(int argc, char **argv)
{
    (void)argc;
    tack_device *cpu = NULL;
    if (tack_device_open("cpu", NULL, 0, &cpu) != TACK_OK) {
        fprintf(stderr, "host: %s\n", tack_last_error());
        return 1;
    }
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*call)(char *, size_t) = (int (*)(char *, size_t))dlsym(plugin, "plugin_call");
    char message[4096];
    int status = call(message, sizeof message);
    printf("plugin's call: %d %s\n", status, message);
    int64_t n = 4;
    tack_array *a = NULL;
    tack_status st = tack_array_empty(cpu, TACK_F32, 1, &n, 0, &a);
    printf("host's call after: %s\n", tack_status_name(st));
    /* The plugin's copy, refused, leaves the host's handle alone. */
    void (*plugin_release)(tack_array *) = (void (*)(tack_array *))dlsym(plugin, "plugin_release");
    plugin_release(a);
    float two = 2.0f;
    st = tack_array_fill(a, &two);
    printf("host's array after the plugin's release: %s, %ld alive\n", tack_status_name(st),
           tack_array_live_count());
    tack_array_release(a);
    tack_device_release(cpu);
    return 0;
}
"""


def test_c_program_loading_a_plugin_with_its_own_tack(tmp_path, static_libtack):
    plugin = static_plugin(tmp_path, static_libtack)
    host = compile_c(HOST_LINKING_TACK, tmp_path / "host", f"-I{tack.get_include()}", str(library_file()),
                     f"-Wl,-rpath,{library_file().parent}", "-ldl")
    rc, out = run_child([str(host), str(plugin)])
    assert rc == 0, out
    assert f"plugin's call: {TACK_ERUNTIME} tack_device_open: {REFUSAL}: {plugin}, loaded after {library_file()}" \
        in out, out
    assert "host's call after: TACK_OK" in out, out
    assert "host's array after the plugin's release: TACK_OK, 1 alive" in out, out


def test_static_program_loading_a_plugin_linking_the_shared_libtack(tmp_path, static_libtack):
    """The copy in the executable is the first: the shared libtack a plugin
    brings is the second, refused."""
    plugin_src = STATIC_PLUGIN.replace("libtack.a, its symbols kept to\n * itself as plugins do", "the package's")
    plugin = compile_c(plugin_src, tmp_path / "shared_plugin.so", "-shared", "-fPIC", f"-I{tack.get_include()}",
                       str(library_file()), f"-Wl,-rpath,{library_file().parent}")
    host = compile_c(HOST_LINKING_TACK, tmp_path / "static_host", f"-I{tack.get_include()}", str(static_libtack),
                     "-pthread", "-ldl", "-lm")
    rc, out = run_child([str(host), str(plugin)])
    assert rc == 0, out
    assert f"plugin's call: {TACK_ERUNTIME} tack_device_open: {REFUSAL}: {library_file()}, loaded after {host}" \
        in out, out
    assert "host's call after: TACK_OK" in out, out


def test_one_copy_is_never_refused_in_a_fork_child(tmp_path):
    code = textwrap.dedent("""
        import os, tack
        tack.zeros(4, tack.f32).fill(1)
        pid = os.fork()
        if pid == 0:
            a = tack.zeros(4, tack.f32)
            a.fill(3)
            os._exit(0 if list(memoryview(a).cast("B").cast("f")) == [3.0] * 4 else 1)
        _, status = os.waitpid(pid, 0)
        print("child:", os.waitstatus_to_exitcode(status))
    """)
    rc, out = run_child([sys.executable, "-c", code])
    assert rc == 0 and "child: 0" in out, out
    assert REFUSAL not in out, out


def test_build_flags_from_python(tmp_path):
    """python -m tack --cflags --libs builds a C program against the
    package's libtack; --cmake-dir holds the CMake package; the headers,
    tack.pc and the library are where tack.get_include() and
    tack.get_library_dir() say."""
    include, libdir = pathlib.Path(tack.get_include()), pathlib.Path(tack.get_library_dir())
    headers = pathlib.Path(__file__).resolve().parents[2] / "include" / "tack"
    for header in headers.glob("*.h"):
        assert (include / "tack" / header.name).read_bytes() == header.read_bytes(), header.name
    assert (libdir / "pkgconfig" / "tack.pc").is_file()

    def flags(*options):
        run = subprocess.run([sys.executable, "-m", "tack", *options], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        return run.stdout.split()

    assert flags("--cflags") == [f"-I{include}"]
    cmake_dir = pathlib.Path(flags("--cmake-dir")[0])
    assert (cmake_dir / "TackConfig.cmake").is_file() and (cmake_dir / "TackConfigVersion.cmake").is_file()
    source = textwrap.dedent("""
        #include <stdio.h>
        #include <tack/tack.h>
        int main(void) { printf("%s\\n", tack_status_name(TACK_EVALUE)); return 0; }
    """)
    exe = compile_c(source, tmp_path / "prog", *flags("--cflags"), *flags("--libs"))
    rc, out = run_child([str(exe)])
    assert rc == 0 and out.strip() == "TACK_EVALUE", out
    run = subprocess.run([sys.executable, "-m", "tack", "--no-such-option"], capture_output=True, text=True)
    assert run.returncode == 2 and "--cflags" in run.stderr


def test_pkg_config_and_cmake_of_the_package(tmp_path):
    pkg = pathlib.Path(tack.get_library_dir()) / "pkgconfig"
    if shutil.which("pkg-config"):
        run = subprocess.run(["pkg-config", "--cflags", "--libs", "tack"], capture_output=True, text=True,
                             env=dict(os.environ, PKG_CONFIG_PATH=str(pkg)))
        assert run.returncode == 0, run.stderr
        words = run.stdout.split()
        includes = [os.path.realpath(w[2:]) for w in words if w.startswith("-I")]
        assert includes == [os.path.realpath(tack.get_include())], words
        assert any(os.path.realpath(w) == os.path.realpath(library_file()) for w in words), words
    if not shutil.which("cmake"):
        return
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "CMakeLists.txt").write_text(textwrap.dedent("""
        cmake_minimum_required(VERSION 3.16)
        project(uses_tack C)
        find_package(Tack 0.1 REQUIRED)
        get_target_property(loc Tack::tack IMPORTED_LOCATION)
        get_target_property(inc Tack::tack INTERFACE_INCLUDE_DIRECTORIES)
        message(STATUS "tack library: ${loc}")
        message(STATUS "tack include: ${inc}")
    """))
    run = subprocess.run(["cmake", "-S", str(tmp_path / "src"), "-B", str(tmp_path / "build"),
                          f"-DCMAKE_PREFIX_PATH={pkg.parent / 'cmake' / 'Tack'}"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert run.returncode == 0, run.stdout + run.stderr
    loc = re.search(r"tack library: (.*)", run.stdout).group(1)
    inc = re.search(r"tack include: (.*)", run.stdout).group(1)
    assert os.path.realpath(loc) == os.path.realpath(library_file())
    assert os.path.realpath(inc) == os.path.realpath(tack.get_include())


def test_extension_binds_to_libtack_by_soname():
    run = subprocess.run(["readelf", "-dW", tack._tack.__file__], capture_output=True, text=True)
    if run.returncode != 0:
        pytest.skip("no readelf")
    assert f"[{library_file().name}]" in run.stdout and "(NEEDED)" in run.stdout, run.stdout
    assert "[$ORIGIN/lib]" in run.stdout, run.stdout
