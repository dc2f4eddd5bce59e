-- rewrite_spec: patterns, rules, apply (indexing, fixed point, counts, errors), verify, and the
-- built-in rule sets algebra, fusion (with the fused kernel) and inference.
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn
local R = dle.rewrite
local P, B = R.pattern, R.build

local count = H.count_ops

local max_diff = H.max_diff

-- R.verify passes for every rule of a set (trials random inputs each), its error below max_err
-- when given; rules are named by name_of(r) in the messages.
local function verify_all(rules, trials, max_err, name_of)
  for _, r in ipairs(rules) do
    local ok, err, msg = R.verify(r, {trials = trials})
    assert.is_true(ok, name_of(r) .. ": " .. tostring(msg))
    if max_err then assert.is_true(err < max_err, name_of(r)) end
  end
end
local function rule_name(r) return r.name end

describe("patterns and rules", function()
  it("P.mul(P.any 'x', P.const(2)) matches x * 2 and binds x", function()
    local g = dle.graph.trace(function(x) return x * 2 end, dle.randn(3))
    local m = P.match(P.mul(P.any "x", P.const(2)), g.outputs[1])
    assert.is_truthy(m)
    assert.equal(g.inputs[1], m.x)
    assert.is_nil(P.match(P.mul(P.any "x", P.const(3)), g.outputs[1]))
    assert.is_nil(P.match(P.add(P.any "x", P.const(2)), g.outputs[1]))
    assert.is_truthy(P.match(P.op("mul", P.any(), P.const()), g.outputs[1]))
  end)

  it("a name used twice must bind the same node", function()
    local g = dle.graph.trace(function(x, y) return x * x, x * y end, dle.randn(3), dle.randn(3))
    local p = P.mul(P.any "a", P.any "a")
    assert.is_truthy(P.match(p, g.outputs[1]))
    assert.is_nil(P.match(p, g.outputs[2]))
  end)

  it("rule() rejects bad specs with errors naming rewrite.rule", function()
    H.assert_error(function() R.rule{pattern = P.any(), replace = function() end} end, "rewrite.rule", "name")
    H.assert_error(function() R.rule{name = "r", pattern = 3, replace = function() end} end, "rewrite.rule", "pattern")
    H.assert_error(function() R.rule{name = "r", pattern = P.any(), replace = 1} end, "rewrite.rule", "replace")
  end)

  it("apply rewrites a copy to a fixed point and counts per rule", function()
    local twice = R.rule{name = "x*2 -> x+x", pattern = P.mul(P.any "x", P.const(2)),
                         replace = function(m) return B.add(m.x, m.x) end}
    local unused = R.rule{name = "unused", pattern = P.sin(P.any "x"), replace = function(m) return m.x end}
    local g = dle.graph.trace(function(x) return (x * 2) * 2 end, dle.randn(3))
    local g2, counts = R.apply(g, {twice, unused})
    assert.equal(2, counts["x*2 -> x+x"])
    assert.equal(0, counts.unused)
    assert.equal(0, count(g2, "mul"))
    assert.equal(2, count(g2, "add"))
    assert.equal(2, count(g, "mul"))   -- the original is unchanged
    local x = dle.randn(3)
    assert.is_true(max_diff(g2:run(x), x * 4) < 1e-6)
  end)

  it("a declining rule (replace returns nil) changes nothing", function()
    local never = R.rule{name = "never", pattern = P.mul(P.any "x", P.any "y"), replace = function() return nil end}
    local g = dle.graph.trace(function(x) return x * x end, dle.randn(3))
    local g2, counts = R.apply(g, never)
    assert.equal(0, counts.never)
    assert.equal(1, count(g2, "mul"))
  end)

  it("errors naming the rule when rules never settle, or a replacement changes the shape", function()
    local grow = R.rule{name = "grow", pattern = P.relu(P.any "x"),
                        replace = function(m) return B.relu(B.relu(m.x)) end}
    local g = dle.graph.trace(function(x) return x:relu() end, dle.randn(3))
    H.assert_error(function() R.apply(g, grow, {max_passes = 5}) end, "did not settle", "'grow'")
    local bad = R.rule{name = "bad shape", pattern = P.relu(P.any "x"),
                       replace = function(m) return B.sum(m.x) end}
    H.assert_error(function() R.apply(g, bad) end, "rule 'bad shape'", "{3}", "{}")
  end)

  it("build infers shapes through the engine and names build.<op> on bad input", function()
    local g = dle.graph.trace(function(x, y) return x + 1, y end, dle.randn(2, 3), dle.randn(4, 5))
    local n = B.matmul(g.inputs[1], B.permute(g.inputs[1], {ints = {1, 0}}))
    assert.same({2, 2}, n:shape())
    H.assert_error(function() B.matmul(g.inputs[1], g.inputs[2]) end, "build.matmul", "{2,3}", "{4,5}")
    H.assert_error(function() B.add(g.inputs[1], 3) end, "build.add", "graph node")
  end)

  it("build rejects attrs the engine does not read instead of silently dropping them", function()
    local g = dle.graph.trace(function(x) return x:clamp(0, 1) end, dle.randn(3))
    assert.same({f = {0, 1}}, g:nodes()[2].attrs)
    H.assert_error(function() B.clamp(g.inputs[1], {min = 0}) end, "build.clamp", "unknown attr 'min'")
    local n = B.clamp(g.inputs[1], {f = {0, 1}})
    assert.same({3}, n:shape())
  end)

  it("verify accepts a correct user rule and rejects a wrong one with a message", function()
    local good = R.rule{name = "x*2 -> x+x", pattern = P.mul(P.any "x", P.const(2)),
                        replace = function(m) return B.add(m.x, m.x) end}
    local ok, err = R.verify(good, {trials = 3})
    assert.is_true(ok)
    assert.is_true(err < 1e-12)
    local wrong = R.rule{name = "x*2 -> x+x+x", pattern = P.mul(P.any "x", P.const(2)),
                         replace = function(m) return B.add(B.add(m.x, m.x), m.x) end}
    local ok2, err2, msg = R.verify(wrong, {trials = 3})
    assert.is_false(ok2)
    assert.is_true(err2 > 0.01)
    assert.truthy(msg:find("x*2 -> x+x+x", 1, true))
  end)
end)

