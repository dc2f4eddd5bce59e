-- scatter_spec.lua — scatter and scatter_reduce (index family): values against a pure-Lua
-- reference for every reduction (sum, prod, mean, amax, amin), with and without include_self,
-- along each dim, every dtype, on transposed, strided and sliced self, index and src; in place;
-- a number as src; reduce = "add" / "multiply"; repeated indices; NaN in amax/amin; integer
-- mean rounding down; errors naming the function and shapes; PyTorch in float64 when there.
local dle = require("dle")
local H = require("helpers")

local I64 = {dtype = "int64"}
local NAN = 0 / 0
local REDUCTIONS = {"sum", "prod", "mean", "amax", "amin"}
local DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64"}

local function copy2(v)
  local o = {}
  for i, r in ipairs(v) do o[i] = {table.unpack(r)} end
  return o
end

-- reference scatter_reduce of 2-D tables along d (1 or 2); reduce nil: plain scatter
local function ref(self, d, index, src, reduce, include_self, int)
  local out, count = copy2(self), {}
  for i, row in ipairs(index) do
    for j, k in ipairs(row) do
      local a, b = i, j
      if d == 1 then a = k else b = k end
      local key = a .. "," .. b
      local v = src[i][j]
      if not reduce then
        out[a][b] = v
      else
        local c = count[key] or 0
        count[key] = c + 1
        if c == 0 and not include_self then out[a][b] = v
        else
          local o = out[a][b]
          if reduce == "sum" or reduce == "mean" then out[a][b] = o + v
          elseif reduce == "prod" then out[a][b] = o * v
          elseif reduce == "amax" then out[a][b] = math.max(o, v)
          else out[a][b] = math.min(o, v) end
        end
      end
    end
  end
  if reduce == "mean" then
    for key, c in pairs(count) do
      local a, b = key:match("(%d+),(%d+)")
      a, b = tonumber(a), tonumber(b)
      local n = c + (include_self and 1 or 0)
      out[a][b] = int and math.floor(out[a][b] / n) or out[a][b] / n
    end
  end
  return out
end

describe("scatter", function()
  local self_v = H.values({3, 4}, {seed = 1, int = true, lo = 1, hi = 3})
  local src_v = H.values({2, 3}, {seed = 2, int = true, lo = 1, hi = 3})

  it("writes src at index along each dim, every dtype and layout (last write wins)", function()
    for d = 1, 2 do
      local index_v = H.values({2, 3}, {seed = 3 + d, int = true, lo = 1, hi = d == 1 and 3 or 4})
      local want = ref(self_v, d, index_v, src_v)
      for _, dt in ipairs(DTYPES) do
        H.each_layout(self_v, dt, function(layout, s)
          local index = H.make(index_v, "int64", layout)
          local src = H.make(src_v, dt, layout)
          assert.are.same(want, dle.scatter(s, d, index, src):totable(), dt .. " " .. layout .. " dim " .. d)
          local c = s:clone()
          assert.are.equal(c, c:scatter_(d, index, src))
          assert.are.same(want, c:totable(), dt .. " " .. layout .. " in place")
        end)
      end
    end
  end)

  it("takes a number, reads only index's part of a larger src, and reduce add / multiply", function()
    local s = dle.zeros(2, 3)
    assert.are.same({{0, 5, 0}, {5, 0, 0}}, s:scatter(2, dle.tensor({{2}, {1}}, I64), 5):totable())
    local big = dle.tensor({{7, 8, 9}, {1, 2, 3}})
    assert.are.same({{0, 7, 0}, {1, 0, 0}}, s:scatter(2, dle.tensor({{2}, {1}}, I64), big):totable())
    local o = dle.ones(3)
    local idx = dle.tensor({1, 1, 3}, I64)
    assert.are.same({6, 1, 5}, o:scatter(1, idx, dle.tensor({2, 3, 4}), {reduce = "add"}):totable())
    assert.are.same({6, 1, 4}, o:scatter(1, idx, dle.tensor({2, 3, 4}), {reduce = "multiply"}):totable())
  end)

  it("rejects out-of-range indices, mismatched ranks and bad options", function()
    H.assert_error(function() return dle.zeros(3):scatter(1, dle.tensor({4}, I64), dle.ones(1)) end,
      "scatter: index 4 is out of range for dim 1 of size 3")
    H.assert_error(function() return dle.zeros(3):scatter(1, dle.ones(1, 1, I64), dle.ones(1, 1)) end,
      "scatter: self {3}, index {1,1} and src {1,1} must have the same number of dims")
    H.assert_error(function() return dle.zeros(3):scatter(1, dle.ones(2, I64), dle.ones(1)) end,
      "scatter: index of shape {2} is larger than src of shape {1} in dim 1")
    H.assert_error(function() return dle.zeros(3):scatter(1, dle.ones(1), dle.ones(1)) end,
      "scatter: index must be int64, got float32")
    H.assert_error(function() return dle.zeros(3):scatter(1, dle.ones(1, I64), 1, {reduce = "max"}) end,
      "scatter: reduce must be \"add\" or \"multiply\", got max")
    H.assert_error(function() return dle.zeros(3):scatter(2, dle.ones(1, I64), 1) end, "scatter", "dim")
  end)
end)

