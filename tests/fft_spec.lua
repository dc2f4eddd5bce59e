-- fft_spec.lua — dle.fft: every transform against a direct O(n^2) DFT in float64 (a matrix of
-- e^(-2 pi i jk/n) built in Lua; irfft against its cosine-sum formula) on odd and even sizes,
-- batched, transposed (non-contiguous) and sliced inputs, each norm mode, n and s shorter and
-- longer than the input (crop / zero-pad), dims given in any order; round trips; float32 against
-- float64; fftfreq, rfftfreq, fftshift, ifftshift; errors naming the function; PyTorch's values
-- when python3-torch is there.
local dle = require("dle")
local H = require("helpers")
local F = dle.fft

local NORMS = {"backward", "ortho", "forward"}

local function cdiff(a, b) return dle.abs(a - b):max():item() end
local function real64(shape, seed) return H.seeded(shape, seed, -1, 1) end
local function cplx(shape, seed) return dle.complex(real64(shape, seed), real64(shape, seed + 7)) end

-- x (any dtype) with dim d cropped or zero-padded to length n
local function resize(x, d, n)
  local m = x:size(d)
  if n <= m then return x:narrow(d, 1, n) end
  local shape = x:shape()
  shape[d] = n - m
  return dle.cat({x, dle.zeros(shape, {dtype = x:dtype()})}, d)
end

-- The DFT of x along dim d with signal length n (direct sums), sign -1 forward, +1 inverse, and
-- PyTorch's scale for the norm.
local function dft(x, d, n, inverse, norm)
  x = resize(x:to("complex128"), d, n)
  local re, im = {}, {}
  for k = 0, n - 1 do
    re[k + 1], im[k + 1] = {}, {}
    for j = 0, n - 1 do
      local a = (inverse and 2 or -2) * math.pi * ((j * k) % n) / n
      re[k + 1][j + 1], im[k + 1][j + 1] = math.cos(a), math.sin(a)
    end
  end
  local W = dle.complex(dle.tensor(re, {dtype = "float64"}), dle.tensor(im, {dtype = "float64"}))
  local scale = (norm == "ortho") and 1 / math.sqrt(n)
    or ((norm == "forward") ~= (inverse == true)) and 1 / n or 1
  local y = x:transpose(d, -1):matmul(W:t()):transpose(d, -1)
  return y * scale
end

