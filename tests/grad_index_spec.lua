-- covers: cat gather scatter_add index_select index_add masked_fill tril triu
-- grad_index_spec.lua — gradient rules (reverse and forward mode) of the joining and indexing
-- ops, checked with dle.gradcheck (float64, central differences, forward = true) on odd shapes,
-- every dim, negative dims, non-contiguous inputs, broadcast masks and repeated indices; the
-- Lua compositions stack/split/chunk; double backward of gather (and of the ops its gradient uses).
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

-- deterministic values: the specs must not depend on the global generator's state
local gen = dle.Generator(20240611)
local R, I, B = H.randn64(gen), H.int64, H.bool

local check = H.gradcheck

-- A function of gradcheck's inputs whose results are gradients computed with create_graph: it
-- records even inside gradcheck's no_grad finite differences, so the gradient is compared with
-- finite differences of itself (double backward) in reverse and forward mode.
local function gradient_of(f)
  return function(...) return dle.enable_grad(f, ...) end
end

-- copies of views, so an output never aliases a gradcheck input (the finite differences write
-- into the inputs while earlier outputs are still held)
local function copies(list)
  local out = {}
  for i, t in ipairs(list) do out[i] = dle.cat({t}) end
  return table.unpack(out)
end

local function assert_close(expected, actual, tol)
  tol = tol or 1e-10
  assert.same(expected:shape(), actual:shape())
  local e, a = expected:contiguous():view(-1):totable(), actual:contiguous():view(-1):totable()
  for i = 1, #e do
    assert(math.abs(e[i] - a[i]) <= tol, string.format("element %d: expected %.12g, got %.12g", i, e[i], a[i]))
  end
end

describe("op table", function()
  it("every differentiable indexing op has a reverse and a forward rule; one_hot has none", function()
    local seen = {}
    for _, op in ipairs(dle.core.op_table()) do
      if op.kind == "index" or op.kind == "INDEX" then
        seen[op.name] = true
        if op.name == "one_hot" then
          assert.is_false(op.differentiable)
        else
          assert(op.differentiable, op.name .. " should be differentiable")
          assert(op.has_vjp, op.name .. " has no vjp")
          assert(op.has_jvp, op.name .. " has no jvp")
        end
      end
    end
    for _, name in ipairs({"cat", "gather", "scatter_add", "index_select", "index_add", "masked_fill",
                           "tril", "triu", "one_hot"}) do
      assert(seen[name], name .. " missing from the op table (kind index)")
    end
  end)
end)

