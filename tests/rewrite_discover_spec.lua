--- rewrite_discover_spec.lua — dle.rewrite.discover: rules found by enumerating expressions over
-- given ops, fingerprinting them and keeping the verified rewrites toward cheaper equivalents:
-- the known identities are found, constant-only and renamed duplicates are not, every rule
-- verifies, the rule file loads back, and the set shrinks a real graph without changing it.
local dle = require("dle")
local H = require("helpers")
local R = dle.rewrite

local function names(rules) return H.index_by(rules, "name", true) end

describe("dle.rewrite.discover", function()
  local path = H.tmpdir() .. "/rules.lua"
  local rules, report = R.discover{ops = {"add", "sub", "mul", "neg"}, max_nodes = 2, constants = {0, 1}, path = path}

  it("finds the textbook identities and no rule over constants only or renamed variables", function()
    local set = names(rules)
    for _, want in ipairs({"add(x,0) -> x", "mul(x,1) -> x", "neg(neg(x)) -> x", "sub(x,neg(y)) -> add(x,y)",
                           "sub(0,x) -> neg(x)", "add(x,neg(y)) -> sub(x,y)"}) do
      assert.is_true(set["discovered: " .. want], want .. " not found")
    end
    for name in pairs(set) do
      assert.truthy(name:find("x", 1, true), "a rule over constants only: " .. name)
    end
    assert.is_nil(set["discovered: add(y,0) -> y"], "renamed duplicates are dropped")
    assert.is_true(report.expressions > 100 and report.rules == #rules and report.candidates >= report.rules)
  end)

  it("keeps no rule that is an instance of a smaller one, and every rule verifies on new inputs", function()
    assert.is_nil(names(rules)["discovered: add(0,add(x,x)) -> add(x,x)"])
    for _, r in ipairs(rules) do
      local ok, err = R.verify(r, {trials = 2, tol = 1e-9})
      assert.is_true(ok, tostring(err))
    end
  end)

  it("writes a rule file that loads back as the same rules", function()
    local again = dofile(path)
    assert.are.equal(#rules, #again)
    assert.are.same(names(rules), names(again))
  end)

  it("shrinks a traced graph full of exporter-style redundancy and leaves its results as they were", function()
    local f = function(x, y) return ((x * 1 - y:neg()):neg():neg() + 0) * (x - (0 - y)) end
    local x, y = dle.randn(4, 8), dle.randn(8)
    local g = dle.graph.trace(f, x, y)
    local g2, counts = R.apply(g, rules)
    local fired = 0
    for _, c in pairs(counts) do fired = fired + c end
    assert.is_true(fired >= 4, "fired " .. fired)
    assert.is_true(#g2:nodes() < #g:nodes() - 3, #g:nodes() .. " -> " .. #g2:nodes())
    assert.is_true((g2:run(x, y) - f(x, y)):abs():max():item() < 1e-6)
  end)

  it("bad options are errors naming rewrite.discover", function()
    local function err(o) return select(2, pcall(R.discover, o)) end
    assert.matches("rewrite.discover: ops must be", err({}))
    assert.matches("matmul is not an elementwise", err({ops = {"matmul"}}))
    assert.matches("max_nodes must be", err({ops = {"add"}, max_nodes = 9}))
    assert.matches("unknown option", err({ops = {"add"}, bogus = 1}))
  end)
end)