-- irfft's definition: y[t] = scale * (Re X0 + 2 sum_{k=1}^{m} Re(X_k e^(2 pi i kt/n)) + [n even] Re X_{n/2} (-1)^t)
-- on a 1-D half spectrum (cropped / zero-padded to n/2+1); imaginary parts of X0 and X_{n/2} ignored.
local function irfft_ref(X, n, norm)
  local h = resize(X:to("complex128"), 1, n // 2 + 1):totable()
  local scale = norm == "ortho" and 1 / math.sqrt(n) or norm == "forward" and 1 or 1 / n
  local y = {}
  for t = 0, n - 1 do
    local s = h[1][1]
    for k = 1, (n + 1) // 2 - 1 do
      local a = 2 * math.pi * k * t / n
      s = s + 2 * (h[k + 1][1] * math.cos(a) - h[k + 1][2] * math.sin(a))
    end
    if n % 2 == 0 then s = s + h[n // 2 + 1][1] * ((t % 2 == 0) and 1 or -1) end
    y[t + 1] = s * scale
  end
  return dle.tensor(y, {dtype = "float64"})
end

describe("dle.fft", function()
  describe("fft and ifft", function()
    it("match the direct DFT on odd and even sizes, along each dim, for every norm", function()
      for _, n in ipairs({1, 2, 7, 8, 15}) do
        local x = cplx({3, n}, n)
        for _, norm in ipairs(NORMS) do
          local o = {norm = norm}
          assert.is_true(cdiff(F.fft(x, nil, nil, o), dft(x, 2, n, false, norm)) < 1e-12, "fft n=" .. n .. " " .. norm)
          assert.is_true(cdiff(F.ifft(x, o), dft(x, 2, n, true, norm)) < 1e-12, "ifft n=" .. n .. " " .. norm)
          assert.is_true(cdiff(F.fft(x, nil, 1, o), dft(x, 1, 3, false, norm)) < 1e-12, "fft dim 1 " .. norm)
        end
      end
    end)

    it("crops to a shorter n and zero-pads to a longer one", function()
      local x = cplx({2, 9}, 3)
      for _, n in ipairs({1, 4, 9, 13, 16}) do
        assert.is_true(cdiff(F.fft(x, n), dft(x, 2, n, false, "backward")) < 1e-12, "n=" .. n)
        assert.is_true(cdiff(F.ifft(x, n, -1, {norm = "ortho"}), dft(x, 2, n, true, "ortho")) < 1e-12, "ifft n=" .. n)
      end
      assert.are.same({2, 13}, F.fft(x, {n = 13}):shape())
    end)

    it("reads transposed, sliced and batched (3-D) inputs by their strides", function()
      local base = cplx({6, 5, 4}, 11)
      local t = base:transpose(1, 3) -- {4, 5, 6}, non-contiguous
      assert.is_true(cdiff(F.fft(t), dft(t:contiguous(), 3, 6, false, "backward")) < 1e-12)
      assert.is_true(cdiff(F.fft(t, nil, 2), dft(t:contiguous(), 2, 5, false, "backward")) < 1e-12)
      local s = base:narrow(2, 2, 3):select(3, 2) -- offset and strides
      assert.is_true(cdiff(F.fft(s, 7, 1), dft(s:contiguous(), 1, 7, false, "backward")) < 1e-12)
    end)

    it("makes real and integer inputs complex (complex128 for float64, complex64 otherwise)", function()
      local x = real64({5}, 4)
      assert.are.equal("complex128", F.fft(x):dtype())
      assert.is_true(cdiff(F.fft(x), F.fft(x:to("complex128"))) < 1e-15)
      assert.are.equal("complex64", F.fft(dle.tensor({1, 2, 3}, {dtype = "int64"})):dtype())
      assert.are.equal("complex64", F.fft(x:float()):dtype())
      assert.is_true(cdiff(F.fft(x:float()):to("complex128"), F.fft(x)) < 1e-5)
    end)

    it("ifft(fft(x)) gives x back, for every norm", function()
      local x = cplx({4, 11}, 5)
      for _, norm in ipairs(NORMS) do
        assert.is_true(cdiff(F.ifft(F.fft(x, {norm = norm}), {norm = norm}), x) < 1e-14, norm)
      end
    end)

    it("returns an empty result for an empty batch", function()
      local y = F.fft(dle.zeros({0, 8}, {dtype = "complex64"}))
      assert.are.same({0, 8}, y:shape())
    end)
  end)

  describe("rfft, irfft, hfft, ihfft", function()
    it("rfft gives the n/2+1 non-negative frequencies of the DFT, for odd and even n and every norm", function()
      local x = real64({3, 10}, 6)
      for _, n in ipairs({1, 5, 10, 12}) do
        for _, norm in ipairs(NORMS) do
          local y = F.rfft(x, n, -1, {norm = norm})
          assert.are.same({3, n // 2 + 1}, y:shape())
          assert.is_true(cdiff(y, dft(x, 2, n, false, norm):narrow(2, 1, n // 2 + 1)) < 1e-12, n .. " " .. norm)
        end
      end
      local xt = real64({7, 3}, 8):t() -- transposed
      assert.is_true(cdiff(F.rfft(xt), dft(xt, 2, 7, false, "backward"):narrow(2, 1, 4)) < 1e-12)
      assert.is_true(cdiff(F.rfft(xt, nil, 1), dft(xt, 1, 3, false, "backward"):narrow(1, 1, 2)) < 1e-12)
    end)

    it("irfft matches its cosine-sum definition, ignoring the imaginary parts of X0 and X_{n/2}", function()
      local X = cplx({6}, 9)
      for _, n in ipairs({1, 2, 7, 10, 14}) do
        for _, norm in ipairs(NORMS) do
          local y = F.irfft(X, n, 1, {norm = norm})
          assert.are.same({n}, y:shape())
          assert.are.equal("float64", y:dtype())
          assert.is_true((y - irfft_ref(X, n, norm)):abs():max():item() < 1e-12, n .. " " .. norm)
        end
      end
      assert.are.same({10}, F.irfft(X):shape()) -- default n = 2 * (6 - 1)
    end)

    it("irfft(rfft(x), n) gives x back for odd and even n", function()
      for _, n in ipairs({1, 6, 9}) do
        local x = real64({2, n}, n + 20)
        assert.is_true((F.irfft(F.rfft(x), n) - x):abs():max():item() < 1e-14, "n=" .. n)
        assert.is_true((F.irfft(F.rfft(x, nil, nil, {norm = "ortho"}), n, nil, {norm = "ortho"}) - x)
          :abs():max():item() < 1e-14)
      end
    end)

    it("ihfft is conj(rfft) with the mirrored norm and hfft inverts it", function()
      local x = real64({9}, 30)
      assert.is_true(cdiff(F.ihfft(x), dle.conj(F.rfft(x)) / 9) < 1e-15)
      assert.is_true(cdiff(F.ihfft(x, {norm = "forward"}), dle.conj(F.rfft(x))) < 1e-15)
      assert.is_true((F.hfft(F.ihfft(x), 9) - x):abs():max():item() < 1e-14)
      local X = cplx({5}, 31)
      assert.is_true((F.hfft(X, 8) - F.irfft(dle.conj(X), 8) * 8):abs():max():item() < 1e-12)
    end)
  end)

  describe("2-D and n-D transforms", function()
    local x = cplx({3, 4, 5}, 40)

    it("fft2 / fftn are 1-D transforms over each dim in turn, with s cropping or padding", function()
      local want = dft(dft(x, 3, 5, false, "backward"), 2, 4, false, "backward")
      assert.is_true(cdiff(F.fft2(x), want) < 1e-12)
      local all = dft(want, 1, 3, false, "backward")
      assert.is_true(cdiff(F.fftn(x), all) < 1e-12)
      local s = dft(dft(x, 1, 2, false, "ortho"), 3, 7, false, "ortho")
      assert.is_true(cdiff(F.fftn(x, {2, 7}, {1, 3}, {norm = "ortho"}), s) < 1e-12)
      assert.are.same({3, 6, 2}, F.fftn(x, {6, 2}):shape()) -- s alone: the last #s dims
      assert.is_true(cdiff(F.ifftn(F.fftn(x)), x) < 1e-14)
      assert.is_true(cdiff(F.ifft2(F.fft2(x, nil, {1, 3}), nil, {1, 3}), x) < 1e-14)
    end)

    it("rfftn halves the last dim given, also when it is not the last of the tensor", function()
      local r = real64({4, 6, 5}, 41)
      local full = F.fftn(r:to("complex128"))
      assert.is_true(cdiff(F.rfftn(r), full:narrow(3, 1, 3)) < 1e-12)
      local y = F.rfftn(r, nil, {3, 2}) -- dim 2 is halved
      assert.are.same({4, 4, 5}, y:shape())
      assert.is_true(cdiff(y, F.fftn(r:to("complex128"), nil, {2, 3}):narrow(2, 1, 4)) < 1e-12)
      assert.is_true(cdiff(F.rfft2(r, {3, 8}), F.fft2(r, {3, 8}):narrow(3, 1, 5)) < 1e-12)
    end)

    it("irfftn inverts rfftn (odd and even last sizes) and equals ifft over the leading dims then irfft", function()
      for _, last in ipairs({5, 6}) do
        local r = real64({3, 4, last}, 42 + last)
        for _, norm in ipairs(NORMS) do
          local o = {norm = norm}
          local back = F.irfftn(F.rfftn(r, nil, nil, o), r:shape(), nil, o)
          assert.is_true((back - r):abs():max():item() < 1e-14, last .. " " .. norm)
        end
        local X = cplx({3, 4, 4}, 50) -- not Hermitian: the order of the steps matters
        local want = F.irfft(F.ifft2(X, nil, {1, 2}), last)
        assert.is_true((F.irfftn(X, {3, 4, last}) - want):abs():max():item() < 1e-14)
        assert.is_true((F.irfft2(X, {4, last}) - F.irfft(F.ifft(X, nil, 2), last)):abs():max():item() < 1e-14)
      end
    end)
  end)

  describe("helpers", function()
    it("fftfreq and rfftfreq give PyTorch's sample frequencies, with spacing d and a dtype", function()
      assert.are.same({0, 0.2, 0.4, -0.4, -0.2}, F.fftfreq(5, {dtype = "float64"}):totable())
      assert.are.same({0, 0.25, -0.5, -0.25}, F.fftfreq(4, 1, {dtype = "float64"}):totable())
      assert.are.same({0, 1 / 3, 2 / 3, 1}, F.rfftfreq(6, 0.5, {dtype = "float64"}):totable())
      assert.are.same({0, 0.2, 0.4}, F.rfftfreq(5, {dtype = "float64"}):totable())
      assert.are.equal("float32", F.fftfreq(3):dtype())
    end)

    it("fftshift moves the zero frequency to the middle and ifftshift undoes it, over all or given dims", function()
      assert.are.same({3, 4, 0, 1, 2}, F.fftshift(dle.arange(0, 5)):totable())
      assert.are.same({2, 3, 4, 0, 1}, F.ifftshift(dle.arange(0, 5)):totable())
      assert.are.same({-0.4, -0.2, 0, 0.2, 0.4}, F.fftshift(F.fftfreq(5, {dtype = "float64"})):totable())
      local m = dle.arange(0, 12):reshape(3, 4)
      assert.are.same({{10, 11, 8, 9}, {2, 3, 0, 1}, {6, 7, 4, 5}}, F.fftshift(m):totable())
      assert.are.same({{2, 3, 0, 1}, {6, 7, 4, 5}, {10, 11, 8, 9}}, F.fftshift(m, 2):totable())
      assert.are.same(m:totable(), F.ifftshift(F.fftshift(m, {1, 2}), {1, 2}):totable())
    end)
  end)

  describe("errors", function()
    local x = real64({4, 5}, 60)

    it("name the function and the bad dim, n, s, norm or option", function()
      H.assert_error(function() return F.fft(x, nil, 3) end, "fft.fft:", "dim 3", "{4,5}")
      H.assert_error(function() return F.rfft(x, nil, 0) end, "fft.rfft:", "dim 0")
      H.assert_error(function() return F.fftn(x, nil, {1, 1}) end, "fft.fftn:", "twice")
      H.assert_error(function() return F.fft(x, 0) end, "fft.fft:", "n must be a positive integer", "0")
      H.assert_error(function() return F.irfft(x, -2) end, "fft.irfft:", "n must be")
      H.assert_error(function() return F.fft2(x, {4, 0}) end, "fft.fft2:", "s[2]")
      H.assert_error(function() return F.fftn(x, {4}, {1, 2}) end, "fft.fftn:", "same length")
      H.assert_error(function() return F.ifft(x, {norm = "Ortho"}) end, "fft.ifft:", "norm", '"Ortho"')
      H.assert_error(function() return F.fft(x, {nn = 3}) end, "fft.fft:", "unknown option 'nn'")
      H.assert_error(function() return F.fft(x, 3, nil, {n = 3}) end, "fft.fft:", "n given twice")
      H.assert_error(function() return F.fft(dle.tensor(1.5)) end, "fft.fft:", "0-dim")
      H.assert_error(function() return F.fftfreq(0) end, "fft.fftfreq:", "n")
      H.assert_error(function() return F.rfftfreq(4, 0) end, "fft.rfftfreq:", "d")
    end)

    it("refuse a complex input to rfft and a signal of 0 points", function()
      H.assert_error(function() return F.rfft(cplx({4}, 1)) end, "fft.rfft:", "real input", "complex128")
      H.assert_error(function() return F.ihfft(cplx({4}, 1)) end, "fft.ihfft:", "complex128")
      H.assert_error(function() return F.irfft(cplx({1}, 1)) end, "fft.irfft:", "invalid number of data points (0)")
      H.assert_error(function() return F.fft(dle.zeros({3, 0})) end, "fft.fft:", "(0)")
    end)
  end)

  describe("PyTorch's values (python3-torch)", function()
    it("fft, rfft, irfft, hfft, ihfft, fftn, rfftn, irfftn, hfft2, hfftn, ihfft2 and ihfftn with n / s and " ..
       "every norm, in float64", function()
      if H.without_torch(pending) then return end
      local r = real64({3, 5, 6}, 70)
      local zr, zi = real64({3, 4}, 71), real64({3, 4}, 72)
      local z = dle.complex(zr, zi)
      local lines, mine = {"z = torch.complex(zr, zi)",
        "def q(t): p(torch.view_as_real(t.resolve_conj()) if t.is_complex() else t)"}, {}
      local function flat(t)
        if t:is_complex() then t = dle.view_as_real(t) end
        return t:contiguous():reshape(-1):totable()
      end
      for _, norm in ipairs(NORMS) do
        local q = "norm='" .. norm .. "'"
        local function add(py, t) lines[#lines + 1] = "q(" .. py .. ")"; mine[#mine + 1] = flat(t) end
        add("torch.fft.fft(z, n=7, dim=0, " .. q .. ")", F.fft(z, 7, 1, {norm = norm}))
        add("torch.fft.ifft(z, n=3, " .. q .. ")", F.ifft(z, 3, nil, {norm = norm}))
        add("torch.fft.rfft(r, n=9, dim=1, " .. q .. ")", F.rfft(r, 9, 2, {norm = norm}))
        add("torch.fft.irfft(z, n=5, " .. q .. ")", F.irfft(z, 5, nil, {norm = norm}))
        add("torch.fft.hfft(z, " .. q .. ")", F.hfft(z, {norm = norm}))
        add("torch.fft.ihfft(r, " .. q .. ")", F.ihfft(r, {norm = norm}))
        add("torch.fft.fftn(r, s=(4, 7), dim=(2, 0), " .. q .. ")", F.fftn(r, {4, 7}, {3, 1}, {norm = norm}))
        add("torch.fft.rfftn(r, s=(2, 5), dim=(2, 1), " .. q .. ")", F.rfftn(r, {2, 5}, {3, 2}, {norm = norm}))
        add("torch.fft.irfftn(z, s=(4, 7), " .. q .. ")", F.irfftn(z, {4, 7}, nil, {norm = norm}))
        add("torch.fft.irfft2(z, " .. q .. ")", F.irfft2(z, {norm = norm}))
        add("torch.fft.hfft2(z, " .. q .. ")", F.hfft2(z, {norm = norm}))
        add("torch.fft.hfftn(z, s=(2, 5), " .. q .. ")", F.hfftn(z, {2, 5}, nil, {norm = norm}))
        add("torch.fft.ihfft2(r, s=(3, 4), dim=(0, 2), " .. q .. ")", F.ihfft2(r, {3, 4}, {1, 3}, {norm = norm}))
        add("torch.fft.ihfftn(r, " .. q .. ")", F.ihfftn(r, {norm = norm}))
      end
      local out = H.run_torch({r = r, zr = zr, zi = zi}, lines)
      assert.are.equal(#mine, #out, table.concat(out, "\n"))
      for i = 1, #mine do H.assert_torch_numbers(mine[i], out[i], 1e-12, lines[i + 2]) end
    end)
  end)

  -- Every transform's gradient: input (complex128 "c" or float64 "r", shape, seed), the dle call
  -- and PyTorch's (0-based dims), with n/s cropping and padding, dims in any order, every norm,
  -- odd sizes, transposed and narrowed (non-contiguous) inputs.
  local function c(shape, seed) return cplx(shape, seed) end
  local function r(shape, seed) return real64(shape, seed) end
  local grad_cases = {
    {"fft", c({5}, 1), function(z) return F.fft(z) end, "torch.fft.fft(a)"},
    {"fft, n = 3 (crop) along dim 1, ortho", c({4, 3}, 2), function(z) return F.fft(z, 3, 1, {norm = "ortho"}) end,
      "torch.fft.fft(a, 3, 0, norm='ortho')"},
    {"fft of a real input, n = 7 (pad), forward", r({2, 5}, 3),
      function(x) return F.fft(x, 7, -1, {norm = "forward"}) end,
      "torch.fft.fft(a, 7, -1, norm='forward')"},
    {"fft of a narrowed input", c({2, 5}, 4), function(z) return F.fft(z:narrow(2, 2, 3)) end,
      "torch.fft.fft(a.narrow(1, 1, 3))"},
    {"ifft of a transposed input", c({3, 4}, 5), function(z) return F.ifft(z:t(), nil, 2) end,
      "torch.fft.ifft(a.t(), None, 1)"},
    {"ifft, n = 6, ortho", c({5}, 6), function(z) return F.ifft(z, 6, nil, {norm = "ortho"}) end,
      "torch.fft.ifft(a, 6, norm='ortho')"},
    {"rfft of an odd length", r({7}, 7), function(x) return F.rfft(x) end, "torch.fft.rfft(a)"},
    {"rfft of a transposed input along dim 1, n = 4, forward", r({3, 5}, 8),
      function(x) return F.rfft(x:t(), 4, 1, {norm = "forward"}) end, "torch.fft.rfft(a.t(), 4, 0, norm='forward')"},
    {"rfft, n = 9 (pad), ortho", r({2, 6}, 9), function(x) return F.rfft(x, 9, 2, {norm = "ortho"}) end,
      "torch.fft.rfft(a, 9, 1, norm='ortho')"},
    {"irfft (n = 2 (size - 1))", c({4}, 10), function(z) return F.irfft(z) end, "torch.fft.irfft(a)"},
    {"irfft, n = 5 (odd), ortho", c({2, 3}, 11), function(z) return F.irfft(z, 5, 2, {norm = "ortho"}) end,
      "torch.fft.irfft(a, 5, 1, norm='ortho')"},
    {"irfft, n = 9 (pad) along dim 1, forward", c({3, 2}, 12),
      function(z) return F.irfft(z, 9, 1, {norm = "forward"}) end,
      "torch.fft.irfft(a, 9, 0, norm='forward')"},
    {"hfft", c({4}, 13), function(z) return F.hfft(z) end, "torch.fft.hfft(a)"},
    {"hfft, n = 5, ortho", c({2, 3}, 14), function(z) return F.hfft(z, 5, -1, {norm = "ortho"}) end,
      "torch.fft.hfft(a, 5, -1, norm='ortho')"},
    {"ihfft", r({5}, 15), function(x) return F.ihfft(x) end, "torch.fft.ihfft(a)"},
    {"ihfft, n = 6, forward", r({2, 4}, 16), function(x) return F.ihfft(x, 6, 2, {norm = "forward"}) end,
      "torch.fft.ihfft(a, 6, 1, norm='forward')"},
    {"fft2", c({3, 4}, 17), function(z) return F.fft2(z) end, "torch.fft.fft2(a)"},
    {"fft2, s = {2, 5}, ortho", c({3, 4}, 18), function(z) return F.fft2(z, {2, 5}, nil, {norm = "ortho"}) end,
      "torch.fft.fft2(a, (2, 5), norm='ortho')"},
    {"ifft2 of a transposed input", c({4, 3}, 19), function(z) return F.ifft2(z:t()) end, "torch.fft.ifft2(a.t())"},
    {"rfft2", r({3, 5}, 20), function(x) return F.rfft2(x) end, "torch.fft.rfft2(a)"},
    {"rfft2, s = {4, 4}, forward", r({3, 5}, 21), function(x) return F.rfft2(x, {4, 4}, nil, {norm = "forward"}) end,
      "torch.fft.rfft2(a, (4, 4), norm='forward')"},
    {"irfft2", c({3, 3}, 22), function(z) return F.irfft2(z) end, "torch.fft.irfft2(a)"},
    {"irfft2, s = {3, 5}, ortho", c({2, 3}, 23), function(z) return F.irfft2(z, {3, 5}, nil, {norm = "ortho"}) end,
      "torch.fft.irfft2(a, (3, 5), norm='ortho')"},
    {"fftn", c({2, 3, 2}, 24), function(z) return F.fftn(z) end, "torch.fft.fftn(a)"},
    {"fftn over dims {3, 1}, s = {3, 2}", c({2, 2, 3}, 25), function(z) return F.fftn(z, {3, 2}, {3, 1}) end,
      "torch.fft.fftn(a, (3, 2), (2, 0))"},
    {"ifftn over dims {1, 2}, forward", c({2, 3, 2}, 26),
      function(z) return F.ifftn(z, nil, {1, 2}, {norm = "forward"}) end,
      "torch.fft.ifftn(a, None, (0, 1), norm='forward')"},
    {"rfftn", r({2, 3, 3}, 27), function(x) return F.rfftn(x) end, "torch.fft.rfftn(a)"},
    {"rfftn over dims {1, 3}, s = {3, 4}, ortho", r({2, 2, 3}, 28),
      function(x) return F.rfftn(x, {3, 4}, {1, 3}, {norm = "ortho"}) end,
      "torch.fft.rfftn(a, (3, 4), (0, 2), norm='ortho')"},
    {"irfftn", c({2, 2, 3}, 29), function(z) return F.irfftn(z) end, "torch.fft.irfftn(a)"},
    {"irfftn over dims {2, 3}, s = {3, 5}, forward", c({2, 3, 3}, 30),
      function(z) return F.irfftn(z, {3, 5}, {2, 3}, {norm = "forward"}) end,
      "torch.fft.irfftn(a, (3, 5), (1, 2), norm='forward')"},
    {"hfft2", c({3, 3}, 35), function(z) return F.hfft2(z) end, "torch.fft.hfft2(a)"},
    {"hfftn over dims {3, 1}, s = {3, 5}, ortho", c({2, 2, 3}, 36),
      function(z) return F.hfftn(z, {3, 5}, {3, 1}, {norm = "ortho"}) end,
      "torch.fft.hfftn(a, (3, 5), (2, 0), norm='ortho')"},
    {"ihfft2 of a transposed input, forward", r({5, 3}, 37),
      function(x) return F.ihfft2(x:t(), nil, nil, {norm = "forward"}) end,
      "torch.fft.ihfft2(a.t(), norm='forward')"},
    {"ihfftn, s = {2, 4}", r({2, 3, 3}, 38), function(x) return F.ihfftn(x, {2, 4}) end, "torch.fft.ihfftn(a, (2, 4))"},
    {"fftshift of a complex input", c({3, 4}, 31), function(z) return F.fftshift(z) end, "torch.fft.fftshift(a)"},
    {"fftshift of a real input along dim 2", r({3, 5}, 32), function(x) return F.fftshift(x, 2) end,
      "torch.fft.fftshift(a, 1)"},
    {"ifftshift of a complex input along dims {1}", c({5, 2}, 33), function(z) return F.ifftshift(z, {1}) end,
      "torch.fft.ifftshift(a, (0,))"},
    {"ifftshift of a real input", r({4, 3}, 34), function(x) return F.ifftshift(x) end, "torch.fft.ifftshift(a)"},
  }

  describe("gradients", function()
    for _, case in ipairs(grad_cases) do
      it(case[1] .. ": reverse and forward mode match finite differences", function()
        H.gradcheck(case[3], {case[2]})
      end)
    end

    it("rfft's gradient accounts for the halved spectrum; irfft's doubles the mirrored entries", function()
      -- L = re(rfft(x)[k]) for k = 1: d/dx_t = cos(2 pi t / n), the full spectrum's entry alone
      local x = real64({6}, 40):requires_grad_(true)
      local g = dle.grad(F.rfft(x):real():select(1, 2), {x})[1]:totable()
      for t = 0, 5 do assert.is_true(math.abs(g[t + 1] - math.cos(2 * math.pi * t / 6)) < 1e-14, t) end
      -- irfft of 4 bins (n = 6) summed: only bin 0 (weight 1) reaches the sum of y; bins 1..2
      -- would count twice (their mirrors); bin 3 (Nyquist) once
      local z = cplx({4}, 41):requires_grad_(true)
      local w = dle.tensor({1, 0, 0, 0, 0, 0}, {dtype = "float64"}) -- y[0] = (X0 + 2 re X1 + 2 re X2 + X3) / 6
      local gz = dle.grad((F.irfft(z) * w):sum(), {z})[1]
      local want = {{1 / 6, 0}, {2 / 6, 0}, {2 / 6, 0}, {1 / 6, 0}}
      local got = dle.view_as_real(gz):totable()
      for i = 1, 4 do
        for k = 1, 2 do assert.is_true(math.abs(got[i][k] - want[i][k]) < 1e-15, i .. "," .. k) end
      end
    end)

    it("matches PyTorch's gradients of every transform in complex128 / float64", function()
      if H.without_torch(pending) then return end
      local list = {}
      for i, case in ipairs(grad_cases) do list[i] = {name = case[1], ins = {case[2]}, f = case[3], py = case[4]} end
      H.assert_torch_grads(list, 1e-12)
    end)
  end)
end)
