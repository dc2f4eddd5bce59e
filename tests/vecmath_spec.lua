--- vecmath_spec.lua — the hand-vectorised float32 paths (kernels/cpu/cpu_vec*.c) and the tiled
-- strided iterator (kernels/cpu/cpu_loop.c) against float64 references and against the portable
-- loops: SIMD loop tails (sizes 1..17, 31, 33, 1000003), non-contiguous, broadcast and transposed
-- inputs and outputs, every element size through the transposing tiles, sums over either dim,
-- softmax/log_softmax/logsumexp rows (short, long, large logits, -inf, NaN), and the same results
-- with DLE_SIMD=0 (the portable fallback a CPU without AVX2 uses).
local dle = require("dle")

dle.manual_seed(7)

local SIZES = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 1000003}

-- max |a - b| / (|b| + floor), in float64
local function max_rel(a, b, floor)
  a, b = a:double(), b:double()
  return ((a - b):abs() / (b:abs() + (floor or 1e-30))):max():item()
end
local function max_abs(a, b) return (a:double() - b:double()):abs():max():item() end

-- inputs that exercise each function's whole useful range
local INPUTS = {
  exp = function(n) return (dle.randn(n) * 30):clamp(-100, 88) end,  -- finite in float32
  log = function(n) return dle.rand(n) * 100 + 1e-30 end,
  tanh = function(n) return dle.randn(n) * 4 end,
  sigmoid = function(n) return dle.randn(n) * 20 end,
  silu = function(n) return dle.randn(n) * 20 end,
  -- the float64 reference (libm erf) itself cancels below -5: compare where it is exact
  gelu = function(n) return (dle.randn(n) * 4):clamp(-5, 30) end,
  gelu_grad = function(n) return (dle.randn(n) * 4):clamp(-5, 30) end,
}
local OPS = {"exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_grad"}
-- relative-error floors: gelu' crosses zero (x = -0.7518) as the difference of two terms of ~0.2,
-- so near the root its error is absolute (a few ulp of 0.2), not relative
local FLOOR = {gelu_grad = 0.1}