describe("scatter_reduce", function()
  local self_v = H.values({3, 4}, {seed = 11, int = true, lo = -3, hi = 3})
  local src_v = H.values({3, 4}, {seed = 12, int = true, lo = -3, hi = 3})

  it("combines with every reduction, with and without self, along each dim, every dtype and layout", function()
    for d = 1, 2 do
      local index_v = H.values({3, 4}, {seed = 13 + d, int = true, lo = 1, hi = d == 1 and 3 or 4})
      for _, reduce in ipairs(REDUCTIONS) do
        for _, include_self in ipairs({true, false}) do
          for _, dt in ipairs(DTYPES) do
            local int = dt == "int32" or dt == "int64"
            local want = ref(self_v, d, index_v, src_v, reduce, include_self, int)
            H.each_layout(self_v, dt, function(layout, s)
              local what = table.concat({reduce, tostring(include_self), dt, layout, "dim " .. d}, " ")
              local r = dle.scatter_reduce(s, d, H.make(index_v, "int64", layout), H.make(src_v, dt, layout),
                reduce, {include_self = include_self})
              H.assert_close(r:double(), want, {rtol = dt == "bfloat16" and 1e-2 or 1e-3, atol = 1e-3, msg = what})
            end)
          end
        end
      end
    end
  end)

  it("scatter_reduce_ writes in place; mean of integers rounds down", function()
    local x = dle.tensor({1, 5, 2}, I64)
    assert.are.equal(x, x:scatter_reduce_(1, dle.tensor({1, 1}, I64), dle.tensor({2, 2}, I64), "mean"))
    assert.are.same({1, 5, 2}, x:totable())
    local y = dle.tensor({-1, 0}, I64):scatter_reduce(1, dle.tensor({1, 1}, I64), dle.tensor({-2, 0}, I64), "mean")
    assert.are.same({-1, 0}, y:totable())
    assert.are.same({4, 5, 2}, dle.tensor({1, 5, 2}):scatter_reduce(1, dle.tensor({1, 1}, I64),
      dle.tensor({7, 1}), "mean", {include_self = false}):totable())
  end)

  it("lets NaN win amax and amin", function()
    local r = dle.zeros(2):scatter_reduce(1, dle.tensor({1, 1, 2}, I64), dle.tensor({NAN, 3, 1}), "amax"):totable()
    assert.is_true(r[1] ~= r[1])
    assert.are.equal(1, r[2])
  end)

  it("handles an empty index and many repeated indices", function()
    assert.are.same({1, 2}, dle.tensor({1, 2}):scatter_reduce(1, dle.zeros(0, I64), dle.zeros(0), "sum"):totable())
    local n = 100000
    local idx = dle.arange(0, n, I64):remainder(10) + 1
    local r = dle.zeros(10):scatter_reduce(1, idx, dle.ones(n), "sum")
    assert.are.same({n / 10, n / 10}, {r[1], r[10]})
  end)

  it("rejects unknown reductions and options, naming the function", function()
    H.assert_error(function() return dle.zeros(2):scatter_reduce(1, dle.ones(1, I64), dle.ones(1), "max") end,
      "scatter_reduce: reduce must be one of \"sum\", \"prod\", \"mean\", \"amax\", \"amin\", got max")
    H.assert_error(function()
      return dle.zeros(2):scatter_reduce(1, dle.ones(1, I64), dle.ones(1), "sum", {bogus = 1})
    end,
      "scatter_reduce: unknown option 'bogus'")
    H.assert_error(function() return dle.zeros(2):scatter_reduce(1, dle.tensor({0}, I64), dle.ones(1), "sum") end,
      "scatter_reduce: index 0 is out of range for dim 1 of size 2")
  end)

  it("matches PyTorch in float64 for every reduction", function()
    if H.without_torch(pending) then return end
    local s = H.seeded({4, 5}, 21, -2, 2)
    local src = H.seeded({4, 5}, 22, -2, 2)
    local idx = dle.tensor(H.values({4, 5}, {seed = 23, int = true, lo = 1, hi = 5}), I64)
    local lines = {"i = torch.tensor(" .. "[" .. table.concat(idx:reshape(-1):totable(), ",") .. "]).reshape(4, 5) - 1"}
    for _, reduce in ipairs(REDUCTIONS) do
      for _, inc in ipairs({"True", "False"}) do
        lines[#lines + 1] = string.format("p(s.scatter_reduce(1, i, src, '%s', include_self=%s))", reduce, inc)
      end
    end
    local out = H.run_torch({s = s, src = src}, lines)
    local k = 0
    for _, reduce in ipairs(REDUCTIONS) do
      for _, inc in ipairs({true, false}) do
        k = k + 1
        local r = s:scatter_reduce(2, idx, src, reduce, {include_self = inc})
        H.assert_torch_numbers(r:reshape(-1):totable(), out[k], 1e-12, reduce .. " " .. tostring(inc))
      end
    end
  end)
end)
