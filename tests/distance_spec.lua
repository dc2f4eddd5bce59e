--- distance_spec.lua — dle.cdist (lua/dle/distance.lua; compositions of dle ops) against PyTorch in
-- float64, values and gradients (skipped without it), for p = 2 by matrix product and by
-- differences, p = 0, 1, 3, 0.5 and inf, batched and broadcast batch dims, rows at distance 0
-- (gradient 0); float64 gradchecks in both modes; float32 against float64; the broadcasting
-- helpers (broadcast_shapes, broadcast_to, broadcast_tensors); bad arguments.
local dle = require("dle")
local H = require("helpers")
local F64 = {dtype = "float64"}

local r = H.randn64()

local a, b = r(30, 4), r(7, 4)
local same = dle.cat({r(3, 4), r(2, 4)}, 1)
same = dle.cat({same, same:narrow(1, 2, 2)}, 1) -- rows 6, 7 repeat rows 2, 3: distance 0
local CASES = {
  {"p=2 by matrix product (30 rows)", {}, "", {a, b}},
  {"p=2 by differences", {compute_mode = "donot_use_mm_for_euclid_dist"},
   ", compute_mode='donot_use_mm_for_euclid_dist'", {a, b}},
  {"p=2 small (differences), equal rows", {}, "", {same, same}},
  {"p=2 by matrix product, equal rows", {compute_mode = "use_mm_for_euclid_dist"},
   ", compute_mode='use_mm_for_euclid_dist'", {same, r(4, 4)}},
  {"p=1", {p = 1}, ", p=1", {a, b}},
  {"p=inf", {p = math.huge}, ", p=float('inf')", {a, b}},
  {"p=3", {p = 3}, ", p=3", {a, b}},
  {"p=0.5", {p = 0.5}, ", p=0.5", {r(5, 3), r(6, 3)}},
  {"p=3, equal rows", {p = 3}, ", p=3", {same, same}},
  {"p=0", {p = 0}, ", p=0", {a, b:narrow(2, 1, 4)}},
  {"batched, broadcast batch dims", {}, "", {r(2, 1, 27, 3), r(3, 5, 3)}},
}

