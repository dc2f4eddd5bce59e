-- scan_spec.lua — the scan ops (cumsum, cumprod, logcumsumexp, cummax, cummin) forward: values
-- against a plain Lua reference along every dim of odd-sized inputs in every layout (contiguous,
-- transposed, strided, sliced, expanded), PyTorch's dtype rules (integer and bool cumsum/cumprod
-- give int64, dtype option, logcumsumexp floats only), cummax/cummin indices (1-based, ties to the
-- last position, NaN stays), 0-dim and empty inputs, long lines (the two-pass parallel scan at 1
-- and 2 threads) against float64, bad input, and PyTorch in float64 when it is installed.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

-- The reference scan of nested table v along dim d (1-based): step(acc, x) folded over elements
-- 1..k; for cummax/cummin `better(x, acc)` decides and the result is {values, indices}.
local function ref_scan(v, d, step, init)
  local shape = H.shape(v)
  return H.build(shape, function(idx)
    local acc, at = init, {}
    for i = 1, #idx do at[i] = idx[i] end
    for k = 1, idx[d] do
      at[d] = k
      acc = step(acc, H.get(v, at))
    end
    return acc
  end)
end

local function ref_extreme(v, d, better)
  local shape = H.shape(v)
  local inds = {}
  local vals = H.build(shape, function(idx)
    local best, bi, at = nil, nil, {}
    for i = 1, #idx do at[i] = idx[i] end
    for k = 1, idx[d] do
      at[d] = k
      local x = H.get(v, at)
      if bi == nil or better(x, best) then best, bi = x, k end
    end
    inds[#inds + 1] = bi
    return best
  end)
  return vals, inds
end

local function is_nan(x) return x ~= x end
local function max_better(x, a) return is_nan(x) or (not is_nan(a) and x >= a) end
local function min_better(x, a) return is_nan(x) or (not is_nan(a) and x <= a) end

local refs = {
  cumsum = function(v, d) return ref_scan(v, d, function(a, x) return a + x end, 0) end,
  cumprod = function(v, d) return ref_scan(v, d, function(a, x) return a * x end, 1) end,
  logcumsumexp = function(v, d)
    return ref_scan(v, d, function(a, x)
      local hi, lo = math.max(a, x), math.min(a, x)
      if lo == -math.huge then return hi end
      return hi + math.log(1 + math.exp(lo - hi))
    end, -math.huge)
  end,
}

local values3 = H.values({3, 4, 5}, {seed = 11, lo = 0.5, hi = 1.5})

describe("scan ops: values", function()
  for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp"}) do
    it(name .. " matches the reference along every dim of a {3,4,5} input in every layout", function()
      for d = -3, 3 do
        if d ~= 0 then
          local expected = refs[name](values3, d < 0 and d + 4 or d)
          H.each_layout(values3, "float64", function(layout, t)
            H.assert_close(dle[name](t, d), expected, {rtol = 1e-12, atol = 1e-12, msg = layout .. " dim " .. d})
          end)
        end
      end
    end)
  end

  for _, name in ipairs({"cummax", "cummin"}) do
    it(name .. " values and 1-based indices match the reference along every dim in every layout", function()
      local v = H.values({3, 4, 5}, {seed = 12, lo = -3, hi = 3})
      v = H.map(v, function(x) return math.floor(x) end) -- many ties
      for d = 1, 3 do
        local ev, ei = ref_extreme(v, d, name == "cummax" and max_better or min_better)
        H.each_layout(v, "float32", function(layout, t)
          local vals, inds = t[name](t, d)
          assert.are.equal("int64", inds:dtype())
          H.assert_close(vals, ev, {msg = layout})
          assert.are.same(ei, inds:reshape(-1):totable(), layout .. " dim " .. d)
        end)
      end
    end)
  end

  it("an expanded input (stride 0 along the scanned dim and across it) scans like its copy", function()
    local row = {1, -2, 3, 0.5, 2}
    local t = H.make(H.repeat_rows(row, 4), "float32", "expanded")
    for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"}) do
      for d = 1, 2 do
        local a, ai = t[name](t, d)
        local b, bi = t:contiguous()[name](t:contiguous(), d)
        H.assert_close(a, b:totable(), {msg = name .. " dim " .. d})
        if ai then assert.are.same(bi:totable(), ai:totable()) end
      end
    end
  end)

  it("a permuted 3-d input whose dims do not merge is scanned correctly (copied first)", function()
    local base = dle.tensor(values3, F64)
    local t = base:permute({2, 3, 1}) -- {4, 5, 3}, strides {5, 1, 20}
    local expected = refs.cumsum(t:totable(), 1)
    H.assert_close(t:cumsum(1), expected, {rtol = 1e-12})
    H.assert_close(t:cumsum(3), refs.cumsum(t:totable(), 3), {rtol = 1e-12})
  end)
end)

describe("scan ops: cummax and cummin ties and NaN (as PyTorch)", function()
  it("ties give the last position; a NaN stays the maximum and each later NaN takes the index", function()
    local v, i = dle.tensor({1, 3, 3, 2, 0 / 0, 5, 0 / 0, 1}):cummax(1)
    assert.are.same({1, 2, 3, 3, 5, 5, 7, 7}, i:totable())
    local vals = v:totable()
    assert.are.same({1, 3, 3, 3}, {vals[1], vals[2], vals[3], vals[4]})
    for k = 5, 8 do assert.is_true(is_nan(vals[k])) end
    local mv, mi = dle.tensor({2, 1, 1, 3, 1}):cummin(1)
    assert.are.same({2, 1, 1, 1, 1}, mv:totable())
    assert.are.same({1, 2, 3, 3, 5}, mi:totable())
  end)

  it("integer, uint8 and bool inputs keep their dtype", function()
    for _, dt in ipairs({"int32", "int64", "uint8"}) do
      local v, i = dle.tensor({3, 1, 4, 1, 5}, {dtype = dt}):cummax(1)
      assert.are.equal(dt, v:dtype())
      assert.are.same({3, 3, 4, 4, 5}, v:totable())
      assert.are.same({1, 1, 3, 3, 5}, i:totable())
    end
    local v, i = dle.tensor({true, false, true}):cummax(1)
    assert.are.equal("bool", v:dtype())
    assert.are.same({true, true, true}, v:totable())
    assert.are.same({1, 1, 3}, i:totable())
  end)
end)

describe("scan ops: infinities and NaN (as PyTorch)", function()
  it("logcumsumexp: -inf adds nothing, +inf stays, NaN propagates; cumsum: inf - inf is NaN", function()
    local inf = math.huge
    local l = dle.tensor({-inf, -inf, 1, inf, 2}):logcumsumexp(1):totable()
    assert.are.same({-inf, -inf, 1, inf, inf}, l)
    local n = dle.tensor({1, 0 / 0, 2}):logcumsumexp(1):totable()
    assert.are.equal(1, n[1])
    assert.is_true(is_nan(n[2]) and is_nan(n[3]))
    local c = dle.tensor({1, inf, -inf, 1}):cumsum(1):totable()
    assert.are.same({1, inf}, {c[1], c[2]})
    assert.is_true(is_nan(c[3]) and is_nan(c[4]))
    local _, i = dle.tensor({3, 0 / 0, 1, 0 / 0}):cummin(1)
    assert.are.same({1, 2, 2, 4}, i:totable())
  end)
end)

describe("scan ops: dtypes", function()
  it("cumsum and cumprod of integers and bool give int64, as in PyTorch", function()
    for _, dt in ipairs({"int32", "int64", "uint8"}) do
      local t = dle.tensor({1, 2, 3, 4}, {dtype = dt})
      assert.are.equal("int64", t:cumsum(1):dtype())
      assert.are.same({1, 3, 6, 10}, t:cumsum(1):totable())
      assert.are.same({1, 2, 6, 24}, t:cumprod(1):totable())
    end
    local b = dle.tensor({true, false, true, true})
    assert.are.same({1, 1, 2, 3}, b:cumsum(1):totable())
    assert.are.equal("int64", b:cumprod(1):dtype())
  end)

  it("uint8 cumsum does not wrap at 256 (it counts in int64)", function()
    local t = dle.full({3}, 200, {dtype = "uint8"})
    assert.are.same({200, 400, 600}, t:cumsum(1):totable())
  end)

  it("the dtype option converts the input first (floats truncate into int64)", function()
    local t = dle.tensor({1.5, 2.5, 3.5})
    local r = t:cumsum(1, {dtype = "int64"})
    assert.are.equal("int64", r:dtype())
    assert.are.same({1, 3, 6}, r:totable())
    assert.are.equal("float64", dle.cumprod(t, 1, {dtype = "float64"}):dtype())
  end)

  it("float16, bfloat16, float32 and float64 keep their dtype and agree with float64", function()
    local v = H.values({5, 7}, {seed = 13, lo = 0.5, hi = 1.5})
    local ref = dle.tensor(v, F64)
    for _, dt in ipairs({"float16", "bfloat16", "float32", "float64"}) do
      local t = dle.tensor(v, {dtype = dt})
      local tol = ({float16 = 1e-2, bfloat16 = 2e-2, float32 = 1e-6, float64 = 1e-14})[dt]
      for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp", "cummax"}) do
        local r = t[name](t, 2)
        assert.are.equal(dt, r:dtype())
        local e = ref:to(dt):double()[name](ref:to(dt):double(), 2)
        H.assert_close(r:double(), e:totable(), {rtol = tol, atol = tol, msg = name .. " " .. dt})
      end
    end
  end)
end)

describe("scan ops: 0-dim, empty and long inputs", function()
  it("a 0-dim tensor scans as one element along dim 1 or -1", function()
    local t = dle.tensor(2.5)
    for _, d in ipairs({1, -1}) do
      assert.are.equal(2.5, t:cumsum(d):item())
      assert.are.equal(0, t:cumsum(d):dim())
      assert.are.equal(2.5, t:cumprod(d):item())
      assert.are.equal(2.5, t:logcumsumexp(d):item())
      local v, i = t:cummax(d)
      assert.are.equal(2.5, v:item())
      assert.are.equal(1, i:item())
    end
    H.assert_error(function() t:cumsum(2) end, "cumsum", "dim 2 out of range")
  end)

  it("empty inputs give empty results of the same shape", function()
    for _, shape in ipairs({{0}, {3, 0}, {0, 4}}) do
      local t = dle.zeros(shape)
      for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"}) do
        local r, i = t[name](t, #shape)
        assert.are.same(shape, r:shape())
        if i then assert.are.same(shape, i:shape()) end
      end
    end
  end)

  it("a long line (the two-pass parallel scan) matches a float64 running sum at 1 and 2 threads", function()
    local n = 300007
    local x = dle.rand({n}, {generator = dle.Generator(5)}) - 0.5
    local ref = x:double():totable()
    local acc = 0
    for k = 1, n do
      acc = acc + ref[k]
      ref[k] = acc
    end
    local before = dle.get_num_threads()
    for _, threads in ipairs({1, 2}) do
      dle.set_num_threads(threads)
      local got = x:cumsum(1):double():totable()
      -- float32 results of a double accumulator (as PyTorch's CPU cumsum): each is the running
      -- sum rounded once to float32, within half an ulp; a float32 accumulator is far off
      local bad
      for k = 1, n do
        if math.abs(got[k] - ref[k]) > 2 ^ -24 * math.abs(ref[k]) + 1e-9 then bad = bad or k end
      end
      assert.is_nil(bad, bad and
        string.format("element %d: %.9g vs %.9g at %d threads", bad, got[bad], ref[bad], threads))
      -- cummax along the same line: the maximum early, a tie near the end
      local y = dle.zeros({n})
      y[10] = 7
      y[n - 3] = 7
      local v, i = y:cummax(1)
      local vt, it = v:totable(), i:totable()
      assert.are.same({10, n - 3, 7, 0}, {it[n - 4], it[n], vt[n], vt[9]})
      -- cumprod of 2, 0.5, 2, 0.5, ...: the carry from the first slice must enter the second
      local alt = {}
      for k = 1, n do alt[k] = k % 2 == 1 and 2 or 0.5 end
      local p = dle.tensor(alt, F64):cumprod(1):totable()
      assert.are.same({2, 1, 2, 1}, {p[1], p[2], p[n - 2], p[n - 1]})
      assert.are.equal(2, p[n])
      -- logcumsumexp along the same long line
      H.assert_close(dle.zeros({n}, F64):logcumsumexp(1)[n], math.log(n), {rtol = 1e-12})
    end
    dle.set_num_threads(before)
  end)

  it("many long columns (scanning dim 1 of {N, 70}) match the reference", function()
    local v = H.values({41, 70}, {seed = 14, lo = -1, hi = 1})
    local t = dle.tensor(v, F64)
    H.assert_close(t:cumsum(1), refs.cumsum(v, 1), {rtol = 1e-12, atol = 1e-12})
    H.assert_close(t:t():cumsum(2), H.transpose(refs.cumsum(v, 1)), {rtol = 1e-12, atol = 1e-12})
  end)
end)

describe("scan ops: bad input", function()
  local t = dle.ones({2, 3})
  it("a dim out of range names the function, the dim and the tensor", function()
    H.assert_error(function() t:cumsum(3) end, "cumsum", "dim 3 out of range", "2-dim")
    H.assert_error(function() dle.cummax(t, -3) end, "cummax", "dim -3 out of range")
    H.assert_error(function() t:cumprod(0) end, "cumprod", "dim 0 is invalid")
  end)

  it("a missing dim, a non-tensor and a bad options argument are errors naming the function", function()
    H.assert_error(function() t:cumsum() end, "cumsum", "dim argument #")
    H.assert_error(function() dle.logcumsumexp({1, 2}, 1) end, "logcumsumexp")
    H.assert_error(function() t:cumsum(1, 5) end, "cumsum", "options table")
  end)

  it("unknown options are errors naming the option; logcumsumexp and cummax take none", function()
    H.assert_error(function() t:cumsum(1, {dtpye = "int64"}) end, "cumsum", "unknown option 'dtpye'")
    H.assert_error(function() t:logcumsumexp(1, {dtype = "float64"}) end, "logcumsumexp", "unknown option 'dtype'")
    H.assert_error(function() t:cummin(1, {keepdim = true}) end, "cummin", "unknown option 'keepdim'")
  end)

  it("logcumsumexp of an integer tensor is an error (as in PyTorch)", function()
    H.assert_error(function() dle.tensor({1, 2}, {dtype = "int64"}):logcumsumexp(1) end,
      "logcumsumexp", "float tensor", "int64")
  end)
end)

describe("scan ops: PyTorch agreement (optional)", function()
  it("all five ops match torch in float64 (values and indices) on a transposed input with ties", function()
    if H.without_torch(pending) then return end
    local v = H.map(H.values({5, 6}, {seed = 15, lo = -2, hi = 2}), function(x) return math.floor(x * 2) / 2 end)
    local x = dle.tensor(v, F64):t()
    local out = H.run_torch({x = x}, {
      "for d in (0, 1):",
      "  p(x.cumsum(d)); p(x.cumprod(d)); p(x.logcumsumexp(d))",
      "  v, i = x.cummax(d); p(v); p(i + 1)",
      "  v, i = x.cummin(d); p(v); p(i + 1)",
    })
    local line = 0
    local function expect(t, what)
      line = line + 1
      H.assert_close(t:double():reshape(-1), H.torch_line(out[line]), {rtol = 1e-12, atol = 1e-12, msg = what})
    end
    for d = 1, 2 do
      expect(x:cumsum(d), "cumsum")
      expect(x:cumprod(d), "cumprod")
      expect(x:logcumsumexp(d), "logcumsumexp")
      local mv, mi = x:cummax(d)
      expect(mv, "cummax values")
      expect(mi, "cummax indices")
      local nv, ni = x:cummin(d)
      expect(nv, "cummin values")
      expect(ni, "cummin indices")
    end
  end)
end)
