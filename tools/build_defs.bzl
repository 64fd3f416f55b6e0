"""ge2 build macros. Load from any BUILD file:

    load("//tools:build_defs.bzl", "ge2_c_library", "ge2_c_binary", "ge2_c_test",
         "ge2_gpu_test", "ge2_cuda_library")

Why macros: every C target must get the same dialect and warning flags
(-std=c11 -Wall -Wextra -Werror), and tests/binaries must link the same way
(statically against ge2's own libraries, so a binary copied out of bazel-bin for
the GPU machine needs only system libraries). Keeping that here keeps module
BUILD files short and uniform.

Includes: the workspace root is the include root ("graph/ir.h",
"graph/ir.h"); the public API is "ge2/ge2.h" through //include:ge2.
"""

load("@cuda//:cuda_config.bzl", "NVCC")

GE2_VERSION = "0.1.0"

# C flags for every ge2 C target. -O2 even in Bazel's default fastbuild mode:
# the CPU backend and trainer are too slow at -O0 to be useful.
GE2_COPTS = [
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-D_GNU_SOURCE",
    "-O2",
    # A node's attributes are bytes each op family reads and writes as its
    # own struct (graph/ir.h: GE2_ATTRS): accesses the type-based alias
    # analysis would reorder against a copy of the node.
    "-fno-strict-aliasing",
]

# nvcc flags: one real architecture (Hopper, sm_90), plus its PTX so newer
# GPUs JIT it (GE2_NVCC_PTX_OPTS, left out under --define=ge2_cuda_ptx=0, the
# build tools/stage_gpu.sh stages for the sm_90 GPU machine: PTX is ~30% of
# every binary's fatbin). One gencode keeps cold CI builds fast; add more
# only when needed.
GE2_NVCC_OPTS = [
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-O3",
    "-std=c++17",
    "-Xcompiler",
    "-fPIC",
    "-Xcompiler",
    "-fno-strict-aliasing",  # as GE2_COPTS: the host code reads nodes' attributes too
    "--expt-relaxed-constexpr",
    # Source lines in the cubin, so Nsight Compute's source page maps stalls
    # and instruction counts to CUDA lines; no effect on the code.
    "-lineinfo",
    # Smallest fatbins (about a third of the default): every staged GPU binary
    # embeds all kernels, and the staged folder must stay under 50 MiB.
    # Needs a CUDA 12.8+ driver to load, which sm_90 + CUDA 13 implies.
    "-compress-mode=size",
]

GE2_NVCC_PTX_OPTS = [
    "-gencode",
    "arch=compute_90,code=compute_90",
]

def ge2_c_library(name, srcs = [], hdrs = [], deps = [], copts = [], **kwargs):
    """cc_library with ge2's C flags. Extra kwargs go to cc_library."""
    native.cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        copts = GE2_COPTS + copts,
        **kwargs
    )

def ge2_c_binary(name, srcs = [], deps = [], copts = [], **kwargs):
    """cc_binary with ge2's C flags, linked statically against ge2 libraries."""
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps,
        copts = GE2_COPTS + copts,
        linkstatic = kwargs.pop("linkstatic", True),
        **kwargs
    )

def ge2_c_test(name, srcs = [], deps = [], copts = [], size = "small", tags = [], **kwargs):
    """cc_test for a Check suite: ge2's C flags, //third_party:check linked in.

    size: "small" (< 60 s) by default; use "medium" for gradient checks or
    anything slower. linkstatic so the binary is self-contained (GPU staging
    copies test binaries out of bazel-bin).
    """
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps + [d for d in ["//third_party:check"] if d not in deps],
        copts = GE2_COPTS + copts,
        linkstatic = kwargs.pop("linkstatic", True),
        size = size,
        tags = tags,
        **kwargs
    )

