-- dle-scm-1.rockspec — LuaRocks package of dle: the native module dle.core (builtin build of the
-- C sources below), the Lua package dle.* and a `dle` launcher.
--   luarocks --lua-version 5.4 make rockspec/dle-scm-1.rockspec \
--     CFLAGS="-O3 -fPIC -std=gnu11 -fopenmp" LIBFLAG="-shared -fopenmp -Wl,-z,nodelete"
-- The builtin backend takes compiler flags only from LuaRocks' CFLAGS/LIBFLAG variables, which a
-- rockspec cannot set: without the two assignments above the kernels compile without OpenMP
-- (single-threaded; OpenBLAS still threads) and everything else works the same. -z nodelete keeps
-- the module mapped at exit, when OpenMP's worker threads may still be running.
-- Adding a C or Lua file: add its name to the lists below (tests/rockspec_spec.lua checks them
-- against the tree).
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
external_dependencies = { OPENBLAS = { library = "openblas" } }

-- C sources per directory (names without .c).
local c_sources = {
  ["engine/"] = { "alloc", "autocast", "backend", "dtype", "error", "fused", "ops", "optim", "profile", "rng", "serialize",
                "tensor", "trace" },
  ["engine/autograd/"] = { "backward", "checks", "forward", "tape" },
  ["engine/ops/"] = { "conv", "conv_grad", "copy", "copy_grad", "create", "elementwise",
                      "elementwise_grad", "entry", "flops", "index", "index_grad", "losses", "losses_grad",
                      "matmul", "matmul_grad", "nn", "nn_grad", "norm", "norm_grad", "reduce",
                      "reduce_grad", "view", "view_grad" },
  ["kernels/cpu/"] = { "attention", "backend", "conv", "cpu_conv_job", "cpu_conv_winograd", "copy", "elementwise", "index",
                       "cpu_loop", "cpu_loop_tiles", "losses", "matmul", "nn", "norm", "optim", "pool",
                       "random", "reduce", "softmax", "cpu_stream", "cpu_vec_gemm", "cpu_vec_softmax", "cpu_vec_sum", "cpu_vec_winograd", "cpu_vecmath", "fused" },
  ["bindings/"] = { "lua_autograd", "lua_conv", "lua_core", "lua_data", "lua_elementwise", "lua_errors", "lua_index", "lua_io",
                    "lua_losses", "lua_matmul", "lua_nn", "lua_norm", "lua_optim", "lua_profile", "lua_random", "lua_reduce", "lua_tensor", "lua_graph", "lua_onnx" },
}
-- Lua files under lua/dle/ (without .lua): "x" is module dle.x, "x/init" dle.x, "x/y" dle.x.y.
local lua_files = {
  "amp", "autograd", "check", "checkpoint", "einsum", "profile", "repl", "tensor",
  "io/init", "io/common", "io/json", "io/atomic", "io/dle_format", "io/npy", "io/safetensors",
  "data/init", "data/data_loader", "data/text_corpus",
  "nn/init", "nn/module", "nn/functional", "nn/weight_init", "nn/utils", "nn/linear", "nn/sequential",
  "nn/activations", "nn/flatten", "nn/dropout", "nn/embedding", "nn/layer_norm", "nn/losses",
  "nn/attention", "nn/transformer", "nn/batch_norm", "nn/conv", "nn/functional_conv",
  "optim/init", "optim/optimizer", "optim/sgd", "optim/adagrad", "optim/rmsprop", "optim/adam",
  "optim/adamw", "optim/lr", "optim/zero", "optim/functional",
  "dist/init", "dist/buckets", "dist/ddp",
  "compile", "graph/init", "graph/guard", "graph/guard_code", "graph/node", "graph/run",
  "rewrite/init", "rewrite/pattern", "rewrite/build", "rewrite/rules/algebra", "rewrite/rules/fusion",
  "rewrite/rules/inference",
  "onnx/init", "onnx/util",
  "onnx/ops_elementwise", "onnx/ops_reduce", "onnx/ops_shape", "onnx/ops_nn", "onnx/ops_resize", "onnx/ops_rnn", "onnx/ops_quant", "onnx/ops_training",
  "onnx/conformance",
  -- help reads the doc-only files of doc/ (the docs of the C functions) next to itself
  "help", "doc/autocast", "doc/autograd_modes", "doc/conversion", "doc/creation", "doc/elementwise",
  "doc/files", "doc/functional_activations", "doc/grad_ops", "doc/indexing", "doc/linalg",
  "doc/metadata", "doc/nn_ops", "doc/random", "doc/reductions", "doc/runtime", "doc/views",
}

-- (The rockspec runs in an empty environment: no next/pairs/ipairs, only plain Lua.)
local sources = {}
local dirs = { "engine/", "engine/autograd/", "engine/ops/", "kernels/cpu/", "bindings/" }
for k = 1, #dirs do
  local names = c_sources[dirs[k]]
  for i = 1, #names do sources[#sources + 1] = dirs[k] .. names[i] .. ".c" end
end

local modules = {
  -- dle.core sets the OpenMP wait policy, then loads dle.native (bindings/loader/core_loader.c)
  ["dle.core"] = { sources = { "bindings/loader/core_loader.c" } },
  ["dle.native"] = {
    sources = sources,
    libraries = { "openblas", "z", "gomp", "m", "dl", "protobuf-c" },
    incdirs = { "$(OPENBLAS_INCDIR)", "build/gen/onnx" },
    libdirs = { "$(OPENBLAS_LIBDIR)" },
  },
  dle = "lua/dle/init.lua",
}
for i = 1, #lua_files do
  local name = lua_files[i]:gsub("/init$", ""):gsub("/", ".")
  modules["dle." .. name] = "lua/dle/" .. lua_files[i] .. ".lua"
end

build = {
  type = "builtin",
  modules = modules,
  install = { bin = { dle = "rockspec/dle" } },
}
