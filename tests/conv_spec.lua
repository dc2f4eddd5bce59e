-- conv_spec.lua — dle.conv2d, dle.max_pool2d and dle.avg_pool2d (forward) against direct
-- pure-Lua loops on odd sizes: stride, padding, dilation, groups, bias, float32 / float64 /
-- float16, non-contiguous inputs; the pools with padding and count_include_pad; the gradient ops
-- in dle.core against their definitions as adjoints; and the error messages.
local dle = require("dle")
local H = require("helpers")

local function dot(a, b) return (a * b):sum():item() end

-- ---------------------------------------------------------------- references

local function pair(v, def)
  if v == nil then return def, def end
  if type(v) == "table" then return v[1], v[2] end
  return v, v
end

--- Direct convolution on nested tables: x {N,C,H,W}, w {O,C/g,kh,kw}, b {O} or nil.
local function ref_conv(x, w, b, o)
  o = o or {}
  local sh, sw = pair(o.stride, 1)
  local ph, pw = pair(o.padding, 0)
  local dh, dw = pair(o.dilation, 1)
  local g = o.groups or 1
  local xs, ws = H.shape(x), H.shape(w)
  local N, Hh, W = xs[1], xs[3], xs[4]
  local O, Cg, kh, kw = ws[1], ws[2], ws[3], ws[4]
  local Ho = (Hh + 2 * ph - dh * (kh - 1) - 1) // sh + 1
  local Wo = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
  local Og = O // g
  return H.build({N, O, Ho, Wo}, function(idx)
    local n, oc, oh, ow = idx[1], idx[2], idx[3], idx[4]
    local grp = (oc - 1) // Og
    local s = b and b[oc] or 0
    for c = 1, Cg do
      local ci = grp * Cg + c
      for i = 1, kh do
        for j = 1, kw do
          local ih = (oh - 1) * sh - ph + (i - 1) * dh + 1
          local iw = (ow - 1) * sw - pw + (j - 1) * dw + 1
          if ih >= 1 and ih <= Hh and iw >= 1 and iw <= W then
            s = s + x[n][ci][ih][iw] * w[oc][c][i][j]
          end
        end
      end
    end
    return s
  end)
end

