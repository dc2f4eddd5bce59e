-- arch_spec.lua — the roads between the C layers, checked on the built objects with nm:
--   engine/ reaches the CPU kernels only through the backend table: of everything the kernel
--   objects (build/obj/cpu) define, an engine object (build/obj/engine) may use only the one
--   registration of the CPU backend;
--   bindings/ calls only the engine's public API: every engine or kernel symbol a binding object
--   (build/obj/native) uses is declared in engine/dle.h (as the preprocessor sees it, so the
--   entry points ops.def generates count).
local H = require("helpers")
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local build = os.getenv("DLE_BUILD") or (root .. "/build")

local q = H.shell_quote

-- Runs a shell command (without the ASan preload of `scripts/test --asan`); returns its stdout.
local function sh(cmd)
  local p = assert(io.popen("env -u LD_PRELOAD sh -c " .. q(cmd) .. " 2>/dev/null"))
  local out = p:read("a")
  p:close()
  return out
end

-- The source files (by stem) of the C layer each object directory is built from: an object whose
-- source is gone (left by a build before a file was renamed) is not part of the library.
local SOURCES = {engine = {"engine", "engine/ops", "engine/autograd"}, cpu = {"kernels/cpu"}, native = {"bindings"}}

local function stems(dirs)
  local set = {}
  for _, d in ipairs(dirs) do
    for f in sh("ls " .. q(root .. "/" .. d)):gmatch("[^\n]+") do
      local stem = f:match("^(.*)%.c$")
      if stem then set[stem] = true end
    end
  end
  return set
end

-- The object files of one build/obj/<dir> (any configuration) whose source exists.
local function objects(dir)
  local list, current = {}, stems(SOURCES[dir])
  for f in sh("ls " .. q(build .. "/obj/" .. dir) .. "/*/*.o"):gmatch("[^\n]+") do
    if current[f:match("([^/]+)%.o$")] then list[#list + 1] = f end
  end
  return list
end

-- Set of the global symbols the objects define, or use without defining (undefined = true).
local function symbols(objs, undefined)
  local set = {}
  if #objs == 0 then return set end
  local quoted = {}
  for i, f in ipairs(objs) do quoted[i] = q(f) end
  local flag = undefined and "-u" or "-g --defined-only"
  for line in sh("nm " .. flag .. " " .. table.concat(quoted, " ")):gmatch("[^\n]+") do
    local name = line:match("^%s*%x*%s+%a%s+([%w_.$]+)$")
    if name then set[name] = true end
  end
  return set
end

-- Uses of symbols in `defined` by `objs`, one "object: symbol" line each, minus the allowed.
local function crossings(objs, defined, allowed)
  local bad = {}
  for _, f in ipairs(objs) do
    for name in pairs(symbols({f}, true)) do
      if defined[name] and not allowed(name) then bad[#bad + 1] = f:match("[^/]+$") .. ": " .. name end
    end
  end
  table.sort(bad)
  return bad
end

describe("the C layers", function()
  local engine, cpu, native = objects("engine"), objects("cpu"), objects("native")

  it("are built into separate object directories (engine, cpu kernels, bindings)", function()
    assert.is_true(#engine > 10, "engine objects in " .. build .. "/obj/engine")
    assert.is_true(#cpu > 10, "CPU kernel objects in " .. build .. "/obj/cpu")
    assert.is_true(#native > 10, "binding objects in " .. build .. "/obj/native")
  end)

  it("engine objects use no kernel symbol but the CPU backend's registration", function()
    local bad = crossings(engine, symbols(cpu), function(name) return name == "dle_cpu_backend" end)
    assert.are.same({}, bad)
  end)

  it("binding objects use only engine and kernel symbols that engine/dle.h declares", function()
    local header = sh("cd " .. q(root) .. " && cc -E -P engine/dle.h")
    assert.is_true(#header > 1000, "cc -E engine/dle.h")
    local declared = {}
    for word in header:gmatch("[%a_][%w_]*") do declared[word] = true end
    local engine_defs = symbols(engine)
    for name in pairs(symbols(cpu)) do engine_defs[name] = true end
    local bad = crossings(native, engine_defs, function(name) return declared[name] end)
    assert.are.same({}, bad)
  end)

  it("the CPU backend's registration is not part of the public header", function()
    local header = assert(io.open(root .. "/engine/dle.h")):read("a")
    assert.is_nil(header:find("dle_cpu_backend", 1, true))
  end)

  it("no source file of the engine, kernels, bindings or Lua package runs past 850 lines (one job per file)", function()
    local long = {}
    local files = sh("cd " .. q(root) .. " && git ls-files engine kernels bindings lua")
    local source = {c = true, h = true, cu = true, cuh = true, lua = true}
    for f in files:gmatch("[^\n]+") do
      if source[f:match("%.(%w+)$")] then
        local n = 0
        for _ in io.lines(root .. "/" .. f) do n = n + 1 end
        if n > 850 then long[#long + 1] = f .. " (" .. n .. " lines)" end
      end
    end
    assert.are.same({}, long)
  end)
end)
