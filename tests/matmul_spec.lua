-- matmul_spec.lua — matmul (1-D, 2-D, batched with broadcasting), mm, bmm, mv, dot, outer and
-- einsum against pure-Lua references, on every memory layout, several dtypes, empty and odd
-- sizes, and their error messages.
local dle = require("dle")
local H = require("helpers")

-- ---------------------------------------------------------------- references

--- PyTorch's matmul on nested tables: 1-D operands are a row (left) or a column (right) whose
-- dim is dropped again; leading batch dims broadcast.
local function ref_matmul(A, B)
  local sa, sb = H.shape(A), H.shape(B)
  local na, nb = #sa, #sb
  local K = sa[na]
  local M = na >= 2 and sa[na - 1] or nil
  local N = nb >= 2 and sb[nb] or nil
  local ba = {table.unpack(sa, 1, math.max(na - 2, 0))}
  local bb = {table.unpack(sb, 1, math.max(nb - 2, 0))}
  local bs = assert(H.broadcast_shape(ba, bb))
  local shape = {table.unpack(bs)}
  if M then shape[#shape + 1] = M end
  if N then shape[#shape + 1] = N end
  return H.build(shape, function(idx)
    local nbs = #bs
    local i, j = M and idx[nbs + 1] or nil, N and idx[#idx] or nil
    local ia, ib = {}, {}
    for d = 1, #ba do ia[d] = ba[d] == 1 and 1 or idx[nbs - #ba + d] end
    for d = 1, #bb do ib[d] = bb[d] == 1 and 1 or idx[nbs - #bb + d] end
    if i then ia[#ia + 1] = i end
    local ka, kb = #ia + 1, #ib + 1
    if j then ib[kb + 1] = j end
    local sum = 0
    for k = 1, K do
      ia[ka], ib[kb] = k, k
      sum = sum + H.get(A, ia) * H.get(B, ib)
    end
    return sum
  end)
end

--- Brute-force einsum on nested tables: explicit equations of letters only ("ij,jk->ik").
local function ref_einsum(eq, ...)
  local ops = {...}
  local lhs, rhs = eq:gsub("%s", ""):match("^(.-)%->(.*)$")
  local subs = {}
  for s in (lhs .. ","):gmatch("([^,]*),") do subs[#subs + 1] = s end
  local size, labels = {}, {}
  for k, s in ipairs(subs) do
    local sh = H.shape(ops[k])
    for d = 1, #s do
      local l = s:sub(d, d)
      if not size[l] then labels[#labels + 1] = l end
      size[l] = sh[d]
    end
  end
  local out_shape = {}
  for d = 1, #rhs do out_shape[d] = size[rhs:sub(d, d)] end
  local summed = {}
  for _, l in ipairs(labels) do if not rhs:find(l, 1, true) then summed[#summed + 1] = l end end
  return H.build(out_shape, function(idx)
    local val = {}
    for d = 1, #rhs do val[rhs:sub(d, d)] = idx[d] end
    local total = 0
    H.each_assignment(summed, size, val, function()
      local p = 1
      for k, s in ipairs(subs) do
        local at = {}
        for d = 1, #s do at[d] = val[s:sub(d, d)] end
        p = p * H.get(ops[k], at)
      end
      total = total + p
    end)
    return total
  end)
end

-- Values for a dtype: small integers for integer and half types (their products are exact),
-- float32-representable reals for float32.
local function vals(shape, dtype, seed)
  if dtype == "float64" then return H.values(shape, {seed = seed}) end
  if dtype == "float32" then return H.map(H.values(shape, {seed = seed}), H.f32) end
  return H.values(shape, {int = true, lo = -3, hi = 3, seed = seed})
end

-- float32 sums of K products of values up to 3 carry absolute error ~1e-5.
local tol = {float32 = {rtol = 1e-5, atol = 1e-4}}

local function check(actual, expected, dtype, msg)
  local t = tol[dtype] or {}
  H.assert_close(actual, expected, {dtype = dtype, rtol = t.rtol, atol = t.atol, msg = msg})
end

-- ---------------------------------------------------------------- matmul

describe("matmul", function()
  it("multiplies 2-D matrices of odd sizes (7x13 . 13x5) in float64 and float32", function()
    for _, dt in ipairs({"float64", "float32"}) do
      local A, B = vals({7, 13}, dt, 1), vals({13, 5}, dt, 2)
      check(dle.tensor(A, {dtype = dt}):matmul(dle.tensor(B, {dtype = dt})), ref_matmul(A, B), dt)
    end
  end)

  it("gives the right values for every layout pair of A and B (transposed, strided, sliced)", function()
    for _, dt in ipairs({"float64", "float32", "float16", "bfloat16", "int64", "int32"}) do
      local A, B = vals({7, 13}, dt, 3), vals({13, 5}, dt, 4)
      local expected = ref_matmul(A, B)
      for _, la in ipairs(H.layouts) do
        for _, lb in ipairs(H.layouts) do
          local a, b = H.make(A, dt, la), H.make(B, dt, lb)
          check(dle.matmul(a, b), expected, dt, dt .. " " .. la .. " x " .. lb)
        end
      end
    end
  end)

  it("multiplies t() views of both operands (the BLAS transpose flags) correctly", function()
    local A, B = vals({13, 7}, "float64", 5), vals({5, 13}, "float64", 6)
    local a, b = dle.tensor(A, {dtype = "float64"}), dle.tensor(B, {dtype = "float64"})
    check(a:t():matmul(b:t()), ref_matmul(H.transpose(A), H.transpose(B)), "float64")
    check(a:t():matmul(a), ref_matmul(H.transpose(A), A), "float64")
    check(b:matmul(b:t()), ref_matmul(B, H.transpose(B)), "float64")
  end)

  it("multiplies narrowed (sliced) sub-matrices with a storage offset", function()
    local Big = vals({9, 15}, "float32", 7)
    local big = dle.tensor(Big)
    local a = big:narrow(1, 2, 7):narrow(2, 3, 13)          -- 7x13, row stride 15
    local b = big:narrow(1, 1, 5):narrow(2, 2, 13):t()      -- 13x5, column-major
    local A, B = {}, {}
    for i = 1, 7 do A[i] = {table.unpack(Big[i + 1], 3, 15)} end
    for i = 1, 5 do B[i] = {table.unpack(Big[i], 2, 14)} end
    check(a:matmul(b), ref_matmul(A, H.transpose(B)), "float32")
  end)

  it("matches a float64 reference on a 64x48 . 48x80 product (BLAS blocking)", function()
    local A, B = vals({64, 48}, "float64", 8), vals({48, 80}, "float64", 9)
    check(dle.tensor(A, {dtype = "float64"}):matmul(dle.tensor(B, {dtype = "float64"})),
          ref_matmul(A, B), "float64")
  end)

  it("handles the 1-D cases: dot (0-dim), vector . matrix, matrix . vector", function()
    local v, w = vals({13}, "float64", 10), vals({13}, "float64", 11)
    local M1, M2 = vals({13, 5}, "float64", 12), vals({7, 13}, "float64", 13)
    local o = {dtype = "float64"}
    local d = dle.tensor(v, o):matmul(dle.tensor(w, o))
    assert.are.same({}, d:shape())
    check(d, ref_matmul(v, w), "float64")
    check(dle.tensor(v, o):matmul(dle.tensor(M1, o)), ref_matmul(v, M1), "float64")
    check(dle.tensor(M2, o):matmul(dle.tensor(v, o)), ref_matmul(M2, v), "float64")
  end)

  it("handles 1-D operands on strided, sliced and transposed layouts", function()
    local v, M1, M2 = vals({13}, "float32", 14), vals({13, 5}, "float32", 15), vals({7, 13}, "float32", 16)
    for _, lv in ipairs(H.layouts) do
      for _, lm in ipairs(H.layouts) do
        local tv = H.make(v, "float32", lv)
        check(tv:matmul(H.make(M1, "float32", lm)), ref_matmul(v, M1), "float32", lv .. " x " .. lm)
        check(H.make(M2, "float32", lm):matmul(tv), ref_matmul(M2, v), "float32", lm .. " x " .. lv)
        check(tv:matmul(H.make(v, "float32", lm)), ref_matmul(v, v), "float32", "dot " .. lv .. " x " .. lm)
      end
    end
  end)

  it("handles 1-D with batched operands ({13} . {3,13,5} and {3,7,13} . {13})", function()
    local v, B, A = vals({13}, "float64", 17), vals({3, 13, 5}, "float64", 18), vals({3, 7, 13}, "float64", 19)
    local o = {dtype = "float64"}
    local r1 = dle.tensor(v, o):matmul(dle.tensor(B, o))
    assert.are.same({3, 5}, r1:shape())
    check(r1, ref_matmul(v, B), "float64")
    local r2 = dle.tensor(A, o):matmul(dle.tensor(v, o))
    assert.are.same({3, 7}, r2:shape())
    check(r2, ref_matmul(A, v), "float64")
  end)

  it("broadcasts batch dims: {2,1,3,4} . {5,4,6} -> {2,5,3,6}", function()
    local A, B = vals({2, 1, 3, 4}, "float64", 20), vals({5, 4, 6}, "float64", 21)
    local r = dle.tensor(A, {dtype = "float64"}):matmul(dle.tensor(B, {dtype = "float64"}))
    assert.are.same({2, 5, 3, 6}, r:shape())
    check(r, ref_matmul(A, B), "float64")
  end)

  it("broadcasts batch dims on every layout of 3-D operands", function()
    for _, dt in ipairs({"float32", "int64", "float16"}) do
      local A, B = vals({3, 5, 4}, dt, 22), vals({1, 4, 6}, dt, 23)
      local expected = ref_matmul(A, B)
      for _, la in ipairs(H.layouts) do
        for _, lb in ipairs(H.layouts) do
          check(H.make(A, dt, la):matmul(H.make(B, dt, lb)), expected, dt, dt .. " " .. la .. " x " .. lb)
        end
      end
    end
  end)

  it("reads expand()ed (stride-0) batch operands without materialising them", function()
    local M, B = vals({5, 4}, "float64", 24), vals({3, 4, 6}, "float64", 25)
    local o = {dtype = "float64"}
    local a = dle.tensor(M, o):expand(3, 5, 4)
    assert.are.same(0, a:stride(1))
    check(a:matmul(dle.tensor(B, o)), ref_matmul({M, M, M}, B), "float64")
    local b = dle.tensor(B[1], o):expand(3, 4, 6)
    check(dle.tensor(B, o):narrow(3, 1, 4):matmul(b), ref_matmul(
      H.build({3, 4, 4}, function(i) return B[i[1]][i[2]][i[3]] end), {B[1], B[1], B[1]}), "float64")
  end)

  it("folds the batch of {batch, seq, k} . {k, n} (Linear) and of non-foldable views alike", function()
    local X, W = vals({4, 6, 5}, "float32", 26), vals({5, 3}, "float32", 27)
    local expected = ref_matmul(X, W)
    check(dle.tensor(X):matmul(dle.tensor(W)), expected, "float32", "contiguous")
    for _, l in ipairs(H.layouts) do
      check(H.make(X, "float32", l):matmul(H.make(W, "float32", l)), expected, "float32", l)
    end
    -- rows of a selected middle dim: batch stride is not rows * row stride
    local Y = vals({4, 2, 6, 5}, "float32", 28)
    local y = dle.tensor(Y):select(2, 2)
    check(y:matmul(dle.tensor(W)), ref_matmul(H.build({4, 6, 5}, function(i) return Y[i[1]][2][i[2]][i[3]] end), W),
          "float32", "selected")
  end)

  it("computes float16 and bfloat16 with float32 accumulation and keeps their dtype", function()
    -- 2048 * 1 + 1 + ... would lose the small terms if accumulated in float16
    local n = 64
    local a = dle.full({1, n}, 1, {dtype = "float16"})
    local b = dle.full({n, 1}, 1, {dtype = "float16"})
    a[1][1] = 1024
    local r = a:matmul(b)
    assert.are.equal("float16", r:dtype())
    assert.are.equal(1024 + n - 1, r:item())
    local r2 = a:bfloat16():matmul(b:bfloat16())
    assert.are.equal("bfloat16", r2:dtype())
    assert.are.equal(1088, r2:item())   -- 1087 rounded to bfloat16's 8 bits
  end)

  -- Sizes above OpenBLAS's threading threshold (m*n*k >= 262144), so at 2 threads the BLAS
  -- calls really split the work: the Linear (tall-skinny) shape, odd sizes, transposed, sliced,
  -- batched and broadcast operands, and the gemv cases.
  it("gives the float64 product's values at 1 and 2 threads on threaded-BLAS sizes and layouts", function()
    dle.manual_seed(5)
    local cases = {
      {"tall-skinny 128x784 . 784x512", function() return dle.randn(128, 784), dle.randn(784, 512) end},
      {"odd 131x257 . 257x67", function() return dle.randn(131, 257), dle.randn(257, 67) end},
      {"transposed a", function() return dle.randn(257, 131):t(), dle.randn(257, 67) end},
      {"transposed b", function() return dle.randn(131, 257), dle.randn(67, 257):t() end},
      {"sliced rows and columns", function()
        return dle.randn(140, 270):narrow(1, 5, 131):narrow(2, 3, 257),
            dle.randn(260, 80):narrow(1, 2, 257):narrow(2, 7, 67)
      end},
      {"batched {3,67,129} . {3,129,71}", function() return dle.randn(3, 67, 129), dle.randn(3, 129, 71) end},
      {"batch folded {3,67,129} . {129,71}", function() return dle.randn(3, 67, 129), dle.randn(129, 71) end},
      {"broadcast {3,67,129} . expanded {129,71}", function()
        return dle.randn(67, 129):expand(3, 67, 129), dle.randn(3, 129, 71)
      end},
      {"matrix . vector 517x1031 . 1031", function() return dle.randn(517, 1031), dle.randn(1031) end},
      {"vector . transposed matrix 1031 . 1031x517", function() return dle.randn(1031), dle.randn(517, 1031):t() end},
    }
    local threads = dle.get_num_threads()
    for _, c in ipairs(cases) do
      local a, b = c[2]()
      local expected = a:double():matmul(b:double()):totable()
      for _, n in ipairs({1, 2}) do
        dle.set_num_threads(n)
        local ok, err = pcall(H.assert_close, a:matmul(b), expected,
                              {dtype = "float32", rtol = 1e-4, atol = 1e-4, msg = c[1] .. " at " .. n .. " thread(s)"})
        dle.set_num_threads(threads)
        assert(ok, err)
      end
    end
  end)

  -- At 2 threads the BLAS splits each product between its threads; the split is fixed for a
  -- shape and thread count, so results must not change from run to run.
  it("gives the same bits on every run at 2 threads, close to 1 thread's", function()
    local g = dle.Generator(11)
    local cases = {
      {"128x784 . 784x256 (the MLP's first layer)", dle.randn(128, 784, {generator = g}),
       dle.randn(256, 784, {generator = g}):t()},
      {"its weight gradient 256x128 . 128x784", dle.randn(128, 256, {generator = g}):t(),
       dle.randn(128, 784, {generator = g})},
      {"517x129 . 129x67", dle.randn(517, 129, {generator = g}), dle.randn(129, 67, {generator = g})},
      {"transposed a 517x129", dle.randn(129, 517, {generator = g}):t(), dle.randn(129, 67, {generator = g})},
      {"float64, transposed b", dle.randn(67, 129, {generator = g, dtype = "float64"}),
        dle.randn(1031, 129, {generator = g, dtype = "float64"}):t()},
      {"batched {2,131,257} . {2,257,67}", dle.randn(2, 131, 257, {generator = g}),
       dle.randn(2, 257, 67, {generator = g})},
    }
    H.keep_threads(finally)
    for _, c in ipairs(cases) do
      local a, b = c[2], c[3]
      dle.set_num_threads(1)
      local one = a:matmul(b)
      local bias = dle.randn(one:size(-1), {generator = g, dtype = a:dtype()})
      local lin = a:dim() == 2 and dle.nn.functional.linear(a, b:t(), bias) or nil
      H.assert_close(one, a:double():matmul(b:double()):totable(), {rtol = 1e-4, atol = 1e-4, msg = c[1]})
      dle.set_num_threads(2)
      local two = a:matmul(b)
      local lin2 = lin and dle.nn.functional.linear(a, b:t(), bias)
      H.assert_close(two, one:totable(), {rtol = 1e-4, atol = 1e-4, msg = c[1] .. " vs 1 thread"})
      for run = 1, 5 do
        assert.is_true(a:matmul(b):equal(two), c[1] .. ", run " .. run)
        if lin then
          assert.is_true(dle.nn.functional.linear(a, b:t(), bias):equal(lin2), c[1] .. " with bias, run " .. run)
        end
      end
    end
  end)

  -- kernels/cpu/matmul.c cuts a large product into slabs of C's rows (or of its columns when N > M),
  -- one per dle thread; every slab boundary case against the float64 product: rows and columns,
  -- sizes not a multiple of the 16-element slab alignment, more threads than slabs fit, both
  -- operands transposed, an addend accumulated (addmm, beta = 1) and a sliced (strided) output.
  it("splits large products into row or column slabs on dle's threads without changing values", function()
    local g = dle.Generator(23)
    local function rn(m, n) return n and dle.randn(m, n, {generator = g}) or dle.randn(m, {generator = g}) end
    local cases = {   -- each above the split size, 2^26 multiply-adds
      {"rows 1001x512 . 512x140", rn(1001, 512), rn(512, 140)},
      {"columns 140x512 . 512x1001", rn(140, 512), rn(512, 1001)},
      {"columns, both transposed", rn(512, 140):t(), rn(1001, 512):t()},
      {"33 rows, room for 2 slabs only: 33x2053 . 2053x1000", rn(33, 2053), rn(2053, 1000)},
      {"float64 rows 1031x512 . 512x129", rn(1031, 512):double(), rn(512, 129):double()},
    }
    H.keep_threads(finally)
    dle.set_num_threads(1)   -- the float64 references unsplit: a wrong slab must not be in both
    for _, c in ipairs(cases) do c.want = c[2]:double():matmul(c[3]:double()) end
    for _, threads in ipairs({2, 3, 5}) do
      dle.set_num_threads(threads)
      for _, c in ipairs(cases) do
        local a, b, msg, want = c[2], c[3], c[1] .. " at " .. threads .. " threads", c.want
        H.assert_close(a:matmul(b), want:totable(), {rtol = 1e-4, atol = 1e-4, msg = msg})
        local addend = rn(want:size(2)):to(a:dtype())
        H.assert_close(dle.addmm(addend, a, b), (want + addend:double()):totable(),
                       {rtol = 1e-4, atol = 1e-4, msg = msg .. ", addmm"})
        local big = dle.zeros(want:size(1) + 3, want:size(2) + 5, {dtype = a:dtype()})
        local out = big:narrow(1, 2, want:size(1)):narrow(2, 4, want:size(2))
        a:matmul(b, {out = out})
        H.assert_close(out, want:totable(), {rtol = 1e-4, atol = 1e-4, msg = msg .. ", sliced out"})
        assert.are.equal(0, big:narrow(1, 1, 1):abs():sum():item(), msg .. ": row above out untouched")
      end
    end
  end)

  it("gives zeros for K = 0 and empty results for M = 0 or N = 0", function()
    for _, dt in ipairs({"float32", "float64", "float16", "int64"}) do
      local z = dle.zeros(3, 0, {dtype = dt}):matmul(dle.zeros(0, 4, {dtype = dt}))
      assert.are.same({3, 4}, z:shape())
      check(z, H.build({3, 4}, function() return 0 end), dt, dt)
      local e = dle.zeros(0, 3, {dtype = dt}):matmul(dle.ones(3, 4, {dtype = dt}))
      assert.are.same({0, 4}, e:shape())
      assert.are.same({5, 0}, dle.ones(5, 3, {dtype = dt}):matmul(dle.ones(3, 0, {dtype = dt})):shape())
      assert.are.same({0, 2, 4}, dle.ones(0, 2, 3, {dtype = dt}):matmul(dle.ones(3, 4, {dtype = dt})):shape())
    end
    local d = dle.zeros(0):matmul(dle.zeros(0))
    assert.are.same({}, d:shape())
    assert.are.equal(0, d:item())
  end)

  it("promotes dtypes: float32.float64 -> float64, int64.float32 -> float32, bool.bool -> int64", function()
    local f32, f64 = dle.ones(2, 3), dle.ones(3, 2, {dtype = "float64"})
    assert.are.equal("float64", f32:matmul(f64):dtype())
    local i64 = dle.ones(3, 2, {dtype = "int64"})
    local r = f32:matmul(i64)
    assert.are.equal("float32", r:dtype())
    check(r, {{3, 3}, {3, 3}}, "float32")
    local bt = dle.tensor({{true, true}, {false, true}})
    local rb = bt:matmul(bt)
    assert.are.equal("int64", rb:dtype())
    assert.are.same({{1, 2}, {0, 1}}, rb:totable())
    assert.are.equal("int32", dle.ones(2, 2, {dtype = "int32"}):matmul(dle.ones(2, 2, {dtype = "int32"})):dtype())
    assert.are.same({{2, 2}, {2, 2}},
                    dle.ones(2, 2, {dtype = "uint8"}):matmul(dle.ones(2, 2, {dtype = "uint8"})):totable())
  end)

  it("keeps exact int64 products beyond 2^53", function()
    local big = (1 << 31) + 1
    local a = dle.tensor({{big, 1}}, {dtype = "int64"})
    local b = dle.tensor({{big + 1}, {3}}, {dtype = "int64"})
    assert.are.equal(big * (big + 1) + 3, a:matmul(b):item())
  end)

  it("returns a new contiguous tensor that does not share the inputs' storage", function()
    local a = dle.ones(4, 3)
    local r = a:matmul(a:t())
    assert.is_true(r:is_contiguous())
    assert.is_false(dle.same_storage(r, a))
    check(r, H.build({4, 4}, function() return 3 end), "float32")
  end)

  it("writes into a given output {out = t}: contiguous, other dtype, strided, aliasing an input", function()
    local A, B = vals({3, 4}, "float64", 29), vals({4, 3}, "float64", 30)
    local a, b = dle.tensor(A, {dtype = "float64"}), dle.tensor(B, {dtype = "float64"})
    local expected = ref_matmul(A, B)
    local out = dle.zeros(3, 3, {dtype = "float64"})
    assert.are.equal(out, dle.matmul(a, b, {out = out}))
    check(out, expected, "float64", "contiguous out")
    local out32 = dle.zeros(3, 3)
    a:matmul(b, {out = out32})
    check(out32, H.map(expected, H.f32), "float32", "float32 out")
    local big = dle.zeros(3, 6, {dtype = "float64"})
    local strided = big:view(3, 3, 2):select(3, 2)
    a:matmul(b, {out = strided})
    check(strided, expected, "float64", "strided out")
    check(big:view(3, 3, 2):select(3, 1), H.build({3, 3}, function() return 0 end), "float64", "untouched")
    local sq = dle.tensor(vals({3, 3}, "float64", 31), {dtype = "float64"})
    local want = ref_matmul(sq:totable(), sq:totable())
    sq:matmul(sq, {out = sq})
    check(sq, want, "float64", "aliased out")
    H.assert_error(function() return a:matmul(b, {out = dle.zeros(3, 4, {dtype = "float64"})}) end,
                   "matmul: result of shape {3,3} cannot be written into an output of shape {3,4}")
  end)

  it("raises errors naming the function and the shapes", function()
    H.assert_error(function() return dle.matmul(dle.zeros(2, 3), dle.zeros(4, 5)) end,
                   "matmul: shapes {2,3} and {4,5} are not aligned (3 vs 4)")
    H.assert_error(function() return dle.zeros(3):matmul(dle.zeros(4)) end,
                   "matmul: shapes {3} and {4} are not aligned (3 vs 4)")
    H.assert_error(function() return dle.zeros(2, 3, 4):matmul(dle.zeros(5, 4, 6)) end,
                   "matmul", "{2,3,4}", "{5,4,6}", "broadcast")
    H.assert_error(function() return dle.tensor(1):matmul(dle.zeros(3)) end, "matmul", "{}", "{3}")
    H.assert_error(function() return dle.zeros(2, 2):matmul(3) end, "matmul")
  end)
end)

-- ---------------------------------------------------------------- mm, bmm, mv, dot, outer

describe("addmm", function()
  it("equals matmul(a, b) + c for every dtype, c broadcast, with or without a transposed b", function()
    for _, dt in ipairs({"float32", "float64", "float16", "int64", "int32"}) do
      local a = dle.tensor(vals({5, 7}, dt, 1), {dtype = dt})
      local b = dle.tensor(vals({7, 3}, dt, 2), {dtype = dt})
      for _, c in ipairs({dle.tensor(vals({3}, dt, 3), {dtype = dt}), dle.tensor(vals({5, 3}, dt, 4), {dtype = dt})}) do
        local want = a:matmul(b) + c
        check(dle.addmm(c, a, b), want:totable(), dt, dt)
        check(c:addmm(a, b:t():contiguous():t()), want:totable(), dt, dt .. " transposed b")
      end
    end
  end)

  it("batched products and a {K = 0} product (the result is c itself)", function()
    local a, b, c = dle.randn(2, 4, 6), dle.randn(6, 3), dle.randn(3)
    check(dle.addmm(c, a, b), (a:matmul(b) + c):totable(), "float32")
    local e = dle.addmm(dle.tensor({1, 2}), dle.empty(3, 0), dle.empty(0, 2))
    assert.same({{1, 2}, {1, 2}, {1, 2}}, e:totable())
  end)

  it("leaves c unchanged and rejects an addend that does not broadcast", function()
    local c = dle.tensor({1, 2, 3})
    dle.addmm(c, dle.ones(2, 2), dle.ones(2, 3))
    assert.same({1, 2, 3}, c:totable())
    local ok, err = pcall(dle.addmm, dle.ones(4), dle.ones(2, 2), dle.ones(2, 3))
    assert.is_false(ok)
    assert.matches("matmul: shapes {4} and {2,3} cannot be broadcast", err, 1, true)
    ok, err = pcall(dle.addmm, dle.ones(2, 1, 3), dle.ones(2, 2), dle.ones(2, 3))   -- would grow the result
    assert.is_false(ok)
    assert.matches("matmul: the addend of shape {2,1,3} does not broadcast to the product's shape {2,3}", err, 1, true)
  end)
end)

describe("mm, bmm, mv, dot and outer", function()
  it("mm multiplies 2-D matrices and rejects other ranks and misaligned shapes", function()
    local A, B = vals({7, 13}, "float64", 30), vals({13, 5}, "float64", 31)
    local o = {dtype = "float64"}
    check(dle.tensor(A, o):mm(dle.tensor(B, o)), ref_matmul(A, B), "float64")
    check(dle.mm(H.make(A, "float64", "transposed"), H.make(B, "float64", "sliced")), ref_matmul(A, B), "float64")
    H.assert_error(function() return dle.mm(dle.zeros(2, 3), dle.zeros(4, 5)) end,
                   "mm: shapes {2,3} and {4,5} are not aligned (3 vs 4)")
    H.assert_error(function() return dle.mm(dle.zeros(2, 2, 3), dle.zeros(3, 5)) end,
                   "mm: expected 2-D tensors, got shapes {2,2,3} and {3,5}")
  end)

  it("bmm multiplies batches of equal size and rejects broadcasting", function()
    local A, B = vals({3, 4, 5}, "float32", 32), vals({3, 5, 2}, "float32", 33)
    check(dle.bmm(dle.tensor(A), dle.tensor(B)), ref_matmul(A, B), "float32")
    check(H.make(A, "float32", "transposed"):bmm(H.make(B, "float32", "strided")), ref_matmul(A, B), "float32")
    H.assert_error(function() return dle.bmm(dle.zeros(2, 4, 5), dle.zeros(3, 5, 2)) end,
                   "bmm: batch sizes of shapes {2,4,5} and {3,5,2} differ (2 vs 3)")
    H.assert_error(function() return dle.bmm(dle.zeros(2, 4, 5), dle.zeros(2, 4, 2)) end,
                   "bmm: shapes {2,4,5} and {2,4,2} are not aligned (5 vs 4)")
    H.assert_error(function() return dle.bmm(dle.zeros(4, 5), dle.zeros(5, 2)) end,
                   "bmm: expected 3-D tensors, got shapes {4,5} and {5,2}")
  end)

  it("mv, dot and outer compute their products and check their ranks", function()
    local M, v, w = vals({7, 13}, "float64", 34), vals({13}, "float64", 35), vals({5}, "float64", 36)
    local o = {dtype = "float64"}
    check(dle.tensor(M, o):mv(dle.tensor(v, o)), ref_matmul(M, v), "float64")
    check(dle.tensor(v, o):dot(dle.tensor(v, o)), ref_matmul(v, v), "float64")
    local outer = dle.outer(dle.tensor(v, o), dle.tensor(w, o))
    check(outer, H.build({13, 5}, function(i) return v[i[1]] * w[i[2]] end), "float64")
    check(H.make(w, "float64", "strided"):outer(H.make(v, "float64", "sliced")),
          H.build({5, 13}, function(i) return w[i[1]] * v[i[2]] end), "float64")
    H.assert_error(function() return dle.zeros(3):dot(dle.zeros(4)) end, "dot", "{3}", "{4}")
    H.assert_error(function() return dle.zeros(2, 3):dot(dle.zeros(3)) end, "dot: expected two 1-D tensors", "{2,3}")
    H.assert_error(function() return dle.zeros(2, 3):mv(dle.zeros(4)) end,
                   "mv: shapes {2,3} and {4} are not aligned (3 vs 4)")
    H.assert_error(function() return dle.zeros(3):mv(dle.zeros(3)) end, "mv: expected a 2-D matrix", "{3}")
    H.assert_error(function() return dle.outer(dle.zeros(2, 2), dle.zeros(3)) end, "outer", "{2,2}", "{3}")
  end)
end)

-- ---------------------------------------------------------------- einsum

describe("einsum", function()
  local o = {dtype = "float64"}
  local function T(v) return dle.tensor(v, o) end

  it("does a matrix product, also on transposed and sliced operands", function()
    local A, B = vals({7, 13}, "float64", 40), vals({13, 5}, "float64", 41)
    local expected = ref_einsum("ij,jk->ik", A, B)
    check(dle.einsum("ij,jk->ik", T(A), T(B)), expected, "float64")
    check(dle.einsum("ij,jk->ik", H.make(A, "float64", "transposed"), H.make(B, "float64", "sliced")),
          expected, "float64")
    check(dle.einsum("ij,jk->ki", T(A), T(B)), ref_einsum("ij,jk->ki", A, B), "float64")
  end)

  it("does a batched matrix product and batch labels in any position", function()
    local A, B = vals({3, 4, 5}, "float64", 42), vals({3, 5, 2}, "float64", 43)
    check(dle.einsum("bij,bjk->bik", T(A), T(B)), ref_einsum("bij,bjk->bik", A, B), "float64")
    local C = vals({4, 3, 5}, "float64", 44)
    check(dle.einsum("ibj,bjk->kbi", T(C), T(B)), ref_einsum("ibj,bjk->kbi", C, B), "float64")
  end)

  it("permutes one operand ('ij->ji', 'abc->cab') without copying", function()
    local A = vals({3, 4, 5}, "float64", 45)
    local r = dle.einsum("abc->cab", T(A))
    check(r, ref_einsum("abc->cab", A), "float64")
    local m = T(vals({2, 3}, "float64", 46))
    assert.is_true(dle.same_storage(dle.einsum("ij->ji", m), m))
  end)

  it("takes outer products ('i,j->ij') and broadcasts batch labels ('bi,bj->bij')", function()
    local v, w = vals({4}, "float64", 47), vals({3}, "float64", 48)
    check(dle.einsum("i,j->ij", T(v), T(w)), ref_einsum("i,j->ij", v, w), "float64")
    local A, B = vals({2, 4}, "float64", 49), vals({2, 3}, "float64", 50)
    check(dle.einsum("bi,bj->bij", T(A), T(B)), ref_einsum("bi,bj->bij", A, B), "float64")
  end)

  it("supports implicit output: labels used once, alphabetically", function()
    local A, B = vals({2, 3}, "float64", 51), vals({3, 4}, "float64", 52)
    check(dle.einsum("ij,jk", T(A), T(B)), ref_einsum("ij,jk->ik", A, B), "float64")
    check(dle.einsum("ba", T(A)), ref_einsum("ba->ab", A), "float64")
    check(dle.einsum(" i j , j k ", T(A), T(B)), ref_einsum("ij,jk->ik", A, B), "float64")
  end)

  it("contracts three operands left to right", function()
    local A, B, C = vals({2, 3}, "float64", 53), vals({3, 4}, "float64", 54), vals({4, 5}, "float64", 55)
    check(dle.einsum("ij,jk,kl->il", T(A), T(B), T(C)), ref_einsum("ij,jk,kl->il", A, B, C), "float64")
    -- a label shared by the first and third operands only survives the first contraction
    local D = vals({2, 4}, "float64", 56)
    check(dle.einsum("ij,jk,ik->k", T(A), T(B), T(D)), ref_einsum("ij,jk,ik->k", A, B, D), "float64")
  end)

  it("accepts the operands as one table and '...' for leading dims", function()
    local A, B = vals({3, 4, 5}, "float64", 57), vals({3, 5, 2}, "float64", 58)
    check(dle.einsum("bij,bjk->bik", {T(A), T(B)}), ref_einsum("bij,bjk->bik", A, B), "float64")
    check(dle.einsum("...ij,...jk->...ik", T(A), T(B)), ref_einsum("bij,bjk->bik", A, B), "float64")
    check(dle.einsum("...ij,jk", T(A), T(B[1])), ref_einsum("bij,jk->bik", A, B[1]), "float64")
  end)

  it("works in float32 and int64", function()
    local A, B = vals({4, 3}, "float32", 59), vals({3, 2}, "float32", 60)
    check(dle.einsum("ij,jk->ik", dle.tensor(A), dle.tensor(B)), ref_einsum("ij,jk->ik", A, B), "float32")
    local I, J = vals({4, 3}, "int64", 61), vals({3, 2}, "int64", 62)
    check(dle.einsum("ij,jk->ki", dle.tensor(I, {dtype = "int64"}), dle.tensor(J, {dtype = "int64"})),
          ref_einsum("ij,jk->ki", I, J), "int64")
  end)

  -- These use t:sum (reductions).
  it("sums labels away ('ij->i', 'ij->', 'ij,jk->i')", function()
    local A, B = vals({3, 4}, "float64", 63), vals({4, 2}, "float64", 64)
    check(dle.einsum("ij->i", T(A)), ref_einsum("ij->i", A), "float64")
    check(dle.einsum("ij->j", T(A)), ref_einsum("ij->j", A), "float64")
    check(dle.einsum("ij->", T(A)), ref_einsum("ij->", A), "float64")
    check(dle.einsum("ij,jk->i", T(A), T(B)), ref_einsum("ij,jk->i", A, B), "float64")
    check(dle.einsum("ij,kl->", T(A), T(B)), ref_einsum("ij,kl->", A, B), "float64")
  end)

  it("takes diagonals and traces ('ii->i', 'ii', 'bii->b')", function()
    local A, C = vals({4, 4}, "float64", 65), vals({2, 3, 3}, "float64", 66)
    check(dle.einsum("ii->i", T(A)), ref_einsum("ii->i", A), "float64")
    check(dle.einsum("ii", T(A)), ref_einsum("ii->", A), "float64")
    check(dle.einsum("bii->b", T(C)), ref_einsum("bii->b", C), "float64")
  end)

  it("raises clear errors for bad equations and operands", function()
    local a, b = dle.zeros(2, 3), dle.zeros(3, 4)
    H.assert_error(function() return dle.einsum("ij,jk", a, dle.zeros(3, 4, 5)) end,
                   "einsum: operand 2 has 3 dims but subscripts 'jk' name 2")
    H.assert_error(function() return dle.einsum("ij,jk", a, dle.zeros(4, 4)) end,
                   "einsum: label 'j' has size 3 in operand 1 {2,3} but size 4 in operand 2 {4,4}")
    H.assert_error(function() return dle.einsum("ij,jk->iz", a, b) end,
                   "einsum: output label 'z' does not appear in any operand")
    H.assert_error(function() return dle.einsum("ij,jk->ii", a, b) end,
                   "einsum: output label 'i' appears more than once")
    H.assert_error(function() return dle.einsum("ij", a, b) end,
                   "einsum: subscripts 'ij' name 1 operand but 2 were given")
    H.assert_error(function() return dle.einsum("i1,jk", a, b) end, "einsum: invalid character '1'")
    H.assert_error(function() return dle.einsum("ij,jk", a, 3) end, "einsum: operand 2 is a number, not a tensor")
  end)
end)
