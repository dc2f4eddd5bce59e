--- norm_spec.lua — the fused normalization ops dle.layer_norm and dle.batch_norm (forward values
-- against a pure-Lua reference in double precision on odd sizes, every memory layout, with and
-- without weight/bias, train vs eval, the statistics they return, float16/bfloat16/integer
-- inputs, numerically hard rows, empty inputs), the backward ops against composite autograd,
-- F.batch_norm's running statistics, nn.LayerNorm over several dims, error messages, and (when
-- /usr/bin/python3 has torch) PyTorch's values.
local dle = require("dle")
local H = require("helpers")
local nn = require("dle.nn")
local F = require("dle.nn.functional")

local F64 = {dtype = "float64"}

-- ---------------------------------------------------------------- pure-Lua references

-- Flat list -> mean and biased variance (two-pass, in double).
local function moments(list)
  local m, v = 0, 0
  for _, a in ipairs(list) do m = m + a end
  m = m / #list
  for _, a in ipairs(list) do v = v + (a - m) ^ 2 end
  return m, v / #list
end

--- layer norm of a flat value list seen as rows of d; w, b flat lists of d (or nil).
-- Returns flat y and the per-row {mean, var} list.
local function ref_layer_norm(flat, d, w, b, eps)
  local y, stats = {}, {}
  for r0 = 0, #flat // d - 1 do
    local row = {}
    for j = 1, d do row[j] = flat[r0 * d + j] end
    local m, v = moments(row)
    stats[#stats + 1] = {m, v}
    for j = 1, d do
      y[r0 * d + j] = (row[j] - m) / math.sqrt(v + eps) * (w and w[j] or 1) + (b and b[j] or 0)
    end
  end
  return y, stats
end

--- batch norm of a flat list of shape {N, C, S...}: per channel over N and S. rm/rv: use these
-- statistics instead (eval). Returns flat y and per-channel {mean, var}.
local function ref_batch_norm(flat, shape, w, b, eps, rm, rv)
  local N, C = shape[1], shape[2]
  local S = #flat // (N * C)
  local y, stats = {}, {}
  for c = 1, C do
    local vals = {}
    for n = 0, N - 1 do
      for s = 1, S do vals[#vals + 1] = flat[(n * C + c - 1) * S + s] end
    end
    local m, v
    if rm then m, v = rm[c], rv[c] else m, v = moments(vals) end
    stats[c] = {m, v}
    for n = 0, N - 1 do
      for s = 1, S do
        local i = (n * C + c - 1) * S + s
        y[i] = (flat[i] - m) / math.sqrt(v + eps) * (w and w[c] or 1) + (b and b[c] or 0)
      end
    end
  end
  return y, stats
end

local function flat_of(t) return H.flat(t:totable()) end

local function assert_flat(t, want, rtol, atol, msg)
  local ok, err = H.approx(flat_of(t), want, rtol, atol)
  assert(ok, (msg or "") .. ": " .. tostring(err))
end

-- ---------------------------------------------------------------- layer_norm

describe("dle.layer_norm", function()
  it("matches the reference on odd sizes, over 1 and 2 trailing dims, with and without weight/bias (float64)",
     function()
    local shape = {3, 7, 5}
    local vals = H.values(shape, {seed = 1})
    local x = dle.tensor(vals, F64)
    for _, ns in ipairs({{5}, {7, 5}}) do
      local d = 1
      for _, s in ipairs(ns) do d = d * s end
      local wv, bv = H.flat(H.values(ns, {seed = 2})), H.flat(H.values(ns, {seed = 3}))
      local w, b = dle.tensor(wv, F64):reshape(ns), dle.tensor(bv, F64):reshape(ns)
      for _, case in ipairs({{w, b, wv, bv}, {w, nil, wv, nil}, {nil, b, nil, bv}, {nil, nil, nil, nil}}) do
        local y, stats = dle.layer_norm(x, ns, case[1], case[2], 1e-5)
        local ry, rstats = ref_layer_norm(H.flat(vals), d, case[3], case[4], 1e-5)
        assert.are.same(shape, y:shape())
        assert_flat(y, ry, 1e-12, 1e-12, "y over " .. #ns .. " dims")
        assert.are.same({#rstats, 2}, stats:shape())
        assert_flat(stats, H.flat(rstats), 1e-12, 1e-12, "stats")
      end
    end
  end)

  it("takes normalized_shape as a number for the last dim and uses eps", function()
    local x = dle.tensor({{1, 2, 3, 4}, {2, 2, 2, 2}}, F64)
    local y, stats = dle.layer_norm(x, 4, nil, nil, 0.5)
    local ry = ref_layer_norm({1, 2, 3, 4, 2, 2, 2, 2}, 4, nil, nil, 0.5)
    assert_flat(y, ry, 1e-12, 1e-12, "eps 0.5")
    H.assert_close(stats, {{2.5, 1.25}, {2, 0}})
    assert_flat((dle.layer_norm(x, 4)), ref_layer_norm(H.flat(x:totable()), 4, nil, nil, 1e-5), 1e-12, 1e-12,
      "default eps 1e-5")
  end)

  it("gives the same values on transposed, strided and sliced inputs as on contiguous ones", function()
    local vals = H.values({4, 9}, {seed = 5})
    local w = dle.tensor(H.flat(H.values({9}, {seed = 6})))
    local want = dle.layer_norm(dle.tensor(vals), 9, w, nil)
    H.each_layout(vals, "float32", function(layout, x)
      H.assert_close(dle.layer_norm(x, 9, w, nil), want:totable(), {msg = layout})
    end)
    -- a transposed weight too
    local w2 = H.make(H.values({3, 3}, {seed = 7}), "float32", "transposed")
    local x2 = dle.tensor(H.values({2, 3, 3}, {seed = 8}))
    H.assert_close(dle.layer_norm(x2, {3, 3}, w2), dle.layer_norm(x2, {3, 3}, w2:contiguous()):totable())
  end)

  it("computes float32 with float statistics, and float16/bfloat16 in float32 (stats float32)", function()
    local vals = H.values({5, 33}, {seed = 9})
    local ry = ref_layer_norm(H.flat(vals), 33, nil, nil, 1e-5)
    local y, stats = dle.layer_norm(dle.tensor(vals), 33)
    assert.are.equal("float32", y:dtype())
    assert.are.equal("float32", stats:dtype())
    assert_flat(y, ry, 1e-5, 1e-5, "float32")
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local x = dle.tensor(vals, {dtype = dt})
      local yl, sl = dle.layer_norm(x, 33)
      assert.are.equal(dt, yl:dtype())
      assert.are.equal("float32", sl:dtype())
      -- against the reference on the rounded inputs
      local r = ref_layer_norm(flat_of(x:to("float64")), 33, nil, nil, 1e-5)
      assert_flat(yl, r, H.tol[dt].rtol * 4, H.tol[dt].atol * 4, dt)
    end
    -- integers compute in float32
    local yi = dle.layer_norm(dle.tensor({{1, 2, 3}}, {dtype = "int64"}), 3)
    assert.are.equal("float32", yi:dtype())
    assert_flat(yi, ref_layer_norm({1, 2, 3}, 3, nil, nil, 1e-5), 1e-5, 1e-5, "int64")
  end)

  it("keeps the variance exact for rows with a large offset (two-pass, not E[x^2] - E[x]^2) and never gives NaN",
     function()
    -- float32 rows 1e4 + u, u in [-1, 1]: the naive formula loses all digits of the variance
    local base = H.values({3, 1000}, {seed = 10, lo = -1, hi = 1})
    local shifted = H.map(base, function(u) return 1e4 + u end)
    local x = dle.tensor(shifted)
    local _, stats = dle.layer_norm(x, 1000)
    local xs = flat_of(x:to("float64"))  -- the float32 values actually stored
    for r = 1, 3 do
      local row = {}
      for j = 1, 1000 do row[j] = xs[(r - 1) * 1000 + j] end
      local m, v = moments(row)
      local sm, sv = stats[r][1], stats[r][2]
      assert.is_true(math.abs(sm - m) < 1e-3, "mean row " .. r)
      assert.is_true(math.abs(sv - v) < 1e-4 * v, "var row " .. r .. ": " .. sv .. " vs " .. v)
    end
    -- huge values and a constant row: finite results
    local big = dle.tensor({{1e18, -1e18, 3e17}, {5, 5, 5}})
    local y = dle.layer_norm(big, 3)
    for _, v in ipairs(flat_of(y)) do assert.is_true(v == v and math.abs(v) < 2, "finite and normalized: " .. v) end
    H.assert_close(y[2], {0, 0, 0})
  end)

  it("normalizes the rows of a long row (blocks joined in double) and of empty inputs", function()
    local n = 5000
    local vals = H.values({2, n}, {seed = 11, lo = 0, hi = 2})
    local ry = ref_layer_norm(H.flat(vals), n, nil, nil, 1e-5)
    assert_flat(dle.layer_norm(dle.tensor(vals, F64), n), ry, 1e-11, 1e-11, "long rows")
    local y, stats = dle.layer_norm(dle.zeros(0, 4), 4)
    assert.are.same({0, 4}, y:shape())
    assert.are.same({0, 2}, stats:shape())
  end)

  it("writes large float32 outputs (>= 8 MiB, streaming stores) right, rows aligned or not", function()
    for _, shape in ipairs({{2048, 1024}, {2048, 1027}}) do
      local x = dle.randn(shape, {generator = dle.Generator(12)})
      local w, b = dle.randn(shape[2], {generator = dle.Generator(13)}),
          dle.randn(shape[2], {generator = dle.Generator(14)})
      local y = dle.layer_norm(x, shape[2], w, b)
      local x64 = x:to("float64")
      local m = x64:mean(-1, true)
      local want = (x64 - m) * ((x64 - m) ^ 2):mean(-1, true):add(1e-5):rsqrt() * w:to("float64") + b:to("float64")
      local err = (y:to("float64") - want):abs():max():item()
      assert.is_true(err < 1e-4, "shape {" .. table.concat(shape, ",") .. "}: max error " .. err)
    end
  end)

  it("refuses mismatched shapes with messages naming the function and the shapes", function()
    local x = dle.zeros(2, 3)
    H.assert_error(function() dle.layer_norm(x, 4) end, "layer_norm", "{2,3}", "{4}")
    H.assert_error(function() dle.layer_norm(x, {2, 2}) end, "layer_norm", "{2,3}", "{2,2}")
    H.assert_error(function() dle.layer_norm(x, {1, 2, 3}) end, "layer_norm", "{2,3}")
    H.assert_error(function() dle.layer_norm(x, 3, dle.ones(4)) end, "layer_norm", "weight", "{4}", "{3}")
    H.assert_error(function() dle.layer_norm(x, 3, nil, dle.ones(2, 3)) end, "layer_norm", "bias", "{2,3}")
    H.assert_error(function() dle.layer_norm(x, 3, "w") end, "layer_norm", "weight", "tensor")
    H.assert_error(function() dle.layer_norm(x, "3") end, "layer_norm", "normalized_shape")
    H.assert_error(function() dle.layer_norm(x, 3, nil, nil, -1) end, "layer_norm", "eps")
    H.assert_error(function() x:layer_norm_grad_input(x, dle.zeros(3, 2), nil, 3) end,
      "layer_norm_grad_input", "stats", "{3,2}", "{2,2}")
    H.assert_error(function() dle.zeros(2, 4):layer_norm_grad_input(x, dle.zeros(2, 2), nil, 3) end,
      "layer_norm_grad_input", "grad_output", "{2,4}")
  end)
end)

-- ---------------------------------------------------------------- batch_norm

describe("dle.batch_norm", function()
  local function check_train(shape, seed, affine)
    local vals = H.values(shape, {seed = seed})
    local C = shape[2]
    local wv = affine and H.flat(H.values({C}, {seed = seed + 1})) or nil
    local bv = affine and H.flat(H.values({C}, {seed = seed + 2})) or nil
    local y, stats = dle.batch_norm(dle.tensor(vals, F64), wv and dle.tensor(wv, F64), bv and dle.tensor(bv, F64),
      nil, nil, true, 1e-5)
    local ry, rstats = ref_batch_norm(H.flat(vals), shape, wv, bv, 1e-5)
    assert_flat(y, ry, 1e-12, 1e-12, "y " .. table.concat(shape, "x"))
    assert_flat(stats, H.flat(rstats), 1e-12, 1e-12, "stats")
  end

  it("training mode matches the reference on {N, C}, {N, C, L} and {N, C, H, W} of odd sizes (float64)", function()
    check_train({5, 3}, 20, true)
    check_train({3, 2, 7}, 21, true)
    check_train({3, 5, 3, 7}, 22, true)
    check_train({2, 3, 5, 1}, 23, false)
  end)

  it("eval mode uses the given running statistics", function()
    local shape = {4, 3, 2, 3}
    local vals = H.values(shape, {seed = 30})
    local rm, rv, w, b = {0.5, -1, 2}, {1.5, 0.25, 4}, {2, -1, 0.5}, {0, 1, -2}
    local y, stats = dle.batch_norm(dle.tensor(vals, F64), dle.tensor(w, F64), dle.tensor(b, F64),
      dle.tensor(rm, F64), dle.tensor(rv, F64), false, 1e-5)
    local ry = ref_batch_norm(H.flat(vals), shape, w, b, 1e-5, rm, rv)
    assert_flat(y, ry, 1e-12, 1e-12, "eval")
    H.assert_close(stats, {{0.5, 1.5}, {-1, 0.25}, {2, 4}})
    -- float32 running statistics with a float64 input are cast
    local y32 = dle.batch_norm(dle.tensor(vals, F64), nil, nil, dle.tensor(rm), dle.tensor(rv), false)
    assert_flat(y32, ref_batch_norm(H.flat(vals), shape, nil, nil, 1e-5, rm, rv), 1e-12, 1e-12, "cast stats")
  end)

  it("gives the same values on non-contiguous inputs", function()
    local vals = H.values({3, 4, 5}, {seed = 31})
    local want = dle.batch_norm(dle.tensor(vals), nil, nil, nil, nil, true):totable()
    H.each_layout(vals, "float32", function(layout, x)
      H.assert_close(dle.batch_norm(x, nil, nil, nil, nil, true), want, {msg = layout})
    end)
  end)

  it("handles float16 inputs with float32 statistics and many channels (split over threads)", function()
    local vals = H.values({8, 64, 9, 9}, {seed = 32})
    local want = dle.batch_norm(dle.tensor(vals, {dtype = "float16"}):to("float64"), nil, nil, nil, nil, true)
    local y, stats = dle.batch_norm(dle.tensor(vals, {dtype = "float16"}), nil, nil, nil, nil, true)
    assert.are.equal("float16", y:dtype())
    assert.are.equal("float32", stats:dtype())
    H.assert_close(y:to("float64"), want:totable(), {rtol = 4e-3, atol = 4e-3})
  end)

  it("refuses bad shapes, missing running statistics in eval and one value per channel in training", function()
    local x = dle.zeros(4, 3, 2)
    H.assert_error(function() dle.batch_norm(dle.zeros(4), nil, nil, nil, nil, true) end, "batch_norm", "{4}", "2 dims")
    H.assert_error(function() dle.batch_norm(x, dle.ones(2), nil, nil, nil, true) end, "batch_norm", "weight", "{2}",
                   "{3}")
    H.assert_error(function() dle.batch_norm(x, nil, dle.ones(3, 1), nil, nil, true) end, "batch_norm", "bias", "{3,1}")
    H.assert_error(function() dle.batch_norm(x, nil, nil, nil, nil, false) end, "batch_norm", "running_mean")
    H.assert_error(function() dle.batch_norm(x, nil, nil, dle.zeros(4), dle.ones(3), false) end,
      "batch_norm", "running_mean", "{4}")
    H.assert_error(function() dle.batch_norm(dle.zeros(1, 3), nil, nil, nil, nil, true) end,
      "batch_norm", "more than 1 value per channel", "{1,3}")
    H.assert_error(function() dle.batch_norm(x, nil, nil, dle.zeros(3):requires_grad_(true), dle.ones(3), false) end,
      "batch_norm", "must not require grad")
    H.assert_error(function() x:batch_norm_grad_affine(x, dle.zeros(2, 2)) end, "batch_norm_grad_affine", "stats",
                   "{2,2}")
  end)
end)

-- ---------------------------------------------------------------- fused backward vs composite

describe("fused backward", function()
  -- the gradients the fused ops give, and those of the same function written with dle ops
  local function compare(fused, composite, inputs)
    local ins = {}
    for i, t in ipairs(inputs) do ins[i] = t:detach():requires_grad_(true) end
    local g1 = dle.grad(fused(table.unpack(ins)), ins)
    local g2 = dle.grad(composite(table.unpack(ins)), ins)
    for i = 1, #ins do H.assert_close(g1[i], g2[i]:totable(), {msg = "input " .. i, rtol = 1e-10, atol = 1e-12}) end
  end

  it("layer_norm gives the gradients of the composite mean/var formula (float64, 2 normalized dims)", function()
    local x = dle.tensor(H.values({3, 4, 5}, {seed = 40}), F64)
    local w = dle.tensor(H.values({4, 5}, {seed = 41}), F64)
    local b = dle.tensor(H.values({4, 5}, {seed = 42}), F64)
    local mix = dle.tensor(H.values({3, 4, 5}, {seed = 43}), F64)
    compare(function(x_, w_, b_) return ((dle.layer_norm(x_, {4, 5}, w_, b_)) * mix):sum() end,
      function(x_, w_, b_)
        local m = x_:mean({2, 3}, true)
        local c = x_ - m
        local v = (c * c):mean({2, 3}, true)
        return ((c * (v + 1e-5):rsqrt() * w_ + b_) * mix):sum()
      end, {x, w, b})
  end)

  it("batch_norm gives the gradients of the composite formula in training and eval mode", function()
    local x = dle.tensor(H.values({4, 3, 2, 5}, {seed = 44}), F64)
    local w = dle.tensor(H.values({3}, {seed = 45}), F64)
    local b = dle.tensor(H.values({3}, {seed = 46}), F64)
    local mix = dle.tensor(H.values({4, 3, 2, 5}, {seed = 47}), F64)
    local cs = {1, 3, 1, 1}
    compare(function(x_, w_, b_) return ((dle.batch_norm(x_, w_, b_, nil, nil, true)) * mix):sum() end,
      function(x_, w_, b_)
        local m = x_:mean({1, 3, 4}, true)
        local c = x_ - m
        local v = (c * c):mean({1, 3, 4}, true)
        return ((c * (v + 1e-5):rsqrt() * w_:reshape(cs) + b_:reshape(cs)) * mix):sum()
      end, {x, w, b})
    local rm, rv = dle.tensor({0.1, -0.2, 0.3}, F64), dle.tensor({1.5, 0.5, 2}, F64)
    compare(function(x_, w_, b_) return ((dle.batch_norm(x_, w_, b_, rm, rv, false)) * mix):sum() end,
      function(x_, w_, b_)
        return (((x_ - rm:reshape(cs)) * (rv:reshape(cs) + 1e-5):rsqrt() * w_:reshape(cs) + b_:reshape(cs)) * mix):sum()
      end, {x, w, b})
  end)

  it("layer_norm's gradient ops work on float32 rows of 4096 (several blocks and threads)", function()
    local x = dle.randn(64, 4096, {generator = dle.Generator(3)})
    local w = dle.randn(4096, {generator = dle.Generator(4)})
    local gy = dle.randn(64, 4096, {generator = dle.Generator(5)})
    local _, stats = dle.layer_norm(x, 4096, w)
    local gx = gy:layer_norm_grad_input(x, stats, w, 4096)
    local gw, gb = gy:layer_norm_grad_affine(x, stats, 4096)
    -- the same in float64 with composite ops
    local x64, w64, gy64 = x:to("float64"), w:to("float64"), gy:to("float64")
    local m = x64:mean(-1, true)
    local r = ((x64 - m) ^ 2):mean(-1, true):add(1e-5):rsqrt()
    local xh = (x64 - m) * r
    local g = gy64 * w64
    local want = r * (g - g:mean(-1, true) - xh * (g * xh):mean(-1, true))
    assert.is_true((gx:to("float64") - want):abs():max():item() < 1e-4)
    assert.is_true((gw:to("float64") - (gy64 * xh):sum(1)):abs():max():item() < 1e-3)
    assert.is_true((gb:to("float64") - gy64:sum(1)):abs():max():item() < 1e-3)
  end)
end)

-- ---------------------------------------------------------------- Lua layers

describe("F.batch_norm and the layers on the fused ops", function()
  it("updates running statistics from the fused op's statistics (momentum, unbiased variance)", function()
    local vals = H.values({3, 2, 5}, {seed = 50})
    local rm, rv = dle.tensor({0.5, -0.5}), dle.tensor({2, 3})
    F.batch_norm(dle.tensor(vals), rm, rv, nil, nil, true, 0.25)
    local _, st = ref_batch_norm(H.flat(vals), {3, 2, 5}, nil, nil, 1e-5)
    local n = 15
    H.assert_close(rm, {0.75 * 0.5 + 0.25 * st[1][1], 0.75 * -0.5 + 0.25 * st[2][1]})
    H.assert_close(rv, {0.75 * 2 + 0.25 * st[1][2] * n / (n - 1), 0.75 * 3 + 0.25 * st[2][2] * n / (n - 1)})
    -- eval leaves them alone
    F.batch_norm(dle.tensor(vals), rm, rv, nil, nil, false, 0.25)
    H.assert_close(rm, {0.75 * 0.5 + 0.25 * st[1][1], 0.75 * -0.5 + 0.25 * st[2][1]})
  end)

  it("nn.LayerNorm normalizes over several trailing dims with weight and bias of that shape", function()
    local ln = nn.LayerNorm({3, 4}):to("float64")
    assert.are.same({3, 4}, ln.weight:shape())
    local vals = H.values({2, 3, 4}, {seed = 51})
    local ry = ref_layer_norm(H.flat(vals), 12, nil, nil, 1e-5)
    assert_flat(ln(dle.tensor(vals, F64)), ry, 1e-12, 1e-12, "LayerNorm({3, 4})")
    H.assert_error(function() ln(dle.zeros(2, 4, 3)) end, "LayerNorm", "{2,4,3}", "{3,4}")
    H.assert_error(function() nn.LayerNorm({3, 0}) end, "LayerNorm", "positive")
  end)
end)

-- ---------------------------------------------------------------- PyTorch (optional)

local function have_torch()
  return os.execute("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == true
end

describe("against PyTorch", function()
  local it_torch = have_torch() and it or pending
  it_torch("layer_norm and batch_norm forward and input/weight/bias gradients match torch in float64 (needs " ..
      "/usr/bin/python3 + torch)", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local function p(name) return dir .. "/" .. name end
    local x = dle.tensor(H.values({3, 4, 6}, {seed = 60}), F64)
    local w = dle.tensor(H.values({6}, {seed = 61}), F64)
    local b = dle.tensor(H.values({6}, {seed = 62}), F64)
    local gy = dle.tensor(H.values({3, 4, 6}, {seed = 63}), F64)
    for name, t in pairs({x = x, w = w, b = b, gy = gy}) do dle.save_npy(p(name .. ".npy"), t) end
    local f = assert(io.open(p("ref.py"), "w"))
    f:write(table.concat({
      "import sys, numpy as np, torch",
      "d = sys.argv[1]",
      "L = lambda n: torch.from_numpy(np.load(d + '/' + n + '.npy'))",
      "x, w, b, gy = L('x').requires_grad_(), L('w').requires_grad_(), L('b').requires_grad_(), L('gy')",
      "y = torch.nn.functional.layer_norm(x, (6,), w, b, 1e-5)",
      "gx, gw, gb = torch.autograd.grad(y, (x, w, b), gy)",
      "for n, t in (('ln_y', y), ('ln_gx', gx), ('ln_gw', gw), ('ln_gb', gb)): np.save(d + '/' + n + '.npy', " ..
          "t.detach().numpy())",
      "wc, bc = w[:4].detach().clone().requires_grad_(), b[:4].detach().clone().requires_grad_()",
      "y = torch.nn.functional.batch_norm(x, None, None, wc, bc, True, 0.1, 1e-5)",
      "gx, gw, gb = torch.autograd.grad(y, (x, wc, bc), gy)",
      "for n, t in (('bn_y', y), ('bn_gx', gx), ('bn_gw', gw), ('bn_gb', gb)): np.save(d + '/' + n + '.npy', " ..
          "t.detach().numpy())",
    }, "\n"))
    f:close()
    assert.is_true(os.execute("/usr/bin/python3 " .. p("ref.py") .. " " .. dir) == true)
    local function check(prefix, fn, ins)
      local req = {}
      for i, t in ipairs(ins) do req[i] = t:detach():requires_grad_(true) end
      local y = fn(table.unpack(req))
      local g = dle.grad(y, req, {grad_outputs = gy})
      H.assert_close(y, dle.load_npy(p(prefix .. "_y.npy")):totable(),
                     {msg = prefix .. " y", rtol = 1e-10, atol = 1e-10})
      for i, n in ipairs({"gx", "gw", "gb"}) do
        H.assert_close(g[i], dle.load_npy(p(prefix .. "_" .. n .. ".npy")):totable(),
          {msg = prefix .. " " .. n, rtol = 1e-9, atol = 1e-9})
      end
    end
    check("ln", function(x_, w_, b_) return (dle.layer_norm(x_, 6, w_, b_)) end, {x, w, b})
    check("bn", function(x_, w_, b_) return (dle.batch_norm(x_, w_, b_, nil, nil, true)) end,
      {x, w:narrow(1, 1, 4), b:narrow(1, 1, 4)})
    os.execute("rm -rf " .. dir)
  end)
end)
