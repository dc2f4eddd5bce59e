-- premake5.lua — builds the dle engine, its CPU kernels and the Lua module dle.core.
-- Runs under premake5 and under Debian's premake4:
--   premake4 --file=premake5.lua gmake && make -C build config=release
-- Outputs: build/lib/dle/core.so (require "dle.core") loading build/lib/dle/native.so,
-- build/lib/dle/dist_native.so (require "dle.dist_native", the MPI side of dle.dist, when MPI is found),
-- build/lib/dle/libdle_cuda.so (the CUDA backend, when nvcc is found), build/lib/dle/dist_nccl.so
-- (require "dle.dist_nccl", collectives on CUDA tensors, when nvcc and nccl.h are found),
-- build/lib/dle/cuda_info.so (require "dle.cuda_info", device properties, when nvcc is found),
-- build/bin/test_engine (C tests), build/bin/bench_ref (the C reference of scripts/bench);
-- DLE_BUILD=dir puts them under dir/ instead.
-- Extra compiler flags (sanitizers) come from the environment: CFLAGS=... LDFLAGS=... make.

local P5 = tonumber(_PREMAKE_VERSION:match("^(%d+)")) >= 5

local function pkg_flags(what, pkg, fallback)
  local p = io.popen("pkg-config " .. what .. " " .. pkg .. " 2>/dev/null")
  local out = p and p:read("*a") or ""
  if p then p:close() end
  out = out:gsub("%s+$", "")
  return out ~= "" and out or fallback
end

local lua_cflags = pkg_flags("--cflags", "lua5.4", "-I/usr/include/lua5.4")
-- DLE_BUILD names the build directory (default "build"): separate trees for sanitizer builds.
local B = os.getenv("DLE_BUILD") or "build"

-- premake4/premake5 spellings of the same settings
local function when(cfg)
  if P5 then filter("configurations:" .. cfg) else configuration(cfg) end
end
local function always()
  if P5 then filter({}) else configuration({}) end
end
local function debug_symbols()
  if P5 then symbols("On") else flags({"Symbols"}) end
end
local function optimize_speed()
  if P5 then optimize("Speed") else flags({"OptimizeSpeed"}) end
end

if P5 then workspace("dle") else solution("dle") end
  configurations({"release", "debug"})
  location(B)
  language("C")
  -- -fno-math-errno: nothing reads errno, and without it sqrt() blocks vectorisation
  buildoptions({"-std=gnu11", "-fPIC", "-fopenmp", "-fno-math-errno", "-Wall", "-Wextra", "-Wno-unused-parameter"})
  linkoptions({"-fopenmp"})
  when("release")
    optimize_speed()
    debug_symbols()   -- keeps premake4 from stripping (-s): readable sanitizer and perf traces
    buildoptions({"-O3", "-g"})
    defines({"NDEBUG"})
  when("debug")
    debug_symbols()
    buildoptions({"-O0", "-g"})
  always()

