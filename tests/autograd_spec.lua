-- autograd_spec.lua — the autodiff engine's behaviour (not the per-op rules, which the
-- tests/grad_*_spec.lua files check): accumulation into .grad, dle.grad, graph retention,
-- in-place safety, grad mode, detach, higher order, forward mode against reverse mode, memory,
-- and custom Lua ops (dle.autograd.Function).
-- Only ops whose rules are certain to exist are used here: add sub mul neg exp sum.
local dle = require("dle")

local f64 = {dtype = "float64"}

local function full_gc()
  collectgarbage()
  collectgarbage()
end

local function vals(t) return t:detach():contiguous():view(-1):totable() end

local function assert_close(expected, got, tol)
  tol = tol or 1e-9
  if type(expected) == "number" then expected = {expected} end
  if dle.is_tensor(got) then got = vals(got) elseif type(got) == "number" then got = {got} end
  assert.are.equal(#expected, #got, "number of elements")
  for i = 1, #expected do
    local e, g = expected[i], got[i]
    if math.abs(e - g) > tol * math.max(1, math.abs(e)) then
      error(string.format("element %d: expected %.12g, got %.12g", i, e, g), 2)
    end
  end
end

local function leaf(v) return dle.tensor(v, f64):requires_grad_() end

describe("autograd engine", function()
  it("backward accumulates into the .grad of leaves (a second backward doubles it)", function()
    local x = leaf({1, 2, 3})
    local w = leaf({4, 5, 6})
    local y = (x * w):sum()
    y:backward(nil, {retain_graph = true})
    assert_close({4, 5, 6}, x.grad)
    assert_close({1, 2, 3}, w.grad)
    y:backward()
    assert_close({8, 10, 12}, x.grad)
    assert_close({2, 4, 6}, w.grad)
    assert.is_false(x.grad.requires_grad)  -- gradients are detached without create_graph
  end)

  it(".grad is dense, accumulates in place, and a gradient read earlier never changes", function()
    local x = leaf({1, 2, 3})
    x:sum():backward()                     -- sum's gradient is a broadcast of one value
    assert.is_true(x.grad:is_contiguous())
    for _ = 1, 4 do (x * 2):sum():backward() end
    assert_close({9, 9, 9}, x.grad)
    local before = x.grad                  -- a reference the next step must not write through
    ;(x * x):sum():backward()
    assert_close({9, 9, 9}, before)
    assert_close({11, 13, 15}, x.grad)
    x.grad:zero_()
    ;(x * 3):sum():backward()
    assert_close({3, 3, 3}, x.grad)
  end)

  it("the gradient of a weight used transposed (x @ w:t(), as Linear does) is dense", function()
    local x, w = leaf({{1, 2}, {3, 4}, {5, 6}}), leaf({{1, 0}, {0, 1}, {1, 1}})
    x:matmul(w:t()):sum():backward()
    assert.is_true(w.grad:is_contiguous())
    assert_close({9, 12, 9, 12, 9, 12}, w.grad:reshape(6))   -- every row: column sums of x
    assert_close({2, 2, 2, 2, 2, 2}, x.grad:reshape(6))      -- every row: column sums of w
  end)

  it("backward on a fresh graph adds to an existing .grad", function()
    local x = leaf({1, 2})
    ;(x * x):sum():backward()
    ;(x * x):sum():backward()
    assert_close({4, 8}, x.grad)
    x.grad = nil
    ;(x * 3):sum():backward()
    assert_close({3, 3}, x.grad)
  end)

  it("dle.grad returns the gradients and leaves .grad untouched", function()
    local x, w = leaf({1, 2, 3}), leaf({4, 5, 6})
    local gx, gw = table.unpack(dle.grad((x * w):sum(), {x, w}))
    assert_close({4, 5, 6}, gx)
    assert_close({1, 2, 3}, gw)
    assert.is_nil(x.grad)
    assert.is_nil(w.grad)
    -- a single input may be passed without a list
    local g = dle.grad((x * x):sum(), x)
    assert_close({2, 4, 6}, g[1])
  end)

  it("dle.grad: an unused input is an error unless allow_unused (then nil)", function()
    local x, u = leaf({1, 2}), leaf({3})
    assert.has_error(function() dle.grad((x * 2):sum(), {x, u}) end)
    local g = dle.grad((x * 2):sum(), {x, u}, {allow_unused = true})
    assert_close({2, 2}, g[1])
    assert.is_nil(g[2])
  end)

  it("grad_outputs weight a non-scalar output (vector-Jacobian product)", function()
    local x = leaf({1, 2, 3})
    local y = x * x                                  -- dy/dx = 2x
    local v = dle.tensor({1, 10, 100}, f64)
    local g = dle.grad(y, {x}, {grad_outputs = v})[1]
    assert_close({2, 40, 600}, g)
    y = x * x
    y:backward(v)
    assert_close({2, 40, 600}, x.grad)
    -- several outputs with their grad_outputs: the vjps add
    local a, b = x * 2, x:exp()
    g = dle.grad({a, b}, {x}, {grad_outputs = {dle.ones_like(a), v}})[1]
    local e = vals(x:detach():exp())
    assert_close({2 + e[1], 2 + 10 * e[2], 2 + 100 * e[3]}, g)
  end)

  it("grad_outputs of the wrong shape is an error", function()
    local x = leaf({1, 2, 3})
    assert.has_error(function() dle.grad(x * 2, {x}, {grad_outputs = dle.ones(2, f64)}) end)
  end)

  it("a value used by several consumers sums its partial adjoints", function()
    local x = leaf({0.5, -1})
    local u = x:exp()                       -- consumed three times
    local y = (u * u + u - u:neg()):sum()   -- u^2 + 2u
    local g = dle.grad(y, {x})[1]
    local e = vals(x:detach():exp())
    assert_close({2 * e[1] * e[1] + 2 * e[1], 2 * e[2] * e[2] + 2 * e[2]}, g)
    -- the same leaf reached along several paths
    local z = (x * x * x + x):sum()         -- 3x^2 + 1
    assert_close({1.75, 4}, dle.grad(z, {x})[1])
  end)

  it("graphs longer and wider than the backward pass's inline buffers (32 nodes) give exact gradients", function()
    -- a chain of 100 nodes: y = x * 1.01^100, so dy/dx = 1.01^100
    local x = leaf({2})
    local y = x
    for _ = 1, 100 do y = y * 1.01 end
    assert_close({1.01 ^ 100}, dle.grad(y:sum(), {x})[1])
    -- 70 branches off one leaf joined by a sum: d/dx sum_k (k*x) = sum_k k
    local terms = {}
    for k = 1, 70 do terms[k] = x * k end
    local s = terms[1]
    for k = 2, 70 do s = s + terms[k] end
    assert_close({70 * 71 / 2}, dle.grad(s:sum(), {x})[1])
  end)

  it("retain_graph allows a second backward; without it the second one is a clear error", function()
    local x = leaf({2})
    local y = (x:exp() * x):sum()
    y:backward(nil, {retain_graph = true})
    y:backward()
    local e = math.exp(2)
    assert_close({2 * (e + 2 * e)}, x.grad)
    local ok, err = pcall(function() y:backward() end)
    assert.is_false(ok)
    assert.matches("already freed", err)
    assert.matches("retain_graph", err)
    -- the same through dle.grad
    local z = (x * x):sum()
    dle.grad(z, {x})
    ok, err = pcall(dle.grad, z, {x})
    assert.is_false(ok)
    assert.matches("retain_graph", err)
  end)

  it("modifying in place a tensor saved for backward is an error naming the op, never a wrong gradient", function()
    local x = leaf({1, 2, 3})
    local y = x:exp()          -- exp saves its output
    y:add_(1)
    local ok, err = pcall(function() y:sum():backward() end)
    assert.is_false(ok)
    assert.matches("exp", err)
    assert.matches("in%-place", err)
    assert.is_nil(x.grad)
    -- a saved input modified through another tensor
    local a = leaf({1, 2})
    local b = a * 1            -- not a leaf, so it may be written in place
    local c = (b * b):sum()    -- mul saves b
    b:mul_(3)
    ok, err = pcall(function() c:backward() end)
    assert.is_false(ok)
    assert.matches("mul", err)
  end)

  it("in-place on a tensor no rule reads is fine (the gradient is right)", function()
    local x = leaf({1, 2})
    local y = x + 1
    local z = y * 2            -- mul saves its inputs (its rule reads them): the write is caught
    y:add_(5)
    assert.has_error(function() z:sum():backward() end)
    local p = x + 1
    local q = p:neg()          -- neg saves nothing
    p:add_(5)
    q:sum():backward()
    assert_close({-1, -1}, x.grad)
  end)

  it("recording an in-place write into a view, or into a base a recorded view shares, is refused", function()
    local x = leaf({1, 2})
    local buf = dle.zeros(4, f64)
    local ok, err = pcall(function() buf:narrow(1, 1, 2):copy_(x) end)   -- buf's history would miss it
    assert.is_false(ok)
    assert.matches("copy: recording an in%-place write into a view", err)
    local y = x * 2
    local v = y:view(2, 1)                                                -- a recorded view of y
    ok, err = pcall(function() y:mul_(3) end)                            -- v's history would be stale
    assert.is_false(ok)
    assert.matches("mul", err)
    -- under no_grad the same writes are allowed
    dle.no_grad(function() buf:narrow(1, 1, 2):copy_(x); y:mul_(3) end)
    assert.are.same({1, 2}, buf:narrow(1, 1, 2):totable())
    assert.are.equal(2, #v:totable())
  end)

  it("an in-place write to a leaf that requires grad is an error", function()
    local x = leaf({1, 2})
    local ok, err = pcall(function() x:add_(1) end)
    assert.is_false(ok)
    assert.matches("leaf", err)
    assert_close({1, 2}, x:detach())
    -- allowed under no_grad, or through a detached alias
    dle.no_grad(function() x:add_(1) end)
    assert_close({2, 3}, x:detach())
  end)

  it("dle.no_grad returns fn's results and records nothing", function()
    local x = leaf({1, 2})
    local a, b, c = dle.no_grad(function(p, q) return x * p, q, "s" end, 3, 7)
    assert_close({3, 6}, a)
    assert.is_false(a.requires_grad)
    assert.is_nil(a.grad_fn)
    assert.are.equal(7, b)
    assert.are.equal("s", c)
    assert.is_true(dle.is_grad_enabled())
  end)

  it("dle.no_grad restores the grad mode even when fn raises", function()
    local ok, err = pcall(dle.no_grad, function()
      assert.is_false(dle.is_grad_enabled())
      error("inside")
    end)
    assert.is_false(ok)
    assert.matches("inside", err)
    assert.is_true(dle.is_grad_enabled())
    -- nested: the inner one restores the outer mode
    dle.no_grad(function()
      pcall(dle.no_grad, function() error("x") end)
      assert.is_false(dle.is_grad_enabled())
    end)
    assert.is_true(dle.is_grad_enabled())
  end)

  it("t:detach() shares storage with t but has no history", function()
    local x = leaf({1, 2, 3})
    local y = x * 2
    local d = y:detach()
    assert.is_false(d.requires_grad)
    assert.is_nil(d.grad_fn)
    assert.is_true(d.is_leaf)
    assert.is_true(dle.same_storage(d, y))
    dle.no_grad(function() d[1] = 42 end)
    assert.are.equal(42, y:detach()[1])
    -- computing from a detached tensor records nothing
    assert.is_false((d * x:detach()).requires_grad)
  end)

  it("requires_grad_ on an integer or bool tensor is an error", function()
    local i = dle.tensor({1, 2}, {dtype = "int64"})
    local ok, err = pcall(function() i:requires_grad_() end)
    assert.is_false(ok)
    assert.matches("int64", err)
    assert.has_error(function() dle.tensor({true, false}, {dtype = "bool"}):requires_grad_() end)
    assert.is_false(i.requires_grad)
  end)

  it(".grad_fn names the op that made a tensor; .is_leaf", function()
    local x = leaf({1, 2})
    assert.is_nil(x.grad_fn)
    assert.is_true(x.is_leaf)
    assert.are.equal("mul", (x * x).grad_fn)
    assert.are.equal("exp", x:exp().grad_fn)
    assert.are.equal("sum", x:sum().grad_fn)
    assert.are.equal("add", (x + 1).grad_fn)
    assert.is_false((x + 1).is_leaf)
    -- a tensor that does not require grad is a leaf too
    assert.is_true(dle.ones(2).is_leaf)
  end)

  it("integer and bool results are not differentiable (comparisons do not require grad)", function()
    local x = leaf({-1, 2, 3})
    local c = x:gt(0)
    assert.are.equal("bool", c:dtype())
    assert.is_false(c.requires_grad)
    assert.is_nil(c.grad_fn)
    assert.is_false(x:eq(x).requires_grad)
    local i = x:argmax(1)
    assert.is_false(i.requires_grad)
    -- an integer tensor mixed into a float graph: the gradient flows only to the float input
    local g = dle.grad((x * c:to("float64")):sum(), {x})[1]
    assert_close({0, 1, 1}, g)
  end)

  it("the op table marks integer/bool ops non-differentiable", function()
    local by = {}
    for _, o in ipairs(dle.core.op_table()) do by[o.name] = o end
    for _, name in ipairs({"eq", "ne", "lt", "le", "gt", "ge", "argmax"}) do
      if by[name] then assert.is_false(by[name].differentiable, name) end
    end
    assert.is_true(by.add.differentiable)
  end)

  it("backward on a non-scalar output without a gradient is an error", function()
    local x = leaf({1, 2, 3})
    local ok, err = pcall(function() (x * 2):backward() end)
    assert.is_false(ok)
    assert.matches("grad_outputs", err)
    -- a one-element non-0-dim output is fine
    local y = (x * 2):sum() + dle.zeros(1, f64)   -- shape {1}
    y:backward()
    assert_close({2, 2, 2}, x.grad)
  end)

  it("backward on a tensor that does not require grad is an error", function()
    local x = dle.tensor({1, 2}, f64)
    local ok, err = pcall(function() x:sum():backward() end)
    assert.is_false(ok)
    assert.matches("does not require grad", err)
  end)

  it("second derivative: d2/dx2 of x^3 at 1.5 is 9", function()
    local x = leaf({1.5})
    local y = (x * x * x):sum()
    local g = dle.grad(y, {x}, {create_graph = true})[1]
    assert_close({3 * 1.5 * 1.5}, g)
    assert.is_true(g.requires_grad)
    local h = dle.grad(g:sum(), {x}, {create_graph = true})[1]
    assert_close({9}, h)
    -- third derivative: 6
    local t = dle.grad(h:sum(), {x})[1]
    assert_close({6}, t)
  end)

  it("second derivative through exp and a saved output: d2/dx2 of exp(2x) = 4 exp(2x)", function()
    local x = leaf({0.3, -0.7})
    local y = (x * 2):exp():sum()
    local g = dle.grad(y, {x}, {create_graph = true})[1]
    local h = dle.grad(g:sum(), {x})[1]
    assert_close({4 * math.exp(0.6), 4 * math.exp(-1.4)}, h)
  end)

  it("backward with create_graph leaves a differentiable .grad", function()
    local x = leaf({2})
    local y = (x * x * x):sum()
    y:backward(nil, {create_graph = true})
    assert.is_true(x.grad.requires_grad)
    local g = x.grad
    x.grad = nil
    g:sum():backward()
    assert_close({12}, x.grad)
  end)

  it("jvp of a composite function equals the reverse-mode gradient contracted with the tangent", function()
    local f = function(x, w) return ((x * w):exp() - x * x + w:neg()):sum() end
    local x = dle.tensor({0.3, -0.2, 0.5, 0.1, -0.4}, f64)
    local w = dle.tensor({1.1, 0.7, -0.9, 0.2, 0.6}, f64)
    local tx = dle.tensor({0.5, -1, 2, 0.25, 1}, f64)
    local tw = dle.tensor({-0.3, 0.8, 0.1, 1.5, -2}, f64)
    local out, tout = dle.jvp(f, {x, w}, {tx, tw})
    local xr, wr = x:clone():requires_grad_(), w:clone():requires_grad_()
    local y = f(xr, wr)
    assert_close(vals(out), y:detach())
    local gx, gw = table.unpack(dle.grad(y, {xr, wr}))
    local expect = (gx * tx):sum():item() + (gw * tw):sum():item()
    assert_close({expect}, tout, 1e-12)
    -- and the tangent is not left on the inputs
    assert.is_nil(dle.core._tangent(x))
  end)

  it("jvp with several outputs returns a tangent per output", function()
    local x = dle.tensor({0.1, 0.2}, f64)
    local outs, tans = dle.jvp(function(a) return a * a, a:exp() end, x, dle.ones(2, f64))
    assert.are.equal(2, #outs)
    assert_close({0.2, 0.4}, tans[1])
    assert_close({math.exp(0.1), math.exp(0.2)}, tans[2])
  end)

  it("memory: a 1000-step loop building and discarding a graph stays flat", function()
    local x = dle.randn(64, f64):requires_grad_()
    local w = dle.randn(64, f64):requires_grad_()
    local function step()
      local y = (x * w):exp():sum()
      y:backward()
      x.grad, w.grad = nil, nil
    end
    for _ = 1, 20 do step() end
    full_gc()
    local base = dle.core.memory_allocated()
    for _ = 1, 1000 do step() end
    full_gc()
    assert.are.equal(base, dle.core.memory_allocated())
    -- graphs dropped without any backward are released too
    for _ = 1, 1000 do local _ = ((x * w):exp() * x):sum() end
    full_gc()
    assert.are.equal(base, dle.core.memory_allocated())
  end)

  it("memory: intermediates the backward pass does not need are freed early", function()
    local n = 1 << 20                             -- 4 MB per float32 tensor
    local MB4 = 4 * n
    full_gc()
    local base = dle.core.memory_allocated()
    local x = dle.ones(n):requires_grad_()
    local z = ((x + 1) + 1):sum()                 -- add's rule reads neither input
    full_gc()
    local held = dle.core.memory_allocated() - base - MB4
    assert.is_true(held < MB4 // 8, "graph of add/add/sum holds " .. held .. " bytes")
    z:backward()
    assert.are.equal(n, x.grad:sum():item())
    x.grad = nil
    -- by contrast mul reads its inputs, so x + 1 stays alive while the graph does
    local m = ((x + 1) * (x + 1)):sum() -- luacheck: ignore 231 (held while memory is measured)
    full_gc()
    held = dle.core.memory_allocated() - base - MB4
    assert.is_true(held >= MB4, "mul's graph should hold x + 1 (" .. held .. " bytes)")
    m, z = nil, nil -- luacheck: ignore 311 (dropped for the collection below)
    full_gc()
    assert.are.equal(base + MB4, dle.core.memory_allocated())
  end)

  it("memory: backward without retain_graph frees the saved values at once", function()
    local n = 1 << 20
    local x = dle.ones(n):requires_grad_()
    full_gc()
    local base = dle.core.memory_allocated()
    local y = ((x + 1):exp()):sum()               -- exp saves its 4 MB output
    full_gc()
    assert.is_true(dle.core.memory_allocated() - base >= 4 * n)
    y:backward()
    x.grad = nil
    full_gc()
    assert.is_true(dle.core.memory_allocated() - base < 4 * n // 8)
  end)
end)

describe("dle.autograd.Function", function()
  local Square = dle.autograd.Function{
    name = "Square",
    forward = function(ctx, x)
      ctx:save_for_backward(x)
      return x * x
    end,
    backward = function(ctx, g)
      local x = table.unpack(ctx.saved_tensors)
      return g * x * 2
    end,
  }

  it("a Lua square op: forward value, grad_fn name and gradient", function()
    local x = leaf({1, -2, 3})
    local y = Square(x)
    assert_close({1, 4, 9}, y:detach())
    assert.are.equal("Square", y.grad_fn)
    assert.is_true(y.requires_grad)
    y:sum():backward()
    assert_close({2, -4, 6}, x.grad)
  end)

  it("a backward returning the wrong number of gradients is an error naming the Function once", function()
    local Bad = dle.autograd.Function{
      forward = function(_, x) return x * 2 end,
      backward = function(_, g) return g, g end,   -- two gradients for one input
    }
    local x = leaf({1, 2})
    local ok, err = pcall(function() Bad(x):sum():backward() end)
    assert.is_false(ok)
    err = tostring(err)
    assert.truthy(err:find("Function backward: returned 2 gradients", 1, true), err)
    assert.falsy(err:find("backward:.*backward:"), err)
  end)

  it("forward runs under no_grad (its own ops are not recorded)", function()
    local seen
    local F = dle.autograd.Function{
      forward = function(_, x) seen = dle.is_grad_enabled(); return (x * 2):exp() end,
      backward = function(_, g) return g end,
    }
    local y = F(leaf({1}))
    assert.is_false(seen)
    assert.are.equal("Function", y.grad_fn)   -- the default name, one node, not exp
  end)

  it("gradcheck of a custom op (reverse and forward mode)", function()
    local x = dle.randn(3, 5, f64)
    local ok, err, msg = dle.gradcheck(function(a) return Square(a) end, {x})
    assert.is_true(ok, msg)
    assert.is_true(err < 1e-6)
    -- forward mode flows through the dle ops forward runs
    ok, err, msg = dle.gradcheck(function(a) return Square(a) end, {x}, {forward = true})
    assert.is_true(err < 1e-6)
    assert.is_true(ok, msg)
  end)

  it("a two-output op gets one gradient per output", function()
    local SinCosLike = dle.autograd.Function{
      name = "ExpAndSquare",
      forward = function(ctx, x)
        local e = x:exp()
        ctx:save_for_backward(x, e)              -- e is an output: kept detached
        return e, x * x
      end,
      backward = function(ctx, ge, gs)
        local x, e = table.unpack(ctx.saved_tensors)
        return ge * e + gs * x * 2
      end,
    }
    local x = leaf({0.5, -0.25})
    local e, s = SinCosLike(x)
    assert.are.equal("ExpAndSquare", e.grad_fn)
    assert.are.equal("ExpAndSquare", s.grad_fn)
    local g = dle.grad((e * 3 + s):sum(), {x})[1]
    assert_close({3 * math.exp(0.5) + 1, 3 * math.exp(-0.25) - 0.5}, g)
    -- only one output used: the other's gradient arrives as zeros (materialized)
    local e2 = SinCosLike(x)
    assert_close({math.exp(0.5), math.exp(-0.25)}, dle.grad(e2:sum(), {x})[1])
    local ok, _, msg = dle.gradcheck(function(a) return SinCosLike(a) end, {dle.randn(2, 3, f64)})
    assert.is_true(ok, msg)
  end)

  it("an op used twice in one graph sums both paths", function()
    local x = leaf({1.5, -0.5})
    local y = Square(Square(x)) + Square(x)     -- x^4 + x^2
    local g = dle.grad(y:sum(), {x})[1]
    assert_close({4 * 1.5 ^ 3 + 3, 4 * (-0.5) ^ 3 - 1}, g)
  end)

  it("double backward through a custom op (backward built from dle ops)", function()
    local x = leaf({1.5})
    local g = dle.grad((Square(x) * x):sum(), {x}, {create_graph = true})[1]   -- 3x^2
    assert_close({6.75}, g)
    assert_close({9}, dle.grad(g:sum(), {x})[1])
  end)

  it("several tensor inputs, non-tensor arguments and needs_input_grad", function()
    local needs
    local Scale = dle.autograd.Function{
      name = "ScaleAdd",
      forward = function(ctx, a, k, b)
        needs = ctx.needs_input_grad
        ctx.k = k
        return a * k + b
      end,
      backward = function(ctx, g)
        return g * ctx.k, ctx.needs_input_grad[3] and g or nil
      end,
    }
    local a, b = leaf({1, 2}), dle.tensor({5, 6}, f64)
    local y = Scale(a, 3, b)
    assert.are.same({true, false, false}, needs)
    y:sum():backward()
    assert_close({3, 3}, a.grad)
    local b2 = leaf({1, 1})
    local ga, gb = table.unpack(dle.grad(Scale(a, 2, b2):sum(), {a, b2}))
    assert_close({2, 2}, ga)
    assert_close({1, 1}, gb)
  end)

  it("nothing is recorded under no_grad or when no input requires grad", function()
    local calls = 0
    local F = dle.autograd.Function{
      forward = function(_, x) calls = calls + 1; return x * 2 end,
      backward = function(_, g) return g * 2 end,
    }
    local y = F(dle.tensor({1}, f64))
    assert.is_false(y.requires_grad)
    local z = dle.no_grad(F, leaf({1}))   -- a Function is a plain Lua function
    assert.is_false(z.requires_grad)
    assert.is_nil(z.grad_fn)
    assert.are.equal(2, calls)
  end)

  it("errors raised in backward propagate as Lua errors naming the Function", function()
    local Bad = dle.autograd.Function{
      name = "Exploding",
      forward = function(_, a) return a * 1 end,
      backward = function() error("boom in backward") end,
    }
    local x = leaf({1})
    local ok, err = pcall(function() Bad(x):sum():backward() end)
    assert.is_false(ok)
    assert.matches("Exploding", err)
    assert.matches("boom in backward", err)
    -- a wrongly shaped gradient is caught too, naming the Function
    local WrongShape = dle.autograd.Function{
      name = "WrongShape",
      forward = function(_, a) return a * 1 end,
      backward = function() return dle.ones(5, f64) end,
    }
    ok, err = pcall(function() WrongShape(leaf({1, 2})):sum():backward() end)
    assert.is_false(ok)
    assert.matches("WrongShape", err)
    local NotTensor = dle.autograd.Function{
      name = "NotTensor",
      forward = function(_, a) return a * 1 end,
      backward = function() return 42 end,
    }
    ok, err = pcall(function() NotTensor(leaf({1})):sum():backward() end)
    assert.is_false(ok)
    assert.matches("NotTensor", err)
    -- the engine is usable afterwards
    Square(x):sum():backward()
    assert_close({2}, x.grad)
  end)

  it("a saved tensor modified in place before backward is an error naming the Function", function()
    local x = leaf({1, 2})
    local h = x * 1
    local y = Square(h)
    h:add_(1)
    local ok, err = pcall(function() y:sum():backward() end)
    assert.is_false(ok)
    assert.matches("Square", err)
    assert.matches("in%-place", err)
  end)

  it("an output that is an input is returned as a new tensor (the input keeps its history)", function()
    local Id = dle.autograd.Function{
      name = "Ident",
      forward = function(_, x) return x end,
      backward = function(_, g) return g * 5 end,
    }
    local x = leaf({1, 2})
    local y = Id(x)
    assert.is_true(x.is_leaf)
    assert.are.equal("Ident", y.grad_fn)
    y:sum():backward()
    assert_close({5, 5}, x.grad)
  end)

  it("forward mode through a Function: its dle ops, or its jvp rule when given", function()
    local x, t = dle.tensor({0.5, 2}, f64), dle.tensor({1, -3}, f64)
    local _, tan = dle.jvp(Square, x, t)
    assert_close({1, -12}, tan)
    local rule_calls = 0
    local Cube2 = dle.autograd.Function{
      name = "Cube2",
      forward = function(ctx, a)
        ctx:save_for_backward(a)
        local v = a:contiguous():view(-1):totable()   -- raw values: no tangent flows here
        for i = 1, #v do v[i] = v[i] ^ 3 end
        return dle.tensor(v, f64):view(table.unpack(a:shape()))
      end,
      backward = function(ctx, g) local a = ctx.saved_tensors[1]; return g * a * a * 3 end,
      jvp = function(ctx, ta)
        rule_calls = rule_calls + 1
        local a = ctx.saved_tensors[1]
        return ta * a * a * 3
      end,
    }
    assert.is_function(Cube2)
    local out, tout = dle.jvp(Cube2, x, t)
    assert_close({0.125, 8}, out)
    assert_close({0.75, -36}, tout)
    assert.are.equal(1, rule_calls)
    local ok, _, msg = dle.gradcheck(Cube2, {dle.randn(2, 3, f64)}, {forward = true})
    assert.is_true(ok, msg)
  end)

  it("constructing a Function checks its fields", function()
    assert.has_error(function() dle.autograd.Function{backward = function() end} end)
    assert.has_error(function() dle.autograd.Function{forward = function() end} end)
    assert.has_error(function() dle.autograd.Function(42) end)
  end)

  it("memory: custom nodes (and the tensors they save) are released", function()
    local x = dle.randn(1000, f64):requires_grad_()
    local Keep = dle.autograd.Function{
      forward = function(ctx, a)
        local e = a:exp()
        ctx:save_for_backward(a, e)   -- saves its own output
        return e
      end,
      backward = function(ctx, g) return g * ctx.saved_tensors[2] end,
    }
    -- released custom nodes free their Lua closure on the next custom op call: settle() makes
    -- that call, so the same (tiny) closure is pending at both measurements
    local function settle()
      for _ = 1, 2 do
        Keep(dle.ones(1, f64):requires_grad_())
        full_gc()
      end
    end
    for _ = 1, 20 do Keep(x):sum():backward() end
    x.grad = nil
    settle()
    local base = dle.core.memory_allocated()
    for _ = 1, 300 do local _ = Keep(x):sum() end          -- no backward
    for _ = 1, 300 do Keep(x):sum():backward(); x.grad = nil end
    settle()
    assert.are.equal(base, dle.core.memory_allocated())
  end)
end)
