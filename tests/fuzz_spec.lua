-- fuzz_spec.lua — a short deterministic run of the API fuzzer (tests/fuzz/fuzzer.lua): ~2000 seeded
-- random calls of dle's public Lua API with wrong and edge-case arguments. Reaching the end means
-- none crashed the process; each call must have returned or raised a string naming a function,
-- and none may have run away (the fuzzer's instruction budget). Longer runs, under ASan:
-- tests/fuzz/run --seed S --seconds T.
local dle = require("dle")
local fuzzer = require("fuzz.fuzzer")

local tmpdir = require("helpers").tmpdir

-- The problems as readable lines, for the failure message.
local function report(problems)
  local lines = {}
  for i, p in ipairs(problems) do
    if i > 10 then lines[#lines + 1] = "..."; break end
    lines[#lines + 1] = string.format("%s in %s (iteration %d): %s\n    %s", p.kind, p.target, p.iter,
      tostring(p.message), p.call or "?")
  end
  return table.concat(lines, "\n")
end

describe("API fuzzer smoke run", function()
  it("the error classifier accepts named errors and rejects Lua runtime errors", function()
    local named = fuzzer.names_function
    assert.is_true(named("add: shapes {2,3} and {4} cannot broadcast"))
    assert.is_true(named("x.lua:3: dle.load_safetensors: cannot open cuda:0: no such file"))
    assert.is_true(named("exp: argument #1 must be a tensor, got string"))
    assert.is_false(named("bad argument #1 to 'f' (dle.Tensor expected, got string)"))
    assert.is_true(named("SGD: lr must be a non-negative number, got -1"))
    assert.is_false(named("lua/dle/nn/functional.lua:22: attempt to index a number value (local 'x')"))
    assert.is_false(named("attempt to call a table value"))
  end)

  it("2000 seeded random calls return or raise errors naming a function", function()
    local dir = tmpdir()
    local fz = fuzzer.new({seed = 20240601, tmpdir = dir})
    -- module summaries print their tables: keep the test output clean
    local print_ = print
    _G.print = function() end
    local ok, err = pcall(fz.run, fz, 1, 2000)
    _G.print = print_
    os.execute("rm -rf '" .. dir .. "'")
    assert(ok, err)
    assert.is_true(fz.stats.calls >= 2000)
    -- both outcomes happen: the run is not all type errors, nor all successes
    assert.is_true(fz.stats.ok > 200, "too few calls returned: " .. fz.stats.ok)
    assert.is_true(fz.stats.errors > 200, "too few calls raised: " .. fz.stats.errors)
    assert.are.equal(0, #fz.problems, report(fz.problems))
  end)

  it("leaves the global state as it found it", function()
    assert.is_true(dle.is_grad_enabled())
    assert.are.equal(4, dle.print_options.precision)
    assert.are.equal("function", type(io.open))
    local path = os.tmpname()
    local f = io.open(path, "w")   -- the sandbox is gone: writes work again
    assert.is_truthy(f)
    f:close()
    assert.is_true(os.remove(path))
  end)
end)