describe("cat gradient", function()
  it("narrows g for each of three inputs along dims 1, 2, -1 and -2 (3-D)", function()
    check(function(a, b, c) return dle.cat({a, b, c}, 1) end, {R(2, 5), R(3, 5), R(1, 5)})
    check(function(a, b, c) return dle.cat({a, b, c}, 2) end, {R(3, 2), R(3, 5), R(3, 1)})
    check(function(a, b, c) return dle.cat({a, b, c}, -1) end, {R(3, 2), R(3, 5), R(3, 1)})
    check(function(a, b) return dle.cat({a, b}, -2) end, {R(2, 3, 3), R(2, 1, 3)})
    check(function(a, b) return dle.cat({a, b}, 3) end, {R(2, 3, 1), R(2, 3, 2)})
  end)

  it("defaults to dim 1 and handles a single input", function()
    check(function(a, b) return dle.cat({a, b}) end, {R(2, 3), R(1, 3)})
    check(function(a) return dle.cat({a}, 2) end, {R(3, 5)})
  end)

  it("works on non-contiguous (transposed, narrowed) inputs", function()
    check(function(a, b) return dle.cat({a:t(), b:narrow(1, 2, 3)}, 1) end, {R(5, 3), R(6, 5)})
    check(function(a, b) return dle.cat({a:t(), b:narrow(2, 2, 5)}, 2) end, {R(5, 3), R(3, 7)})
  end)

  it("gives zeros of shape {0} to a skipped 1-D empty input and g's slices to the others", function()
    check(function(e, a, b) return dle.cat({e, a, e, b}, 2) end, {dle.zeros(0, F64), R(3, 2), R(3, 3)})
    local e = dle.zeros(0, {dtype = "float64", requires_grad = true})
    local a = R(2, 3):requires_grad_(true)
    local g = R(4, 3)
    local y = dle.cat({e, a, a}, 1)
    local ge, ga = table.unpack(dle.grad(y, {e, a}, {grad_outputs = g}))
    assert.same({0}, ge:shape())
    assert_close(g:narrow(1, 1, 2) + g:narrow(1, 3, 2), ga)
  end)

  it("ignores integer inputs and promotes (float64 with int64)", function()
    local k = I({{1, 2, 3}})
    check(function(a) return dle.cat({k, a, k}, 1) end, {R(2, 3)})
  end)

  it("gives gradients only to the inputs that require grad (constant operands)", function()
    local b = R(3, 2)
    check(function(a) return dle.cat({b, a, b}, 2) end, {R(3, 4)})
  end)

  it("casts each input's gradient to its dtype (float32 with float64)", function()
    local a = dle.randn(2, 3, {generator = gen}):requires_grad_(true)
    local b = R(1, 3):requires_grad_(true)
    local y = dle.cat({a, b}, 1)
    assert.equal("float64", y:dtype())
    local ga, gb = table.unpack(dle.grad(y, {a, b}, {grad_outputs = dle.ones(3, 3, F64)}))
    assert.equal("float32", ga:dtype())
    assert.equal("float64", gb:dtype())
    assert.same({{1, 1, 1}, {1, 1, 1}}, ga:totable())
  end)

  it("forward mode fills zeros for inputs without a tangent", function()
    local a, b, ta = R(3, 2), R(3, 4), R(3, 2)
    local y, ty = dle.jvp(function(x) return dle.cat({b, x, b}, 2) end, a, ta)
    assert.same({3, 10}, y:shape())
    assert_close(dle.cat({dle.zeros(3, 4, F64), ta, dle.zeros(3, 4, F64)}, 2), ty)
  end)
end)

describe("stack, split and chunk gradients (compositions of cat and narrow)", function()
  it("stack along dims 1, 2, 3 and -1", function()
    for _, d in ipairs({1, 2, 3, -1}) do
      check(function(a, b, c) return dle.stack({a, b, c}, d) end, {R(3, 5), R(3, 5), R(3, 5)})
    end
  end)

  it("split by size and by sizes, every piece an output, dims 1, 2, -1", function()
    check(function(x) return copies(x:split(2, 1)) end, {R(5, 3)})
    check(function(x) return copies(x:split(2, 2)) end, {R(3, 5)})
    check(function(x) return copies(x:split({1, 3, 1}, -1)) end, {R(3, 5)})
  end)

  it("split pieces re-joined in another order (narrow then cat)", function()
    check(function(x)
      local p = x:split(2, 2)
      return dle.cat({p[3], p[1], p[2], p[1]}, 2)
    end, {R(3, 5)})
  end)

  it("chunk along dims 1 and -1, then cat", function()
    check(function(x) return copies(dle.chunk(x, 2, 1)) end, {R(5, 3)})
    check(function(x)
      local p = x:chunk(3, -1)
      return dle.cat({p[2], p[3], p[1]}, -1)
    end, {R(3, 7)})
  end)
end)

