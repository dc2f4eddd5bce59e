--- Random numbers: the Philox4x32-10 generator against its published known answers, how kernels
-- map Philox words to values, reproducibility (seeds, generators, saved states, thread counts),
-- statistics of the distributions, in-place fills on every layout, and error messages.
-- Statistics are computed in Lua from t:totable() so this spec does not depend on reductions.
local dle = require("dle")

local function flat(v, acc)
  acc = acc or {}
  if type(v) == "table" then
    for i = 1, #v do flat(v[i], acc) end
  else
    acc[#acc + 1] = v
  end
  return acc
end

local function values(t) return flat(t:totable()) end

local function mean_var(xs)
  local s = 0
  for _, x in ipairs(xs) do s = s + x end
  local m = s / #xs
  local v = 0
  for _, x in ipairs(xs) do v = v + (x - m) ^ 2 end
  return m, v / (#xs - 1)
end

local function min_max(xs)
  local lo, hi = math.huge, -math.huge
  for _, x in ipairs(xs) do
    if x < lo then lo = x end
    if x > hi then hi = x end
  end
  return lo, hi
end

-- Mean, variance, min and max of t's elements, and the elements as a flat list.
local function moments(t)
  local xs = values(t)
  local m, v = mean_var(xs)
  local lo, hi = min_max(xs)
  return m, v, lo, hi, xs
end

local function same_list(a, b)
  if #a ~= #b then return false, "lengths " .. #a .. " vs " .. #b end
  for i = 1, #a do
    if a[i] ~= b[i] and not (a[i] ~= a[i] and b[i] ~= b[i]) then
      return false, ("element %d: %s vs %s"):format(i, tostring(a[i]), tostring(b[i]))
    end
  end
  return true
end

local function assert_same(a, b)
  local ok, why = same_list(a, b)
  assert(ok, why)
end

local function assert_error(pattern_list, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  err = tostring(err)
  for _, p in ipairs(pattern_list) do
    assert(err:find(p, 1, true), ("error %q does not mention %q"):format(err, p))
  end
  return err
end

-- The Philox words of block b (0-based) of the default generator's stream from `state`.
local function words(seed, block)
  return {dle.core._philox(seed, block)}
end

local function word64(w, k) return (w[2 * k + 1] << 32) | w[2 * k + 2] end

describe("Philox4x32-10", function()
  it("matches Random123's known-answer vector for counter 0 and key 0", function()
    assert.same({0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}, {dle.core._philox(0, 0, 0)})
  end)

  it("matches the known-answer vector for an all-ones counter and key", function()
    assert.same({0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}, {dle.core._philox(-1, -1, -1)})
  end)

  it("matches the known-answer vector for the digits of pi", function()
    -- counter words 243f6a88 85a308d3 13198a2e 03707344, key words a4093822 299f31d0 (low first)
    local w = {dle.core._philox(0x299f31d0a4093822, 0x85a308d3243f6a88, 0x0370734413198a2e)}
    assert.same({0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}, w)
  end)

  it("uses the 64-bit seed as the key and the block as the low counter half", function()
    assert.same({dle.core._philox(0, 0, 0)}, {dle.core._philox(0, 0)})
    local a, b = {dle.core._philox(1, 0)}, {dle.core._philox(1 << 32, 0)}
    assert.is_false(same_list(a, b))
    assert.is_false(same_list({dle.core._philox(7, 1)}, {dle.core._philox(7, 1 << 32)}))
  end)
end)

describe("random kernels map Philox words to values", function()
  local seed = 1234

  -- The values of make() made right after manual_seed(seed).
  local function seeded_values(make)
    dle.manual_seed(seed)
    return values(make())
  end

  -- f(i, w, v) for each value v of got (element i, 0-based) and the words w of its block, the
  -- stream's blocks holding per_block elements each.
  local function each_element(got, per_block, f)
    for i = 0, #got - 1 do f(i, words(seed, i // per_block), got[i + 1]) end
  end

  it("rand float32 element i is the top 24 bits of word i of the stream (7x13, odd size)", function()
    local got = seeded_values(function() return dle.rand(7, 13) end)
    assert.equal(91, #got)
    each_element(got, 4, function(i, w, v) assert.equal((w[i % 4 + 1] >> 8) * 2.0 ^ -24, v) end)
  end)

  it("rand float64 uses 53 bits from two words per element", function()
    local got = seeded_values(function() return dle.rand(5, {dtype = "float64"}) end)
    assert.equal(5, #got)
    each_element(got, 2, function(i, w, v) assert.equal((word64(w, i % 2) >> 11) * 2.0 ^ -53, v) end)
  end)

  it("rand float16 and bfloat16 use as many bits as they hold (11 and 8)", function()
    dle.manual_seed(seed)
    local h = values(dle.rand(6, {dtype = "float16"}))
    dle.manual_seed(seed)
    local b = values(dle.rand(6, {dtype = "bfloat16"}))
    for i = 0, 5 do
      local w = words(seed, i // 4)[i % 4 + 1]
      assert.equal((w >> 21) * 2.0 ^ -11, h[i + 1])
      assert.equal((w >> 24) * 2.0 ^ -8, b[i + 1])
    end
  end)

  it("randn float64 is Box-Muller of two 53-bit uniforms with u1 in (0, 1]", function()
    dle.manual_seed(seed)
    local got = values(dle.randn(6, {dtype = "float64"}))
    for b = 0, 2 do
      local w = words(seed, b)
      local u1 = ((word64(w, 0) >> 11) + 1) * 2.0 ^ -53
      local u2 = (word64(w, 1) >> 11) * 2.0 ^ -53
      local r = math.sqrt(-2 * math.log(u1))
      assert.near(r * math.cos(2 * math.pi * u2), got[2 * b + 1], 1e-12)
      assert.near(r * math.sin(2 * math.pi * u2), got[2 * b + 2], 1e-12)
    end
  end)

  it("randn float32 makes two normals from each pair of words", function()
    dle.manual_seed(seed)
    local got = values(dle.randn(7))
    for i = 0, 6, 2 do
      local w = words(seed, i // 4)
      local k = i % 4
      local u1 = ((w[k + 1] >> 8) + 1) * 2.0 ^ -24
      local u2 = (w[k + 2] >> 8) * 2.0 ^ -24
      local r = math.sqrt(-2 * math.log(u1))
      assert.near(r * math.cos(2 * math.pi * u2), got[i + 1], 1e-5)
      if i + 2 <= 7 then assert.near(r * math.sin(2 * math.pi * u2), got[i + 2], 1e-5) end
    end
  end)

  it("randint scales 64 random bits per element (a power-of-two range keeps the top bits)", function()
    local got = seeded_values(function() return dle.randint(-8, 8, {9}) end)
    assert.equal(9, #got)
    each_element(got, 2, function(i, w, v) assert.equal(-8 + (w[2 * (i % 2) + 1] >> 28), v) end)
  end)

  it("consecutive calls continue the stream at the next unused block", function()
    for _, case in ipairs({{"float32", 4}, {"float64", 2}}) do
      local opts = {dtype = case[1]}
      dle.manual_seed(seed)
      local whole = values(dle.rand(4 * case[2], opts))
      dle.manual_seed(seed)
      local a, b = values(dle.rand(2 * case[2], opts)), values(dle.rand(2 * case[2], opts))
      for _, x in ipairs(b) do a[#a + 1] = x end
      assert_same(whole, a)
    end
    dle.manual_seed(seed)
    dle.rand(5)                        -- 5 float32 take 2 blocks
    assert.same({seed = seed, offset = 2}, dle.get_rng_state())
    dle.randint(0, 3, {3})             -- 3 integers take 2 blocks
    dle.randn(3, {dtype = "float64"})  -- 3 float64 normals take 2 blocks
    assert.same({seed = seed, offset = 6}, dle.get_rng_state())
  end)
end)

describe("reproducibility", function()
  it("gives the same numbers for the same seed and different ones for another seed", function()
    dle.manual_seed(42)
    local a = values(dle.randn(100))
    dle.manual_seed(42)
    local b = values(dle.randn(100))
    dle.manual_seed(43)
    local c = values(dle.randn(100))
    assert_same(a, b)
    assert.is_false(same_list(a, c))
  end)

  it("manual_seed returns the default generator and initial_seed reports the seed", function()
    local g = dle.manual_seed(77)
    assert.is_true(dle.is_generator(g))
    assert.equal(dle.default_generator, g)
    assert.equal(77, dle.initial_seed())
    assert.equal(77, g:initial_seed())
    assert.matches("dle.Generator%(default, seed=77, offset=0%)", tostring(g))
  end)

  it("dle.seed picks a non-negative seed and seeds the default generator with it", function()
    local s = dle.seed()
    assert.is_true(math.type(s) == "integer" and s >= 0)
    assert.equal(s, dle.initial_seed())
    assert.same({seed = s, offset = 0}, dle.get_rng_state())
  end)

  it("an unseeded process starts from seed 67280421310721 and repeats across runs", function()
    assert.equal(67280421310721, dle.Generator():initial_seed())
    local cmd = ("lua5.4 -e %q -e %q"):format(
      "package.path = " .. ("%q"):format(package.path) .. " package.cpath = " .. ("%q"):format(package.cpath),
      "local dle = require('dle') io.write(dle.initial_seed(), ' ', table.concat(dle.rand(4):totable(), ' '))")
    local function run()
      local p = assert(io.popen(cmd))
      local out = p:read("a")
      p:close()
      return out
    end
    local first = run()
    assert.matches("^67280421310721 ", first)
    assert.equal(first, run())
    local g = dle.Generator()
    local mine = table.concat(dle.rand(4, {generator = g}):totable(), " ")
    assert.equal("67280421310721 " .. mine, first)
  end)

  it("a Generator has its own stream and leaves the default generator alone", function()
    dle.manual_seed(5)
    local expected = values(dle.rand(10))
    dle.manual_seed(5)
    local g = dle.Generator(5)
    local from_g = values(dle.rand(10, {generator = g}))
    assert_same(expected, from_g)
    assert.same({seed = 5, offset = 0}, dle.get_rng_state())
    assert_same(expected, values(dle.rand(10)))
    assert.same({seed = 5, offset = 3}, g:get_state())
    local g2 = dle.Generator(6)
    assert.is_false(same_list(values(dle.rand(10, {generator = g2})), expected))
    assert.matches("dle.Generator%(seed=6, offset=3%)", tostring(g2))
  end)

  it("g:manual_seed restarts a generator's stream and returns it", function()
    local g = dle.Generator(9)
    local a = values(dle.randn(8, {generator = g}))
    assert.equal(g, g:manual_seed(9))
    assert_same(a, values(dle.randn(8, {generator = g})))
    assert.equal(9, g:initial_seed())
  end)

  it("get_state/set_state replay exactly, across dtypes and ops", function()
    local g = dle.Generator(2024)
    dle.rand(3, {generator = g})
    local state = g:get_state()
    local function draw()
      return {values(dle.rand(5, {generator = g})), values(dle.randn(7, {dtype = "float64", generator = g})),
              values(dle.randint(-5, 5, {9}, {generator = g})), values(dle.rand(3, {dtype = "float16", generator = g})),
              values(dle.randn(4, {dtype = "bfloat16", generator = g})), values(dle.randperm(6, {generator = g}))}
    end
    local a = draw()
    local after = g:get_state()
    assert.equal(g, g:set_state(state))
    local b = draw()
    for i = 1, #a do assert_same(a[i], b[i]) end
    assert.same(after, g:get_state())
  end)

  it("get_rng_state/set_rng_state replay the default generator", function()
    dle.manual_seed(11)
    dle.randn(3)
    local s = dle.get_rng_state()
    assert.same({seed = 11, offset = 1}, s)
    local a = values(dle.rand(6, {dtype = "float64"}))
    dle.set_rng_state(s)
    assert_same(a, values(dle.rand(6, {dtype = "float64"})))
  end)

  it("gives identical large tensors with 1 and 2 threads", function()
    local saved = dle.get_num_threads()
    local function draw(threads)
      dle.set_num_threads(threads)
      local g = dle.Generator(99)
      return {values(dle.rand(150001, {generator = g})), values(dle.randn(100003, {dtype = "float64", generator = g})),
              values(dle.randint(0, 1000, {120001}, {generator = g}))}
    end
    local one, two = draw(1), draw(2)
    dle.set_num_threads(saved)
    for i = 1, 3 do assert_same(one[i], two[i]) end
  end)
end)

describe("distributions", function()
  it("rand float32 and float64 have mean 1/2 and variance 1/12 in [0, 1)", function()
    for _, dt in ipairs({"float32", "float64"}) do
      local m, v, lo, hi = moments(dle.rand(200000, {dtype = dt, generator = dle.Generator(1)}))
      assert.near(0.5, m, 0.005)
      assert.near(1 / 12, v, 0.002)
      assert.is_true(lo >= 0 and hi < 1)
    end
  end)

  it("rand float16 and bfloat16 stay in [0, 1) and spread over it", function()
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local t = dle.rand(50000, {dtype = dt, generator = dle.Generator(2)})
      assert.equal(dt, t:dtype())
      local m, _, lo, hi = moments(t)
      assert.is_true(lo >= 0 and hi < 1, dt .. " out of range: " .. lo .. " " .. hi)
      assert.near(0.5, m, 0.01)
      assert.is_true(hi > 0.99)
    end
  end)

  it("randn float32 and float64 have mean 0 and variance 1", function()
    for _, dt in ipairs({"float32", "float64"}) do
      local m, v, _, _, xs = moments(dle.randn(200000, {dtype = dt, generator = dle.Generator(3)}))
      assert.near(0, m, 0.01)
      assert.near(1, v, 0.02)
      local inside = 0
      for _, x in ipairs(xs) do if math.abs(x) < 1 then inside = inside + 1 end end
      assert.near(0.6827, inside / #xs, 0.005)
    end
  end)

  it("randn float16 and bfloat16 are finite normals", function()
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local m, v, lo, hi = moments(dle.randn(20000, {dtype = dt, generator = dle.Generator(4)}))
      assert.near(0, m, 0.03)
      assert.near(1, v, 0.05)
      assert.is_true(lo > -7 and hi < 7)
    end
  end)

  it("randint covers [lo, hi) exactly and never returns hi", function()
    local xs = values(dle.randint(-3, 4, {30000}, {generator = dle.Generator(5)}))
    local count = {}
    for _, x in ipairs(xs) do
      assert.equal("integer", math.type(x))
      count[x] = (count[x] or 0) + 1
    end
    for v = -3, 3 do assert.near(30000 / 7, count[v] or 0, 300) end
    assert.is_nil(count[4])
    assert.is_nil(count[-4])
  end)

  it("randint(hi, sizes) draws from [0, hi) as int64 by default", function()
    local t = dle.randint(3, {4, 5})
    assert.same({4, 5}, t:shape())
    assert.equal("int64", t:dtype())
    local lo, hi = min_max(values(t))
    assert.is_true(lo >= 0 and hi <= 2)
  end)

  it("randint takes varargs sizes, every dtype, and wide ranges", function()
    assert.same({2, 3}, dle.randint(0, 5, 2, 3):shape())
    for _, case in ipairs({{"int32", -100, 100}, {"uint8", 0, 256}, {"bool", 0, 2}, {"float32", -1000, 1000},
                           {"float64", 0, 1 << 40}, {"float16", -2048, 2048}, {"bfloat16", 0, 256}}) do
      local dt, lo, hi = case[1], case[2], case[3]
      local t = dle.randint(lo, hi, {2000}, {dtype = dt, generator = dle.Generator(6)})
      assert.equal(dt, t:dtype())
      local xs = values(t)
      if dt == "bool" then
        local n = 0
        for _, x in ipairs(xs) do if x then n = n + 1 end end
        assert.near(1000, n, 150)
      else
        local a, b = min_max(xs)
        assert.is_true(a >= lo and b < hi, dt .. ": " .. a .. " .. " .. b)
        for _, x in ipairs(xs) do assert.equal(math.floor(x), x) end
        assert.is_true(b - a > (hi - lo) / 2)
      end
    end
    local big = values(dle.randint(-(1 << 52), 1 << 52, {1000}))
    local a, b = min_max(big)
    assert.is_true(a >= -(1 << 52) and b < (1 << 52) and b - a > (1 << 52))
  end)

  it("randperm is a permutation of 1..n, reproducible from its generator", function()
    for _, n in ipairs({0, 1, 2, 7, 1000}) do
      local p = dle.randperm(n, {generator = dle.Generator(8)})
      assert.equal("int64", p:dtype())
      assert.same({n}, p:shape())
      local seen = {}
      for _, v in ipairs(values(p)) do
        assert.is_true(v >= 1 and v <= n and not seen[v])
        seen[v] = true
      end
    end
    local a = values(dle.randperm(50, {generator = dle.Generator(8)}))
    assert_same(a, values(dle.randperm(50, {generator = dle.Generator(8)})))
    assert.is_false(same_list(a, values(dle.randperm(50, {generator = dle.Generator(9)}))))
    assert.equal("float64", dle.randperm(4, {dtype = "float64"}):dtype())
  end)

  it("randperm puts each value at each position equally often", function()
    local g = dle.Generator(10)
    local first = {0, 0, 0, 0}
    for _ = 1, 2000 do
      local p = dle.randperm(4, {generator = g})
      first[p[1]] = first[p[1]] + 1
    end
    for v = 1, 4 do assert.near(500, first[v], 90) end
  end)

  it("bernoulli draws 1 with probability p", function()
    local xs = values(dle.bernoulli(0.3, 20000, {generator = dle.Generator(11)}))
    assert.near(0.3, (mean_var(xs)), 0.015)
    for _, x in ipairs(xs) do assert.is_true(x == 0 or x == 1) end
    assert.same({0, 0, 0}, dle.bernoulli(0, 3):totable())
    assert.same({1, 1, 1}, dle.bernoulli(1, {3}):totable())
    local p = dle.tensor({{0, 1, 0.5}, {1, 0, 0.5}}, {dtype = "float64"})
    local b = dle.bernoulli(p)
    assert.equal("float64", b:dtype())
    local t = b:totable()
    assert.same({0, 1, 1, 0}, {t[1][1], t[1][2], t[2][1], t[2][2]})
    assert.equal("float32", p:bernoulli({dtype = "float32"}):dtype())
  end)
end)

describe("creation options and _like forms", function()
  it("rand and randn default to float32 and honour dtype, sizes tables and requires_grad", function()
    assert.equal("float32", dle.rand(2, 3):dtype())
    assert.same({2, 3}, dle.randn({2, 3}):shape())
    assert.equal("float64", dle.randn(2, {dtype = "float64"}):dtype())
    assert.is_true(dle.rand(2, {requires_grad = true}).requires_grad)
    assert.same({}, dle.rand():shape())
    assert.same({0, 3}, dle.rand(0, 3):shape())
  end)

  it("rand_like, randn_like and randint_like follow the source's shape and dtype", function()
    local src = dle.zeros(13, 7, {dtype = "float64"}):t()
    local r = dle.rand_like(src)
    assert.same({7, 13}, r:shape())
    assert.equal("float64", r:dtype())
    assert.is_true(r:is_contiguous())
    assert.equal("float16", dle.randn_like(src, {dtype = "float16"}):dtype())
    local i = dle.randint_like(dle.zeros(3, 4, {dtype = "int32"}), 5)
    assert.equal("int32", i:dtype())
    local lo, hi = min_max(values(i))
    assert.is_true(lo >= 0 and hi < 5)
    lo, hi = min_max(values(dle.randint_like(src, 10, 12)))
    assert.is_true(lo >= 10 and hi <= 11)
  end)
end)

describe("in-place fills", function()
  it("uniform_ on a transposed view writes the values of rand in logical order", function()
    local g = dle.Generator(12)
    local t = dle.zeros(13, 7):t()
    t:uniform_({generator = g})
    local r = dle.rand(7, 13, {generator = dle.Generator(12)})
    assert_same(values(r), values(t))
    assert.same({seed = 12, offset = 23}, g:get_state())
  end)

  it("uniform_(a, b) fills only a narrowed slice, within [a, b)", function()
    local base = dle.zeros(7, 13, {dtype = "float64"})
    local s = base:narrow(2, 3, 5)
    assert.equal(s, s:uniform_(2, 3))
    local t = base:totable()
    for i = 1, 7 do
      for j = 1, 13 do
        if j >= 3 and j <= 7 then assert.is_true(t[i][j] >= 2 and t[i][j] < 3)
        else assert.equal(0, t[i][j]) end
      end
    end
  end)

  it("normal_(mean, std) on a selected row has the requested moments", function()
    local base = dle.zeros(3, 20000)
    base:select(1, 2):normal_(5, 2, {generator = dle.Generator(13)})
    local t = base:totable()
    local m, v = mean_var(t[2])
    assert.near(5, m, 0.05)
    assert.near(4, v, 0.15)
    assert.equal(0, t[1][100])
    assert.equal(0, t[3][20000])
  end)

  it("uniform_ and normal_ work in float16, bfloat16 and float64", function()
    for _, dt in ipairs({"float16", "bfloat16", "float64"}) do
      local xs = values(dle.zeros(4000, {dtype = dt}):uniform_(-1, 1))
      local lo, hi = min_max(xs)
      assert.is_true(lo >= -1 and hi <= 1 and hi - lo > 1.9, dt)
      local m, v = mean_var(values(dle.zeros(4000, {dtype = dt}):normal_()))
      assert.near(0, m, 0.1)
      assert.near(1, v, 0.15)
    end
  end)

  it("random_ fills integers in [lo, hi), also for float and non-contiguous tensors", function()
    local t = dle.zeros(5, 7, {dtype = "int64"}):t()
    t:random_(10, 20)
    local lo, hi = min_max(values(t))
    assert.is_true(lo >= 10 and hi < 20)
    lo, hi = min_max(values(dle.zeros(100):random_(4)))
    assert.is_true(lo >= 0 and hi < 4 and hi == math.floor(hi))
  end)

  it("bernoulli_ takes a number or a tensor p broadcast to the tensor", function()
    local t = dle.zeros(7, 13):bernoulli_(0.5, {generator = dle.Generator(14)})
    for _, x in ipairs(values(t)) do assert.is_true(x == 0 or x == 1) end
    local p = dle.zeros(13)
    p[2] = 1
    p[13] = 1
    local u = dle.full({13, 7}, 7):t():bernoulli_(p)
    for _, row in ipairs(u:totable()) do
      for j = 1, 13 do assert.equal((j == 2 or j == 13) and 1 or 0, row[j]) end
    end
    local b = dle.zeros(4, {dtype = "bool"}):bernoulli_(1)
    assert.same({true, true, true, true}, b:totable())
  end)
end)

describe("errors", function()
  it("randint rejects lo >= hi, naming the function and the bounds", function()
    assert_error({"randint", "5", "3"}, dle.randint, 5, 3, {2})
    assert_error({"randint", "low", "1.5"}, dle.randint, 1.5, 3, {2})
    assert_error({"randint", "2^53"}, dle.randint, 0, 1 << 60, {2})
    assert_error({"randint_like", "high"}, dle.randint_like, dle.zeros(2), "x")
  end)

  it("randint rejects ranges the dtype cannot hold", function()
    assert_error({"randint", "uint8", "300"}, dle.randint, 0, 300, {2}, {dtype = "uint8"})
    assert_error({"randint", "float16"}, dle.randint, 0, 5000, {2}, {dtype = "float16"})
    assert_error({"randint", "bool"}, dle.randint, -1, 1, {2}, {dtype = "bool"})
  end)

  it("negative sizes are rejected by name", function()
    assert_error({"rand", "negative size -2"}, dle.rand, 3, -2)
    assert_error({"randn", "negative"}, dle.randn, {-1})
    assert_error({"randint", "negative"}, dle.randint, 0, 4, {2, -3})
    assert_error({"randperm", "-4"}, dle.randperm, -4)
    assert_error({"bernoulli", "negative"}, dle.bernoulli, 0.5, -1)
  end)

  it("a generator option of the wrong type is rejected", function()
    assert_error({"rand", "generator must be a dle.Generator, got number"}, dle.rand, 2, {generator = 5})
    assert_error({"randperm", "dle.Generator"}, dle.randperm, 3, {generator = {}})
    assert_error({"normal_", "dle.Generator"}, function() dle.zeros(2):normal_(0, 1, {generator = "g"}) end)
    assert_error({"manual_seed", "dle.Generator"}, function() dle.Generator(1).manual_seed(5, 1) end)
    assert_error({"Generator", "seed", "integer"}, dle.Generator, "abc")
  end)

  it("rand and randn need a float dtype", function()
    assert_error({"rand", "float", "int64"}, dle.rand, 2, {dtype = "int64"})
    assert_error({"randn", "float", "bool"}, dle.randn, 2, {dtype = "bool"})
    assert_error({"rand_like", "int32", "{2,3}"}, dle.rand_like, dle.zeros(2, 3, {dtype = "int32"}))
  end)

  it("in-place fills check dtype, parameters and shapes", function()
    local i = dle.zeros(2, 3, {dtype = "int64"})
    assert_error({"uniform_", "int64", "{2,3}"}, function() i:uniform_() end)
    assert_error({"normal_", "int64", "{2,3}"}, function() i:normal_() end)
    local f = dle.zeros(2, 3)
    assert_error({"uniform_", "{2,3}"}, function() f:uniform_(1, 0) end)
    assert_error({"normal_", "std", "{2,3}"}, function() f:normal_(0, -1) end)
    assert_error({"random_", "{2,3}"}, function() f:random_(3, 3) end)
    assert_error({"bernoulli_", "[0, 1]", "{2,3}"}, function() f:bernoulli_(1.5) end)
    assert_error({"bernoulli_", "{4}", "{2,3}"}, function() f:bernoulli_(dle.zeros(4)) end)
    assert_error({"bernoulli", "float", "int64"}, dle.bernoulli, i)
  end)

  it("set_state and set_rng_state reject malformed states", function()
    assert_error({"set_rng_state", "table"}, dle.set_rng_state, 5)
    assert_error({"set_rng_state", "state.offset"}, dle.set_rng_state, {seed = 1})
    assert_error({"set_state", "state.offset", ">= 0"}, function() dle.Generator():set_state({seed = 1,
                                                                                              offset = -1}) end)
    assert_error({"set_state", "state.seed"}, function() dle.Generator():set_state({seed = "x", offset = 0}) end)
  end)
end)