--- Pooling on nested tables: kind "max" (values and 1-based indices) or "avg".
local function ref_pool(kind, x, k, o)
  o = o or {}
  local kh, kw = pair(k)
  local sh, sw = pair(o.stride, nil)
  if not sh then sh, sw = kh, kw end
  local ph, pw = pair(o.padding, 0)
  local include = o.count_include_pad ~= false
  local xs = H.shape(x)
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  local Ho, Wo = (Hh + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
  local idxs = {}
  local vals = H.build({N, C, Ho, Wo}, function(idx)
    local n, c, oh, ow = idx[1], idx[2], idx[3], idx[4]
    local best, bi, s, cnt = -math.huge, nil, 0, 0
    for i = 1, kh do
      for j = 1, kw do
        local ih = (oh - 1) * sh - ph + i
        local iw = (ow - 1) * sw - pw + j
        if ih >= 1 and ih <= Hh and iw >= 1 and iw <= W then
          local v = x[n][c][ih][iw]
          if v > best then best, bi = v, (ih - 1) * W + iw end
          s, cnt = s + v, cnt + 1
        end
      end
    end
    if kind == "max" then
      idxs[#idxs + 1] = bi
      return best
    end
    return s / (include and kh * kw or cnt)
  end)
  return vals, H.unflat(idxs, {N, C, Ho, Wo})
end

-- ---------------------------------------------------------------- conv2d

describe("conv2d", function()
  local X = H.values({2, 3, 7, 9}, {seed = 1})
  local W = H.values({4, 3, 3, 2}, {seed = 2})
  local B = H.values({4}, {seed = 3})

  it("matches a direct convolution on N=2 C=3 H=7 W=9 with a 3x2 kernel (float64, no options)", function()
    local y = dle.conv2d(dle.tensor(X, {dtype = "float64"}), dle.tensor(W, {dtype = "float64"}))
    H.assert_close(y, ref_conv(X, W), {dtype = "float64"})
  end)

  it("matches with stride 2, padding 1, dilation 2 and a bias (float32 and float64)", function()
    local o = {stride = 2, padding = 1, dilation = 2}
    for _, dt in ipairs({"float32", "float64"}) do
      local y = dle.conv2d(dle.tensor(X, {dtype = dt}), dle.tensor(W, {dtype = dt}),
                           dle.tensor(B, {dtype = dt}), o)
      H.assert_close(y, ref_conv(X, W, B, o), {dtype = dt, rtol = 1e-5, atol = 1e-5, msg = dt})
    end
  end)

  it("takes per-dim {h, w} stride, padding and dilation", function()
    local o = {stride = {2, 1}, padding = {0, 2}, dilation = {1, 3}}
    local y = dle.conv2d(dle.tensor(X, {dtype = "float64"}), dle.tensor(W, {dtype = "float64"}), nil, o)
    H.assert_close(y, ref_conv(X, W, nil, o))
    assert.are.same({2, 4, 3, 10}, y:shape())
  end)

  it("matches with groups 3 (C=3, O=6) and a bias", function()
    local Wg = H.values({6, 1, 3, 2}, {seed = 4})
    local Bg = H.values({6}, {seed = 5})
    local o = {groups = 3, padding = 1}
    local y = dle.conv2d(dle.tensor(X, {dtype = "float64"}), dle.tensor(Wg, {dtype = "float64"}),
                         dle.tensor(Bg, {dtype = "float64"}), o)
    H.assert_close(y, ref_conv(X, Wg, Bg, o))
  end)

  it("matches with groups 2 over 4 channels, 2 inputs per group", function()
    local X4 = H.values({1, 4, 5, 5}, {seed = 6})
    local W4 = H.values({4, 2, 2, 2}, {seed = 7})
    local y = dle.conv2d(dle.tensor(X4, {dtype = "float64"}), dle.tensor(W4, {dtype = "float64"}), nil,
                         {groups = 2, stride = 2})
    H.assert_close(y, ref_conv(X4, W4, nil, {groups = 2, stride = 2}))
  end)

  it("gives the same result on non-contiguous inputs (every layout of x and of w)", function()
    local o = {padding = 1, stride = {1, 2}}
    local want = ref_conv(X, W, B, o)
    local b = dle.tensor(B)
    for _, layout in ipairs(H.layouts) do
      local y1 = dle.conv2d(H.make(X, "float32", layout), dle.tensor(W), b, o)
      H.assert_close(y1, want, {rtol = 1e-5, atol = 1e-5, msg = "x " .. layout})
      local y2 = dle.conv2d(dle.tensor(X), H.make(W, "float32", layout), b, o)
      H.assert_close(y2, want, {rtol = 1e-5, atol = 1e-5, msg = "w " .. layout})
    end
  end)

  it("works as a method and computes float16 in float32 within half precision", function()
    local x, w = dle.tensor(X, {dtype = "float16"}), dle.tensor(W, {dtype = "float16"})
    local y = x:conv2d(w, nil, {padding = 1})
    assert.are.equal("float16", y:dtype())
    -- the reference on the float16-rounded inputs
    H.assert_close(y, ref_conv(x:double():totable(), w:double():totable(), nil, {padding = 1}),
                   {rtol = 4e-3, atol = 2e-2})
  end)

  it("promotes mixed dtypes (float32 x, float64 w) to float64 and integers to float32", function()
    local y = dle.conv2d(dle.tensor(X), dle.tensor(W, {dtype = "float64"}))
    assert.are.equal("float64", y:dtype())
    local xi = dle.tensor(H.values({1, 1, 3, 3}, {int = true, seed = 8}), {dtype = "int64"})
    local wi = dle.tensor({{{{1, 2}, {3, 4}}}}, {dtype = "int64"})
    local yi = dle.conv2d(xi, wi)
    assert.are.equal("float32", yi:dtype())
    H.assert_close(yi, ref_conv(xi:totable(), wi:totable()))
  end)

  it("handles a batch larger than one column chunk the same as sample by sample", function()
    -- 40 samples of 4x32x32 with a 5x5 kernel: 400 KB of columns each, over the 256 KiB budget,
    -- so each sample is done in two parts of 16 output rows; compare with each sample alone
    local g = dle.Generator(3)
    local x = dle.randn({40, 4, 32, 32}, {generator = g})
    local w = dle.randn({3, 4, 5, 5}, {generator = g})
    local y = dle.conv2d(x, w, nil, {padding = 2})
    for _, n in ipairs({1, 17, 40}) do
      local yn = dle.conv2d(x:narrow(1, n, 1), w, nil, {padding = 2})
      H.assert_close(y:narrow(1, n, 1), yn:totable(), {rtol = 1e-5, atol = 1e-5})
    end
  end)

  -- conv2d by unfold + matmul in float64 (index_select and BLAS: no code shared with the conv
  -- kernels), group by group
  local function unfold_conv(x, w, b, o)
    local F = dle.nn.functional
    local x64, w64 = x:double(), w:double()
    local g = o.groups or 1
    local oc, cg, kh, kw = w:size(1), w:size(2), w:size(3), w:size(4)
    local og, ys = oc // g, {}
    for k = 1, g do
      local cols = F.unfold(x64:narrow(2, (k - 1) * cg + 1, cg), {kh, kw},
        {stride = o.stride, padding = o.padding, dilation = o.dilation})   -- {N, cg kh kw, L}
      local wk = w64:narrow(1, (k - 1) * og + 1, og):reshape(og, cg * kh * kw)
      ys[k] = dle.matmul(wk, cols)   -- {N, og, L}
    end
    local y = g > 1 and dle.cat(ys, 2) or ys[1]
    if b then y = y + b:double():reshape(1, oc, 1) end
    return y   -- {N, O, L}
  end

  it("float32 agrees with unfold + matmul over generated geometries: strides, padding, dilation, groups, odd sizes, "
    .. "non-contiguous inputs, batch 1, small maps (several samples per gemm), large ones (samples in parts), "
    .. "one-row and 1x1 convs (by taps)",
    function()
      local state = 11
      local function rnd(lo, hi)
        state = (state * 1103515245 + 12345) % 2147483648
        return lo + state % (hi - lo + 1)
      end
      -- {n, c, h, w, o, kh, kw, stride, padding, dilation, groups}
      local cases = {
        {3, 64, 5, 5, 32, 3, 3, 1, 1, 1, 1},     -- small maps, many channels: chunks of several samples
        {8, 96, 7, 7, 16, 3, 3, 2, 1, 1, 1},     -- 4x4 outputs, stride 2
        {1, 16, 48, 48, 8, 3, 3, 1, 1, 1, 1},    -- batch 1, 1.3 MB of columns: parts of output rows
        {1, 3, 90, 93, 8, 7, 7, 2, 3, 1, 1},     -- a first layer at stride 2, odd sizes, in parts
        {2, 8, 61, 40, 6, 5, 3, 1, 2, 2, 2},     -- dilation 2, groups 2, parts
        {5, 512, 3, 3, 8, 3, 3, 1, 1, 1, 1},     -- K = 4608, 9 outputs per sample
        -- one-row inputs and kernels at stride 1 (conv1d's lowering: by taps, no columns)
        {4, 16, 1, 1024, 16, 1, 3, 1, {0, 1}, 1, 1},
        {1, 12, 1, 37, 9, 1, 4, 1, {0, 3}, 2, 3},  -- dilation 2, groups 3, outputs past both ends
        {3, 8, 1, 5, 4, 1, 5, 1, {0, 2}, 1, 1},    -- every tap clipped on one side
        {2, 6, 1, 9, 6, 1, 1, 1, 0, 1, 2},          -- 1x1 on one row
        -- 1x1 kernels at stride 1 without padding (a plane as one row)
        {2, 32, 7, 9, 24, 1, 1, 1, 0, 1, 1},
        {1, 64, 14, 14, 16, 1, 1, 1, 0, 1, 4},
      }
      for _ = 1, 18 do
        local kh, kw, s, d, g = rnd(1, 4), rnd(1, 4), rnd(1, 3), rnd(1, 2), rnd(1, 2)
        local p = rnd(0, 2)
        local h, w = rnd(d * (kh - 1) + 1, 19), rnd(d * (kw - 1) + 1, 23)
        if _ % 4 == 0 then kh, h, s, p = 1, 1, 1, {0, p} end   -- a one-row conv
        cases[#cases + 1] = {rnd(1, 6), g * rnd(1, 24), h, w, g * rnd(1, 12), kh, kw, s, p, d, g}
      end
      local gen = dle.Generator(31)
      for ci, cs in ipairs(cases) do
        local n, c, h, wd, oc, kh, kw, s, p, d, g = table.unpack(cs)
        local o = {stride = s, padding = p, dilation = d, groups = g}
        local w = dle.randn({oc, c // g, kh, kw}, {generator = gen}) * 0.1
        local b = ci % 3 ~= 0 and dle.randn({oc}, {generator = gen}) or nil
        -- every other case reads x through a transposed view
        local x = ci % 2 == 0 and dle.randn({n, c, wd, h}, {generator = gen}):transpose(3, 4)
                  or dle.randn({n, c, h, wd}, {generator = gen})
        local y = dle.conv2d(x, w, b, o)
        local want = unfold_conv(x, w, b, o)
        local msg = string.format("case %d: x {%d,%d,%d,%d} w {%d,%d,%d,%d} stride %d padding %s dilation %d "
          .. "groups %d", ci, n, c, h, wd, oc, c // g, kh, kw, s, type(p) == "table" and table.concat(p, ",") or p,
          d, g)
        assert.are.same({n, oc, want:size(3)}, {y:size(1), y:size(2), y:size(3) * y:size(4)}, msg)
        local err = (y:double():reshape(n, oc, -1) - want):abs():max():item()
        local scale = want:abs():max():item() + 1
        assert(err <= 1e-5 * scale, msg .. ": max error " .. err)
      end
    end)

  it("rejects bad shapes and attributes with messages naming conv2d and the shapes", function()
    local x, w = dle.zeros(2, 3, 7, 9), dle.zeros(4, 3, 3, 2)
    H.assert_error(function() dle.conv2d(dle.zeros(3, 7, 9), w) end, "conv2d", "4-D", "{3,7,9}")
    H.assert_error(function() dle.conv2d(x, dle.zeros(4, 2, 3, 3)) end, "conv2d", "{2,3,7,9}", "{4,2,3,3}", "channels")
    H.assert_error(function() dle.conv2d(x, dle.zeros(4, 1, 3, 3), nil, {groups = 2}) end, "conv2d", "groups 2")
    H.assert_error(function() dle.conv2d(x, dle.zeros(5, 1, 3, 3), nil, {groups = 3}) end, "conv2d", "groups 3")
    H.assert_error(function() dle.conv2d(x, dle.zeros(4, 3, 9, 2)) end, "conv2d", "larger than the padded input")
    H.assert_error(function() dle.conv2d(x, w, nil, {stride = 0}) end, "conv2d", "stride must be positive")
    H.assert_error(function() dle.conv2d(x, w, nil, {padding = -1}) end, "conv2d", "padding")
    H.assert_error(function() dle.conv2d(x, w, nil, {dilation = {1, 0}}) end, "conv2d", "dilation")
    H.assert_error(function() dle.conv2d(x, w, dle.zeros(3)) end, "conv2d", "bias", "{4}", "{3}")
    H.assert_error(function() dle.conv2d(x, w, nil, {stride = "2"}) end, "conv2d", "stride")
    H.assert_error(function() dle.conv2d(x, w, 5) end, "conv2d", "bias")
  end)

  -- found by the API fuzzer: padding 2^40 on an empty batch made an output whose strides overflowed
  -- int64, and huge groups/dilations overflowed the shape arithmetic (UBSan)
  it("rejects huge geometry values without overflow, empty batches included", function()
    local x, w = dle.zeros(0, 2, 1, 5), dle.zeros(3, 2, 3, 3)
    local big = 1 << 40
    H.assert_error(function() dle.conv2d(x, w, nil, {padding = big, stride = 2}) end, "conv2d",
                   "larger than the supported")
    H.assert_error(function() dle.conv2d(x, w, nil, {dilation = math.maxinteger}) end, "conv2d",
                   "larger than the supported")
    H.assert_error(function() dle.conv2d(dle.zeros(1, 2, 5, 5), w, nil, {groups = math.maxinteger}) end, "conv2d",
                   "groups")
    H.assert_error(function() dle.conv2d(dle.zeros(1, 2, 5, 5), dle.zeros(1, 2, 1 << 40, 0), nil,
                                         {dilation = 1 << 30}) end,
                   "conv2d", "too large")
    H.assert_error(function() dle.max_pool2d(dle.zeros(1, 1, 4, 4), math.maxinteger) end, "max_pool2d",
                   "larger than the supported")
    H.assert_error(function() dle.avg_pool2d(dle.zeros(1, 1, 4, 4), 2, {stride = big}) end, "avg_pool2d",
                   "larger than the supported")
    H.assert_error(function() dle.zeros(0, big, big) end, "zeros", "too many elements")
    assert.same({0, 3, 1, 3}, dle.conv2d(x, w, nil, {padding = 1, stride = 2}):shape())
  end)
end)

-- ---------------------------------------------------------------- conv2d kernel paths
-- The CPU kernel cuts the batch into chunks whose column buffer stays under 256 KiB (a larger
-- sample is done in parts of output rows); a chunk of one sample in float32/float64 lets the gemms
-- read gy and write y in place (no gather/scatter), float16 still goes through the gathered
-- buffers; im2col/col2im copy precomputed runs of valid columns, and copy/add a whole shifted
-- plane per tap when stride 1 keeps the width ("same" padding). These cases cross those paths with
-- padding/stride/dilation edges, on one thread (the threaded chunk loop is tested further down).

describe("conv2d kernel paths", function()
  H.one_thread(setup, teardown)

  it("one-sample chunks in row parts (4 x 43 x 43 input, 9-tap columns > 256 KiB) match the direct loops in " ..
      "float32, float64 and float16", function()
    local X = H.values({2, 4, 43, 43}, {seed = 51})
    local W = H.values({3, 4, 3, 3}, {seed = 52})
    local B = H.values({3}, {seed = 53})
    local o = {padding = 1}
    local want = ref_conv(X, W, B, o)
    for _, dt in ipairs({"float32", "float64", "float16"}) do
      local y = dle.conv2d(dle.tensor(X, {dtype = dt}), dle.tensor(W, {dtype = dt}), dle.tensor(B, {dtype = dt}), o)
      local tol = dt == "float16" and 2e-2 or 1e-5
      H.assert_close(y, want, {dtype = dt, rtol = tol, atol = tol, msg = dt})
    end
    -- without a bias the float32 output is the gemm's own result
    H.assert_close(dle.conv2d(dle.tensor(X), dle.tensor(W), nil, o), ref_conv(X, W, nil, o), {rtol = 1e-5, atol = 1e-5})
    -- a non-contiguous input takes the same path after the front door's copy
    H.assert_close(dle.conv2d(H.make(X, "float32", "transposed"), dle.tensor(W), nil, o), ref_conv(X, W, nil, o),
                   {rtol = 1e-5, atol = 1e-5})
  end)

  it("one-sample chunks keep grad_input and grad_weight adjoint to conv2d (float64, float32, float16)", function()
    local g = dle.Generator(7)
    local o = {padding = 1, stride = {1, 2}}
    local x64 = dle.randn({3, 4, 45, 41}, {generator = g, dtype = "float64"})
    local w64 = dle.randn({5, 4, 3, 3}, {generator = g, dtype = "float64"})
    local y64 = dle.conv2d(x64, w64, nil, o)
    local gy64 = dle.randn(y64:shape(), {generator = g, dtype = "float64"})
    local lhs = dot(gy64, y64)
    local gx64 = dle.core._conv2d_grad_input(gy64, w64, {45, 41}, o)
    local gw64 = dle.core._conv2d_grad_weight(gy64, x64, {3, 3}, o)
    assert.is_true(math.abs(dot(gx64, x64) - lhs) < 1e-9 * math.abs(lhs))
    assert.is_true(math.abs(dot(gw64, w64) - lhs) < 1e-9 * math.abs(lhs))
    for _, dt in ipairs({"float32", "float16"}) do
      local gx = dle.core._conv2d_grad_input(gy64:to(dt), w64:to(dt), {45, 41}, o)
      local gw = dle.core._conv2d_grad_weight(gy64:to(dt), x64:to(dt), {3, 3}, o)
      local tol = dt == "float16" and 5e-2 or 1e-4
      H.assert_close(gx:double(), gx64:totable(), {rtol = tol, atol = tol, msg = dt})
      H.assert_close(gw:double(), gw64:totable(), {rtol = tol, atol = tol * 50, msg = dt})
    end
  end)

  -- float32 with at most 16 weights per output channel (C/G kh kw) takes the dot-product kernel
  -- (cpu_vec_gemm.c) over each sample's gy rows in place; float64 takes gemm: they must agree
  it("grad_weight with few weights per channel (the dot-product kernel) matches float64", function()
    local g = dle.Generator(11)
    local cases = {
      {x = {19, 1, 28, 28}, w = {32, 1, 3, 3}, o = {padding = 1}},                -- chunks of samples
      {x = {2, 1, 301, 207}, w = {7, 1, 3, 3}, o = {padding = 1, stride = {2, 1}}}, -- row parts, odd widths
      {x = {5, 2, 17, 13}, w = {6, 1, 3, 3}, o = {groups = 2, dilation = 2}},    -- groups
      {x = {4, 1, 11, 9}, w = {5, 1, 4, 4}, o = {padding = 2}},                  -- K = 16
    }
    for k, c in ipairs(cases) do
      local x64 = dle.randn(c.x, {generator = g, dtype = "float64"})
      local w64 = dle.randn(c.w, {generator = g, dtype = "float64"})
      local gy64 = dle.randn(dle.conv2d(x64, w64, nil, c.o):shape(), {generator = g, dtype = "float64"})
      local want = dle.core._conv2d_grad_weight(gy64, x64, {c.w[3], c.w[4]}, c.o)
      local got = dle.core._conv2d_grad_weight(gy64:float(), x64:float(), {c.w[3], c.w[4]}, c.o)
      assert.are.equal("float32", got:dtype())
      local scale = want:abs():amax():item()
      H.assert_close(got:double(), want:totable(), {rtol = 1e-4, atol = 1e-5 * scale, msg = "case " .. k})
    end
  end)

  it("multi-sample chunks with a partial last one (41 x 1x28x28, float64: 4 samples per chunk, 11 chunks) agree on " ..
      "1 and 2 threads", function()
    local g = dle.Generator(9)
    local x = dle.randn({41, 1, 28, 28}, {generator = g, dtype = "float64"})
    local w = dle.randn({6, 1, 3, 3}, {generator = g, dtype = "float64"})
    local b = dle.randn({6}, {generator = g, dtype = "float64"})
    local gy = dle.randn({41, 6, 28, 28}, {generator = g, dtype = "float64"})
    local o = {padding = 1}
    local function all()
      return dle.conv2d(x, w, b, o), dle.core._conv2d_grad_input(gy, w, {28, 28}, o),
             dle.core._conv2d_grad_weight(gy, x, {3, 3}, o)
    end
    local y1, gx1, gw1 = all()            -- one thread: chunks of 4 samples
    dle.set_num_threads(2)
    local y2, gx2, gw2 = all()            -- the same chunks shared by two threads
    dle.set_num_threads(1)
    H.assert_close(y1, y2:totable(), {rtol = 1e-12, atol = 1e-12})
    H.assert_close(gx1, gx2:totable(), {rtol = 1e-12, atol = 1e-12})
    H.assert_close(gw1, gw2:totable(), {rtol = 1e-10, atol = 1e-10})
    local lhs = dot(gy, y1 - b:reshape({1, 6, 1, 1}))
    assert.is_true(math.abs(dot(gw1, w) - lhs) < 1e-9 * math.abs(lhs))
  end)

  it("matches the direct loops where padding reaches past whole kernel rows and columns", function()
    local X = H.values({3, 2, 5, 6}, {seed = 54})
    local cases = {
      {w = {2, 2, 2, 2}, o = {padding = 3}},                         -- border rows/cols all padding
      {w = {2, 2, 3, 3}, o = {padding = 2, stride = 3, dilation = 2}},
      {w = {4, 1, 1, 3}, o = {padding = {0, 4}, stride = {2, 3}, groups = 2}},
      {w = {1, 2, 5, 6}, o = {}},                                    -- kernel as large as the input
      {w = {2, 2, 1, 1}, o = {stride = 2}},                          -- 1x1, strided
      {w = {2, 2, 3, 7}, o = {padding = {1, 3}}},                    -- same width: rows shifted by up to 3
      {w = {2, 2, 3, 3}, o = {padding = 2, dilation = 2}},           -- same width, dilated
      {w = {2, 2, 1, 3}, o = {padding = {2, 1}, dilation = {1, 1}}}, -- same width, rows all padding
    }
    for k, c in ipairs(cases) do
      local W = H.values(c.w, {seed = 60 + k})
      local x, w = dle.tensor(X, {dtype = "float64"}), dle.tensor(W, {dtype = "float64"})
      local y = dle.conv2d(x, w, nil, c.o)
      H.assert_close(y, ref_conv(X, W, nil, c.o), {msg = "case " .. k})
      local gy = dle.tensor(H.values(y:shape(), {seed = 70 + k}), {dtype = "float64"})
      local lhs = dot(gy, y)
      local gx = dle.core._conv2d_grad_input(gy, w, {5, 6}, c.o)
      local gw = dle.core._conv2d_grad_weight(gy, x, {c.w[3], c.w[4]}, c.o)
      assert.is_true(math.abs(dot(gx, x) - lhs) < 1e-9 * (1 + math.abs(lhs)), "grad_input case " .. k)
      assert.is_true(math.abs(dot(gw, w) - lhs) < 1e-9 * (1 + math.abs(lhs)), "grad_weight case " .. k)
    end
  end)
end)

-- ---------------------------------------------------------------- the Winograd path
-- 3x3 kernels at stride 1 and dilation 1 with at least 8 channels per group on both sides go to
-- Winograd F(2x2, 3x3) (kernels/cpu/cpu_conv_winograd.c) in all three ops: tiles of 2x2 outputs,
-- the last tile row/column partial on odd sizes; grad_input is the same conv on gy with the kernel
-- flipped and padding 2 - p (negative past p = 2). Smaller channel counts keep im2col, and so do
-- batches of fewer than 160 tiles: these small cases lower that threshold to reach Winograd.

describe("conv2d Winograd path (3x3, stride 1, >= 8 channels per group)", function()
  H.one_thread(setup, teardown)
  H.tuning("winograd_min_tiles", 0, setup, teardown)

  it("is taken from 160 tiles in the batch, and gives im2col's result on both sides of it", function()
    -- resnet18's 7x7 and 14x14 layers at batch 1 (16 and 49 tiles) and 8 (128 and 392 tiles), its
    -- 28x28 ones at batch 1 (196 tiles), and 159 / 160 tiles exactly
    local g = dle.Generator(260)
    for _, c in ipairs({{1, 16, 7}, {8, 16, 7}, {1, 8, 14}, {8, 8, 14}, {1, 8, 28}, {1, 8, 6, 106}, {1, 8, 8, 80}}) do
      local x = dle.randn({c[1], c[2], c[3], c[4] or c[3]}, {generator = g})
      local w = dle.randn({c[2], c[2], 3, 3}, {generator = g})
      local wino = dle.conv2d(x, w, nil, {padding = 1})
      dle.core._tuning("winograd_min_tiles", math.maxinteger)   -- im2col
      local plain = dle.conv2d(x, w, nil, {padding = 1})
      dle.core._tuning("winograd_min_tiles", -1)   -- the default
      local default = dle.conv2d(x, w, nil, {padding = 1})
      dle.core._tuning("winograd_min_tiles", 0)
      H.assert_close(wino, plain:totable(), {rtol = 1e-4, atol = 1e-4, msg = table.concat(c, ",")})
      assert.are_not.same(wino:totable(), plain:totable(), "the two paths round differently")
      local tiles = c[1] * ((c[3] + 1) // 2) * (((c[4] or c[3]) + 1) // 2)
      local want = (tiles >= 160 and wino or plain):totable()
      assert.are.same(want, default:totable(), "the default picks by tiles: " .. table.concat(c, ","))
    end
  end)

  local cases = {
    {x = {2, 8, 5, 7}, o_ch = 8, o = {padding = 1}},                -- odd sizes: partial tiles
    {x = {3, 8, 6, 6}, o_ch = 9, o = {}},                           -- no padding, 9 outputs
    {x = {1, 16, 4, 9}, o_ch = 16, o = {padding = 2, groups = 2}},  -- groups of 8, output larger
    {x = {2, 8, 3, 3}, o_ch = 8, o = {padding = 3}},                -- grad_input pads by -1
    {x = {1, 8, 1, 1}, o_ch = 8, o = {padding = 1}},                -- one pixel
    {x = {2, 8, 7, 4}, o_ch = 10, o = {padding = {0, 1}}},          -- per-dim padding
  }
  for k, c in ipairs(cases) do
    local name = string.format("{%s} -> %d, %s", table.concat(c.x, ","), c.o_ch,
                               c.o.padding and "padding " .. tostring(type(c.o.padding) == "table" and
                                 table.concat(c.o.padding, ",") or c.o.padding) or "no padding")
    it(name .. ": y matches the direct loops (float64, float32, float16), grad ops adjoint and close in every dtype",
       function()
      local g = c.o.groups or 1
      local X = H.values(c.x, {seed = 200 + k})
      local W = H.values({c.o_ch, c.x[2] // g, 3, 3}, {seed = 210 + k})
      local B = H.values({c.o_ch}, {seed = 220 + k})
      local want = ref_conv(X, W, B, c.o)
      for _, dt in ipairs({"float64", "float32", "float16"}) do
        local y = dle.conv2d(dle.tensor(X, {dtype = dt}), dle.tensor(W, {dtype = dt}), dle.tensor(B, {dtype = dt}), c.o)
        local tol = ({float64 = 1e-12, float32 = 1e-5, float16 = 2e-2})[dt]
        H.assert_close(y, want, {dtype = dt, rtol = tol, atol = tol, msg = dt})
      end
      local x, w = dle.tensor(X, {dtype = "float64"}), dle.tensor(W, {dtype = "float64"})
      local y = dle.conv2d(x, w, nil, c.o)
      local gy = dle.tensor(H.values(y:shape(), {seed = 230 + k}), {dtype = "float64"})
      local lhs = dot(gy, y)
      local gx = dle.core._conv2d_grad_input(gy, w, {c.x[3], c.x[4]}, c.o)
      local gw = dle.core._conv2d_grad_weight(gy, x, {3, 3}, c.o)
      assert.is_true(math.abs(dot(gx, x) - lhs) < 1e-9 * (1 + math.abs(lhs)), "grad_input adjoint")
      assert.is_true(math.abs(dot(gw, w) - lhs) < 1e-9 * (1 + math.abs(lhs)), "grad_weight adjoint")
      for _, dt in ipairs({"float32", "float16"}) do
        local tol = dt == "float16" and 5e-2 or 1e-4
        H.assert_close(dle.core._conv2d_grad_input(gy:to(dt), w:to(dt), {c.x[3], c.x[4]}, c.o):double(),
                       gx:totable(), {rtol = tol, atol = tol, msg = dt .. " gx"})
        H.assert_close(dle.core._conv2d_grad_weight(gy:to(dt), x:to(dt), {3, 3}, c.o):double(),
                       gw:totable(), {rtol = tol, atol = tol * 10, msg = dt .. " gw"})
      end
    end)
  end

  it("gives the direct loops' result on every layout of x and w (non-contiguous inputs)", function()
    local X = H.values({2, 8, 5, 6}, {seed = 241})
    local W = H.values({8, 8, 3, 3}, {seed = 242})
    local want = ref_conv(X, W, nil, {padding = 1})
    for _, layout in ipairs(H.layouts) do
      H.assert_close(dle.conv2d(H.make(X, "float32", layout), H.make(W, "float32", layout), nil, {padding = 1}),
                     want, {rtol = 1e-5, atol = 1e-5, msg = layout})
    end
  end)

  -- conv2's layer of the CNN (32 -> 64 channels, 14 x 14): 3 samples per chunk, so 7 samples are
  -- chunks of 3, 3 and 1. The reference sums one-channel convs, which take the im2col path.
  it("the CNN's second layer (7 x 32x14x14 -> 64) agrees with a sum of im2col convs (float64, float32)", function()
    local g = dle.Generator(250)
    local x = dle.randn({7, 32, 14, 14}, {generator = g, dtype = "float64"})
    local w = dle.randn({64, 32, 3, 3}, {generator = g, dtype = "float64"}) * 0.1
    local b = dle.randn({64}, {generator = g, dtype = "float64"})
    local o = {padding = 1}
    local ref = b:reshape({1, 64, 1, 1})
    for c = 1, 32 do
      ref = ref + dle.conv2d(x:narrow(2, c, 1):contiguous(), w:narrow(2, c, 1):contiguous(), nil, o)
    end
    H.assert_close(dle.conv2d(x, w, b, o), ref:totable(), {rtol = 1e-12, atol = 1e-12, msg = "float64"})
    H.assert_close(dle.conv2d(x:float(), w:float(), b:float(), o):double(), ref:totable(),
                   {rtol = 1e-5, atol = 1e-5, msg = "float32"})
    -- the gradient ops against im2col's on the same split: gx sums over the output channels' groups
    local gy = dle.randn({7, 64, 14, 14}, {generator = g, dtype = "float64"})
    local gw = dle.core._conv2d_grad_weight(gy, x, {3, 3}, o)
    local gx = dle.core._conv2d_grad_input(gy, w, {14, 14}, o)
    local gx_ref = dle.zeros({7, 32, 14, 14}, {dtype = "float64"})
    for c = 1, 32 do
      local xc = x:narrow(2, c, 1):contiguous()
      H.assert_close(gw:narrow(2, c, 1), dle.core._conv2d_grad_weight(gy, xc, {3, 3}, o):totable(),
                     {rtol = 1e-10, atol = 1e-10, msg = "gw channel " .. c})
      local wc = w:narrow(2, c, 1):contiguous()
      gx_ref:narrow(2, c, 1):copy_(dle.core._conv2d_grad_input(gy, wc, {14, 14}, o))
    end
    H.assert_close(gx, gx_ref:totable(), {rtol = 1e-10, atol = 1e-10, msg = "gx"})
  end)

  it("7-channel groups stay on im2col and agree with the same conv padded to 8 channels by zeros", function()
    local g = dle.Generator(260)
    local x = dle.randn({2, 7, 6, 5}, {generator = g, dtype = "float64"})
    local w = dle.randn({8, 7, 3, 3}, {generator = g, dtype = "float64"})
    local x8 = dle.cat({x, dle.zeros({2, 1, 6, 5}, {dtype = "float64"})}, 2)
    local w8 = dle.cat({w, dle.zeros({8, 1, 3, 3}, {dtype = "float64"})}, 2)
    H.assert_close(dle.conv2d(x8, w8, nil, {padding = 1}), dle.conv2d(x, w, nil, {padding = 1}):totable(),
                   {rtol = 1e-12, atol = 1e-12})
  end)
end)

-- ---------------------------------------------------------------- conv2d on several threads
-- With several threads each OpenMP thread takes whole chunks of samples (im2col, its own
-- single-threaded gemms, col2im) and grad_weight sums one accumulator per span of consecutive
-- chunks in span order (whichever thread took the span); a chunk holds at most 1/threads of the
-- batch. The one-thread path is checked against the direct
-- loops above; here every two-thread result must equal it, stay adjoint, and grad_weight must come
-- out bit for bit the same on every run, on batches that do not divide evenly among the threads.

describe("conv2d on two threads", function()
  local threads
  setup(function() threads = dle.get_num_threads() end)
  teardown(function() dle.set_num_threads(threads) end)

  -- y, gx and gw of one case on n threads
  local function run(n, x, w, b, gy, o)
    dle.set_num_threads(n)
    local xs, ws = x:shape(), w:shape()
    return dle.conv2d(x, w, b, o), dle.core._conv2d_grad_input(gy, w, {xs[3], xs[4]}, o),
           dle.core._conv2d_grad_weight(gy, x, {ws[3], ws[4]}, o)
  end

  local cases = {
    {name = "7 x 32x14x14 -> 64, 3x3 pad 1 (conv2's layer, Winograd: chunks of 3, 3 and 1)",
     x = {7, 32, 14, 14}, w = {64, 32, 3, 3}, o = {padding = 1}},
    {name = "23 x 1x28x28 -> 6, 3x3 pad 1 (conv1's layer: several samples per chunk, the last chunk partial)",
     x = {23, 1, 28, 28}, w = {6, 1, 3, 3}, o = {padding = 1}},
    {name = "5 x 8x40x40 -> 4, 3x3 pad 1, no bias (one-sample chunks done in parts of output rows)",
     x = {5, 8, 40, 40}, w = {4, 8, 3, 3}, o = {padding = 1}, nobias = true},
    {name = "9 x 4x13x11 -> 6, groups 2, stride {2, 1}, padding {1, 2}, dilation {2, 1} (chunks of 5 and 4)",
     x = {9, 4, 13, 11}, w = {6, 2, 3, 2}, o = {groups = 2, stride = {2, 1}, padding = {1, 2}, dilation = {2, 1}}},
    {name = "3 x 2x9x9 -> 3, 5x5, stride 2 (chunks of 2 and 1)",
     x = {3, 2, 9, 9}, w = {3, 2, 5, 5}, o = {stride = 2}},
    {name = "1 x 6x20x20 -> 5, padding 2 (a batch of one: one chunk, OpenBLAS's own threads)",
     x = {1, 6, 20, 20}, w = {5, 6, 3, 3}, o = {padding = 2}},
  }
  for k, c in ipairs(cases) do
    it(c.name .. ": y, gx, gw equal the one-thread results (float64, float32, float16)", function()
      local g = dle.Generator(100 + k)
      local x64 = dle.randn(c.x, {generator = g, dtype = "float64"})
      local w64 = dle.randn(c.w, {generator = g, dtype = "float64"})
      local b64 = not c.nobias and dle.randn({c.w[1]}, {generator = g, dtype = "float64"}) or nil
      local gy64 = dle.randn(dle.conv2d(x64, w64, nil, c.o):shape(), {generator = g, dtype = "float64"})
      for _, dt in ipairs({"float64", "float32", "float16"}) do
        local x, w, gy = x64:to(dt), w64:to(dt), gy64:to(dt)
        local b = b64 and b64:to(dt)
        local y1, gx1, gw1 = run(1, x, w, b, gy, c.o)
        local y2, gx2, gw2 = run(2, x, w, b, gy, c.o)
        local tol = ({float64 = 1e-12, float32 = 1e-5, float16 = 1e-2})[dt]
        H.assert_close(y2:double(), y1:double():totable(), {rtol = tol, atol = tol, msg = dt .. " y"})
        H.assert_close(gx2:double(), gx1:double():totable(), {rtol = tol, atol = tol, msg = dt .. " gx"})
        H.assert_close(gw2:double(), gw1:double():totable(), {rtol = tol, atol = tol, msg = dt .. " gw"})
        local _, _, gw3 = run(2, x, w, b, gy, c.o)
        assert.are.same(gw2:double():totable(), gw3:double():totable(), dt .. " gw differs between runs")
      end
      -- adjoint on two threads: a chunk done twice or never would break these
      dle.set_num_threads(2)
      local y, gx, gw = run(2, x64, w64, nil, gy64, c.o)
      local lhs = dot(gy64, y)
      assert.is_true(math.abs(dot(gx, x64) - lhs) < 1e-9 * (1 + math.abs(lhs)), "grad_input adjoint")
      assert.is_true(math.abs(dot(gw, w64) - lhs) < 1e-9 * (1 + math.abs(lhs)), "grad_weight adjoint")
    end)
  end

  it("matches the direct loops on two threads, non-contiguous inputs included", function()
    local X = H.values({5, 3, 6, 7}, {seed = 81})
    local W = H.values({4, 3, 3, 3}, {seed = 82})
    local B = H.values({4}, {seed = 83})
    local o = {padding = 1}
    local want = ref_conv(X, W, B, o)
    dle.set_num_threads(2)
    for _, layout in ipairs(H.layouts) do
      local y = dle.conv2d(H.make(X, "float64", layout), dle.tensor(W, {dtype = "float64"}),
                           dle.tensor(B, {dtype = "float64"}), o)
      H.assert_close(y, want, {msg = layout})
    end
    -- a non-contiguous gy through both gradient ops gives what its contiguous copy gives
    local x, w = dle.tensor(X, {dtype = "float64"}), dle.tensor(W, {dtype = "float64"})
    local gyt = dle.randn({5, 4, 7, 6}, {generator = dle.Generator(84), dtype = "float64"}):transpose(3, 4)
    local gyc = gyt:contiguous()
    H.assert_close(dle.core._conv2d_grad_input(gyt, w, {6, 7}, o),
                   dle.core._conv2d_grad_input(gyc, w, {6, 7}, o):totable(), {rtol = 0, atol = 0})
    H.assert_close(dle.core._conv2d_grad_weight(gyt, x, {3, 3}, o),
                   dle.core._conv2d_grad_weight(gyc, x, {3, 3}, o):totable(), {rtol = 0, atol = 0})
  end)
end)

-- ---------------------------------------------------------------- pooling

describe("max_pool2d", function()
  local X = H.values({2, 3, 7, 9}, {seed = 11})

  it("matches a direct max with 1-based indices h*W + w + 1 (kernel 2, default stride)", function()
    local v, i = dle.max_pool2d(dle.tensor(X, {dtype = "float64"}), 2)
    local rv, ri = ref_pool("max", X, 2)
    H.assert_close(v, rv)
    assert.are.equal("int64", i:dtype())
    H.assert_close(i, ri)
  end)

  it("matches with a {3, 2} kernel, stride {2, 1} and padding 1 (padding never wins)", function()
    local o = {stride = {2, 1}, padding = 1}
    for _, layout in ipairs(H.layouts) do
      local v, i = dle.max_pool2d(H.make(X, "float32", layout), {3, 2}, o)
      local rv, ri = ref_pool("max", X, {3, 2}, o)
      H.assert_close(v, rv, {msg = layout})
      H.assert_close(i, ri, {msg = layout})
    end
    -- all-negative input: padding counts as -inf, so the max stays negative
    local v = dle.max_pool2d(dle.full({1, 1, 3, 3}, -5), 3, {stride = 1, padding = 1})
    H.assert_close(v, H.build({1, 1, 3, 3}, function() return -5 end))
  end)

  it("2x2 windows at stride 2 (the fast path) match the direct max on odd sizes, all dtypes and layouts", function()
    local X2 = H.values({3, 2, 9, 7}, {seed = 12})
    local rv, ri = ref_pool("max", X2, 2)
    for _, dt in ipairs({"float32", "float64", "float16", "bfloat16"}) do
      for _, layout in ipairs(H.layouts) do
        local v, i = dle.max_pool2d(H.make(X2, dt, layout), 2)
        local tol = (dt == "float16" or dt == "bfloat16") and 1e-2 or 1e-6
        H.assert_close(v, rv, {rtol = tol, atol = tol, msg = dt .. " " .. layout})
        if dt == "float32" or dt == "float64" then H.assert_close(i, ri, {msg = dt .. " " .. layout}) end
      end
    end
  end)

  it("2x2 fast path: ties go to the first cell in the window, NaN wins over any number", function()
    local x = dle.tensor({{{{1, 1, 0, 5}, {1, 1, 5, 5}, {2, 0 / 0, 3, 3}, {0 / 0, 4, 3, 0 / 0}}}})
    local v, i = dle.max_pool2d(x, 2)
    -- 1-based h*W + w + 1 in the plane; the second window's first 5, the last NaN of the others
    assert.are.same({1, 4, 13, 16}, i:reshape(4):totable())
    local vt = v:reshape(4):totable()
    assert.are.equal(1, vt[1])
    assert.are.equal(5, vt[2])
    assert.is_true(vt[3] ~= vt[3])   -- NaN
    assert.is_true(vt[4] ~= vt[4])
    -- the same rule as the general path (a 3x3 window over the same cells plus padding)
    local nan = dle.tensor({{{{0 / 0, 0 / 0}, {1, 2}}}})
    local _, i_fast = dle.max_pool2d(nan, 2)
    local _, i_gen = dle.max_pool2d(nan, 3, {stride = 2, padding = 1})
    assert.are.equal(2, i_fast:reshape(1):totable()[1])
    assert.are.equal(2, i_gen:reshape(1):totable()[1])
  end)

  -- max and 1-based index h*W + w + 1 of each window of x {N, C, H, W} (nested tables), in window
  -- order: a larger value or any NaN takes over (so ties go to the first cell, the last NaN wins)
  local function ref_max(x, kh, kw, sh, sw, ph, pw)
    local xs = H.shape(x)
    local Hh, W = xs[3], xs[4]
    local Ho, Wo = (Hh + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
    local vals, idxs = {}, {}
    for n = 1, xs[1] do
      for c = 1, xs[2] do
        for oh = 1, Ho do
          for ow = 1, Wo do
            local best, bi = -math.huge, nil
            for i = 1, kh do
              for j = 1, kw do
                local ih, iw = (oh - 1) * sh - ph + i, (ow - 1) * sw - pw + j
                if ih >= 1 and ih <= Hh and iw >= 1 and iw <= W then
                  local v = x[n][c][ih][iw]
                  bi = bi or (ih - 1) * W + iw
                  if v > best or v ~= v then best, bi = v, (ih - 1) * W + iw end
                end
              end
            end
            vals[#vals + 1], idxs[#idxs + 1] = best, bi
          end
        end
      end
    end
    return vals, idxs
  end

  it("general windows (blocks of a row plus clipped edges) match the direct max over generated geometries, "
    .. "with ties and NaNs, wide rows, float32/float64 and every layout", function()
    local state = 7
    local function rnd(lo, hi)
      state = (state * 1103515245 + 12345) % 2147483648
      return lo + state % (hi - lo + 1)
    end
    local cases = {{3, 3, 1, 1, 1, 1, 1, 600}, {3, 3, 2, 2, 1, 1, 2, 601}, {1, 5, 1, 3, 0, 2, 1, 530}}
    for _ = 1, 40 do
      local kh, kw, sh, sw = rnd(1, 4), rnd(1, 4), rnd(1, 3), rnd(1, 3)
      local ph, pw = rnd(0, kh // 2), rnd(0, kw // 2)
      cases[#cases + 1] = {kh, kw, sh, sw, ph, pw, rnd(kh, 11), rnd(kw, 13)}
    end
    for ci, cs in ipairs(cases) do
      local kh, kw, sh, sw, ph, pw, hh, ww = table.unpack(cs)
      -- small integers make ties; every 7th cell of every other case is NaN
      local Xc = H.values({2, 2, hh, ww}, {seed = 100 + ci, lo = -3, hi = 3, int = true})
      if ci % 2 == 0 then
        local k = 0
        for _, a in ipairs(Xc) do for _, b in ipairs(a) do for _, r in ipairs(b) do
          for j = 1, #r do k = k + 1; if k % 7 == 0 then r[j] = 0 / 0 end end
        end end end
      end
      local rv, ri = ref_max(Xc, kh, kw, sh, sw, ph, pw)
      local o = {stride = {sh, sw}, padding = {ph, pw}}
      local layouts = ci <= 6 and H.layouts or {"contiguous"}
      for _, dt in ipairs({"float32", "float64"}) do
        for _, layout in ipairs(layouts) do
          local v, i = dle.max_pool2d(H.make(Xc, dt, layout), {kh, kw}, o)
          local vt, it_ = v:reshape(-1):totable(), i:reshape(-1):totable()
          local msg = string.format("case %d: kernel %dx%d stride %dx%d padding %dx%d input %dx%d %s %s", ci, kh,
            kw, sh, sw, ph, pw, hh, ww, dt, layout)
          assert.are.equal(#rv, #vt, msg)
          for k = 1, #rv do
            if rv[k] ~= rv[k] then
              assert(vt[k] ~= vt[k], msg .. ": NaN expected at " .. k)
            else
              assert(vt[k] == rv[k], msg .. string.format(": value %s vs %s at %d", vt[k], rv[k], k))
            end
            assert(it_[k] == ri[k], msg .. string.format(": index %d vs %d at %d", it_[k], ri[k], k))
          end
        end
      end
    end
  end)

  it("works as a method on float16 and rejects bad kernels, strides and paddings", function()
    local v = dle.tensor(X, {dtype = "float16"}):max_pool2d(3)
    assert.are.equal("float16", v:dtype())
    assert.are.same({2, 3, 2, 3}, v:shape())
    local x = dle.zeros(1, 1, 4, 4)
    H.assert_error(function() dle.max_pool2d(x, 0) end, "max_pool2d", "kernel size must be positive")
    H.assert_error(function() dle.max_pool2d(x, 2, {stride = 0}) end, "max_pool2d", "stride")
    H.assert_error(function() dle.max_pool2d(x, 2, {padding = 2}) end, "max_pool2d", "half the kernel")
    H.assert_error(function() dle.max_pool2d(x, 5) end, "max_pool2d", "larger than the padded input")
    H.assert_error(function() dle.max_pool2d(dle.zeros(4, 4), 2) end, "max_pool2d", "4-D", "{4,4}")
    H.assert_error(function() dle.max_pool2d(x) end, "max_pool2d", "kernel size")
  end)
end)

describe("avg_pool2d", function()
  local X = H.values({2, 3, 7, 9}, {seed = 21})

  it("matches a direct mean (kernel 3, default stride, no padding)", function()
    H.assert_close(dle.avg_pool2d(dle.tensor(X, {dtype = "float64"}), 3), (ref_pool("avg", X, 3)))
  end)

  it("counts the padding in the divisor by default and not with count_include_pad = false", function()
    local o = {stride = {1, 2}, padding = {1, 1}}
    for _, layout in ipairs(H.layouts) do
      local x = H.make(X, "float32", layout)
      H.assert_close(dle.avg_pool2d(x, {3, 2}, o), (ref_pool("avg", X, {3, 2}, o)), {msg = layout})
      local o2 = {stride = {1, 2}, padding = {1, 1}, count_include_pad = false}
      H.assert_close(dle.avg_pool2d(x, {3, 2}, o2), (ref_pool("avg", X, {3, 2}, o2)), {msg = layout})
    end
    -- a corner of ones with padding 1: 4 of 9 cells valid
    local c = dle.ones(1, 1, 2, 2):avg_pool2d(3, {stride = 1, padding = 1})
    H.assert_close(c, {{{{4 / 9, 4 / 9}, {4 / 9, 4 / 9}}}})
    local d = dle.ones(1, 1, 2, 2):avg_pool2d(3, {stride = 1, padding = 1, count_include_pad = false})
    H.assert_close(d, {{{{1, 1}, {1, 1}}}})
  end)

  it("rejects a kernel larger than the padded input, naming avg_pool2d", function()
    H.assert_error(function() dle.avg_pool2d(dle.zeros(1, 1, 2, 2), 3) end, "avg_pool2d", "larger")
  end)
end)

-- ---------------------------------------------------------------- gradient ops (dle.core)

describe("gradient ops", function()
  local core = dle.core

  it("conv2d_grad_input and conv2d_grad_weight are the adjoints of conv2d in x and in w", function()
    local o = {stride = 2, padding = 1, dilation = {1, 2}, groups = 3}
    local x = dle.tensor(H.values({2, 3, 7, 9}, {seed = 31}), {dtype = "float64"})
    local w = dle.tensor(H.values({6, 1, 3, 2}, {seed = 32}), {dtype = "float64"})
    local y = dle.conv2d(x, w, nil, o)
    local gy = dle.tensor(H.values(y:shape(), {seed = 33}), {dtype = "float64"})
    local gx = core._conv2d_grad_input(gy, w, {7, 9}, o)
    local gw = core._conv2d_grad_weight(gy, x, {3, 2}, o)
    assert.are.same({2, 3, 7, 9}, gx:shape())
    assert.are.same({6, 1, 3, 2}, gw:shape())
    local lhs = dot(gy, y)
    assert.is_true(math.abs(dot(gx, x) - lhs) < 1e-9 * (1 + math.abs(lhs)))
    assert.is_true(math.abs(dot(gw, w) - lhs) < 1e-9 * (1 + math.abs(lhs)))
  end)

  it("the gradient ops stay adjoint when the batch spans several column chunks (40 x 4x32x32)", function()
    H.keep_threads(finally)
    dle.set_num_threads(1) -- one-sample chunks in two row parts each
    local g = dle.Generator(5)
    local x = dle.randn({40, 4, 32, 32}, {generator = g, dtype = "float64"})
    local w = dle.randn({3, 4, 5, 5}, {generator = g, dtype = "float64"})
    local y = dle.conv2d(x, w, nil, {padding = 2})
    local gy = dle.randn(y:shape(), {generator = g, dtype = "float64"})
    local lhs = dot(gy, y)
    local gx = core._conv2d_grad_input(gy, w, {32, 32}, {padding = 2})
    local gw = core._conv2d_grad_weight(gy, x, {5, 5}, {padding = 2})
    assert.is_true(math.abs(dot(gx, x) - lhs) < 1e-9 * math.abs(lhs))
    assert.is_true(math.abs(dot(gw, w) - lhs) < 1e-9 * math.abs(lhs))
  end)

  it("avg_pool2d_grad is the adjoint of avg_pool2d (with and without count_include_pad)", function()
    local x = dle.tensor(H.values({2, 2, 7, 9}, {seed = 41}), {dtype = "float64"})
    for _, inc in ipairs({true, false}) do
      local o = {stride = {2, 1}, padding = 1, count_include_pad = inc}
      local y = dle.avg_pool2d(x, {3, 2}, o)
      local gy = dle.tensor(H.values(y:shape(), {seed = 42}), {dtype = "float64"})
      local gx = core._avg_pool2d_grad(gy, {7, 9}, {3, 2}, o)
      assert.is_true(math.abs(dot(gx, x) - dot(gy, y)) < 1e-9)
    end
  end)

  it("grad ops reject a grad_output that does not match the given input size", function()
    local w = dle.zeros(4, 3, 3, 3)
    H.assert_error(function() core._conv2d_grad_input(dle.zeros(2, 4, 5, 5), w, {9, 9}) end,
                   "conv2d_grad_input", "{2,4,5,5}")
    H.assert_error(function() core._conv2d_grad_weight(dle.zeros(2, 4, 5, 5), dle.zeros(3, 3, 7, 7), {3, 3}) end,
                   "conv2d_grad_weight", "batch")
    H.assert_error(function() core._avg_pool2d_grad(dle.zeros(1, 1, 2, 2), {7, 7}, 2) end,
                   "avg_pool2d_grad", "{1,1,2,2}")
    -- sizes far past any tensor, and a groups x channels product past int64 (found by the fuzzer)
    H.assert_error(function() core._conv2d_grad_input(dle.zeros(1, 4, 5, 5), w, {1 << 50, 9}) end,
                   "conv2d_grad_input", "larger than the supported")
    H.assert_error(function() core._conv2d_grad_input(dle.zeros(1, 4, 5, 5), w, {7, 7}, {groups = 1 << 31}) end,
                   "conv2d_grad_input", "groups")
    H.assert_error(function() core._avg_pool2d_grad(dle.zeros(1, 1, 2, 2), {1 << 50, 7}, 2) end,
                   "avg_pool2d_grad", "larger than the supported")
  end)
end)