def ge2_gpu_test(name, tags = [], **kwargs):
    """ge2_c_test tagged "gpu": always built, run only with --config=gpu.

    `bazel test //...` skips it (.bazelrc: --test_tag_filters=-gpu);
    tools/stage_gpu.sh stages every test tagged gpu for the GPU machine.
    Rule for the suite: no CUDA call in main()/the parent process (Check forks
    each test, and a forked child cannot use its parent's CUDA context); probe
    for a device with //tests:gpu_probe.
    """
    ge2_c_test(name = name, tags = tags + ["gpu"], **kwargs)

def _nvcc_objects_impl(ctx):
    cc_infos = [d[CcInfo] for d in ctx.attr.deps if CcInfo in d]
    cctx = cc_common.merge_cc_infos(cc_infos = cc_infos).compilation_context

    # Include root: the execroot (".") for sources, and bin/ for generated
    # headers; then whatever include dirs and defines the deps export.
    args = list(GE2_NVCC_OPTS) + ctx.attr.nvcc_opts + [
        "-I.",
        "-I" + ctx.bin_dir.path,
        # Intermediates beside the object, not in /tmp: inside linux-sandbox
        # every nvcc is PID 2 of its own PID namespace while /tmp is shared,
        # so parallel compiles wrote the same /tmp/tmpxft_00000002_* files.
        "--objdir-as-tempdir",
    ]
    for inc in depset(transitive = [
        cctx.quote_includes,
        cctx.includes,
        cctx.system_includes,
    ]).to_list():
        args.append("-I" + inc)
    for d in cctx.defines.to_list():
        args.append("-D" + d)

    inputs = depset(ctx.files.hdrs, transitive = [cctx.headers])
    outs = []
    for src in ctx.files.srcs:
        # The path below the package, so same-named files in two folders
        # (ops/<family>/cuda.cu) get objects of their own.
        rel = src.short_path
        if ctx.label.package and rel.startswith(ctx.label.package + "/"):
            rel = rel[len(ctx.label.package) + 1:]
        stem = rel[:-len(src.extension) - 1] if src.extension else rel
        out = ctx.actions.declare_file("_nvcc/%s/%s.o" % (ctx.label.name, stem))
        ctx.actions.run(
            executable = NVCC,
            arguments = args + ["-c", src.path, "-o", out.path],
            inputs = depset([src], transitive = [inputs]),
            outputs = [out],
            mnemonic = "NvccCompile",
            progress_message = "Compiling %s with nvcc" % src.short_path,
            # nvcc needs PATH to find the host compiler (gcc).
            use_default_shell_env = True,
        )
        outs.append(out)
    return [DefaultInfo(files = depset(outs))]

_nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    doc = "Compiles .cu files to object files with the toolkit's nvcc.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "nvcc_opts": attr.string_list(),
    },
)

def ge2_cuda_library(name, srcs = [], hdrs = [], deps = [], nvcc_opts = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc.

    srcs: .cu files. Expose them to C through extern "C" launchers declared in
    hdrs (plain C headers). hdrs may also list CUDA-only headers (.cuh): nvcc
    sees them, the cc_library does not export them (C cannot include them, and
    cc_library rejects the extension). deps: cc_library targets whose headers
    the .cu files include ("graph/ir.h" ...); @cuda//:cudart is added.
    nvcc_opts: extra nvcc flags after GE2_NVCC_OPTS.

    The objects come from `<name>_nvcc`, a rule running nvcc once per file, and
    are fed to the cc_library as precompiled .o sources (cc_library accepts .o
    in srcs; they are -fPIC, so they serve static and shared links alike).
    Extra kwargs go to cc_library.
    """
    c_hdrs = [h for h in hdrs if not h.endswith(".cuh")]
    _nvcc_objects(
        name = name + "_nvcc",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        nvcc_opts = select({
            "//tools:cuda_sass_only": [],
            "//conditions:default": GE2_NVCC_PTX_OPTS,
        }) + nvcc_opts,
        visibility = ["//visibility:private"],
        tags = kwargs.get("tags", []),
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_nvcc"],
        hdrs = c_hdrs,
        deps = deps + ["@cuda//:cudart"],
        # The C++ runtime: nvcc's host code uses libstdc++.
        linkopts = ["-lstdc++"],
        **kwargs
    )
