--- fusion_diff_spec.lua — the fused elementwise executor against the plain ops, on many generated
-- programs: random chains of the fusable ops over 1-4 inputs with random shapes that broadcast,
-- transposed and stepped views, odd sizes, float32 and float64, inputs holding NaN, inf and -0;
-- one size large enough for the streamed output path. The fused kernel evaluates each op with
-- the expression the eager kernel uses, so results are compared bit for bit (NaN equal to NaN).
local dle = require("dle")
local R = require("dle.rewrite")

local UNARY = {"neg", "abs", "relu", "exp", "log", "expm1", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
               "tanh", "sigmoid", "gelu", "silu"}
local BINARY = {"add", "sub", "mul", "div", "maximum", "minimum"}

local function count_fused(g)
  local n = 0
  for _, node in ipairs(g:nodes()) do if node.op == "fused" then n = n + 1 end end
  return n
end

-- Whether a and b hold the same values (NaN equal to NaN, -0 equal to 0), and the first difference.
local function same(a, b)
  local x, y = a:double():reshape(-1), b:double():reshape(-1)
  local differ = x:ne(y):logical_and(x:eq(x):logical_or(y:eq(y)))
  local n = differ:sum():item()
  if n == 0 then return true end
  local i = differ:long():argmax():item()
  return false, ("%d differences, first at %d: %.17g vs %.17g"):format(n, i, x[i]:item(), y[i]:item())
end

