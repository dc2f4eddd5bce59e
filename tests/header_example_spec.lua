-- header_example_spec.lua — the usage example in engine/dle.h's opening comment compiles and runs
-- as written: it is cut out of the header at test time (the indented block of the first comment),
-- included into tests/c/example/header_example.c and linked against the built engine libraries,
-- so the header's documentation cannot drift from the API.
local H = require("helpers")
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
local build = os.getenv("DLE_BUILD") or (root .. "/build")

local q = H.shell_quote

-- Runs a shell command without the ASan preload of `scripts/test --asan` (the program links the
-- sanitizer runtime itself); returns stdout, stderr and whether it exited 0.
local function sh(cmd)
  local err = os.tmpname()
  local p = assert(io.popen("env -u LD_PRELOAD sh -c " .. q(cmd) .. " 2>" .. q(err)))
  local out = p:read("a")
  local ok = p:close()
  local f = io.open(err)
  local errs = f and f:read("a") or ""
  if f then f:close() end
  os.remove(err)
  return out, errs, ok == true
end

-- The example: the first run of comment lines indented by "*   " in the header's opening comment.
local function header_example()
  local text = assert(io.open(root .. "/engine/dle.h")):read("a")
  local comment = assert(text:match("^/%*(.-)%*/"), "dle.h opens with a comment")
  local lines, started = {}, false
  for line in (comment .. "\n"):gmatch("([^\n]*)\n") do
    local code = line:match("^ %*   (.*)$")
    if code then
      started = true
      lines[#lines + 1] = code
    elseif started then
      break
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

describe("dle.h's usage example", function()
  local example = header_example()

  it("is found in the header's opening comment and calls the generated dle_add", function()
    assert.truthy(example:find("dle_add(&c, a, b)", 1, true), example)
    assert.truthy(example:find("dle_tensor_release", 1, true), example)
  end)

  it("compiles as written, runs, prints the broadcast sum and releases every byte", function()
    local inc = os.tmpname()
    local f = assert(io.open(inc, "w"))
    f:write(example)
    f:close()
    local exe = os.tmpname()
    local flags = (os.getenv("CFLAGS") or "") .. " " .. (os.getenv("LDFLAGS") or "")
    local cc = table.concat({"cc -std=gnu11 -fopenmp", flags, "-DDLE_EXAMPLE=" .. q('"' .. inc .. '"'),
      q(root .. "/tests/c/example/header_example.c"), "-Wl,--start-group",
      q(build .. "/lib/libdle_engine.a"), q(build .. "/lib/libdle_cpu.a"), "-Wl,--end-group",
      "-llapacke -lopenblas -lfftw3 -lfftw3f -lz -lm -ldl -o", q(exe)}, " ")
    local _, cerr, compiled = sh(cc)
    os.remove(inc)
    assert.is_true(compiled, cerr)
    local out, err, ran = sh(q(exe))
    os.remove(exe)
    assert.are.equal("", err)
    assert.is_true(ran, out)
    assert.are.equal("c[1][2] = 3\nbytes left: 0\n", out)
  end)
end)
