-- complex_spec.lua — complex64 / complex128: names and conversions, the views real, imag,
-- view_as_real and view_as_complex (sharing storage), printing, item/totable's {re, im} pairs,
-- elementwise arithmetic and functions against Lua's own complex formulas (with broadcasting,
-- promotion, non-contiguous inputs and extreme values for division and abs), sum/mean, matmul
-- against explicit loops, the refusal of every other op and of autograd, files (dle format, npy;
-- safetensors refuses), and PyTorch's values when python3-torch is there.
local dle = require("dle")
local H = require("helpers")

-- a complex128 tensor from seeded parts in [-2, 2]
local function cvals(shape, seed, dt)
  local re = H.seeded(shape, seed, -2, 2)
  local im = H.seeded(shape, seed + 100, -2, 2)
  local z = dle.complex(re, im)
  return dt and z:to(dt) or z
end

-- the largest |a - b| over the elements (complex or real)
local function cdiff(a, b) return dle.abs(a - b):max():item() end

-- the flat list of {re, im} pairs of a complex tensor
local function pairs_of(z)
  local out = {}
  local function walk(v, d)
    if d == z:dim() then out[#out + 1] = v else for _, s in ipairs(v) do walk(s, d + 1) end end
  end
  walk(z:dim() == 0 and z:item() or z:totable(), 0)
  return out
end

-- Lua complex arithmetic on {re, im} pairs: the reference of the kernels
local C = {}
function C.add(a, b) return {a[1] + b[1], a[2] + b[2]} end
function C.sub(a, b) return {a[1] - b[1], a[2] - b[2]} end
function C.mul(a, b) return {a[1] * b[1] - a[2] * b[2], a[1] * b[2] + a[2] * b[1]} end
function C.div(a, b)
  local d = b[1] * b[1] + b[2] * b[2]
  return {(a[1] * b[1] + a[2] * b[2]) / d, (a[2] * b[1] - a[1] * b[2]) / d}
end
function C.exp(a) local r = math.exp(a[1]); return {r * math.cos(a[2]), r * math.sin(a[2])} end
function C.log(a) return {math.log(math.sqrt(a[1] * a[1] + a[2] * a[2])), math.atan(a[2], a[1])} end

local function assert_pairs(got, want, tol, what)
  assert.are.equal(#want, #got, what .. ": element count")
  for i = 1, #want do
    for k = 1, 2 do
      -- not (d <= tol): a NaN on either side fails
      if not (math.abs(got[i][k] - want[i][k]) <= tol * (1 + math.abs(want[i][k]))) then -- luacheck: ignore 581
        error(string.format("%s: element %d part %d is %.17g, expected %.17g", what, i, k, got[i][k], want[i][k]), 2)
      end
    end
  end
end

describe("complex dtypes", function()
  describe("names, conversions and views", function()
    it("parses complex64/complex128 and the aliases cfloat/cdouble, with 8 and 16 byte elements", function()
      assert.are.equal("complex64", dle.zeros(2, {dtype = "cfloat"}):dtype())
      assert.are.equal("complex128", dle.zeros(2, {dtype = "cdouble"}):dtype())
      assert.are.equal(8, dle.zeros(1, {dtype = "complex64"}):element_size())
      assert.are.equal(16, dle.zeros(1, {dtype = "complex128"}):element_size())
      assert.is_true(dle.zeros(1, {dtype = "complex64"}):is_complex())
      assert.is_false(dle.zeros(1):is_complex())
      assert.is_false(dle.zeros(1, {dtype = "complex64"}):is_floating_point())
    end)

    it("converts real to complex with a zero imaginary part, and between complex dtypes", function()
      local x = dle.tensor({{1.5, -2}, {3, 4}}, {dtype = "float64"})
      local z = x:to("complex128")
      assert.are.same({{{1.5, 0}, {-2, 0}}, {{3, 0}, {4, 0}}}, z:totable())
      assert.are.same({{1, 0}, {0, 0}}, dle.tensor({true, false}):to("complex64"):totable())
      assert.are.same({{7, 0}}, dle.tensor({7}, {dtype = "int64"}):to("complex64"):totable())
      local y = dle.complex(dle.tensor({0.1}, {dtype = "float64"}), dle.tensor({-0.2}, {dtype = "float64"}))
      local y32 = y:to("complex64"):totable()[1]
      assert.are.equal(H.f32(0.1), y32[1])
      assert.are.equal(H.f32(-0.2), y32[2])
      -- the transposed (non-contiguous) source converts element by element
      assert.are.same({{{1.5, 0}, {3, 0}}, {{-2, 0}, {4, 0}}}, x:t():to("complex64"):totable())
    end)

    it("refuses complex -> real conversion, naming to, the dtypes and dle.real", function()
      local z = cvals({3}, 1)
      H.assert_error(function() return z:to("float64") end, "to:", "complex128", "float64", "imaginary part", "real")
      H.assert_error(function() return z:float() end, "complex128", "float32")
      H.assert_error(function() dle.zeros(3, {dtype = "float64"}):copy_(z) end, "imaginary part")
    end)

    it("real and imag are views of the storage: writing through them changes the complex tensor", function()
      local z = dle.complex(dle.tensor({1, 2}, {dtype = "float64"}), dle.tensor({3, 4}, {dtype = "float64"}))
      assert.are.same({1, 2}, z:real():totable())
      assert.are.same({3, 4}, dle.imag(z):totable())
      assert.are.equal("float64", z:real():dtype())
      z:imag():fill_(-1)
      z:real():copy_(dle.tensor({5, 6}, {dtype = "float64"}))
      assert.are.same({{5, -1}, {6, -1}}, z:totable())
      local x = dle.tensor({1, 2})
      assert.are.equal(x, x:real()) -- a real tensor is its own real part, as in PyTorch
      H.assert_error(function() return x:imag() end, "imag:", "complex", "float32")
    end)

    it("view_as_real adds a trailing dim of 2 sharing storage; view_as_complex undoes it", function()
      local z = cvals({2, 3}, 2)
      local r = dle.view_as_real(z)
      assert.are.same({2, 3, 2}, r:shape())
      assert.are.same({6, 2, 1}, r:stride())
      assert.is_true(dle.same_storage(r, z))
      local zt = z:t() -- non-contiguous: strides double
      assert.are.same({2, 6, 1}, dle.view_as_real(zt):stride())
      local back = dle.view_as_complex(r)
      assert.are.equal(0, cdiff(back, z))
      r:select(3, 2):zero_()
      assert.are.equal(0, dle.imag(z):abs():max():item())
      local x = dle.randn({3, 2}, {dtype = "float64"})
      assert.are.same(x:select(2, 1):totable(), dle.view_as_complex(x):real():totable())
    end)

    it("view_as_complex refuses a last dim not 2, odd strides or offsets and non-float dtypes", function()
      H.assert_error(function() return dle.view_as_complex(dle.zeros(3, 3)) end, "view_as_complex", "size 2", "{3,3}")
      H.assert_error(function() return dle.view_as_complex(dle.zeros(2, 2):t()) end, "stride 1")
      H.assert_error(function() return dle.view_as_complex(dle.zeros(3, 3):narrow(2, 1, 2)) end, "even")
      H.assert_error(function() return dle.view_as_complex(dle.zeros(4):narrow(1, 2, 2)) end, "offset must be even")
      H.assert_error(function() return dle.view_as_complex(dle.zeros({2}, {dtype = "int64"})) end, "int64")
      H.assert_error(function() return dle.view_as_real(dle.zeros(2)) end, "view_as_real", "complex", "float32")
    end)
  end)

  describe("printing and Lua values", function()
    it("prints PyTorch-style a+bj with 4 decimals and a footer naming the dtype", function()
      local z = dle.complex(dle.tensor({1, -2.5}), dle.tensor({2, -0.5}))
      local s = tostring(z)
      assert.truthy(s:find("1.0000+2.0000j", 1, true), s)
      assert.truthy(s:find("-2.5000-0.5000j", 1, true), s)
      assert.truthy(s:find("[dle.Tensor complex64 of size 2]", 1, true), s)
      local m = tostring(cvals({2, 2}, 3))
      assert.are.equal(2, select(2, m:gsub("\n", "\n")), m) -- two rows and the footer: 3 lines
      assert.truthy(tostring(z:sum()):find("-1.5000+1.5000j", 1, true))
    end)

    it("gives each element as the pair {re, im} from item, totable/tolist and indexing", function()
      local z = dle.complex(dle.tensor({1.5, 2}, {dtype = "float64"}), dle.tensor({-1, 0.25}, {dtype = "float64"}))
      assert.are.same({{1.5, -1}, {2, 0.25}}, z:tolist())
      assert.are.same({2, 0.25}, z:select(1, 2):item())
      assert.are.same({2, 0.25}, z[2])
    end)
  end)

  describe("elementwise", function()
    local a, b = cvals({3, 5}, 10), cvals({3, 5}, 20)

    it("add, sub, mul and div match complex arithmetic, also on transposed inputs", function()
      for _, op in ipairs({"add", "sub", "mul", "div"}) do
        local want = {}
        local pa, pb = pairs_of(a), pairs_of(b)
        for i = 1, #pa do want[i] = C[op](pa[i], pb[i]) end
        assert_pairs(pairs_of(dle[op](a, b)), want, 1e-14, op)
        local at, bt = a:t():contiguous():t(), b:t():contiguous():t() -- same values, transposed storage
        assert_pairs(pairs_of(dle[op](at, bt)), want, 1e-14, op .. " (transposed)")
      end
      assert_pairs(pairs_of(a * b), pairs_of(dle.mul(a, b)), 0, "the * operator")
    end)

    it("promotes as PyTorch (float64, complex64: complex128; int, complex64: complex64) and broadcasts", function()
      local z = cvals({2, 3}, 4, "complex64")
      assert.are.equal("complex128", (z + dle.ones(3, {dtype = "float64"})):dtype())
      assert.are.equal("complex64", (z + dle.ones(3, {dtype = "float32"})):dtype())
      assert.are.equal("complex64", (z * dle.tensor({2}, {dtype = "int64"})):dtype())
      assert.are.equal("complex128", (z + cvals({3}, 5)):dtype())
      local col = dle.tensor({{10}, {20}}, {dtype = "float64"})
      local s = cvals({2, 3}, 4) + col
      local p, q = pairs_of(s), pairs_of(cvals({2, 3}, 4))
      assert.are.same({q[1][1] + 10, q[1][2]}, p[1])
      assert.are.same({q[6][1] + 20, q[6][2]}, p[6])
    end)

    it("takes Lua numbers in the tensor's dtype (0.1 is not rounded to float32 for complex128)", function()
      local z = dle.complex(dle.tensor({1}, {dtype = "float64"}), dle.tensor({1}, {dtype = "float64"}))
      assert.are.same({{1.1, 1}}, (z + 0.1):totable())
      assert.are.same({{2, 2}}, (z * 2):totable())
      assert.are.same({{-1, -1}}, (-z):totable())
      assert.are.same({{0, -1}}, (1 - z):totable())
      assert.are.equal("complex64", (z:to("complex64") / 3):dtype())
    end)

    it("divides without overflow or underflow where the textbook formula fails", function()
      local function c(re, im)
        return dle.complex(dle.tensor({re}, {dtype = "float64"}), dle.tensor({im}, {dtype = "float64"}))
      end
      assert_pairs(pairs_of(c(1e300, 1e300) / c(1e300, 1e300)), {{1, 0}}, 1e-15, "huge / huge")
      assert_pairs(pairs_of(c(1e-300, 1e-300) / c(1e-300, 1e-300)), {{1, 0}}, 1e-15, "tiny / tiny")
      assert_pairs(pairs_of(c(1, 0) / c(0, 2)), {{0, -0.5}}, 0, "1 / 2i")
      local inf = pairs_of(c(1, 1) / c(0, 0))[1]
      assert.is_true(inf[1] ~= inf[1] or math.abs(inf[1]) == math.huge, "x / 0 is inf or nan")
    end)

    it("neg, exp, log match the complex formulas; abs is real (hypot, no overflow), angle atan2(im, re)", function()
      local pa = pairs_of(a)
      local we, wl, wabs, wang = {}, {}, {}, {}
      for i, p in ipairs(pa) do
        we[i], wl[i] = C.exp(p), C.log(p)
        wabs[i], wang[i] = math.sqrt(p[1] ^ 2 + p[2] ^ 2), math.atan(p[2], p[1])
      end
      assert_pairs(pairs_of(dle.exp(a)), we, 1e-14, "exp")
      assert_pairs(pairs_of(dle.log(a)), wl, 1e-14, "log")
      assert_pairs(pairs_of(dle.neg(a)), pairs_of(a * -1), 0, "neg")
      local ab = dle.abs(a)
      assert.are.equal("float64", ab:dtype())
      assert.are.equal("float32", dle.abs(a:to("complex64")):dtype())
      H.assert_close(ab:reshape(-1):totable(), wabs, {rtol = 1e-15, atol = 0})
      H.assert_close(dle.angle(a):reshape(-1):totable(), wang, {rtol = 1e-15, atol = 0})
      local big = dle.complex(dle.tensor({3e300}, {dtype = "float64"}), dle.tensor({4e300}, {dtype = "float64"}))
      H.assert_close(dle.abs(big):item(), 5e300, {rtol = 1e-15})
    end)

    it("conj flips the imaginary part into a new tensor; angle of a real is pi below 0, else 0, nan for nan", function()
      local cz = dle.conj(a)
      assert.is_false(dle.same_storage(cz, a))
      assert.are.equal(0, cdiff(cz:real(), a:real()))
      assert.are.equal(0, cdiff(cz:imag(), -a:imag()))
      local x = dle.tensor({-2, 0, 3, 0 / 0}, {dtype = "float64"})
      local ang = dle.angle(x):totable()
      assert.are.same({math.pi, 0, 0}, {ang[1], ang[2], ang[3]})
      assert.is_true(ang[4] ~= ang[4])
      assert.are.equal(x, dle.conj(x))
    end)

    it("eq and ne compare both parts; where picks complex elements", function()
      local z = dle.complex(dle.tensor({1, 1, 2}), dle.tensor({1, 2, 1}))
      local w = dle.complex(dle.tensor({1, 1, 1}), dle.tensor({1, 1, 1}))
      assert.are.same({true, false, false}, z:eq(w):totable())
      assert.are.same({false, true, true}, z:ne(w):totable())
      local pick = dle.where(dle.tensor({true, false, true}), z, w)
      assert.are.same({{1, 1}, {1, 1}, {2, 1}}, pick:totable())
    end)
  end)

  describe("reductions and matmul", function()
    it("sum and mean over all dims, one dim, negative dims and keepdim, on a transposed input", function()
      local z = cvals({3, 4}, 30)
      local re, im = z:real():contiguous(), z:imag():contiguous()
      local s = z:sum()
      assert.are.same({}, s:shape())
      assert_pairs({s:item()}, {{re:sum():item(), im:sum():item()}}, 1e-15, "sum")
      local m = z:t():mean(1, {keepdim = true})
      assert.are.same({1, 3}, m:shape())
      assert.are.equal(0, cdiff(m:real(), re:t():mean(1, {keepdim = true})))
      assert.are.equal(0, cdiff(m:imag(), im:t():mean(1, {keepdim = true})))
      assert.are.equal(0, cdiff(z:sum(-1), dle.complex(re:sum(-1), im:sum(-1))))
      assert.are.equal("complex64", z:to("complex64"):mean():dtype())
      local z0 = dle.complex(dle.tensor(1.5), dle.tensor(2))
      assert.are.same({1.5, 2}, z0:sum():item())
    end)

    it("matmul matches explicit complex loops for complex64 and complex128, batched and transposed", function()
      local function ref(A, B)
        local a, b = A:totable(), B:totable()
        local n, k, m = #a, #b, #b[1]
        local out = {}
        for i = 1, n do
          out[i] = {}
          for j = 1, m do
            local acc = {0, 0}
            for l = 1, k do acc = C.add(acc, C.mul(a[i][l], b[l][j])) end
            out[i][j] = acc
          end
        end
        return out
      end
      local A, B = cvals({3, 5}, 40), cvals({5, 2}, 50)
      local P = dle.matmul(A, B)
      assert.are.equal("complex128", P:dtype())
      local want = ref(A, B)
      for i = 1, 3 do assert_pairs(P:totable()[i], want[i], 1e-14, "row " .. i) end
      local Pt = dle.matmul(A:t():contiguous():t(), B:t():contiguous():t()) -- column-major operands
      assert.are.equal(0, cdiff(Pt, P))
      local P32 = dle.matmul(A:to("complex64"), B:to("complex64"))
      assert.are.equal("complex64", P32:dtype())
      assert.is_true(cdiff(P32:to("complex128"), P) < 1e-5)
      local Ab = dle.stack({A, A * 2}) -- {2, 3, 5}: cat of complex tensors
      assert.are.same({2, 3, 5}, Ab:shape())
      assert.are.equal(0, cdiff(Ab[1], A))
      assert.are.equal(0, cdiff(dle.cat({A:to("complex64"), A}, 2):narrow(2, 6, 5), A))
      local Pb = Ab:matmul(B)
      assert.are.equal(0, cdiff(Pb[2], P * 2))
      local v = cvals({5}, 60) -- matrix-vector
      assert.is_true(cdiff(A:matmul(v), A:matmul(v:unsqueeze(2)):squeeze(2)) < 1e-14)
      local R = H.seeded({5, 2}, 70) -- real operand promoted to complex
      assert.is_true(cdiff(A:matmul(R), A:matmul(R:to("complex128"))) < 1e-14)
      assert.are.same({3, 0}, {dle.matmul(cvals({3, 0}, 1), cvals({0, 4}, 2)):size(1), 0})
      assert.are.equal(0, dle.abs(dle.matmul(cvals({3, 0}, 1), cvals({0, 4}, 2))):max():item())
    end)
  end)

  describe("what complex does not support", function()
    it("every other op refuses a complex input with an error naming the op and the dtype", function()
      local z = cvals({2, 3}, 80)
      for name, f in pairs({
        relu = function() return dle.relu(z) end, sin = function() return dle.sin(z) end,
        lt = function() return z:lt(z) end, amax = function() return z:amax() end,
        softmax = function() return dle.softmax(z, 1) end, sort = function() return z:sort(1) end,
        sqrt = function() return dle.sqrt(z) end, prod = function() return z:prod() end,
        cumsum = function() return dle.cumsum(z, 1) end,
      }) do
        H.assert_error(f, name, "complex128")
      end
      H.assert_error(function() return dle.rand({2}, {dtype = "complex64"}) end, "complex64")
      H.assert_error(function() return dle.arange(0, 3, 1, {dtype = "complex64"}) end, "complex64")
    end)

    it("an op without complex kernels refuses a complex input that requires grad too (no gradient guessed)", function()
      local z = cvals({3}, 81):requires_grad_(true)
      H.assert_error(function() return dle.sin(z) end, "sin", "complex128")
      H.assert_error(function() return dle.cumsum(z, 1) end, "cumsum", "complex128")
      -- the ops that take complex record it (tests/grad_complex_spec.lua checks their gradients)
      assert.is_true(dle.exp(z).requires_grad)
      local x = dle.randn({3}, {dtype = "float64"}):requires_grad_(true)
      assert.is_true(x:to("complex128").requires_grad)
      assert.is_true(dle.complex(x, x).requires_grad)
      local w = dle.no_grad(function() return dle.complex(x, x * 2) end)
      assert.are.equal("complex128", w:dtype())
      assert.is_false(w.requires_grad)
    end)
  end)

  describe("files", function()
    local dir = H.tmpdir()
    teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

    it("dle.save / dle.load round-trip complex64 and complex128, views included", function()
      local z = cvals({2, 3}, 90)
      dle.save(dir .. "/z.dle", {a = z, b = z:to("complex64"), t = z:t()})
      local l = dle.load(dir .. "/z.dle")
      assert.are.equal("complex128", l.a:dtype())
      assert.are.equal("complex64", l.b:dtype())
      assert.are.equal(0, cdiff(l.a, z))
      assert.are.equal(0, cdiff(l.t, z:t()))
      assert.are.equal(0, cdiff(l.b, z:to("complex64")))
    end)

    it("npy stores <c8 and <c16, transposed tensors too, and reads big-endian >c16 part by part", function()
      local z = cvals({2, 3}, 91)
      dle.save_npy(dir .. "/z.npy", z:t())
      local bytes = H.read_file(dir .. "/z.npy")
      assert.truthy(bytes:find("'descr': '<c16'", 1, true))
      assert.are.equal(0, cdiff(dle.load_npy(dir .. "/z.npy"), z:t()))
      dle.save_npy(dir .. "/z8.npy", z:to("complex64"))
      assert.truthy(H.read_file(dir .. "/z8.npy"):find("'descr': '<c8'", 1, true))
      -- hand-written big-endian file holding 1+2j, -3+0.5j
      local header = "{'descr': '>c16', 'fortran_order': False, 'shape': (2,), }"
      header = header .. string.rep(" ", 64 - 10 - #header - 1) .. "\n"
      H.write_file(dir .. "/be.npy", "\x93NUMPY\1\0" .. string.pack("<I2", #header) .. header ..
        string.pack(">dddd", 1, 2, -3, 0.5))
      assert.are.same({{1, 2}, {-3, 0.5}}, dle.load_npy(dir .. "/be.npy"):totable())
    end)

    it("safetensors has no complex dtype: saving one is an error naming the tensor and a way out", function()
      H.assert_error(function() dle.save_safetensors(dir .. "/z.safetensors", {w = cvals({2}, 1)}) end,
        "save_safetensors", "w", "complex128", "view_as_real")
    end)
  end)

  describe("PyTorch's values (python3-torch)", function()
    it("arithmetic, exp/log, abs/angle, sum and matmul in complex128", function()
      if H.without_torch(pending) then return end
      local a, b = cvals({3, 4}, 100), cvals({4, 2}, 110)
      local ar, ai, br, bi = a:real():contiguous(), a:imag():contiguous(), b:real():contiguous(), b:imag():contiguous()
      local out = H.run_torch({ar = ar, ai = ai, br = br, bi = bi}, {
        "a = torch.complex(ar, ai); b = torch.complex(br, bi); c = a[:, :2] * a[:, 2:] / (a[:, 1:3] + 1)",
        "p(torch.view_as_real(c)); p(torch.view_as_real(torch.exp(a))); p(torch.view_as_real(torch.log(a)))",
        "p(a.abs()); p(a.angle()); p(torch.view_as_real(a.sum(0))); p(torch.view_as_real(a @ b))",
      })
      local c = a:narrow(2, 1, 2) * a:narrow(2, 3, 2) / (a:narrow(2, 2, 2) + 1)
      local function flat(t) return dle.view_as_real(t):contiguous():reshape(-1):totable() end
      H.assert_torch_numbers(flat(c), out[1], 1e-12, "mul/div")
      H.assert_torch_numbers(flat(dle.exp(a)), out[2], 1e-12, "exp")
      H.assert_torch_numbers(flat(dle.log(a)), out[3], 1e-12, "log")
      H.assert_torch_numbers(dle.abs(a):reshape(-1):totable(), out[4], 1e-12, "abs")
      H.assert_torch_numbers(dle.angle(a):reshape(-1):totable(), out[5], 1e-12, "angle")
      H.assert_torch_numbers(flat(a:sum(1)), out[6], 1e-12, "sum")
      H.assert_torch_numbers(flat(a:matmul(b)), out[7], 1e-12, "matmul")
    end)
  end)
end)