-- The engine (engine/**) and the CPU kernels (kernels/cpu/): no Lua in here. Two libraries, so
-- that an op family's engine file and kernel file can share a name (engine/ops/conv.c,
-- kernels/cpu/conv.c) and tests/arch_spec.lua can tell their objects apart (build/obj/engine,
-- build/obj/cpu). They call each other (the engine registers the CPU backend, the kernels use the
-- engine's helpers), so a link takes them as one group that ld rescans (paths relative to the build
-- directory, where make runs the link; links() keeps the dependency for the build order).
local function link_engine()
  links({"dle_engine", "dle_cpu"})
  linkoptions({"-Wl,--start-group", "lib/libdle_engine.a", "lib/libdle_cpu.a", "-Wl,--end-group"})
end
-- ar adds to an existing archive and never drops a member: a source file moved or deleted would
-- leave its old object inside, where the link could still pick it. So each time the archive is
-- remade, it is made again from the current objects only (a post-build step runs only then).
local function fresh_archive()
  postbuildcommands({"@rm -f $(TARGET) && $(AR) -rcs $(TARGET) $(OBJECTS)"})
end
project("dle_engine")
  kind("StaticLib")
  fresh_archive()
  location(B)
  targetdir(B .. "/lib")
  objdir(B .. "/obj/engine")
  files({"engine/**.c"})

project("dle_cpu")
  kind("StaticLib")
  fresh_archive()
  location(B)
  targetdir(B .. "/lib")
  objdir(B .. "/obj/cpu")
  files({"kernels/cpu/*.c"})

-- The ONNX protobuf code (dle.onnx, bindings/lua_onnx.c): protoc-c generates it from the onnx.proto
-- of libonnx-dev, and from bindings/onnx_data.proto (which imports it), into <build>/gen/onnx when
-- premake runs (scripts/build runs premake before every make), and again only when a .proto is
-- newer; bindings/lua_onnx.c includes it (so only the include path is needed), and it is never
-- committed. Not a prebuild step: premake4 has no per-file rules, and a prebuild step would race
-- the compilation that needs it under make -j.
local onnx_proto = os.getenv("DLE_ONNX_PROTO") or "/usr/include/onnx/onnx.proto"
local onnx_gen = path.getabsolute(B .. "/gen/onnx")
do
  local q = function(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
  local onnx_dir = onnx_proto:match("^(.*)/[^/]*$") or "."
  local data_proto = path.getabsolute("bindings/onnx_data.proto")
  -- regenerates out from proto (found in the dirs of paths) unless out is newer than each of deps
  local function gen(out, proto, paths, deps)
    local fresh = {}
    for _, d in ipairs(deps) do fresh[#fresh + 1] = "test " .. q(out) .. " -nt " .. q(d) end
    local pp = {}
    for _, p in ipairs(paths) do pp[#pp + 1] = "--proto_path=" .. q(p) end
    return table.concat({"{", table.concat(fresh, " && "), "|| protoc-c", table.concat(pp, " "),
      "--c_out=" .. q(onnx_gen), q(proto), "; }"}, " ")
  end
  local cmd = table.concat({"mkdir -p", q(onnx_gen),
    "&&", gen(onnx_gen .. "/onnx.pb-c.c", onnx_proto, {onnx_dir}, {onnx_proto}),
    "&&", gen(onnx_gen .. "/onnx_data.pb-c.c", data_proto, {onnx_dir, path.getabsolute("bindings")},
              {onnx_proto, data_proto})}, " ")
  local ok = os.execute(cmd)
  if ok ~= true and ok ~= 0 then
    error("dle: cannot generate the ONNX protobuf code from " .. onnx_proto .. " (needs protoc-c from "
          .. "protobuf-c-compiler and onnx.proto from libonnx-dev; scripts/bootstrap installs them)")
  end
end

-- The native Lua module dle.native: bindings + engine. It must not link liblua (the interpreter
-- provides it).
project("native")
  kind("SharedLib")
  location(B)
  targetdir(B .. "/lib/dle")
  targetname("native")
  targetprefix("")
  objdir(B .. "/obj/native")
  files({"bindings/*.c"})
  includedirs({onnx_gen})
  buildoptions({lua_cflags})
  link_engine()
  links({"lapacke", "openblas", "fftw3", "fftw3f", "z", "m", "dl", "protobuf-c"})
  -- lua_close unloads C modules at exit while OpenMP's worker threads still run code of libgomp,
  -- which goes with us: a crash at exit. Never unloading the module avoids it.
  linkoptions({"-Wl,-z,nodelete"})
  -- Calls between the engine's own functions bind inside the module instead of going through
  -- the PLT (nobody interposes them): a few percent of every small op.
  linkoptions({"-Wl,-Bsymbolic-functions"})

-- require "dle.core": a loader that sets the OpenMP wait policy before dle.native (and with it
-- libgomp) is loaded; see bindings/loader/core_loader.c.
project("core")
  kind("SharedLib")
  location(B)
  targetdir(B .. "/lib/dle")
  targetname("core")
  targetprefix("")
  objdir(B .. "/obj/core")
  files({"bindings/loader/*.c"})
  buildoptions({lua_cflags})

-- require "dle.dist_native": the MPI side of dle.dist (bindings/dist/), a module of its own so
-- that only programs using dle.dist load libmpi. It never calls the engine (dle.native is loaded
-- RTLD_LOCAL): lua/dle/dist/init.lua passes it raw buffers. Built only when MPI is found (mpicc, else
-- pkg-config ompi-c); without it dle.dist.init() says MPI support was not built.
local function mpi_flags(what)
  local p = io.popen("mpicc --showme:" .. what .. " 2>/dev/null")
  local out = p and p:read("*a") or ""
  if p then p:close() end
  out = out:gsub("%s+$", "")
  if out ~= "" then return out end
  return pkg_flags(what == "compile" and "--cflags" or "--libs", "ompi-c", nil)
end
local mpi_cflags, mpi_libs = mpi_flags("compile"), mpi_flags("link")
if mpi_cflags and mpi_libs then
  -- -L and -l go to libdirs and links, so the libraries come after the objects on the link line
  local mpi_libdirs, mpi_links, mpi_other = {}, {}, {}
  for word in mpi_libs:gmatch("%S+") do
    if word:sub(1, 2) == "-L" then mpi_libdirs[#mpi_libdirs + 1] = word:sub(3)
    elseif word:sub(1, 2) == "-l" then mpi_links[#mpi_links + 1] = word:sub(3)
    else mpi_other[#mpi_other + 1] = word end
  end
  project("dist_native")
    kind("SharedLib")
    location(B)
    targetdir(B .. "/lib/dle")
    targetname("dist_native")
    targetprefix("")
    objdir(B .. "/obj/dist_native")
    files({"bindings/dist/*.c"})
    buildoptions({lua_cflags, mpi_cflags})
    libdirs(mpi_libdirs)
    links(mpi_links)
    linkoptions(mpi_other)
    -- never unloaded: the atexit handler that finalizes MPI after os.exit() lives in it
    linkoptions({"-Wl,-z,nodelete"})
else
  print("dle: MPI not found (mpicc --showme, pkg-config ompi-c): dle.dist_native is not built; "
        .. "install libopenmpi-dev for dle.dist")
end

-- The CUDA backend, build/lib/dle/libdle_cuda.so (kernels/cuda/): a library of its own that the
-- engine dlopens on first use of a "cuda" device (engine/backend.c), so CPU users never load cuBLAS.
-- Built only when nvcc is found ($NVCC, /usr/local/cuda/bin/nvcc, or on PATH); it needs no GPU to
-- build. premake4 has no per-file build rules, and a project's prebuild step runs in parallel with
-- its own link under make -j, so the kernels are compiled by the prebuild step of a separate
-- project, dle_cuda_objects (scripts/nvcc_objects: only changed .cu files, one nvcc at a time),
-- which make finishes before dle_cuda links them (the same under premake5). Sanitizer flags from
-- the environment reach the host C file and the link, never nvcc.
local function find_nvcc()
  local env = os.getenv("NVCC") or ""
  for _, p in ipairs({env, "/usr/local/cuda/bin/nvcc"}) do
    local f = p ~= "" and io.open(p, "r")
    if f then
      f:close()
      return p
    end
    if env ~= "" then return nil end  -- NVCC names one that is not there: build without CUDA
  end
  local h = io.popen("command -v nvcc 2>/dev/null")
  local out = h and h:read("*l")
  if h then h:close() end
  return out and out ~= "" and out or nil
end
local nvcc = find_nvcc()
if nvcc then
  local cuda_home = nvcc:match("^(.*)/bin/nvcc$") or "/usr/local/cuda"
  local cuda_obj = path.getabsolute(B .. "/obj/cuda")
  -- sm_80 (A100) and sm_90 (H100) machine code, plus compute_90 PTX for newer GPUs to JIT.
  -- -fmad=false: no fused multiply-adds the CPU kernels do not do, so results round the same way.
  local nvcc_flags = table.concat({"-std=c++17", "-O3", "-fmad=false", "-Xcompiler", "-fPIC",
    "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
    "-gencode", "arch=compute_90,code=compute_90"}, " ")
  local objects = {}
  for _, src in ipairs(os.matchfiles("kernels/cuda/*.cu")) do
    objects[#objects + 1] = cuda_obj .. "/" .. path.getbasename(src) .. ".o"
  end
  project("dle_cuda_objects")
    kind("StaticLib")
    location(B)
    targetdir(B .. "/obj/cuda")
    targetname("dle_cuda_host")
    objdir(B .. "/obj/cuda_host")
    files({"kernels/cuda/*.c"})
    prebuildcommands({table.concat({path.getabsolute("scripts/nvcc_objects"), nvcc, cuda_obj,
                                    path.getabsolute(B .. "/lib/dle/libdle_cuda.so"), nvcc_flags}, " ")})
  project("dle_cuda")
    kind("SharedLib")
    location(B)
    targetdir(B .. "/lib/dle")
    targetname("dle_cuda")   -- libdle_cuda.so
    objdir(B .. "/obj/dle_cuda")
    links({"dle_cuda_objects", "cublasLt", "cublas", "cudart", "stdc++", "m"})
    libdirs({cuda_home .. "/lib64"})
    linkoptions(objects)
    -- -z defs: an engine symbol used by mistake fails here, not at dlopen (see kernels/cuda/common.cuh)
    linkoptions({"-Wl,-rpath," .. cuda_home .. "/lib64", "-Wl,-z,defs"})

  -- require "dle.cuda_info": device properties and synchronize for scripts/gpu-check's benchmark
  -- (bindings/cuda_info/); links libcudart only.
  project("cuda_info")
    kind("SharedLib")
    location(B)
    targetdir(B .. "/lib/dle")
    targetname("cuda_info")
    targetprefix("")
    objdir(B .. "/obj/cuda_info")
    files({"bindings/cuda_info/*.c"})
    buildoptions({lua_cflags})
    includedirs({cuda_home .. "/include"})
    libdirs({cuda_home .. "/lib64"})
    links({"cudart"})
    linkoptions({"-Wl,-rpath," .. cuda_home .. "/lib64"})

  -- require "dle.dist_nccl": dle.dist's collectives on CUDA tensors (bindings/dist_nccl/), built
  -- when NCCL's header is beside the toolkit ($NCCL_HOME/include or <cuda>/include); a module of
  -- its own so that only collectives on CUDA tensors load libnccl. No GPU needed to build it.
  local nccl_home = os.getenv("NCCL_HOME") or cuda_home
  local nccl_h = io.open(nccl_home .. "/include/nccl.h", "r")
  if nccl_h then
    nccl_h:close()
    project("dist_nccl")
      kind("SharedLib")
      location(B)
      targetdir(B .. "/lib/dle")
      targetname("dist_nccl")
      targetprefix("")
      objdir(B .. "/obj/dist_nccl")
      files({"bindings/dist_nccl/*.c"})
      buildoptions({lua_cflags})
      includedirs({nccl_home .. "/include", cuda_home .. "/include"})
      libdirs({nccl_home .. "/lib64", nccl_home .. "/lib", cuda_home .. "/lib64"})
      links({"nccl", "cudart"})
      linkoptions({"-Wl,-rpath," .. nccl_home .. "/lib64", "-Wl,-rpath," .. cuda_home .. "/lib64"})
  else
    io.stderr:write("dle: nccl.h not found in " .. nccl_home .. "/include ($NCCL_HOME): dle.dist_nccl (collectives "
                    .. "on CUDA tensors) is not built\n")
  end
else
  -- stderr: scripts/build keeps premake's stdout quiet
  io.stderr:write("dle: nvcc not found ($NVCC, /usr/local/cuda/bin/nvcc, PATH): the CUDA backend "
                  .. "libdle_cuda.so is not built; dle runs on the CPU only\n")
end

-- Engine-only C tests.
project("test_engine")
  kind("ConsoleApp")
  location(B)
  targetdir(B .. "/bin")
  objdir(B .. "/obj/tests")
  files({"tests/c/*.c"})
  link_engine()
  links({"lapacke", "openblas", "fftw3", "fftw3f", "z", "m", "dl"})
  if nvcc then defines({"DLE_CUDA_BUILT"}) end  -- tests/c/test_cuda.c then expects the library

-- examples/deploy_c: a graph saved from Lua classifying Fashion-MNIST from C, without Lua.
project("deploy_classify")
  kind("ConsoleApp")
  location(B)
  targetdir(B .. "/bin")
  objdir(B .. "/obj/deploy_c")
  files({"examples/deploy_c/*.c"})
  link_engine()
  links({"lapacke", "openblas", "fftw3", "fftw3f", "z", "m", "dl"})

-- The C reference of scripts/bench: raw cblas_sgemm, STREAM-style copy/triad loops, and Lua's
-- own cost of one finalized userdata (the floor under a tensor-returning op).
project("bench_ref")
  kind("ConsoleApp")
  location(B)
  targetdir(B .. "/bin")
  objdir(B .. "/obj/bench_ref")
  files({"bench/ref/*.c"})
  buildoptions({lua_cflags})
  links({"openblas", "lua5.4", "m"})