describe("vectorised float32 unary ops", function()
  for _, op in ipairs(OPS) do
    it(op .. " matches float64 within a few ulp at every SIMD tail size", function()
      for _, n in ipairs(SIZES) do
        local x = INPUTS[op](n)
        local y, ref = x[op](x), x:double()[op](x:double()):float()
        assert.equal("float32", y:dtype())
        local e = max_rel(y, ref, FLOOR[op] or 1e-37)
        assert.is_true(e < 6e-7, ("%s over %d elements: relative error %g"):format(op, n, e))
      end
    end)

    it(op .. " gives the contiguous result on transposed, sliced, stepped and broadcast inputs", function()
      local x = INPUTS[op](70 * 90):view(70, 90)
      local views = {
        x:t(),                                       -- transposed: the tiled iterator
        x:narrow(2, 3, 41),                          -- rows with a gap
        x:t():narrow(1, 2, 33),                      -- transposed and sliced
        x:narrow(2, 1, 1):expand(70, 20),            -- stride 0
        x:view(70, 45, 2):select(3, 2),              -- every other element
      }
      for i, v in ipairs(views) do
        local got, want = v[op](v), v:contiguous()[op](v:contiguous())
        assert.same(want:totable(), got:totable(), ("view %d"):format(i))
      end
    end)
  end

  it("keeps the special values: exp(-inf) = 0, log(0) = -inf, tanh(-0) = -0, NaN stays NaN", function()
    local x = dle.tensor({-math.huge, 0, -0.0, math.huge, 0 / 0, -1})
    local e, l, t = x:exp():totable(), x:log():totable(), x:tanh():totable()
    assert.same({0, 1, 1, math.huge}, {e[1], e[2], e[3], e[4]})
    assert.equal(-math.huge, l[2])
    assert.equal(math.huge, l[4])
    assert.is_true(l[6] ~= l[6] and l[5] ~= l[5] and e[5] ~= e[5], "NaN from log(-1) and NaN inputs")
    assert.equal("-0.0", tostring(t[3]))
    local s = x:sigmoid():totable()
    assert.same({0, 0.5, 0.5, 1}, {s[1], s[2], s[3], s[4]})
  end)

  it("atan2 matches float64 within a few ulp at every tail size, over magnitudes 1e-13..1e13, on strided and "
     .. "broadcast inputs", function()
    for _, n in ipairs(SIZES) do
      local y = dle.randn(n) * dle.exp(dle.randn(n) * 10)
      local x = dle.randn(n) * dle.exp(dle.randn(n) * 10)
      local got, ref = dle.atan2(y, x), dle.atan2(y:double(), x:double()):float()
      local e = max_abs(got, ref)
      assert.is_true(e < 4e-7, ("atan2 over %d elements: error %g"):format(n, e))
    end
    local y, x = dle.randn(70, 90), dle.randn(90, 70)
    local got = dle.atan2(y, x:t())
    assert.same(dle.atan2(y, x:t():contiguous()):totable(), got:totable(), "transposed operand")
    local row = dle.randn(1, 90)
    assert.same(dle.atan2(y, row:expand(70, 90):contiguous()):totable(), dle.atan2(y, row):totable(), "broadcast row")
  end)

  it("atan2 keeps IEEE's special values: signed zeros, infinities, NaN", function()
    local inf, nan = math.huge, 0 / 0
    local vals = {0.0, -0.0, inf, -inf, 1.5, -1.5, nan}
    local ys, xs = {}, {}
    for _, a in ipairs(vals) do for _, b in ipairs(vals) do ys[#ys + 1], xs[#xs + 1] = a, b end end
    local got = dle.atan2(dle.tensor(ys), dle.tensor(xs)):totable()
    for i = 1, #ys do
      local want = math.atan(ys[i], xs[i])
      local g = got[i]
      local what = ("atan2(%s, %s) = %s, want %s"):format(ys[i], xs[i], g, want)
      if want ~= want then
        assert.is_true(g ~= g, what)
      else
        assert.is_true(math.abs(g - want) <= 3e-7 * math.abs(want), what)
        assert.equal(1 / want > 0, 1 / g > 0, what .. " (sign)")
      end
    end
  end)

  it("gelu keeps full precision in the negative tail (erfc form), where 1 + erf cancels", function()
    local y = dle.tensor({-10, -8, -6}):gelu():totable()
    -- 0.5 x erfc(-x / sqrt 2), from a float64 erfc series
    local want = {-7.619853024160593e-23, -4.9767684594174555e-15, -5.919525870226207e-09}
    for i = 1, 3 do
      assert.is_true(math.abs(y[i] - want[i]) <= 1e-5 * math.abs(want[i]), ("gelu tail %d: %g"):format(i, y[i]))
    end
  end)
end)

describe("the tiled iterator on transposed layouts", function()
  local DTYPES = {"float32", "float64", "float16", "int64", "int32", "uint8", "bool"}

  it("copies a transposed tensor into a contiguous one exactly, for every element size", function()
    for _, dt in ipairs(DTYPES) do
      for _, shape in ipairs({{70, 45}, {64, 64}, {9, 130}, {3, 20, 67}}) do
        local a = (dle.randn(table.unpack(shape)) * 50):to(dt)
        local nd = #shape
        local at = a:transpose(nd - 1, nd)
        local c = at:contiguous()
        assert.is_true(c:is_contiguous())
        assert.same(at:totable(), c:totable(), dt .. " " .. table.concat(shape, "x"))
      end
    end
  end)

  it("adds a transposed input to a contiguous one as the contiguous copies do", function()
    for _, dt in ipairs({"float32", "float64", "int64", "float16"}) do
      local a = (dle.randn(77, 66) * 10):to(dt)
      local b = (dle.randn(66, 77) * 10):to(dt)
      local got, want = a:t() + b, a:t():contiguous() + b
      assert.same(want:totable(), got:totable(), dt)
    end
  end)

  it("writes through a transposed output (copy_ and in-place add into a t() view)", function()
    local a = dle.randn(70, 45)
    local dst = dle.zeros(45, 70)
    dst:t():copy_(a)
    assert.same(a:t():totable(), dst:totable())
    local base = dle.randn(45, 70)
    local expect = (base:t() + a):totable()
    base:t():add_(a)
    assert.same(expect, base:t():totable())
  end)

  it("is correct beyond the parallel grain (4 threads of tiles, partial edge tiles)", function()
    local a = dle.randn(517, 389)
    local s = (a:t() * 2):sum():item()
    assert.is_true(math.abs(s - (a * 2):sum():item()) < 1e-2)
    assert.same(a:t():contiguous():t():totable()[517], a:totable()[517])
  end)
end)

describe("kernels that address memory from their operands (plain iteration, never tiled)", function()
  it("gather, index_select and their gradients on transposed tensors match the contiguous copies", function()
    local x = dle.randn(90, 70)
    local xt, xc = x:t(), x:t():contiguous()                       -- 70 x 90
    local idx = dle.randint(1, 91, {70, 80})
    assert.same(xc:gather(2, idx):totable(), xt:gather(2, idx):totable())
    local rows = dle.randint(1, 71, {75})
    assert.same(xc:index_select(1, rows):totable(), xt:index_select(1, rows):totable())
    assert.same(xc:index_select(2, rows):totable(), xt:index_select(2, rows):totable())
    local function grad_of(src)
      local leaf = src:clone():requires_grad_()
      leaf:t():gather(2, idx):sum():backward()                    -- scatter-add into a transposed view
      return leaf.grad
    end
    assert.same(grad_of(x:t():contiguous():t()):totable(), grad_of(x):totable())
  end)

  it("gather and scatter-add along dim 1 of a batch whose last two dims are transposed", function()
    -- the source seen by gather has stride 0 along dim 1 and transposed dims 2, 3: the kernel
    -- reads at offsets from the source pointer, which tiles must not replace by a buffer
    local x = dle.randn(5, 90, 70)
    local xt, xc = x:transpose(2, 3), x:transpose(2, 3):contiguous()  -- 5 x 70 x 90
    local idx = dle.randint(1, 6, {3, 70, 90})
    assert.same(xc:gather(1, idx):totable(), xt:gather(1, idx):totable())
    local function grad_of(src)
      local leaf = src:clone():requires_grad_()
      local y = leaf:transpose(2, 3):gather(1, idx) * 2
      y:sum():backward()
      return leaf.grad
    end
    assert.same(grad_of(x:transpose(2, 3):contiguous():transpose(2, 3)):totable(), grad_of(x):totable())
  end)
end)

describe("vectorised float32 sums", function()
  it("sum of a vector matches float64 at every tail size", function()
    for _, n in ipairs(SIZES) do
      local x = dle.randn(n)
      local got, want = x:sum():item(), x:double():sum():item()
      assert.is_true(math.abs(got - want) <= 1e-6 * (math.abs(want) + 1), ("n = %d: %g vs %g"):format(n, got, want))
    end
  end)

  it("sums over the last dim and over dim 1 (also of transposed inputs) match float64", function()
    for _, shape in ipairs({{37, 1000}, {1000, 37}, {5, 3}, {3, 17}, {64, 4099}}) do
      local x = dle.randn(table.unpack(shape))
      for _, v in ipairs({x, x:t()}) do
        for d = 1, 2 do
          local e = max_abs(v:sum(d), v:double():sum(d))
          assert.is_true(e < 1e-4, ("%s sum(%d): error %g"):format(table.concat(v:shape(), "x"), d, e))
        end
      end
    end
  end)

  it("mean over dim 1 uses the same kernels and stays exact for constant columns", function()
    local x = dle.full({4097, 33}, 0.1)
    local m = x:mean(1):totable()
    for j = 1, 33 do assert.is_true(math.abs(m[j] - 0.1) < 1e-7) end
  end)
end)

describe("vectorised softmax rows", function()
  local function ref_softmax(x, d, lg)
    local xd = x:double()
    return lg and xd:log_softmax(d) or xd:softmax(d)
  end

  -- (x - max is rounded in float32, by the portable loops too: relative error up to |x - max| 2^-24)
  it("softmax, log_softmax and logsumexp match float64 at every row length", function()
    local lens = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 513, 1000, 8192, 8193, 9000}
    for _, n in ipairs(lens) do
      local x = dle.randn(3, n) * 5
      local s, ls = x:softmax(2), x:log_softmax(2)
      assert.is_true(max_rel(s, ref_softmax(x, 2)) < 1e-5, "softmax " .. n)
      assert.is_true(max_abs(ls, ref_softmax(x, 2, true)) < 2e-5, "log_softmax " .. n)
      assert.is_true(max_abs(x:logsumexp(2), x:double():logsumexp(2)) < 2e-5, "logsumexp " .. n)
    end
  end)

  it("stays finite on large logits and handles -inf entries", function()
    local x = dle.randn(4, 1000) * 1e4
    local s = x:softmax(2)
    assert.equal(0, s:ne(s):sum():item())  -- no NaN
    assert.is_true(max_abs(s:sum(2), dle.ones(4)) < 1e-5)
    local m = dle.randn(2, 600)
    m[1]:narrow(1, 1, 550):fill_(-math.huge)  -- the max arrives in a late block
    local r = m:softmax(2)
    assert.is_true(max_rel(r, ref_softmax(m, 2), 1e-30) < 1e-5)
    assert.equal(0, r[1][1])
  end)

  it("a row of -inf only, or holding NaN, gives NaN as the portable loops do", function()
    local x = dle.tensor({{-math.huge, -math.huge, -math.huge}, {1, 0 / 0, 2}})
    local s = x:softmax(2):totable()
    assert.is_true(s[1][1] ~= s[1][1] and s[2][3] ~= s[2][3])
    local l = x:logsumexp(2):totable()
    assert.equal(-math.huge, l[1])
    assert.is_true(l[2] ~= l[2])
  end)

  it("softmax over dim 1 and of transposed inputs matches float64", function()
    local x = dle.randn(300, 41)
    assert.is_true(max_rel(x:softmax(1), ref_softmax(x, 1)) < 1e-5)
    assert.is_true(max_rel(x:t():softmax(2), ref_softmax(x:t(), 2)) < 1e-5)
  end)
end)

