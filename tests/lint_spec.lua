-- lint_spec.lua — the tree stays clean: luacheck (config .luacheckrc) finds nothing in the Lua
-- files, clang-format (config .clang-format) would change nothing in the C and CUDA files, and no
-- source comment states a timing (measurements go to bench/RESULTS.md, where they are dated).
-- `scripts/test --lint` runs this spec alone. Each tool check is pending when its tool is not
-- installed (Debian packages lua-check and clang-format).
local H = require("helpers")

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."

local q = H.shell_quote

-- Output and exit status of a shell command run at the root of the checkout.
local function run(cmd)
  local p = assert(io.popen("cd " .. q(root) .. " && " .. cmd .. " 2>&1"))
  local out = p:read("a")
  local _, _, status = p:close()
  return out, status
end

-- The tracked files matching the git pathspecs, those that exist in the working tree.
local function files(specs)
  local quoted = {}
  for i, s in ipairs(specs) do quoted[i] = q(s) end
  local out = run("git ls-files -- " .. table.concat(quoted, " "))
  local list = {}
  for f in out:gmatch("[^\n]+") do
    if H.exists(root .. "/" .. f) then list[#list + 1] = f end
  end
  return list
end

-- git pathspecs: `*` also matches across directories.
local C_FILES = {"engine/*.c", "engine/*.h", "kernels/*.c", "kernels/*.h", "kernels/*.cu", "kernels/*.cuh",
                 "bindings/*.c", "bindings/*.h", "tests/c/*.c", "tests/c/*.h", "bench/ref/*.c",
                 "examples/*.c", "examples/*.h"}
-- Where the rule "no timings in source comments" holds (bench/ and tests/ measure on purpose).
local SOURCE_FILES = {"engine/*.c", "engine/*.h", "kernels/*.c", "kernels/*.h", "kernels/*.cu", "kernels/*.cuh",
                      "bindings/*.c", "bindings/*.h", "lua/*.lua"}

-- A measured time, rate or speed-up: 12 ms, 0.3 us, 5 µs, 40 ns, 2 s, 21 GB/s, 50 GFLOP/s, 1.6x
-- faster, 3-6% faster. Plurals of numerals ("leading 1s"), sizes (256 KiB, 4 MB) and counts
-- (2.25x fewer flops) are not timings.
local TIMING = {
  "%f[%w.][%d.]*%d%s*[mun]s%f[^%w/]",      -- ms, us, ns (not "ms/step" in a format string's unit)
  "%d%s*\194\181s%f[^%w]",                 -- µs
  "%d%s+s%f[^%w']",                        -- seconds, spelled "2 s"
  "%d%s*[KMGT]i?B/s",                      -- bandwidth
  "%d%s*[KMGT]?FLOP/s",                    -- arithmetic rate
  "%d%s*x%s+faster", "%d%s*x%s+slower", "%d%s*x%s+longer", "%d%s*x%s+quicker",
  "%d%s*%%%s+faster", "%d%s*%%%s+slower",
}

-- The comment on a line of a C/CUDA or a Lua file, or nil.
local function comment_of(file, line)
  if file:match("%.lua$") then return line:match("%-%-(.*)") end
  return line:match("/%*(.*)") or line:match("//(.*)") or line:match("^%s*%*(.*)")
end

local function timings_in(file, lines)
  local found = {}
  for n, line in ipairs(lines) do
    local c = comment_of(file, line)
    if c then
      for _, p in ipairs(TIMING) do
        if c:find(p) then found[#found + 1] = file .. ":" .. n .. ": " .. line; break end
      end
    end
  end
  return found
end

-- Whether a Lua line calls require with a bare string (require "x", require [[x]]) outside strings
-- and comments: the tree writes require("x"), one way, which tools also read as an import line.
local function bare_require(line)
  local i, quote = 1, nil
  while i <= #line do
    local c = line:sub(i, i)
    if quote then
      if c == "\\" then i = i + 1 elseif c == quote then quote = nil end
    elseif c == '"' or c == "'" then
      quote = c
    elseif line:sub(i, i + 1) == "--" then
      return false
    elseif line:find("^require%s*[\"'%[]", i) and not line:sub(i - 1, i - 1):match("[%w_.]") then
      return true
    end
    i = i + 1
  end
  return false
end

describe("lint", function()
  it("luacheck finds no warning in lua/, tests/, bench/, examples/ and premake5.lua", function()
    if not H.have_command("luacheck") then return pending("luacheck is not installed (apt-get install lua-check)") end
    local out, status = run("luacheck --no-color --codes --formatter plain lua tests bench examples premake5.lua")
    assert.are.equal(0, status, out)
  end)

  it("clang-format would change nothing in the C and CUDA sources", function()
    if not H.have_command("clang-format") then
      return pending("clang-format is not installed (apt-get install clang-format)")
    end
    local list = files(C_FILES)
    assert.is_true(#list > 50, "found only " .. #list .. " C files")
    local quoted = {}
    for i, f in ipairs(list) do quoted[i] = q(f) end
    -- one run over every file; each file it would change is named in a "file:line:col: error" line
    local out = run("clang-format --dry-run -Werror " .. table.concat(quoted, " "))
    local bad, seen = {}, {}
    for f in out:gmatch("([^\n:]+):%d+:%d+: error") do
      if not seen[f] then seen[f] = true; bad[#bad + 1] = f end
    end
    assert.are.same({}, bad, out:sub(1, 2000))
  end)

  it("Lua files call require with parentheses, require(\"x\"), not with a bare string", function()
    for _, l in ipairs({'local dle = require "dle"', "local H = require 'helpers'", 'f(require "x")',
                        "x = require [[y]]", 'local a, b = 1, require"z"'}) do
      assert.is_true(bare_require(l), l)
    end
    for _, l in ipairs({'local dle = require("dle")', '"local dle = require \'dle\'"', "-- require \"dle\"",
                        "x = 1 -- then require 'y'", "t.prerequire 'x'", "s = 'say \\' require \"x\"'"}) do
      assert.is_false(bare_require(l), l)
    end
    local found = {}
    local list = files({"lua/*.lua", "tests/*.lua", "bench/*.lua", "examples/*.lua", "premake5.lua"})
    assert.is_true(#list > 300, "found only " .. #list .. " Lua files")
    for _, f in ipairs(list) do
      local n = 0
      for line in io.lines(root .. "/" .. f) do
        n = n + 1
        if bare_require(line) then found[#found + 1] = f .. ":" .. n .. ": " .. line end
      end
    end
    assert.are.same({}, found)
  end)

  it("the timing patterns find timings and leave sizes, counts and plurals alone", function()
    local hits = timings_in("a.c", {
      "/* creating it costs ~100 ms */", " * 262 us -> 114 us per step", "// 1.7 µs there",
      " * ran at 14.8 GB/s against 21", " * reached ~50 GFLOP/s", " * about 1.6x faster per block",
      " * took 2-5x longer on 2 threads", " * training steps 3-6% faster", " * a 2 s epoch"})
    assert.are.equal(9, #hits)
    assert.are.same({}, timings_in("a.c", {
      "/* without its leading 1s */", " * 256 KiB chunks, 4 MB", " * 2.25x fewer flops", " * 8 floats at a time",
      "x = n--; /* 64 bytes */", "int ms = 3; // none"}))
    assert.are.equal(1, #timings_in("a.lua", {"local t = 1 -- took 3 ms", "print('%7.1f ms/step') "}))
  end)

  it("no source comment in engine/, kernels/, bindings/ or lua/ states a timing (they go to bench/RESULTS.md)",
     function()
    local found = {}
    local list = files(SOURCE_FILES)
    assert.is_true(#list > 100, "found only " .. #list .. " source files")
    for _, f in ipairs(list) do
      local lines = {}
      for line in io.lines(root .. "/" .. f) do lines[#lines + 1] = line end
      for _, hit in ipairs(timings_in(f, lines)) do found[#found + 1] = hit end
    end
    assert.are.same({}, found)
  end)
end)
