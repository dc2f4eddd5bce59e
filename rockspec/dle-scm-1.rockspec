-- dle-scm-1.rockspec — LuaRocks package of dle: the native module dle.core (with dle.native, and the
-- CUDA backend libdle_cuda.so / MPI module dle.dist_native where the build finds CUDA / MPI), the
-- Lua package dle.* and a `dle` launcher.
--   luarocks --lua-version 5.4 make rockspec/dle-scm-1.rockspec
-- The build is the project's own (scripts/build: premake and make, with its compiler flags,
-- OpenMP included), so this file names no source: a new file or op family needs no edit here.
-- It needs premake4 (or premake5) and make besides a C compiler (scripts/bootstrap installs them);
-- NVCC=/nonexistent in the environment builds without CUDA.
rockspec_format = "3.0"
package = "dle"
version = "scm-1"
source = { url = "git+file:///work/main" }
description = {
  summary = "A deep learning engine in C with Lua 5.4 bindings",
  detailed = "Tensors with views and broadcasting, CPU kernels (OpenMP, OpenBLAS), scripted in Lua 5.4.",
  license = "MIT",
}
-- dle.io also needs lua-cjson (`require "cjson"`, JSON of safetensors headers). It is not listed
-- here because the offline install takes it from Debian (package lua-cjson, scripts/bootstrap),
-- which LuaRocks does not see; from a LuaRocks server it is the rock "lua-cjson".
dependencies = { "lua >= 5.4, < 5.5" }
external_dependencies = { OPENBLAS = { library = "openblas" }, LAPACKE = { library = "lapacke" },
  FFTW3 = { library = "fftw3" }, FFTW3F = { library = "fftw3f" } }

build = {
  type = "command",
  -- into build-rock/, so a checkout's own build/ is neither used nor disturbed
  build_command = "DLE_BUILD=build-rock scripts/build release modules",
  -- lua/dle/** as the modules dle.*, the built libraries beside each other under dle/ (dle.core
  -- loads dle.native; the engine looks for libdle_cuda.so next to itself), the launcher
  install_command = "mkdir -p $(LUADIR) $(LIBDIR)/dle $(BINDIR) && cp -R lua/dle $(LUADIR)/ && "
    .. "cp build-rock/lib/dle/*.so $(LIBDIR)/dle/ && cp rockspec/dle $(BINDIR)/dle",
}
