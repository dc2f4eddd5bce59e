--- dle: a deep learning engine in C, scripted in Lua 5.4.
-- `local dle = require("dle")` gives the whole public API (see API.md): tensors and their
-- operations (from the native module dle.core), plus the Lua-level helpers loaded below.
local core = require("dle.core")

-- dle.core's helpers for the Lua packages are registered under names starting with `_` and stay
-- in dle.core; everything else is public. Those that are only helpers (not also a tensor method,
-- like _avg_pool2d_grad) are internal for error messages: theirs name the function they serve.
local internal = {}
for name, f in pairs(core) do
  if name:sub(1, 1) == "_" and core.Tensor[name:sub(2)] ~= f then internal[name] = true end
end
-- Errors raised in dle.core are reported at the first caller outside this directory; the
-- internal functions' messages name the public function they serve.
core._set_source_root(debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "", internal, core)
local dle = {}
for name, value in pairs(core) do
  if name:sub(1, 1) ~= "_" then dle[name] = value end
end
dle.core = core
dle.version = "0.1.0"
-- Registered before the subpackages load, so they can `require("dle")` themselves.
package.loaded["dle"] = dle

-- Lua-level parts: each module is a table of functions merged into `dle`; one that must patch the
-- tensor metatable also has an install(dle) run first. dle.io (lua/dle/io/init.lua) is still a
-- function that installs its functions itself.
local function merge(m)
  if type(m) == "function" then return m(dle) end
  if m.install then m.install(dle) end
  for k, v in pairs(m) do
    if k ~= "install" then dle[k] = v end
  end
end
merge(require("dle.tensor"))
merge(require("dle.einsum"))
merge(require("dle.ternary"))
merge(require("dle.autograd"))
merge(require("dle.linalg"))
merge(require("dle.arrange"))
merge(require("dle.select"))
merge(require("dle.distance"))
merge(require("dle.complex"))
merge(require("dle.fft"))
-- installed rather than merged: its module table also holds helpers for dle.io.gguf and dle.nn
require("dle.quant").install(dle)

-- The Lua functions among them report errors at the user's line, not at dle's own (see
-- dle.check: check.public); C functions already do.
local check = require("dle.check")
local function export()
  check.export(dle)
  check.export(dle.Tensor)
  check.export(dle.metatable)
  if rawget(dle, "autograd") then check.export(dle.autograd) end
end
export()

-- Subpackages dle.nn, dle.optim, dle.data, dle.amp, dle.dist, dle.graph, dle.rewrite, dle.fp8, ...
-- load on first use (each is also requireable on its own): together they are half of
-- `require("dle")`'s start-up, which scripts that only compute with tensors should not pay (and
-- dle.dist, which loads MPI on init(), only programs using it).
-- So do the functions of dle.checkpoint, dle.profile and dle.compile (whose modules add them to dle).
local subpackages = {nn = "dle.nn", optim = "dle.optim", data = "dle.data", amp = "dle.amp",
                     dist = "dle.dist", graph = "dle.graph", rewrite = "dle.rewrite", models = "dle.models",
                     tokenizer = "dle.tokenizer", plot = "dle.plot",
                     onnx = "dle.onnx", func = "dle.func", fp8 = "dle.fp8"}
-- The file formats (dle.save/load, npy, safetensors, dle.io) too: lua-cjson and the format modules
-- were a third of the start-up.
local installers = {checkpoint = "dle.checkpoint", profile = "dle.profile", flops = "dle.profile",
                    compile = "dle.compile", compile_info = "dle.compile", freeze = "dle.freeze",
                    progress = "dle.progress", cond = "dle.control",
                    while_loop = "dle.control", scan = "dle.control", io = "dle.io", save = "dle.io",
                    load = "dle.io", save_npy = "dle.io", load_npy = "dle.io", save_safetensors = "dle.io",
                    load_safetensors = "dle.io",
                    save_gguf = "dle.io", load_gguf = "dle.io"}
-- dle.log is both the elementwise log (dle.log(x)) and the metrics log of API.md (dle.log.open):
-- a callable table, whose open loads dle.runlog on first use.
do
  local log_op = dle.log
  dle.log = setmetatable({open = function(...) return require("dle.runlog").open(...) end},
                         {__call = function(_, ...) return log_op(...) end, __index = {op = log_op}})
end
local loading = {}   -- a subpackage's own files may look for it while it loads: nil then
-- __lazy_names lists the names __index provides without loading anything (the REPL completes them).
local lazy_names = {}
for k in pairs(subpackages) do lazy_names[#lazy_names + 1] = k end
for k in pairs(installers) do lazy_names[#lazy_names + 1] = k end
table.sort(lazy_names)
setmetatable(dle, {__lazy_names = lazy_names, __index = function(t, k)
  local installer = installers[k]
  if installer then
    merge(require(installer))
    export()
    return rawget(t, k)
  end
  local name = subpackages[k]
  if not name or loading[k] then return nil end
  loading[k] = true
  local ok, m = pcall(require, name)
  loading[k] = nil
  if not ok then error(m, 0) end
  rawset(t, k, m)
  return m
end})

return dle