describe("rules.algebra", function()
  it("removes x*1, 1*x, x+0, 0+x, x-0, x/1, neg neg and a double transpose", function()
    local f = function(x) return (-(-((1 * (x * 1) + 0) - 0) / 1)):t():t() + 0 end
    local g = dle.graph.trace(f, dle.randn(3, 4))
    local g2, counts = R.apply(g, R.rules.algebra)
    assert.equal(1, #g2:nodes())   -- just the input
    assert.equal(1, counts["algebra.neg_neg"])
    assert.equal(1, counts["algebra.permute_cancel"])
    assert.equal(2, counts["algebra.mul_one"] + counts["algebra.one_mul"])
  end)

  it("keeps x*1 where x broadcasts to a larger shape or the dtype changes", function()
    local one64 = dle.tensor(1, {dtype = "float64"})
    local g = dle.graph.trace(function(x, y) return x * dle.ones(3, 4), y * one64 end, dle.randn(4), dle.randn(2))
    local g2, counts = R.apply(g, R.rules.algebra)
    assert.equal(0, counts["algebra.mul_one"])
    assert.same({3, 4}, g2.outputs[1]:shape())
    assert.equal("float64", g2.outputs[2]:dtype())
    assert.equal(2, count(g2, "mul"))
  end)

  it("does not cancel permutes that do not compose to the identity", function()
    local g = dle.graph.trace(function(x) return x:permute(2, 3, 1):permute(2, 3, 1) end, dle.randn(2, 3, 4))
    local g2, counts = R.apply(g, R.rules.algebra)
    assert.equal(0, counts["algebra.permute_cancel"])
    assert.equal(2, count(g2, "permute"))
  end)

  it("merges Q, K, V projections of one input into one matmul and narrows, with equal results", function()
    local q, k, v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
    local f = function(x)
      local B_, T = x:size(1), x:size(2)
      local qh = q(x):view(B_, T, 2, 4):transpose(2, 3)
      local kh = k(x):view(B_, T, 2, 4):transpose(2, 3)
      local vh = v(x):view(B_, T, 2, 4):transpose(2, 3)
      return (qh:matmul(kh:transpose(3, 4)) / 2):softmax(-1):matmul(vh)
    end
    local g = dle.graph.trace(f, dle.randn(2, 5, 8))
    local before = count(g, "matmul")
    local g2, counts = R.apply(g, R.rules.algebra)
    assert.equal(1, counts["algebra.merge_matmuls"] > 0 and 1 or 0)
    assert.equal(before - 2, count(g2, "matmul"))
    assert.is_true(count(g2, "narrow") >= 3)
    local x = dle.randn(2, 5, 8)
    assert.is_true(max_diff(g2:run(x), f(x)) < 1e-5)
    -- gradients still reach each projection's own weight
    local loss = g2:run(x):sum()
    local gq = dle.grad(loss, {q.weight})[1]
    local want = dle.grad(f(x):sum(), {q.weight})[1]
    assert.is_true(max_diff(gq, want) < 1e-5)
  end)

  it("does not merge products of different inputs", function()
    local a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    local g = dle.graph.trace(function(x, y) return a(x) + b(y) end, dle.randn(2, 4), dle.randn(2, 4))
    local _, counts = R.apply(g, R.rules.algebra)
    assert.equal(0, counts["algebra.merge_matmuls"])
  end)

  it("verify is ok for every algebra rule", function()
    verify_all(R.rules.algebra, 2, 1e-9, rule_name)
  end)
end)

describe("rules.fusion", function()
  local f = function(x, y) return ((x * 2 + y):tanh() - x):relu():sigmoid() * 3 end

  it("turns an elementwise chain into one fused node and leaves single ops alone", function()
    local g = dle.graph.trace(f, dle.randn(4, 5), dle.randn(5))
    local g2, counts = R.apply(g, R.rules.fusion)
    assert.equal(1, counts["fusion.elementwise"])
    assert.equal(1, count(g2, "fused"))
    assert.equal(0, count(g2, "mul"))
    assert.same({"mul", "add", "tanh", "sub", "relu", "sigmoid", "mul"}, g2.outputs[1].attrs.ops)
    local single = dle.graph.trace(function(x) return x:matmul(x):relu() end, dle.randn(3, 3))
    local _, c2 = R.apply(single, R.rules.fusion)
    assert.equal(0, c2["fusion.elementwise"])
  end)

  it("stops at a value with other users and at shape changes", function()
    local g = dle.graph.trace(function(x) local a = x:exp(); return (a + 1):relu(), a:sum() end, dle.randn(3, 4))
    local g2 = R.apply(g, R.rules.fusion)
    assert.equal(1, count(g2, "exp"))
    assert.equal(1, count(g2, "fused"))
  end)

  for _, dtype in ipairs({"float32", "float64"}) do
    it("equals the unfused ops on odd sizes, broadcasts and non-contiguous inputs (" .. dtype .. ")", function()
      local opts = {dtype = dtype}
      local tol = dtype == "float32" and 1e-5 or 1e-12
      for _, shape in ipairs({{1}, {7, 13}, {3, 1029}, {2, 3, 5}}) do
        local x = dle.randn(shape, opts)
        local y = dle.randn(shape[#shape], opts)
        local g = dle.graph.trace(f, x, y)
        local g2 = R.apply(g, R.rules.fusion)
        assert.equal(1, count(g2, "fused"))
        assert.is_true(max_diff(g2:run(x, y), f(x, y)) < tol, table.concat(shape, "x"))
      end
      -- a transposed input and a column broadcast
      local xt = dle.randn(9, 6, opts):t()
      local col = dle.randn(6, 1, opts)
      local h = function(a, b) return (a * b - a:abs()):exp():clamp(0.1, 3) end
      local g = R.apply(dle.graph.trace(h, xt, col), R.rules.fusion)
      assert.equal(1, count(g, "fused"))
      assert.is_true(max_diff(g:run(xt, col), h(xt, col)) < tol)
    end)
  end

  it("covers every fusable op in a chain with the same results as eager", function()
    local ops = {"neg", "abs", "relu", "exp", "log", "expm1", "log1p", "sqrt", "rsqrt", "reciprocal",
                 "sin", "cos", "tanh", "sigmoid", "gelu", "silu"}
    for _, dtype in ipairs({"float32", "float64"}) do
      for _, op in ipairs(ops) do
        local h = function(x) return (x:abs() + 0.5)[op](x:abs() + 0.5) * 2 end
        local x = dle.randn(33, 17, {dtype = dtype})
        local g = R.apply(dle.graph.trace(h, x), R.rules.fusion)
        assert.equal(1, count(g, "fused"), op)
        assert.is_true(max_diff(g:run(x), h(x)) < (dtype == "float32" and 1e-5 or 1e-12), op .. " " .. dtype)
      end
    end
  end)

  it("is counted by dle.profile and dle.flops as one fused_elementwise call per run", function()
    local x, y = dle.randn(7, 13), dle.randn(13)
    local g2 = R.apply(dle.graph.trace(f, x, y), R.rules.fusion)
    local prof = dle.profile(function() return g2:run(x, y) end)
    local by_op = {}
    for _, r in ipairs(prof:ops()) do by_op[r.op] = r end
    local fused = by_op.fused_elementwise
    assert.is_not_nil(fused)
    assert.equal(1, fused.calls)
    assert.equal(7 * 91, fused.flops)                -- 7 instructions over 91 elements
    -- x, y (once), the constants 2 and 3 (0-dim inputs of the node) and the output, float32
    assert.equal((91 + 13 + 2 + 91) * 4, fused.bytes)
    assert.is_nil(by_op.tanh)                        -- the fused ops are not counted again
    assert.equal(7 * 91, dle.flops(function() return g2:run(x, y) end))
  end)

  it("gives gradients through fused nodes equal to eager and to finite differences (float64)", function()
    local g = R.apply(dle.graph.trace(f, dle.randn(3, 4, {dtype = "float64"}), dle.randn(4, {dtype = "float64"})),
                      R.rules.fusion)
    local x = dle.randn(3, 4, {dtype = "float64", requires_grad = true})
    local y = dle.randn(4, {dtype = "float64", requires_grad = true})
    local got = dle.grad(g:run(x, y):sum(), {x, y})
    local want = dle.grad(f(x, y):sum(), {x, y})
    for i = 1, 2 do assert.is_true(max_diff(got[i], want[i]) < 1e-12) end
    H.gradcheck(function(a, b) return g:run(a, b) end, {x:detach(), y:detach()}, {forward = false})
  end)

  it("verify is ok for every fusion rule", function()
    verify_all(R.rules.fusion, 1, 1e-9, function(r) return r.root end)
  end)
end)

describe("rules.inference", function()
  it("folds subgraphs of constants and leaves inputs alone", function()
    local c = dle.randn(3)
    local g = dle.graph.trace(function(x) return x + (c * 2):exp() end, dle.randn(3))
    local g2, counts = R.apply(g, R.rules.inference)
    assert.equal(2, counts["inference.fold_constants"])
    assert.equal(0, count(g2, "exp"))
    assert.equal(1, count(g2, "add"))
    local x = dle.randn(3)
    assert.is_true(max_diff(g2:run(x), x + (c * 2):exp()) < 1e-6)
  end)

  local function frozen(net)
    for _, p in ipairs(net:parameters()) do p:requires_grad_(false) end
    dle.no_grad(function()
      for _, m in ipairs(net:modules()) do
        if m.running_mean then
          m.running_mean:copy_(dle.randn(m.running_mean:shape()))
          m.running_var:copy_(dle.rand(m.running_var:shape()) + 0.5)
        end
      end
    end)
    net:eval()
    return net
  end

  it("folds conv2d + eval batch_norm into one conv2d with equal results", function()
    local net = frozen(nn.Sequential(nn.Conv2d(3, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU()))
    local g = dle.graph.trace(function(x) return net(x) end, dle.randn(2, 3, 6, 6))
    local g2, counts = R.apply(g, R.rules.inference)
    assert.equal(1, counts["inference.conv_bn"])
    assert.equal(0, count(g2, "batch_norm"))
    local x = dle.randn(2, 3, 6, 6)
    assert.is_true(max_diff(g2:run(x), net(x)) < 1e-4)
  end)

  it("folds linear + eval batch_norm", function()
    local net = frozen(nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4)))
    local g = dle.graph.trace(function(x) return net(x) end, dle.randn(3, 5))
    local g2, counts = R.apply(g, R.rules.inference)
    assert.equal(1, counts["inference.linear_bn"])
    local x = dle.randn(3, 5)
    assert.is_true(max_diff(g2:run(x), net(x)) < 1e-5)
  end)

  it("does not fold parameters that require grad, nor training-mode batch norm", function()
    local net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    net:eval()
    local g = dle.graph.trace(function(x) return net(x) end, dle.randn(1, 3, 5, 5))
    local _, counts = R.apply(g, R.rules.inference)
    assert.equal(0, counts["inference.conv_bn"])
    for _, p in ipairs(net:parameters()) do p:requires_grad_(false) end
    net:train()
    local g3 = dle.graph.trace(function(x) return net(x) end, dle.randn(2, 3, 5, 5))
    local _, c3 = R.apply(g3, R.rules.inference)
    assert.equal(0, c3["inference.conv_bn"])
  end)

  it("verify is ok for every inference rule", function()
    verify_all(R.rules.inference, 2, nil, rule_name)
  end)
end)