describe("gather gradient", function()
  -- index values (1-based) with repeats: gradients of repeated picks accumulate
  local idx_d2 = I({{1, 5, 5, 2}, {3, 3, 3, 1}, {4, 2, 5, 4}})        -- 3x4 into 3x5 along dim 2
  local idx_d1 = I({{1, 3, 2, 3, 1}, {3, 3, 1, 2, 2}, {2, 1, 1, 3, 3}, {1, 2, 3, 1, 2}}) -- 4x5 along dim 1

  it("along dims 2 and -1 (repeated indices)", function()
    check(function(x) return x:gather(2, idx_d2) end, {R(3, 5)})
    check(function(x) return x:gather(-1, idx_d2) end, {R(3, 5)})
  end)

  it("along dims 1 and -2 with more index rows than src rows", function()
    check(function(x) return x:gather(1, idx_d1) end, {R(3, 5)})
    check(function(x) return x:gather(-2, idx_d1) end, {R(3, 5)})
  end)

  it("with an index smaller than src in the other dim", function()
    check(function(x) return x:gather(2, I({{2, 2, 5}, {1, 4, 1}})) end, {R(3, 5)})
  end)

  it("on a 3-D src along each dim", function()
    local idx = {I({{{1, 2, 1, 2}}, {{2, 2, 1, 1}}}),          -- 2x1x4 into 2x3x4 along 1
                 I({{{3, 1, 1, 2}, {2, 3, 3, 3}}, {{1, 1, 2, 3}, {3, 2, 1, 1}}}), -- 2x2x4 along 2
                 I({{{4, 4}, {1, 3}, {2, 2}}, {{3, 1}, {1, 1}, {4, 2}}})}  -- 2x3x2 along 3
    for d = 1, 3 do
      check(function(x) return x:gather(d, idx[d]) end, {R(2, 3, 4)})
    end
    check(function(x) return x:gather(-3, idx[1]) end, {R(2, 3, 4)})
  end)

  it("on a non-contiguous src (transposed, narrowed)", function()
    check(function(x) return x:t():gather(2, idx_d2) end, {R(5, 3)})
    check(function(x) return x:narrow(2, 2, 5):gather(1, idx_d1) end, {R(3, 7)})
  end)

  it("accumulates gradients of repeated indices", function()
    local x = dle.arange(0, 6, 1, F64):view(2, 3):requires_grad_(true)
    local y = x:gather(2, I({{1, 1, 1, 3}, {2, 2, 3, 2}}))
    local g = dle.grad(y, x, {grad_outputs = dle.ones(2, 4, F64)})[1]
    assert.same({{3, 0, 1}, {0, 3, 1}}, g:totable())
  end)

  it("double backward: the gradient scatter-adds the incoming gradient, whose own gradient gathers", function()
    local x = R(3, 5):requires_grad_(true)
    local w = R(3, 4):requires_grad_(true)
    local c = R(3, 5)
    local g = dle.grad(x:gather(2, idx_d2), x, {grad_outputs = w, create_graph = true})[1]
    assert(g.requires_grad, "the gradient should be differentiable with create_graph")
    -- g = scatter_add(0, idx, w): d<g, c>/dw = gather(c, idx)
    local gw = dle.grad(g, w, {grad_outputs = c})[1]
    assert_close(c:gather(2, idx_d2), gw)
    -- the gradient as a function of w, against finite differences
    check(gradient_of(function(w2)
      local x2 = x:detach():requires_grad_(true)
      return dle.grad(x2:gather(2, idx_d2), x2, {grad_outputs = w2, create_graph = true})[1]
    end), {w})
  end)

  it("double backward of a nonlinear use: d/dx of the gradient of sum(gather(x)^2)", function()
    local c = R(3, 5)
    -- grad = scatter_add(0, idx, 2 gather(x)); its directional derivative along c is linear in x
    check(gradient_of(function(x)
      local y = x:gather(2, idx_d2)
      local g = dle.grad(y * y, x, {grad_outputs = dle.ones(3, 4, F64), create_graph = true})[1]
      return g * c
    end), {R(3, 5)}, {forward = false})  -- forward-over-reverse through saved non-leaf values
                                         -- is an engine limitation (see the report)
  end)
end)

describe("scatter_add gradient", function()
  local idx = I({{1, 5, 5, 2}, {3, 3, 3, 1}, {4, 2, 5, 4}})   -- 3x4, repeats along dim 2

  it("along dims 2 and -1: self gets g, src gets gather(g)", function()
    check(function(s, src) return s:scatter_add(2, idx, src) end, {R(3, 5), R(3, 4)})
    check(function(s, src) return s:scatter_add(-1, idx, src) end, {R(3, 5), R(3, 4)})
  end)

  it("along dims 1 and -2 with more index rows than self rows", function()
    local i1 = I({{1, 3, 2, 3, 1}, {3, 3, 1, 2, 2}, {2, 1, 1, 3, 3}, {1, 2, 3, 1, 2}})
    check(function(s, src) return dle.scatter_add(s, 1, i1, src) end, {R(3, 5), R(4, 5)})
    check(function(s, src) return dle.scatter_add(s, -2, i1, src) end, {R(3, 5), R(4, 5)})
  end)

  it("with src larger than index (its extra elements get zero gradient)", function()
    check(function(s, src) return s:scatter_add(2, idx, src) end, {R(3, 5), R(4, 6)})
    check(function(s, src) return s:scatter_add(1, I({{2, 1}, {2, 3}}), src) end, {R(3, 5), R(3, 4)})
  end)

  it("on non-contiguous self and src", function()
    check(function(s, src) return s:t():scatter_add(2, idx, src:narrow(1, 2, 3)) end, {R(5, 3), R(5, 4)})
  end)

  it("in place on a clone (scatter_add_)", function()
    check(function(s, src) return s:clone():scatter_add_(2, idx, src) end, {R(3, 5), R(3, 4)})
  end)

  it("double backward: the src gradient gather(g) is itself differentiable", function()
    local s, src = R(3, 5):requires_grad_(true), R(3, 4):requires_grad_(true)
    check(gradient_of(function(w)
      -- self's gradient is w itself: copied so it does not alias gradcheck's input
      return copies(dle.grad(s:scatter_add(2, idx, src), {s, src},
                             {grad_outputs = w, create_graph = true}))
    end), {R(3, 5)})
  end)
end)

