--- dle.cdist and the broadcasting helpers (broadcast_shapes, broadcast_to, broadcast_tensors) as
-- compositions of dle ops, so both autograd modes, dtypes and devices come from those ops.
local check = require("dle.check")

local M = {}

function M.install(dle)
  local Tensor = dle.Tensor

  -- the shape a and b (lists of sizes) broadcast to, or nil and the first dim (from the end) that
  -- does not
  local function broadcast2(a, b)
    local n, out = math.max(#a, #b), {}
    for i = 1, n do
      local x, y = a[#a - n + i] or 1, b[#b - n + i] or 1
      if x ~= y and x ~= 1 and y ~= 1 then return nil, i - n - 1 end
      out[i] = x == 1 and y or x
    end
    return out
  end
  local function shape_of(fn, s, i)
    if dle.is_tensor(s) then return s:shape() end
    if type(s) ~= "table" then
      check.error(string.format("%s: argument %d must be a tensor or a list of sizes, got %s", fn, i,
                                check.typename(s)))
    end
    for k, v in ipairs(s) do
      if math.type(v) ~= "integer" or v < 0 then
        check.error(string.format("%s: argument %d must be a list of sizes (integers >= 0), element %d is %s",
                                  fn, i, k, math.type(v) and tostring(v) or check.typename(v)))
      end
    end
    return s
  end
  local function show(s) return "{" .. table.concat(s, ",") .. "}" end

  -- the shape the shapes (lists of sizes or tensors) broadcast to, or an error naming fn
  local function common_shape(fn, list, n)
    local out = {}
    for i = 1, n do
      local s = shape_of(fn, list[i], i)
      local r, bad = broadcast2(out, s)
      if not r then
        check.error(string.format("%s: shapes %s and %s do not broadcast (dim %d)", fn, show(out), show(s), bad))
      end
      out = r
    end
    return out
  end

  --- dle.broadcast_shapes(s1, s2, ...) -> the shape (a list) that tensors of shapes s1, s2, ...
  -- broadcast to (each a list of sizes or a tensor), or an error naming the two that do not.
  function dle.broadcast_shapes(...)
    return common_shape("broadcast_shapes", {...}, select("#", ...))
  end

  --- dle.broadcast_to(x, shape) / x:broadcast_to(shape): x expanded to shape (a view; torch.broadcast_to).
  function Tensor.broadcast_to(x, shape)
    check.tensor(x, "broadcast_to", "input")
    return x:expand(shape_of("broadcast_to", shape, 2))
  end

  --- dle.broadcast_tensors(t1, t2, ...) -> each tensor expanded to their common shape (views).
  function dle.broadcast_tensors(...)
    local ts = table.pack(...)
    for i = 1, ts.n do check.tensor(ts[i], "broadcast_tensors", "input " .. i) end
    local shape = common_shape("broadcast_tensors", ts, ts.n)
    local out = {}
    for i = 1, ts.n do out[i] = ts[i]:expand(shape) end
    return table.unpack(out, 1, ts.n)
  end

  local MODES = {use_mm_for_euclid_dist_if_necessary = true, use_mm_for_euclid_dist = true,
                 donot_use_mm_for_euclid_dist = true}

  -- p-norm distances of x1 {..., P, M} and x2 {..., R, M} over the differences {..., P, R, M}.
  -- Where a distance is 0 its gradient is 0 (PyTorch's), not 0 * inf: the root is taken of 1
  -- there and the result replaced.
  local function by_differences(x1, x2, p)
    local d = (x1:unsqueeze(-2) - x2:unsqueeze(-3)):abs()
    if p == 1 then return d:sum(-1) end
    if p == math.huge then return d:amax(-1) end
    if p == 0 then return (d:ne(0)):to(x1:dtype()):sum(-1) end
    local s = (p == 2 and d * d or d ^ p):sum(-1)
    local zero = s:eq(0)
    local root = dle.where(zero, dle.ones_like(s), s)
    root = p == 2 and root:sqrt() or root ^ (1 / p)
    return dle.where(zero, dle.zeros_like(s), root)
  end

  -- Euclidean distances by one matrix product, as PyTorch's _euclidean_dist: rows
  -- [-2 x1, |x1|^2, 1] times [x2, 1, |x2|^2] give |x1|^2 - 2 x1.x2 + |x2|^2, clamped at 1e-30
  -- (no root of a rounding error below 0; a zero distance has gradient 0) and rooted.
  local function by_matmul(x1, x2)
    local n1 = (x1 * x1):sum(-1, {keepdim = true})
    local n2 = (x2 * x2):sum(-1, {keepdim = true})
    local a = dle.cat({x1 * -2, n1, dle.ones_like(n1)}, -1)
    local b = dle.cat({x2, dle.ones_like(n2), n2}, -1)
    return a:matmul(b:transpose(-1, -2)):clamp(1e-30):sqrt()
  end

  --- dle.cdist(x1, x2, {p = 2, compute_mode = "use_mm_for_euclid_dist_if_necessary"}): the p-norm
  -- distance between each row of x1 {..., P, M} and each row of x2 {..., R, M} (batch dims
  -- broadcast), shape {..., P, R} (torch.cdist). p = 2 takes one matrix product when P or R is over
  -- 25 (or compute_mode = "use_mm_for_euclid_dist"), as PyTorch does; otherwise, and for p = 0, 1,
  -- inf and any other p >= 0, the differences {..., P, R, M} are formed. Differentiable.
  function dle.cdist(x1, x2, opts)
    check.tensor(x1, "cdist", "x1")
    check.tensor(x2, "cdist", "x2")
    opts = check.options(opts, "cdist", {"p", "compute_mode"})
    local p, mode = opts.p or 2, opts.compute_mode or "use_mm_for_euclid_dist_if_necessary"
    if type(p) ~= "number" or p < 0 or p ~= p then
      check.error("cdist: p must be a number >= 0, got " .. tostring(p))
    end
    if not MODES[mode] then check.error("cdist: unknown compute_mode " .. tostring(mode)) end
    if x1:dim() < 2 or x2:dim() < 2 or x1:size(-1) ~= x2:size(-1) then
      check.error(string.format("cdist: x1 %s and x2 %s must be at least 2-D with the same last size",
                                check.shape_str(x1), check.shape_str(x2)))
    end
    if not x1:is_floating_point() or x1:dtype() ~= x2:dtype() then
      check.error(string.format("cdist: x1 and x2 must be float tensors of one dtype, got %s and %s", x1:dtype(),
                                x2:dtype()))
    end
    local s1, s2 = x1:shape(), x2:shape()
    local b1, b2 = {table.unpack(s1, 1, #s1 - 2)}, {table.unpack(s2, 1, #s2 - 2)}
    local batch, bad = broadcast2(b1, b2)
    if not batch then
      check.error(string.format("cdist: batch dims of x1 %s and x2 %s do not broadcast (dim %d)",
                                check.shape_str(x1), check.shape_str(x2), bad))
    end
    local P, R = x1:size(-2), x2:size(-2)
    local e1, e2 = {table.unpack(batch)}, {table.unpack(batch)}
    e1[#e1 + 1], e1[#e1 + 2], e2[#e2 + 1], e2[#e2 + 2] = P, s1[#s1], R, s2[#s2]
    x1, x2 = x1:expand(e1), x2:expand(e2)
    local mm = p == 2 and mode ~= "donot_use_mm_for_euclid_dist" and
               (mode == "use_mm_for_euclid_dist" or P > 25 or R > 25)
    return mm and by_matmul(x1, x2) or by_differences(x1, x2, p)
  end

  dle.cdist = check.named("cdist", dle.cdist)
  Tensor.broadcast_to = check.named("broadcast_to", Tensor.broadcast_to)
  dle.broadcast_to = Tensor.broadcast_to
end

return M