describe("the portable fallback (DLE_SIMD=0)", function()
  it("gives the same results within float rounding", function()
    local code = [[
      local dle = require('dle')
      dle.manual_seed(3)
      local x = dle.randn(1001) * 3
      local m = dle.randn(70, 45)
      local parts = {x:exp():sum():item(), x:tanh():sum():item(), x:gelu():sum():item(),
                     x:view(7, 143):softmax(2):sum():item(), x:view(7, 143):logsumexp(2):sum():item(),
                     (m:t() + 1):sum(1):sum():item(), m:t():contiguous():sum(2):sum():item()}
      io.write(table.concat(parts, ' '))]]
    local function run(env)
      local cmd = ("%s lua5.4 -e %q -e %q"):format(env,
        "package.path = " .. ("%q"):format(package.path) .. " package.cpath = " .. ("%q"):format(package.cpath), code)
      local p = assert(io.popen(cmd))
      local out = p:read("a")
      p:close()
      local t = {}
      for v in out:gmatch("%S+") do t[#t + 1] = tonumber(v) end
      return t
    end
    local simd, plain = run(""), run("DLE_SIMD=0")
    assert.equal(7, #simd)
    assert.equal(7, #plain)
    for i = 1, 7 do
      assert.is_true(math.abs(simd[i] - plain[i]) <= 1e-4 * (math.abs(plain[i]) + 1),
        ("value %d: %s vs %s"):format(i, simd[i], plain[i]))
    end
  end)
end)