describe("index_select gradient", function()
  local idx = I({3, 1, 3, 2, 3})

  it("along dims 1, 2, -1 and -2 with repeated indices", function()
    check(function(x) return x:index_select(1, idx) end, {R(3, 5)})
    check(function(x) return x:index_select(2, I({5, 1, 5, 2})) end, {R(3, 5)})
    check(function(x) return x:index_select(-1, I({5, 1, 5, 2})) end, {R(3, 5)})
    check(function(x) return x:index_select(-2, idx) end, {R(3, 5)})
  end)

  it("on a 3-D src along dim 2, and with a single index", function()
    check(function(x) return x:index_select(2, I({3, 3, 1})) end, {R(2, 3, 4)})
    check(function(x) return x:index_select(3, I({4})) end, {R(2, 3, 4)})
    check(function(x) return x:index_select(2, I(3)) end, {R(3, 4)})   -- 0-dim index
  end)

  it("on non-contiguous src (transposed, narrowed)", function()
    check(function(x) return x:t():index_select(2, I({5, 1, 5, 2})) end, {R(5, 3)})
    check(function(x) return x:narrow(1, 2, 3):index_select(1, idx) end, {R(5, 4)})
  end)

  it("accumulates gradients of repeated indices", function()
    local x = dle.zeros(3, 2, F64):requires_grad_(true)
    local g = dle.grad(x:index_select(1, I({3, 3, 1, 3})), x, {grad_outputs = dle.ones(4, 2, F64)})[1]
    assert.same({{1, 1}, {0, 0}, {3, 3}}, g:totable())
  end)

  it("double backward: the gradient index_add(0, idx, w) differentiates to index_select", function()
    local x, w, c = R(3, 5):requires_grad_(true), R(5, 5):requires_grad_(true), R(3, 5)
    local g = dle.grad(x:index_select(1, idx), x, {grad_outputs = w, create_graph = true})[1]
    assert_close(c:index_select(1, idx), dle.grad(g, w, {grad_outputs = c})[1])
  end)
end)

describe("index_add gradient", function()
  it("along dims 1, 2, -1 and -2: self gets g, src gets index_select(g)", function()
    local i5 = I({3, 1, 3, 2, 3})
    check(function(s, src) return s:index_add(1, i5, src) end, {R(3, 5), R(5, 5)})
    check(function(s, src) return s:index_add(-2, i5, src) end, {R(3, 5), R(5, 5)})
    check(function(s, src) return s:index_add(2, I({5, 1, 5, 2}), src) end, {R(3, 5), R(3, 4)})
    check(function(s, src) return dle.index_add(s, -1, I({5, 1, 5, 2}), src) end, {R(3, 5), R(3, 4)})
  end)

  it("on a 3-D self, non-contiguous operands and in place on a clone", function()
    check(function(s, src) return s:index_add(2, I({2, 2}), src) end, {R(2, 3, 4), R(2, 2, 4)})
    check(function(s, src) return s:t():index_add(1, I({1, 5}), src:t()) end, {R(3, 5), R(3, 2)})
    check(function(s, src) return s:clone():index_add_(2, I({5, 1, 5}), src) end, {R(3, 5), R(3, 3)})
  end)

  it("with self float32 and src float64: each gradient in its input's dtype", function()
    local s = dle.randn(3, 4, {generator = gen}):requires_grad_(true)
    local src = R(3, 2):requires_grad_(true)
    local y = s:index_add(2, I({4, 1}), src)
    assert.equal("float64", y:dtype())
    local gs, gsrc = table.unpack(dle.grad(y, {s, src}, {grad_outputs = dle.ones(3, 4, F64)}))
    assert.equal("float32", gs:dtype())
    assert.equal("float64", gsrc:dtype())
  end)

  it("double backward: the src gradient index_select(g) is differentiable", function()
    local s, src = R(3, 5):requires_grad_(true), R(3, 3):requires_grad_(true)
    check(gradient_of(function(w)
      return copies(dle.grad(s:index_add(2, I({5, 1, 5}), src), {s, src},
                             {grad_outputs = w, create_graph = true}))
    end), {R(3, 5)})
  end)
end)