describe("cdist", function()
  it("matches PyTorch in float64: values and gradients", function()
    if H.without_torch(pending) then return end
    local tensors, lines = {}, {}
    for i, c in ipairs(CASES) do
      tensors["a" .. i], tensors["b" .. i] = c[4][1], c[4][2]
      lines[#lines + 1] = string.format("a%d.requires_grad_(); b%d.requires_grad_()", i, i)
      lines[#lines + 1] = string.format("y = torch.cdist(a%d, b%d%s)", i, i, c[3])
      lines[#lines + 1] = "p(y)"
      lines[#lines + 1] = "w = torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape) / 7"
      lines[#lines + 1] = string.format("g = torch.autograd.grad((y * w).sum(), (a%d, b%d), allow_unused=True)", i, i)
      lines[#lines + 1] = string.format("p(torch.cat([(t if t is not None else torch.zeros_like(s)).reshape(-1) " ..
                                        "for t, s in zip(g, (a%d, b%d))]))", i, i)
    end
    local out = H.run_torch(tensors, lines)
    assert.are.equal(2 * #CASES, #out, table.concat(out, "\n"))
    for i, c in ipairs(CASES) do
      local x1, x2 = c[4][1]:clone():requires_grad_(), c[4][2]:clone():requires_grad_()
      local y = dle.cdist(x1, x2, c[2])
      H.assert_torch_numbers(y:reshape(-1):totable(), out[2 * i - 1], 1e-9, c[1] .. ": value")
      if c[2].p ~= 0 then -- p = 0 counts: no gradient (PyTorch's is 0)
      local w = dle.arange(0, y:numel(), F64):reshape(y:shape()) / 7
      local g1, g2 = table.unpack(dle.grad((y * w):sum(), {x1, x2}, {allow_unused = true}))
      g1, g2 = g1 or dle.zeros_like(x1), g2 or dle.zeros_like(x2)
      local flat = g1:reshape(-1):totable()
      for _, v in ipairs(g2:reshape(-1):totable()) do flat[#flat + 1] = v end
      H.assert_torch_numbers(flat, out[2 * i], 1e-8, c[1] .. ": gradient")
      end
    end
  end)

  for _, c in ipairs(CASES) do
    if c[2].p ~= 0 and c[1]:find("equal rows") == nil then
      it(c[1] .. ": gradcheck in reverse and forward mode", function()
        H.gradcheck(function(x1, x2) return dle.cdist(x1, x2, c[2]) end, c[4])
      end)
    end
  end

  it("rows at distance 0 have gradient 0 (no NaN), as in PyTorch", function()
    for _, opts in ipairs({{}, {compute_mode = "use_mm_for_euclid_dist"}, {p = 3}, {p = 1}}) do
      local x = same:clone():requires_grad_()
      dle.cdist(x, same:narrow(1, 2, 1), opts):sum():backward()
      local g = x.grad:totable()
      for k = 1, 4 do assert.are.equal(0, g[2][k], "row 2 is the other row") end
      for k = 1, 4 do assert.are.equal(0, g[6][k], "row 6 equals it") end
    end
  end)

  it("float32 (matrix product and differences) within 1e-4 of float64", function()
    local x1, x2 = r(40, 16), r(33, 16)
    for _, opts in ipairs({{}, {compute_mode = "donot_use_mm_for_euclid_dist"}, {p = 1}, {p = math.huge}}) do
      local d = dle.cdist(x1:float(), x2:float(), opts):double() - dle.cdist(x1, x2, opts)
      assert.is_true(d:abs():max():item() < 1e-4, opts.p or opts.compute_mode or "p=2")
    end
  end)

  it("broadcast_shapes, broadcast_to, broadcast_tensors: shapes, views, errors", function()
    assert.are.same({2, 4, 3}, dle.broadcast_shapes({2, 1, 3}, {4, 1}, dle.randn(3)))
    assert.are.same({}, dle.broadcast_shapes())
    local v = dle.tensor({1, 2, 3})
    local e = v:broadcast_to({2, 3})
    assert.are.same({{1, 2, 3}, {1, 2, 3}}, e:totable())
    assert.are.same({2, 3}, dle.broadcast_to(v, dle.zeros(2, 3)):shape())
    local x, y = dle.broadcast_tensors(dle.tensor({{1}, {2}}), v)
    assert.are.same({{1, 1, 1}, {2, 2, 2}}, x:totable())
    assert.are.same({{1, 2, 3}, {1, 2, 3}}, y:totable())
    local function err(f) local ok, msg = pcall(f); assert.is_false(ok); return msg end
    assert.matches("broadcast_shapes: shapes {2,3} and {4} do not broadcast %(dim %-1%)",
      err(function() return dle.broadcast_shapes({2, 3}, {4}) end))
    assert.matches("broadcast_shapes: argument 1 must be a list of sizes %(integers >= 0%), element 1 is dle.Tensor",
      err(function() return dle.broadcast_shapes({dle.ones(2), 4}) end))
    assert.matches("broadcast_shapes: argument 2 must be a list of sizes %(integers >= 0%), element 2 is 1.5",
      err(function() return dle.broadcast_shapes({2}, {1, 1.5}) end))
    assert.matches("expand: cannot expand shape {3} to {2,4}", err(function() return v:broadcast_to({2, 4}) end))
  end)

  it("bad arguments are errors naming cdist and the shapes, dtypes or option", function()
    local function err(f) local ok, msg = pcall(f); assert.is_false(ok); return msg end
    assert.matches("cdist: x1 {3,4} and x2 {2,5} must be at least 2%-D with the same last size",
      err(function() return dle.cdist(dle.randn(3, 4), dle.randn(2, 5)) end))
    assert.matches("cdist: x1 {4} and x2 {2,4} must be at least 2%-D",
      err(function() return dle.cdist(dle.randn(4), dle.randn(2, 4)) end))
    assert.matches("cdist: batch dims of x1 {2,3,4} and x2 {3,3,4} do not broadcast",
      err(function() return dle.cdist(dle.randn(2, 3, 4), dle.randn(3, 3, 4)) end))
    assert.matches("cdist: x1 and x2 must be float tensors of one dtype, got int64 and int64",
      err(function() return dle.cdist(dle.ones(2, 2, {dtype = "int64"}), dle.ones(2, 2, {dtype = "int64"})) end))
    assert.matches("cdist: p must be a number >= 0, got %-1", err(function() return dle.cdist(a, b, {p = -1}) end))
    assert.matches("cdist: unknown option 'bogus'", err(function() return dle.cdist(a, b, {bogus = 1}) end))
    assert.matches("cdist: unknown compute_mode fast",
      err(function() return dle.cdist(a, b, {compute_mode = "fast"}) end))
  end)
end)
