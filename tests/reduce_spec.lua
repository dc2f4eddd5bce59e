-- reduce_spec.lua — reductions (sum, mean, prod, var, std, logsumexp, amax, amin, max/min with
-- indices, argmax/argmin), softmax/log_softmax, all/any and norm, each against a pure-Lua
-- reference on contiguous, transposed, strided, sliced, expanded (stride 0), permuted 3-D and
-- odd-sized inputs, over each dim, several dims and all dims, with and without keepdim; float32,
-- float64, int64 and bool; large inputs (threaded and streamed paths); numerical stability;
-- empty and 0-dim inputs; error messages.
local dle = require("dle")
local H = require("helpers")

local FLOATS = {"float32", "float64"}
local ODD = {7, 13}
local NAN = 0 / 0
local INF = math.huge

-- Input values as the tensor stores them (float32 rounds), so the reference sees the same numbers.
local function stored(values, dtype)
  if dtype == "float32" then return H.map(values, H.f32) end
  return values
end

-- ---------------------------------------------------------------- reference

-- Reference reduction of nested table v over dims (a 1-based dim, a list of them, or nil for
-- all), keepdim like dle. f(list) gives one output from the reduced elements in row-major order.
local function ref_reduce(v, dims, keepdim, f)
  local shape = H.shape(v)
  local nd = #shape
  local red = {}
  if dims == nil then
    for d = 1, nd do red[d] = true end
  else
    for _, d in ipairs(type(dims) == "table" and dims or {dims}) do red[d < 0 and d + nd + 1 or d] = true end
  end
  local oshape, rdims = {}, {}
  for d = 1, nd do
    if not red[d] then oshape[#oshape + 1] = shape[d]
    else
      rdims[#rdims + 1] = d
      if keepdim then oshape[#oshape + 1] = 1 end
    end
  end
  local src = {}
  return H.build(oshape, function(oidx)
    local j = 1
    for d = 1, nd do
      if not red[d] then src[d] = oidx[j]; j = j + 1
      elseif keepdim then j = j + 1 end
    end
    local list = {}
    H.each_assignment(rdims, shape, src, function() list[#list + 1] = H.get(v, src) end)
    return f(list)
  end)
end

local REF = {}
function REF.sum(l) local s = 0 for _, x in ipairs(l) do s = s + x end return s end
function REF.prod(l) local s = 1 for _, x in ipairs(l) do s = s * x end return s end
function REF.mean(l) return REF.sum(l) / #l end
function REF.var(l, c)
  c = c or 1
  local m, s = REF.mean(l), 0
  for _, x in ipairs(l) do s = s + (x - m) ^ 2 end
  return s / math.max(0, #l - c)
end
function REF.std(l, c) return math.sqrt(REF.var(l, c)) end
-- index of the best element: strictly better wins (first occurrence), the first NaN beats all
local function best(l, better)
  local bi = 1
  for i = 2, #l do
    local x, b = l[i], l[bi]
    if b == b and (x ~= x or better(x, b)) then bi = i end
  end
  return bi
end
local function gt(a, b) return a > b end
local function lt(a, b) return a < b end
function REF.argmax(l) return best(l, gt) end
function REF.argmin(l) return best(l, lt) end
function REF.amax(l) return l[best(l, gt)] end
function REF.amin(l) return l[best(l, lt)] end
function REF.logsumexp(l)
  local m = REF.amax(l) or -INF
  if m ~= m or m == INF or m == -INF then return m end
  local s = 0
  for _, x in ipairs(l) do s = s + math.exp(x - m) end
  return m + math.log(s)
end

-- Reference softmax of nested table v along dim d (1-based): per-row max and sum of exp, broadcast
-- back over the row.
local function ref_softmax(v, d, log)
  local m = ref_reduce(v, d, true, function(l) return REF.amax(l) end)
  local s = ref_reduce(v, d, true, function(l)
    local mx, acc = REF.amax(l), 0
    for _, x in ipairs(l) do acc = acc + math.exp(x - mx) end
    return acc
  end)
  return H.zipmap(function(x, mx, sx)
    return log and (x - mx - math.log(sx)) or math.exp(x - mx) / sx
  end, v, m, s)
end

-- The dims each 2-D test reduces over, and their names.
local DIMS_2D = {{nil, "all"}, {1, "dim 1"}, {2, "dim 2"}, {-1, "dim -1"}, {{1, 2}, "dims {1,2}"}}

-- Input domains per op (prod stays near 1 so 91 factors neither overflow nor vanish).
local VALUE_OPS = {
  {"sum", -3, 3}, {"mean", -3, 3}, {"prod", 0.7, 1.3}, {"var", -3, 3}, {"std", -3, 3},
  {"logsumexp", -5, 5}, {"amax", -3, 3}, {"amin", -3, 3},
}

local function every_layout(v, dt, f)
  H.each_layout(v, dt, f)
end

-- ---------------------------------------------------------------- value reductions

describe("value reductions", function()
  for k, spec in ipairs(VALUE_OPS) do
    local name, lo, hi = spec[1], spec[2], spec[3]
    for _, dt in ipairs(FLOATS) do
      it(name .. " " .. dt
         .. " matches the reference over each dim, both dims and all, with keepdim, on every layout (7x13)", function()
        local v = stored(H.values(ODD, {lo = lo, hi = hi, seed = k}), dt)
        every_layout(v, dt, function(layout, x)
          for _, dd in ipairs(DIMS_2D) do
            for _, keep in ipairs({false, true}) do
              local want = ref_reduce(v, dd[1], keep, REF[name])
              local msg = string.format("%s %s %s keepdim=%s", name, layout, dd[2], tostring(keep))
              H.assert_close(x[name](x, dd[1], keep), want, {dtype = dt, msg = msg, rtol = dt == "float32" and 2e-5
                                                             or nil})
            end
          end
        end)
        H.assert_close(dle[name](H.make(v, dt), 2), ref_reduce(v, 2, false, REF[name]),
                       {dtype = dt, msg = "dle." .. name})
      end)
    end

    it(name .. " on a permuted 3-D tensor over dim pairs, dim lists in any order, and negative dims", function()
      local v = H.values({3, 5, 4}, {lo = lo, hi = hi, seed = 10 + k})
      -- stored as {4,3,5}, viewed back as {3,5,4}: every dim has an unusual stride
      local x = dle.tensor(H.permute(v, {3, 1, 2}), {dtype = "float64"}):permute(2, 3, 1)
      assert.is_false(x:is_contiguous())
      for _, dims in ipairs({{1, 3}, {3, 1}, {2}, {-1, -2}, {1, 2, 3}, {}}) do
        for _, keep in ipairs({false, true}) do
          local rd = dims
          if #dims == 0 then rd = nil end  -- {} reduces everything
          H.assert_close(x[name](x, dims, keep), ref_reduce(v, rd, keep, REF[name]),
                         {dtype = "float64", msg = name .. " dims {" .. table.concat(dims, ",") .. "}"})
        end
      end
    end)

    it(name .. " over an expanded (stride 0) dim, and over size-1 dims", function()
      local row = H.values({5}, {lo = lo, hi = hi, seed = 20 + k})
      local v = H.repeat_rows(row, 6)
      local x = H.make(v, "float64", "expanded")
      for _, d in ipairs({1, 2}) do
        H.assert_close(x[name](x, d), ref_reduce(v, d, false, REF[name]),
                       {dtype = "float64", msg = name .. " expanded dim " .. d})
      end
      H.assert_close(x[name](x), ref_reduce(v, nil, false, REF[name]),
                     {dtype = "float64", msg = name .. " expanded all"})
      local w = H.values({4, 1, 3}, {lo = lo, hi = hi, seed = 30 + k})
      local y = dle.tensor(w, {dtype = "float64"})
      for _, d in ipairs({1, 2, 3, {1, 2}, {2, 3}}) do
        H.assert_close(y[name](y, d, true), ref_reduce(w, d, true, REF[name]),
                       {dtype = "float64", msg = name .. " size-1"})
      end
    end)
  end

  it("reduce everything into a 0-dim tensor", function()
    local x = dle.tensor({{1, 2}, {3, 4}})
    local s = x:sum()
    assert.are.same({}, s:shape())
    assert.are.equal(10, s:item())
    assert.are.same({1, 1}, x:sum(nil, true):shape())
    assert.are.same({}, x:mean({}):shape())
  end)

  it("sum of int64 is exact beyond 2^53, and integer results are int64", function()
    local big = 1 << 53
    local x = dle.tensor({big, 1, 1, -3, 5}, {dtype = "int64"})
    assert.are.equal("int64", x:sum():dtype())
    assert.are.equal(big + 4, x:sum():item())
    local v = H.values(ODD, {lo = -50, hi = 50, int = true})
    every_layout(v, "int64", function(layout, t)
      for _, dd in ipairs(DIMS_2D) do
        for _, name in ipairs({"sum", "prod", "amax", "amin"}) do
          local r = t[name](t, dd[1])
          assert.are.equal("int64", r:dtype())
          local want = ref_reduce(v, dd[1], false, REF[name])
          assert.are.same(want, r:totable(), name .. " int64 " .. layout .. " " .. dd[2])
        end
      end
    end)
    local m = dle.tensor({(1 << 62) + 1, (1 << 62) + 3, (1 << 62) + 2}, {dtype = "int64"})
    assert.are.equal((1 << 62) + 3, m:amax():item())
    assert.are.equal((1 << 62) + 1, m:amin():item())
  end)

  it("int32, uint8 and bool sum/prod give int64; mean/var/std/logsumexp of integers give float32", function()
    for _, dt in ipairs({"int32", "uint8", "bool", "int64"}) do
      local vals = dt == "bool" and {{true, false, true}, {true, true, false}} or {{1, 2, 3}, {4, 5, 6}}
      local num = dt == "bool" and {{1, 0, 1}, {1, 1, 0}} or vals
      local x = dle.tensor(vals, {dtype = dt})
      assert.are.equal("int64", x:sum():dtype())
      assert.are.equal("int64", x:prod(1):dtype())
      assert.are.same(ref_reduce(num, 2, false, REF.sum), x:sum(2):totable())
      assert.are.same(ref_reduce(num, 1, false, REF.prod), x:prod(1):totable())
      for _, name in ipairs({"mean", "var", "std", "logsumexp"}) do
        local r = x[name](x, 2)
        assert.are.equal("float32", r:dtype(), name .. " of " .. dt)
        H.assert_close(r, ref_reduce(num, 2, false, REF[name]), {msg = name .. " of " .. dt})
      end
      assert.are.equal(dt, x:amax():dtype())
    end
    assert.is_true(dle.tensor({false, true}):amax():item())
  end)

  it("float16 and bfloat16 sums accumulate in higher precision", function()
    assert.are.equal(4096, dle.ones(4096, {dtype = "float16"}):sum():item())
    assert.are.equal("float16", dle.ones(4, {dtype = "float16"}):sum():dtype())
    assert.are.equal(1024, dle.ones(1024, {dtype = "bfloat16"}):sum():item())
    H.assert_close(dle.ones(3000, {dtype = "float16"}):mean(), 1, {rtol = 0, atol = 0})
  end)

  it("a float32 sum of 1e7 ones is exact", function()
    local s = dle.ones(10000000):sum()
    assert.are.equal("float32", s:dtype())
    assert.are.equal(10000000, s:item())
    assert.are.equal(10000000, dle.ones(2500, 4000):sum(1):sum():item())
  end)

  it("dtype option converts the input first", function()
    local x = dle.tensor({1, 2, 3}, {dtype = "int32"})
    assert.are.equal("float64", x:sum(nil, {dtype = "float64"}):dtype())
    assert.are.equal("float64", x:mean(1, {dtype = "float64", keepdim = true}):dtype())
    assert.are.same({1}, x:mean(1, {keepdim = true}):shape())
  end)
end)

-- ---------------------------------------------------------------- var / std options

describe("var and std", function()
  local v = {{1, 2, 3, 4}, {2, 4, 6, 9}}
  local x = dle.tensor(v, {dtype = "float64"})

  it("are unbiased by default and take correction / unbiased / keepdim options", function()
    H.assert_close(x:var(2), ref_reduce(v, 2, false, function(l) return REF.var(l, 1) end), {dtype = "float64"})
    local pop = ref_reduce(v, 2, false, function(l) return REF.var(l, 0) end)
    H.assert_close(x:var(2, {correction = 0}), pop, {dtype = "float64"})
    H.assert_close(x:var(2, {unbiased = false}), pop, {dtype = "float64"})
    H.assert_close(x:var(2, false, {unbiased = false}), pop, {dtype = "float64"})
    local kept = x:std(2, true, {correction = 0})
    assert.are.same({2, 1}, kept:shape())
    H.assert_close(kept, ref_reduce(v, 2, true, function(l) return REF.std(l, 0) end), {dtype = "float64"})
    H.assert_close(x:std(2, {keepdim = true, correction = 2}),
                   ref_reduce(v, 2, true, function(l) return REF.std(l, 2) end), {dtype = "float64"})
    H.assert_close(x:var({unbiased = false}), REF.var(H.flat(v), 0), {dtype = "float64"})
    H.assert_close(dle.std(x, nil, {correction = 0}), REF.std(H.flat(v), 0), {dtype = "float64"})
  end)

  it("give NaN for one element (unbiased) and inf when correction exceeds the count", function()
    local one = dle.tensor({5.0})
    local r = one:var():item()
    assert.is_true(r ~= r)
    assert.are.equal(0, one:var({correction = 0}):item())
    local two = dle.tensor({1.0, 3.0})
    assert.are.equal(INF, two:var({correction = 3}):item())
  end)

  it("are accurate for values with a large common offset (two-pass)", function()
    local t = dle.tensor({1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4}, {dtype = "float64"})
    H.assert_close(t:var(), 5 / 3, {rtol = 1e-12})
  end)
end)

-- ---------------------------------------------------------------- max / min / argmax / argmin

describe("max, min, argmax and argmin", function()
  for _, dt in ipairs({"float32", "float64", "int64"}) do
    it("max/min values and 1-based first-occurrence indices match the reference on every layout (" .. dt .. ")",
       function()
      local v = H.values(ODD, {lo = -3, hi = 3, int = true, seed = 7})  -- many ties
      every_layout(v, dt, function(layout, x)
        for _, d in ipairs({1, 2, -1}) do
          for _, keep in ipairs({false, true}) do
            for _, pair in ipairs({{"max", "argmax", "amax"}, {"min", "argmin", "amin"}}) do
              local vals, idx = x[pair[1]](x, d, keep)
              local msg = string.format("%s %s dim %d keepdim=%s", pair[1], layout, d, tostring(keep))
              assert.are.equal(dt, vals:dtype())
              assert.are.equal("int64", idx:dtype())
              H.assert_close(vals, ref_reduce(v, d, keep, REF[pair[3]]), {msg = msg})
              assert.are.same(ref_reduce(v, d, keep, REF[pair[2]]), idx:totable(), msg)
              assert.are.same(idx:totable(), x[pair[2]](x, d, keep):totable(), msg)
            end
          end
        end
        -- no dim: flat 1-based index over the logical (row-major) order, value as 0-dim
        local flat = H.flat(v)
        assert.are.equal(REF.argmax(flat), x:argmax():item(), "argmax flat " .. layout)
        assert.are.equal(REF.argmin(flat), x:argmin():item(), "argmin flat " .. layout)
        assert.are.equal(REF.amax(flat), x:max():item())
        assert.are.same({}, x:max():shape())
        assert.are.same({1, 1}, x:argmax(nil, true):shape())
      end)
    end)
  end

  it("NaN propagates: max/amax/argmax pick the first NaN", function()
    local x = dle.tensor({{1, NAN, 3, NAN}, {5, 2, 7, 1}})
    local v, i = x:max(2)
    assert.is_true(v[1] ~= v[1])
    assert.are.same({2, 3}, i:totable())
    local v2, i2 = x:min(2)
    assert.is_true(v2[1] ~= v2[1])
    assert.are.same({2, 4}, i2:totable())
    assert.is_true(x:amax():item() ~= x:amax():item())
    assert.is_true(x:amin(2)[1] ~= x:amin(2)[1])
    assert.are.equal(2, x:argmax():item())
    assert.are.equal(2, x:argmin():item())
    local xt = x:t()   -- logical order of the transpose: column-major of x
    assert.are.equal(3, xt:argmax():item())
  end)

  it("max over a permuted 3-D tensor and over an expanded tensor", function()
    local v = H.values({3, 5, 4}, {lo = -2, hi = 2, int = true, seed = 3})
    local x = dle.tensor(H.permute(v, {3, 1, 2}), {dtype = "float64"}):permute(2, 3, 1)
    for d = 1, 3 do
      local vals, idx = x:max(d)
      H.assert_close(vals, ref_reduce(v, d, false, REF.amax), {dtype = "float64"})
      assert.are.same(ref_reduce(v, d, false, REF.argmax), idx:totable())
    end
    assert.are.equal(REF.argmax(H.flat(v)), x:argmax():item())
    local row = {3, 1, 4, 1, 5}
    local e = H.make(H.repeat_rows(row, 4), "float32", "expanded")
    local ev, ei = e:max(1)
    assert.are.same(row, ev:totable())
    assert.are.same({1, 1, 1, 1, 1}, ei:totable())
    assert.are.same({5, 5, 5, 5}, select(2, e:max(2)):totable())
  end)

  it("max/min with another tensor or a non-integer number are elementwise", function()
    local a = dle.tensor({1, 5, 3})
    local b = dle.tensor({4, 2, 6})
    assert.are.same({4, 5, 6}, a:max(b):totable())
    assert.are.same({1, 2, 3}, dle.min(a, b):totable())
    assert.are.same({2.5, 5, 3}, a:max(2.5):totable())
    assert.are.same({1, 2.5, 2.5}, dle.min(2.5, a):totable())
    local v, i = dle.max(a, 1)
    assert.are.equal(5, v:item())
    assert.are.equal(2, i:item())
  end)

  it("bool and int inputs keep their dtype for values", function()
    local x = dle.tensor({{false, true, true}, {false, false, false}})
    local v, i = x:max(2)
    assert.are.same({true, false}, v:totable())
    assert.are.same({2, 1}, i:totable())
    assert.are.equal(2, x:argmax():item())
  end)
end)

-- ---------------------------------------------------------------- softmax

describe("softmax and log_softmax", function()
  for _, dt in ipairs(FLOATS) do
    it("match the reference along each dim on every layout (" .. dt .. ", 7x13)", function()
      local v = stored(H.values(ODD, {lo = -4, hi = 4, seed = 5}), dt)
      every_layout(v, dt, function(layout, x)
        for _, d in ipairs({1, 2, -1}) do
          for _, name in ipairs({"softmax", "log_softmax"}) do
            local r = x[name](x, d)
            assert.is_true(r:is_contiguous())
            H.assert_close(r, ref_softmax(v, d, name == "log_softmax"),
                           {dtype = dt, msg = name .. " " .. layout .. " dim " .. d})
          end
        end
        H.assert_close(x:softmax(), ref_softmax(v, -1), {dtype = dt, msg = "default dim is the last"})
        H.assert_close(dle.log_softmax(x, 1), ref_softmax(v, 1, true), {dtype = dt, msg = "dle.log_softmax"})
      end)
    end)
  end

  it("work on permuted 3-D, expanded and size-1 dims", function()
    local v = H.values({3, 5, 4}, {seed = 9})
    local x = dle.tensor(H.permute(v, {3, 1, 2}), {dtype = "float64"}):permute(2, 3, 1)
    for d = 1, 3 do
      H.assert_close(x:softmax(d), ref_softmax(v, d), {dtype = "float64", msg = "softmax 3-D dim " .. d})
      H.assert_close(x:log_softmax(d), ref_softmax(v, d, true), {dtype = "float64", msg = "log_softmax 3-D dim " .. d})
    end
    local row = {1, 2, 3}
    local e = H.make(H.repeat_rows(row, 4), "float64", "expanded")
    H.assert_close(e:softmax(1), H.repeat_rows({0.25, 0.25, 0.25}, 4), {dtype = "float64"})
    H.assert_close(e:softmax(2), ref_softmax(H.repeat_rows(row, 4), 2), {dtype = "float64"})
    H.assert_close(dle.tensor({{1}, {2}}):softmax(2), {{1}, {1}})
    H.assert_close(dle.tensor(3.0):softmax(), 1)
    H.assert_close(dle.tensor(3.0):log_softmax(1), 0)
  end)

  it("are stable for huge logits and give float32 for integer inputs", function()
    local s = dle.tensor({1000, -1000, 0}):softmax()
    H.assert_close(s, {1, 0, 0}, {rtol = 0, atol = 0})
    local ls = dle.tensor({1000, -1000, 0}, {dtype = "float64"}):log_softmax()
    H.assert_close(ls, {0, -2000, -1000}, {dtype = "float64"})
    local r = dle.tensor({{1, 2, 3}}, {dtype = "int64"}):softmax(2)
    assert.are.equal("float32", r:dtype())
    H.assert_close(r, ref_softmax({{1, 2, 3}}, 2))
    H.assert_close(dle.tensor({1, 1, 1, 1}, {dtype = "float16"}):softmax(), {0.25, 0.25, 0.25, 0.25},
                   {dtype = "float16"})
  end)

  it("give exact zeros for -inf (masked) logits and keep float32 accuracy over exp's whole range", function()
    local masked = dle.tensor({{0, -INF, 1, -INF}, {-INF, 2, -INF, 2}})
    for _, x in ipairs({masked, masked:t():contiguous():t()}) do
      local s = x:softmax(2):totable()
      assert.are.equal(0, s[1][2])
      assert.are.equal(0, s[1][4])
      assert.are.equal(0, s[2][1])
      H.assert_close(s[2][2], 0.5)
      H.assert_close(s[1][3], math.exp(1) / (1 + math.exp(1)))
    end
    assert.are.equal(-INF, masked:log_softmax(2)[1][2])
    -- rows {0, -d}: the second probability is exp(-d) / (1 + exp(-d)), down to 1e-38
    local rows, want = {}, {}
    for k = 0, 235 do
      local d = H.f32(k * 0.37)
      rows[#rows + 1] = {0, -d}
      want[#want + 1] = {1 / (1 + math.exp(-d)), math.exp(-d) / (1 + math.exp(-d))}
    end
    H.assert_close(dle.tensor(rows):softmax(2), want, {rtol = 1e-5, atol = 0})
    H.assert_close(dle.tensor(rows):t():softmax(1):t(), want, {rtol = 1e-5, atol = 0})
  end)

  it("of a long float32 row match the reference (vectorised path)", function()
    local v = H.map(H.values({3, 1000}, {lo = -30, hi = 30, seed = 77}), H.f32)
    local x = dle.tensor(v)
    H.assert_close(x:softmax(2), ref_softmax(v, 2), {rtol = 1e-5, atol = 1e-12})
    H.assert_close(x:log_softmax(2), ref_softmax(v, 2, true), {rtol = 1e-5, atol = 1e-5})
    H.assert_close(x:logsumexp(2), ref_reduce(v, 2, false, REF.logsumexp), {rtol = 1e-6})
  end)

  it("of an empty tensor is empty", function()
    local e = dle.zeros(3, 0):softmax(2)
    assert.are.same({3, 0}, e:shape())
    assert.are.same({0, 4}, dle.zeros(0, 4):log_softmax(1):shape())
  end)
end)

-- ---------------------------------------------------------------- stability

describe("numerical stability", function()
  it("logsumexp subtracts the max and handles infinities and NaN", function()
    H.assert_close(dle.tensor({1000, 1000}):logsumexp(), 1000 + math.log(2))
    H.assert_close(dle.tensor({-1000, -1000}, {dtype = "float64"}):logsumexp(), -1000 + math.log(2), {rtol = 1e-14})
    assert.are.equal(-INF, dle.tensor({-INF, -INF}):logsumexp():item())
    assert.are.equal(INF, dle.tensor({INF, 1}):logsumexp():item())
    assert.are.equal(INF, dle.tensor({INF, -INF}):logsumexp():item())
    local n = dle.tensor({1, NAN}):logsumexp():item()
    assert.is_true(n ~= n)
    H.assert_close(dle.tensor({{-INF, 0}, {2, -INF}}):logsumexp(2), {0, 2})
  end)
end)

-- ---------------------------------------------------------------- large inputs (threads, streaming)

describe("large inputs", function()
  -- 200 x 171 = 34200 elements: over the threading grain (32768); dim 1 streams rows of outputs,
  -- dim 2 folds contiguous runs, all splits one reduction across threads.
  local v = H.values({200, 171}, {lo = -2, hi = 2, seed = 42})
  local x = dle.tensor(v, {dtype = "float64"})
  local xt = x:t()

  local function both_thread_counts(f)
    local n = dle.get_num_threads()
    local a = f()
    dle.set_num_threads(1)
    local ok, b = pcall(f)
    dle.set_num_threads(n)
    assert(ok, b)
    return a, b
  end

  for _, name in ipairs({"sum", "mean", "var", "std", "logsumexp", "amax", "amin"}) do
    it(name .. " matches the reference over dim 1, dim 2 and all, threaded and single-threaded", function()
      for _, d in ipairs({1, 2, false}) do
        local dim = d or nil
        local want = ref_reduce(v, dim, false, REF[name])
        local a, b = both_thread_counts(function() return x[name](x, dim) end)
        H.assert_close(a, want, {dtype = "float64", rtol = 1e-9, msg = name .. " threaded " .. tostring(d)})
        H.assert_close(b, want, {dtype = "float64", rtol = 1e-9, msg = name .. " 1 thread " .. tostring(d)})
        -- the transpose reduced over the other dim gives the same values from the other layout
        H.assert_close(xt[name](xt, d and 3 - d or nil), want,
                       {dtype = "float64", rtol = 1e-9, msg = name .. " transposed " .. tostring(d)})
      end
    end)
  end

  -- kernels/cpu/reduce.c folds the runs of outputs lying between reduced dims run by run across the
  -- outputs ({N, C, H*W} over N and H*W): {6, 5, 40} in one chunk, {40, 8, 200} (64000 elements)
  -- split across threads at run boundaries that fall inside the reduction
  for _, name in ipairs({"sum", "mean", "var", "std", "logsumexp", "amax", "amin"}) do
    it(name .. " over the outer and inner dims around kept channels matches the reference", function()
      for i, shape in ipairs({{6, 5, 40}, {40, 8, 200}}) do
        local w = H.values(shape, {lo = -2, hi = 2, seed = 50 + i})
        local t = dle.tensor(w, {dtype = "float64"})
        local want = ref_reduce(w, {1, 3}, false, REF[name])
        local a, b = both_thread_counts(function() return t[name](t, {1, 3}) end)
        H.assert_close(a, want, {dtype = "float64", rtol = 1e-9, msg = name .. " threaded " .. i})
        H.assert_close(b, want, {dtype = "float64", rtol = 1e-9, msg = name .. " 1 thread " .. i})
      end
    end)
  end

  -- cpu_vec_sum.c adds float32 rows eight at a time in float before the float64 accumulators:
  -- 203 rows = 25 blocks of 8 and 3 left over, 37 columns = 4 vectors of 8 and a tail of 5
  it("float32 sums over dim 1 (rows added eight at a time) are within float rounding of float64", function()
    local w = H.values({203, 37}, {lo = 0, hi = 2, seed = 44})
    local t64 = dle.tensor(w, {dtype = "float64"})
    local t32 = t64:float()
    local want = t32:double():sum(1)
    local got = both_thread_counts(function() return t32:sum(1) end)
    assert.are.equal("float32", got:dtype())
    H.assert_close(got:double(), want:totable(), {dtype = "float64", rtol = 1e-6, msg = "sum(1) float32"})
    assert.are.same(dle.full({37}, 203):totable(), dle.ones(203, 37):sum(1):totable())
  end)

  it("sum and var over the middle dim of a 3-D tensor (many streamed chunks)", function()
    local w = H.values({9, 40, 100}, {lo = -2, hi = 2, seed = 43})
    local t = dle.tensor(w, {dtype = "float64"})
    for _, name in ipairs({"sum", "var"}) do
      local want = ref_reduce(w, 2, false, REF[name])
      local a, b = both_thread_counts(function() return t[name](t, 2) end)
      H.assert_close(a, want, {dtype = "float64", rtol = 1e-9, msg = name})
      H.assert_close(b, want, {dtype = "float64", rtol = 1e-9, msg = name})
    end
  end)

  it("max/argmax pick the first of tied maxima across thread ranges", function()
    local n = 100003
    local t = dle.zeros(n)
    t[10] = 5; t[80000] = 5; t[60000] = -7; t[90000] = -7
    local a, b = both_thread_counts(function() return t:argmax():item() end)
    assert.are.equal(10, a)
    assert.are.equal(10, b)
    assert.are.equal(60000, t:argmin():item())
    t[70000] = NAN; t[95000] = NAN
    assert.are.equal(70000, t:argmax():item())
    assert.are.equal(70000, t:argmin():item())
    local inf = dle.zeros(n)
    inf[50000] = INF; inf[70000] = INF; inf[30000] = -INF; inf[90000] = -INF
    assert.are.equal(50000, inf:argmax():item())
    assert.are.equal(30000, inf:argmin():item())
    assert.are.equal(INF, inf:amax():item())
    local half = dle.zeros(n, {dtype = "float16"})
    half[99999] = 3; half[12345] = -2
    assert.are.equal(99999, half:argmax():item())
    assert.are.equal(3, half:amax():item())
    assert.are.equal(12345, half:to("bfloat16"):argmin():item())
    local m = dle.zeros(40000, 3)
    m[30000][2] = 1; m[35000][2] = 1; m[20000][3] = -1
    local vals, idx = m:max(1)
    assert.are.same({0, 1, 0}, vals:totable())
    assert.are.same({1, 30000, 1}, idx:totable())
    local _, imin = m:min(1)
    assert.are.same({1, 1, 20000}, imin:totable())
  end)

  it("softmax along the outer and inner dims matches the reference", function()
    for _, d in ipairs({1, 2}) do
      local a, b = both_thread_counts(function() return x:softmax(d) end)
      local want = ref_softmax(v, d)
      H.assert_close(a, want, {dtype = "float64", rtol = 1e-9})
      H.assert_close(b, want, {dtype = "float64", rtol = 1e-9})
      H.assert_close(xt:softmax(3 - d):t(), want, {dtype = "float64", rtol = 1e-9})
    end
  end)

  it("int64 sums of many elements are exact", function()
    local t = dle.arange(0, 200000, {dtype = "int64"})
    assert.are.equal(199999 * 200000 // 2, t:sum():item())
    assert.are.equal(199999 * 200000 // 2, t:view(400, 500):sum(1):sum():item())
  end)
end)

-- ---------------------------------------------------------------- empty and 0-dim

describe("empty and 0-dim inputs", function()
  it("sum over an empty dim is 0, prod 1, mean and var NaN, logsumexp -inf", function()
    local e = dle.zeros(3, 0)
    assert.are.same({0, 0, 0}, e:sum(2):totable())
    assert.are.same({1, 1, 1}, e:prod(2):totable())
    assert.are.same({}, e:sum(1):totable())
    assert.are.same({0}, e:sum(1):shape())
    assert.are.equal(0, e:sum():item())
    local m = e:mean(2):totable()
    assert.is_true(m[1] ~= m[1])
    local vr = e:var():item()
    assert.is_true(vr ~= vr)
    assert.are.equal(-INF, e:logsumexp(2)[1])
    assert.are.same({3, 1}, e:sum(2, true):shape())
  end)

  it("max/min/argmax/amax over an empty dim are errors naming the dim and shape", function()
    local e = dle.zeros(3, 0)
    H.assert_error(function() return e:max(2) end, "max: cannot reduce over dim 2 of size 0 (shape {3,0})")
    H.assert_error(function() return e:min(2) end, "min: cannot reduce over dim 2 of size 0")
    H.assert_error(function() return e:argmax() end, "argmax: cannot reduce over dim 2 of size 0")
    H.assert_error(function() return e:amax() end, "amax: cannot reduce over dim 2 of size 0")
    H.assert_error(function() return e:max() end, "max: cannot reduce an empty tensor (shape {3,0})")
    H.assert_error(function() return dle.min(dle.zeros(0)) end, "min: cannot reduce an empty tensor (shape {0})")
    assert.are.same({0}, dle.zeros(0, 3):amax(2):shape())  -- nothing to reduce into
  end)

  it("0-dim tensors reduce over dim 1 / -1 or all", function()
    local s = dle.tensor(5.0)
    assert.are.equal(5, s:sum():item())
    assert.are.equal(5, s:sum(1):item())
    assert.are.same({}, s:mean(-1):shape())
    local v, i = s:max(1)
    assert.are.equal(5, v:item())
    assert.are.equal(1, i:item())
    assert.are.equal(1, s:argmax():item())
    H.assert_error(function() return s:sum(2) end, "sum: dim 2 out of range", "shape {}")
  end)
end)

-- ---------------------------------------------------------------- all / any / norm

describe("all, any and norm", function()
  it("all/any per dim and overall, with empty slices, NaN and int inputs", function()
    local x = dle.tensor({{1, 0, 2}, {3, 4, 5}})
    assert.are.same({false, true}, x:all(2):totable())
    assert.are.same({true, false, true}, x:all(1):totable())
    assert.are.same({true, true}, x:any(2):totable())
    assert.is_false(x:all():item())
    assert.is_true(dle.any(x):item())
    assert.are.equal("bool", x:any(1):dtype())
    assert.are.same({2, 1}, x:all(2, true):shape())
    assert.is_true(dle.zeros(0):all():item())
    assert.is_false(dle.zeros(0):any():item())
    assert.is_true(dle.tensor({NAN}):all():item())
    assert.is_false(dle.tensor({0, 0}, {dtype = "int64"}):any():item())
    assert.is_true(dle.tensor({{true, true}}):all({1, 2}):item())
    local t = H.make({{1, 0}, {1, 1}, {1, 2}}, "float32", "transposed")
    assert.are.same({true, false}, t:all(1):totable())
  end)

  it("norm for p = 2 (default), 1, inf, -inf, 0, 3 and 'fro', over dims", function()
    local v = {{3, -4, 0}, {1, 2, -2}}
    local x = dle.tensor(v, {dtype = "float64"})
    local function pnorm(p)
      return function(l)
        if p == INF then local m = 0 for _, a in ipairs(l) do m = math.max(m, math.abs(a)) end return m end
        if p == -INF then local m = INF for _, a in ipairs(l) do m = math.min(m, math.abs(a)) end return m end
        if p == 0 then local c = 0 for _, a in ipairs(l) do if a ~= 0 then c = c + 1 end end return c end
        local s = 0
        for _, a in ipairs(l) do s = s + math.abs(a) ^ p end
        return s ^ (1 / p)
      end
    end
    H.assert_close(x:norm(), pnorm(2)(H.flat(v)), {dtype = "float64"})
    H.assert_close(dle.norm(x, "fro"), pnorm(2)(H.flat(v)), {dtype = "float64"})
    for _, p in ipairs({1, 2, 3, INF, -INF, 0}) do
      for _, d in ipairs({1, 2}) do
        H.assert_close(x:norm(p, d), ref_reduce(v, d, false, pnorm(p)),
                       {dtype = "float64", msg = "norm p=" .. p .. " dim " .. d})
      end
    end
    assert.are.same({2, 1}, x:norm(2, 2, true):shape())
    local i = dle.tensor({3, 4}, {dtype = "int64"}):norm()
    assert.are.equal("float32", i:dtype())
    assert.are.equal(5, i:item())
  end)
end)

-- ---------------------------------------------------------------- errors

describe("errors", function()
  local x = dle.zeros(7, 13)

  it("a bad dim names the function and the shape", function()
    for _, name in ipairs({"sum", "mean", "prod", "var", "std", "logsumexp", "amax", "amin", "max", "min", "argmax",
                           "argmin", "softmax", "log_softmax"}) do
      H.assert_error(function() return x[name](x, 3) end, name .. ": dim 3 out of range", "shape {7,13}")
      H.assert_error(function() return dle[name](x, -3) end, name .. ": dim -3 out of range", "{7,13}")
    end
    H.assert_error(function() return x:sum({1, 5}) end, "sum: dim 5 out of range for a tensor of shape {7,13}")
    H.assert_error(function() return x:sum(0) end, "sum: dim 0 is invalid")
    H.assert_error(function() return x:all(3) end, "sum: dim 3 out of range", "{7,13}")
    H.assert_error(function() return x:norm(2, 3) end, "dim 3 out of range", "{7,13}")
  end)

  it("duplicate dims, bad keepdim, unknown options and bad argument types are reported", function()
    H.assert_error(function() return x:sum({1, -2}) end, "sum: dim 1 appears more than once", "{7,13}")
    H.assert_error(function() return x:sum(1, "yes") end, "sum: expected keepdim")
    H.assert_error(function() return x:var(1, {unbaised = false}) end, "var: unknown option 'unbaised'")
    H.assert_error(function() return x:var(1, {correction = "one"}) end, "var: correction must be a number")
    H.assert_error(function() return x:sum("1") end, "sum: dim must be an integer or a table of integers, got string")
    H.assert_error(function() return x:sum({1.5}) end, "sum: dim must be an integer")
    H.assert_error(function() return x:max(1.0 // 1 | 0, "x") end, "max: expected keepdim")
    H.assert_error(function() return x:norm("nuc") end, "norm: p must be a number")
    H.assert_error(function() return dle.sum(3) end, "sum: argument #1 must be a tensor")
  end)
end)

-- ---------------------------------------------------------------- threads

describe("threads", function()
  -- Sums, means and extrema go on several threads only from the light-op grain (262144 elements,
  -- kernels/cpu/cpu_loop.h); logsumexp from the heavy one (32768). Below its grain a reduction is
  -- the one-thread loop whatever the thread count, so its bits cannot change; above, the threads'
  -- partial sums are merged in order and agree to rounding.
  it("sum, mean, amax and logsumexp agree at 1 and 2 threads (same bits below the grain)", function()
    H.keep_threads(finally)
    for _, rows in ipairs({129, 1031}) do -- 129x253 is between the grains, 1031x253 above both
      local x = dle.randn(rows, 253, {generator = dle.Generator(rows)})
      local function all() return {x:sum(), x:mean(1), x:amax(2), x:t():sum(2), x:logsumexp(2)} end
      dle.set_num_threads(1)
      local one = all()
      dle.set_num_threads(2)
      local two = all()
      for i = 1, #one do
        local what = string.format("result %d at %d rows", i, rows)
        if rows == 129 and i < 5 then assert.is_true(one[i]:equal(two[i]), what)
        else H.assert_close(two[i], one[i]:totable(), {rtol = 1e-5, atol = 1e-4, msg = what}) end
      end
    end
  end)
end)