describe("masked_fill gradient", function()
  local mask = B({{true, false, false, true, false}, {false, false, true, false, false},
                  {true, true, false, false, true}})

  it("zeros the gradient where the mask is set (same shape)", function()
    check(function(x) return x:masked_fill(mask, 7.5) end, {R(3, 5)})
    local x = R(3, 5):requires_grad_(true)
    local g = dle.grad(x:masked_fill(mask, 0), x, {grad_outputs = dle.ones(3, 5, F64)})[1]
    assert.same(mask:logical_not():to("float64"):totable(), g:totable())
  end)

  it("with a mask broadcasting over src (row and column masks)", function()
    check(function(x) return x:masked_fill(B({{true, false, true, false, false}}), -1) end, {R(3, 5)})
    check(function(x) return x:masked_fill(B({{false}, {true}, {false}}), 2) end, {R(3, 5)})
  end)

  it("with src broadcasting to the mask's shape (gradient summed back)", function()
    check(function(x) return x:masked_fill(mask, 1) end, {R(5)})
    check(function(x) return x:masked_fill(mask, 1) end, {R(3, 1)})
  end)

  it("on non-contiguous src and in place on a clone", function()
    check(function(x) return x:t():masked_fill(mask, 3) end, {R(5, 3)})
    check(function(x) return x:clone():masked_fill_(mask, 3) end, {R(3, 5)})
  end)

  it("double backward: the gradient masked_fill(w, mask, 0) is differentiable", function()
    local x = R(3, 5):requires_grad_(true)
    check(gradient_of(function(w)
      return dle.grad(x:masked_fill(mask, 9), x, {grad_outputs = w, create_graph = true})[1]
    end), {R(3, 5)})
  end)
end)

describe("tril and triu gradients", function()
  it("tril and triu for k = 0, 1, -1, -2 on wide and tall matrices", function()
    for _, k in ipairs({0, 1, -1, -2}) do
      check(function(x) return x:tril(k) end, {R(3, 5)})
      check(function(x) return x:triu(k) end, {R(3, 5)})
      check(function(x) return dle.tril(x, k) end, {R(5, 3)})
      check(function(x) return dle.triu(x, k) end, {R(5, 3)})
    end
  end)

  it("default k, batched 3-D input, non-contiguous input", function()
    check(function(x) return x:tril() end, {R(4, 4)})
    check(function(x) return x:triu() end, {R(2, 3, 4)})
    check(function(x) return x:tril(1) end, {R(2, 3, 4)})
    check(function(x) return x:t():triu(1) end, {R(5, 3)})
    check(function(x) return x:narrow(2, 2, 4):tril(-1) end, {R(3, 6)})
  end)

  it("in place on a clone (tril_, triu_)", function()
    check(function(x) return x:clone():tril_(1) end, {R(3, 5)})
    check(function(x) return x:clone():triu_(-1) end, {R(3, 5)})
  end)

  it("gradient of tril is the lower triangle of g, and triu of triu's", function()
    local x = R(3, 4):requires_grad_(true)
    local g = R(3, 4)
    assert_close(g:tril(-1), dle.grad(x:tril(-1), x, {grad_outputs = g})[1])
    assert_close(g:triu(2), dle.grad(x:triu(2), x, {grad_outputs = g})[1])
  end)

  it("double backward of tril", function()
    local x = R(3, 5):requires_grad_(true)
    check(gradient_of(function(w)
      return dle.grad(x:tril(1), x, {grad_outputs = w, create_graph = true})[1]
    end), {R(3, 5)})
  end)
end)