-- A random program: a function of k inputs applying `len` random ops, each binary op combining the
-- running value with an input or an earlier value.
local function program(g, len, k)
  local steps = {}
  for s = 1, len do
    if dle.rand(1, {generator = g}):item() < 0.5 then
      steps[s] = {UNARY[dle.randint(1, #UNARY + 1, {1}, {generator = g}):item()]}
    else
      steps[s] = {BINARY[dle.randint(1, #BINARY + 1, {1}, {generator = g}):item()],
                  dle.randint(1, k + s, {1}, {generator = g}):item()}
    end
  end
  local function fn(...)
    local vals = {...}
    local v = vals[1]
    for _, st in ipairs(steps) do
      if st[2] then v = dle[st[1]](v, vals[st[2]]) else v = v[st[1]](v) end
      vals[#vals + 1] = v
    end
    return v
  end
  local names = {}
  for s, st in ipairs(steps) do names[s] = st[1] .. (st[2] and ("#" .. st[2]) or "") end
  return fn, table.concat(names, " ")
end

-- Inputs of shape out (the first) and broadcastable shapes, some transposed or stepped views,
-- with special values sprinkled in.
local function inputs(g, out, k, dtype)
  local specials = dle.tensor({0 / 0, math.huge, -math.huge, -0.0, 0.0, 1e-30, -1e30}, {dtype = dtype})
  local xs = {}
  for i = 1, k do
    local shape = {}
    for d, s in ipairs(out) do shape[d] = (i > 1 and dle.rand(1, {generator = g}):item() < 0.3) and 1 or s end
    if i > 1 and dle.rand(1, {generator = g}):item() < 0.2 then shape = {table.unpack(shape, 2)} end
    local x
    local layout = dle.rand(1, {generator = g}):item()
    if #shape >= 2 and layout < 0.25 then -- transposed storage
      local rev = {}
      for d = 1, #shape do rev[d] = shape[#shape + 1 - d] end
      x = dle.randn(rev, {dtype = dtype, generator = g}) * 3
      local perm = {}
      for d = 1, #shape do perm[d] = #shape + 1 - d end
      x = x:permute(table.unpack(perm))
    elseif #shape >= 1 and layout < 0.45 then -- every other element of a wider tensor
      local wide = {table.unpack(shape)}
      wide[#wide] = wide[#wide] * 2
      x = (dle.randn(wide, {dtype = dtype, generator = g}) * 3):narrow(#wide, 1, wide[#wide] - 1)
      x = x:narrow(#wide, 1, shape[#shape]) -- a view with the wide row stride
    else
      x = dle.randn(shape, {dtype = dtype, generator = g}) * 3
    end
    if x:numel() > 8 then
      local flat = x:contiguous():reshape(-1)
      for _ = 1, 3 do
        local at = dle.randint(1, flat:numel() + 1, {1}, {generator = g}):item()
        flat[at] = specials[dle.randint(1, 8, {1}, {generator = g}):item()]
      end
      x = flat:reshape(x:shape())
    end
    xs[i] = x
  end
  return xs
end

-- fn on xs eagerly and through its traced graph after the fusion rules: want, got, the graph
-- (nil when eager itself raises, e.g. an op refusing a dtype)
local function eager_and_fused(fn, xs)
  local ok_eager, want = pcall(fn, table.unpack(xs))
  if not ok_eager then return nil end
  local graph = R.apply(dle.graph.trace(fn, table.unpack(xs)), R.rules.fusion)
  return want, graph:run(table.unpack(xs)), graph
end

describe("fused programs equal the plain ops bit for bit", function()
  local g = dle.Generator(2024)
  local SHAPES = {{1}, {5}, {17}, {3, 7}, {8, 33}, {2, 3, 5}, {1029}, {4, 1, 6}}
  for _, dtype in ipairs({"float32", "float64"}) do
    it("on 150 generated programs over odd, broadcast, transposed and stepped inputs (" .. dtype .. ")", function()
      local fused_seen = 0
      for case = 1, 150 do
        local out = SHAPES[(case - 1) % #SHAPES + 1]
        local k = dle.randint(1, 5, {1}, {generator = g}):item()
        local fn, what = program(g, dle.randint(2, 9, {1}, {generator = g}):item(), k)
        local want, got, graph = eager_and_fused(fn, inputs(g, out, k, dtype))
        if want then
          fused_seen = fused_seen + count_fused(graph)
          local ok, why = same(got, want)
          assert.is_true(ok, ("case %d (%s, %d inputs, %s): %s"):format(case, what, k, dtype, tostring(why)))
        end
      end
      assert.is_true(fused_seen >= 100, "only " .. fused_seen .. " programs were fused")
    end)
  end

  it("on an output large enough to be written with streaming stores (2M + 3 float32, 1 and 2 threads)", function()
    local n = 2 * 1024 * 1024 + 3
    local a, b, c = dle.randn(n), dle.randn(n), dle.randn(1)
    local fn = function(x, y, z) return ((x + y) * z):tanh() - x end
    local graph = R.apply(dle.graph.trace(fn, a, b, c), R.rules.fusion)
    assert.equal(1, count_fused(graph))
    local threads = dle.get_num_threads()
    for _, t in ipairs({1, 2}) do
      dle.set_num_threads(t)
      local ok, why = same(graph:run(a, b, c), fn(a, b, c))
      dle.set_num_threads(threads)
      assert.is_true(ok, t .. " thread(s): " .. tostring(why))
    end
  end)
end)

describe("fused reductions at the end of a chain", function()
  local g = dle.Generator(77)
  local REDUCE = {"sum", "mean", "amax", "amin"}
  local function fused_reduce_count(graph)
    local n = 0
    for _, node in ipairs(graph:nodes()) do if node.op == "fused" and node.reduce then n = n + 1 end end
    return n
  end

  for _, dtype in ipairs({"float32", "float64"}) do
    it("sum, mean, amax, amin over all elements and over the last dim of 120 generated chains (" .. dtype .. ")",
       function()
      local SHAPES = {{1}, {7}, {3, 5}, {9, 1029}, {2, 3, 1}, {4, 2500}}
      local tol = dtype == "float32" and 2e-6 or 1e-13
      local fused = 0
      for case = 1, 120 do
        local out = SHAPES[(case - 1) % #SHAPES + 1]
        local k = dle.randint(1, 4, {1}, {generator = g}):item()
        local chain, what = program(g, dle.randint(1, 6, {1}, {generator = g}):item(), k)
        local red = REDUCE[dle.randint(1, 5, {1}, {generator = g}):item()]
        local last = dle.rand(1, {generator = g}):item() < 0.5
        local keep = dle.rand(1, {generator = g}):item() < 0.5
        local fn = function(...)
          local v = chain(...)
          if last then return dle[red](v, #out, keep) end
          return dle[red](v)
        end
        local want, got, graph = eager_and_fused(fn, inputs(g, out, k, dtype))
        if want then
          fused = fused + fused_reduce_count(graph)
          local what_case = ("case %d (%s then %s%s, %s)"):format(case, what, red,
                                                                   last and " over the last dim" or "", dtype)
          assert.are.same(want:shape(), got:shape(), what_case)
          if red == "amax" or red == "amin" then
            local ok, why = same(got, want)
            assert.is_true(ok, what_case .. ": " .. tostring(why))
          else
            -- sums accumulate in another order: equal within rounding, NaN and inf where eager has them
            local w, gt = want:double():reshape(-1), got:double():reshape(-1)
            local finite = w:isfinite()
            local ok, why = same(dle.where(finite, 0, gt), dle.where(finite, 0, w))
            assert.is_true(ok, what_case .. " (non-finite entries): " .. tostring(why))
            local scale = dle.where(finite, w:abs(), 0) + 1
            local err = (dle.where(finite, gt - w, 0):abs() / scale):max():item()
            assert.is_true(err <= tol * (out[#out] or 1), what_case .. ": relative error " .. err)
          end
        end
      end
      assert.is_true(fused >= 60, "only " .. fused .. " reductions were fused")
    end)
  end

  it("an empty chain result and a gradient-carrying run take the unfused ops (same values, gradients flow)", function()
    local f = function(a, b) return ((a - b) * (a - b)):mean() end
    local a, b = dle.randn(6, 4, {dtype = "float64"}), dle.randn(4, {dtype = "float64"})
    local graph = R.apply(dle.graph.trace(f, a, b), R.rules.fusion)
    assert.equal(1, fused_reduce_count(graph))
    local e = dle.empty(0, 4, {dtype = "float64"})
    local empty = R.apply(dle.graph.trace(f, e, b), R.rules.fusion)
    assert.equal(1, fused_reduce_count(empty))
    assert.is_true(empty:run(e, b):isnan():item(), "mean of nothing is NaN, as eager")
    local ag = a:clone():requires_grad_()
    local got = dle.grad(graph:run(ag, b), {ag})[1]
    local want = dle.grad(f(ag, b), {ag})[1]
    assert.is_true((got - want):abs():max():item() < 1e-14)
  end)

  it("dle.compile fuses a squared-error mean and a row softmax-style max, with eager's values", function()
    local x, y = dle.randn(300, 77), dle.randn(300, 77)
    local mse = dle.compile(function(a, b) return ((a - b) * (a - b)):mean() end)
    local rowmax = dle.compile(function(a) return (a * 2 - 1):amax(2, true) end)
    assert.is_true(math.abs(mse(x, y):item() - ((x - y) * (x - y)):mean():item()) < 1e-5)
    assert.are.same((x * 2 - 1):amax(2, true):totable(), rowmax(x):totable())
  end)
end)
